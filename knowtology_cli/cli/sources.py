"""A corpus that changes: ``kt sources``, ``kt rm`` and ``kt drop`` (thin shells over ``KnowledgeBase``)."""

from __future__ import annotations

import sys
import time
from typing import Annotated, Any

import typer

from ..errors import ConfigError
from ..textutil import counted
from .common import CollectionOpt, JsonOpt, StoreOpt, console, emit_json, handled, open_kb, run

YesOpt = Annotated[bool, typer.Option("--yes", "-y", help="Do it without asking (needed when stdin is not a terminal).")]
DryRunOpt = Annotated[bool, typer.Option("--dry-run", help="Show what would be removed; change nothing.")]


def confirm(question: str, what: str) -> None:
    """Ask ``question`` on a terminal; refuse outright when nobody can answer."""
    if not sys.stdin.isatty():
        raise ConfigError(f"refusing to {what} without --yes: stdin is not a terminal, so nobody can confirm",
                          hint="pass --yes to go ahead, or --dry-run to see what would go")
    if not typer.confirm(question, default=False, err=True):
        print("Cancelled — nothing was changed.", file=sys.stderr)
        raise typer.Exit(1)


def _when(stamp: float) -> str:
    return time.strftime("%Y-%m-%d %H:%M", time.localtime(stamp)) if stamp else "-"


def print_sources(report: Any) -> None:
    from rich.table import Table  # deferred: heavy

    out = console()
    if not report.sources and not report.unregistered:
        out.print(f"{report.collection}: no sources yet — kt ingest PATH", markup=False)
        return
    table = Table(title=f"{report.collection}: sources", title_justify="left")
    for col in ("source", "root", "kind", "files", "chunks", "last ingest"):
        table.add_column(col)
    for s in report.sources:
        table.add_row(s.name, s.root, s.kind, str(s.files), str(s.chunks), _when(s.last_ingest))
    out.print(table)
    if report.interrupted:
        out.print(f"{report.unregistered} chunks are not in a source yet: {report.interrupted}", markup=False)
    elif report.unregistered:
        out.print(f"{report.unregistered} chunks were stored before sources were recorded; they join a source"
                  " when their folder is ingested again", markup=False)


def print_removal(report: Any) -> None:
    out = console()
    files = counted(len(report.files), "file")
    if report.dry_run:
        out.print(f"{report.collection}: would remove {counted(report.removed, 'chunk')} of {files}"
                  + (f" and forget source {', '.join(report.sources)}" if report.sources else "")
                  + " (dry run: nothing changed)", markup=False)
    else:
        out.print(f"{report.collection}: removed {counted(report.removed, 'chunk')} of {files}"
                  + (f", forgot source {', '.join(report.sources)}" if report.sources else "")
                  + f" — {counted(report.total, 'chunk')}, {counted(report.nodes, 'category')} left", markup=False)
    for name in report.files[:20]:
        out.print(f"  {name}", markup=False)
    if len(report.files) > 20:
        out.print(f"  … {len(report.files) - 20} more", markup=False)
    if report.on_disk and not report.dry_run:
        one = len(report.on_disk) == 1
        it, its = ("it", "its") if one else ("them", "their")
        out.print(f"note: {counted(len(report.on_disk), 'file')} still in {its} folder: the folder's next `kt ingest`"
                  f" reads {it} again; to keep {it} out, list {it} in a .ktignore there (gitignore syntax)", markup=False)


def register(app: typer.Typer) -> None:
    """Add this module's commands to ``app``."""

    @app.command("sources")
    def sources_command(store: StoreOpt = None, collection: CollectionOpt = None, as_json: JsonOpt = False) -> None:
        """List the collection's sources: name, root folder, files, chunks and last ingest."""
        run(as_json, lambda: open_kb(store, collection).sources(), print_sources)

    @app.command("rm")
    def rm_command(
        paths: Annotated[list[str] | None, typer.Argument(help="Files or folders (on disk, or as SOURCE/PATH labels).", show_default=False)] = None,
        source: Annotated[str | None, typer.Option("--source", help="Remove a whole source and forget it.", show_default=False)] = None,
        dry_run: DryRunOpt = False,
        yes: YesOpt = False,
        store: StoreOpt = None,
        collection: CollectionOpt = None,
        as_json: JsonOpt = False,
    ) -> None:
        """Take files, folders or a source out of the collection (vectors, full-text index, tree, read histories)."""
        with handled(as_json):
            kb = open_kb(store, collection)
            if not dry_run and not yes:
                plan = kb.rm(paths or [], source=source, dry_run=True)
                if plan.removed or plan.sources:
                    confirm(f"Remove {counted(plan.removed, 'chunk')} of {counted(len(plan.files), 'file')} from "
                            f"{plan.collection!r}"
                            + (f" and forget source {', '.join(plan.sources)}" if plan.sources else "") + "?",
                            f"remove {counted(plan.removed, 'chunk')}")
            report = kb.rm(paths or [], source=source, dry_run=dry_run)
        if as_json:
            return emit_json(report)
        print_removal(report)

    @app.command("drop")
    def drop_command(
        name: Annotated[str | None, typer.Argument(help="The collection to remove (default: -c / the current one).", show_default=False)] = None,
        dry_run: DryRunOpt = False,
        yes: YesOpt = False,
        store: StoreOpt = None,
        collection: CollectionOpt = None,
        as_json: JsonOpt = False,
    ) -> None:
        """Remove a whole collection: its chunks, tree, sources and read histories."""
        with handled(as_json):
            kb = open_kb(store, name or collection)
            plan = kb.drop(dry_run=True)
            if not dry_run and not yes:
                confirm(f"Drop collection {plan.collection!r} ({plan.chunks} chunks, {plan.nodes} categories)?",
                        f"drop collection {plan.collection!r}")
            report = plan if dry_run else kb.drop()
        if as_json:
            return emit_json(report)
        verb = "would drop" if report.dry_run else "dropped"
        console().print(f"{verb} collection {report.collection}: {report.chunks} chunks, {report.nodes} categories,"
                        f" {report.sources} sources" + (" (dry run: nothing changed)" if report.dry_run else ""),
                        markup=False)
