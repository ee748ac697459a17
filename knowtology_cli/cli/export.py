"""Tree export and import commands: ``kt export`` and ``kt import-tree`` (thin shells over ``KnowledgeBase``)."""

from __future__ import annotations

import sys
from enum import Enum
from pathlib import Path
from typing import Annotated

import typer

from ..textutil import counted
from .common import CollectionOpt, JsonOpt, StoreOpt, console, emit_json, handled, open_kb

EXAMPLES_SHOWN = 5  # ids listed per difference in human output; --json lists them all


class ExportFormat(str, Enum):
    """What ``kt export`` writes."""

    json = "json"
    markdown = "markdown"
    mermaid = "mermaid"
    html = "html"


def register(app: typer.Typer) -> None:
    """Add this module's commands to ``app``."""

    @app.command("export")
    def export_command(
        path: Annotated[str, typer.Argument(help="Subtree to export, e.g. Returns/Refunds (default: the whole tree).")] = "root",
        fmt: Annotated[ExportFormat, typer.Option("--format", "-f", help="json (the documented tree document), markdown, mermaid or html (one self-contained page).")] = ExportFormat.json,
        output: Annotated[str | None, typer.Option("--output", "-o", help="Write to FILE instead of stdout (an existing file is kept unless --force).", show_default=False)] = None,
        force: Annotated[bool, typer.Option("--force", help="Replace FILE if it exists.")] = False,
        depth: Annotated[int | None, typer.Option(min=1, max=3, help="Levels to show (markdown, mermaid).", show_default=False)] = None,
        link_base: Annotated[str, typer.Option("--link-base", help="Prefix for chunk source links, e.g. https://host/repo/blob/main/ (default: each file's path from where the export is written).")] = "",
        store: StoreOpt = None,
        collection: CollectionOpt = None,
        as_json: JsonOpt = False,
    ) -> None:
        """Export the tree as JSON, Markdown, a Mermaid diagram or an HTML page you can open offline."""
        from knowtology_cli.export import write_new_file  # deferred: keeps kt --help fast

        with handled(as_json):
            # links open the source files from where the export is read: the output file's folder
            where = Path(output).resolve().parent if output else Path.cwd()
            result = open_kb(store, collection).export_tree(path, fmt.value, depth=depth, link_base=link_base,
                                                            link_from=where)
            written = write_new_file(output, result.text, force=force) if output else None
        for warning in result.warnings:
            console(stderr=True).print(f"Warning: {warning}", markup=False)
        if as_json:
            emit_json(result if output is None else
                      {**result.model_dump(exclude={"text"}), "output": output, "bytes": written})
        elif output is None:
            sys.stdout.write(result.text)
        else:
            console().print(f"wrote {output} — {fmt.value}, {result.nodes} categories, {result.chunks} chunks",
                            markup=False)

    @app.command("import-tree")
    def import_tree_command(
        file: Annotated[str, typer.Argument(help="A tree document written by `kt export --format json` (- for stdin).")],
        replace: Annotated[bool, typer.Option("--replace", help="Replace the collection's existing tree.")] = False,
        strict: Annotated[bool, typer.Option("--strict", help="Refuse unless the document and the store hold exactly the same chunks.")] = False,
        store: StoreOpt = None,
        collection: CollectionOpt = None,
        as_json: JsonOpt = False,
    ) -> None:
        """Load a tree exported with `kt export --format json` onto the same chunks (e.g. one built with an LLM)."""
        from knowtology_cli.export import read_document_file  # deferred: keeps kt --help fast

        with handled(as_json):
            data, label = read_document_file(file, sys.stdin)
            report = open_kb(store, collection).import_tree(data, replace=replace, strict=strict, source=label)
        if as_json:
            emit_json(report)
            return
        out = console()
        out.print(f"{report.collection}: imported {report.source} — {counted(report.nodes, 'category')}, "
                  f"{counted(report.mapped, 'chunk')} mapped" + (" (replaced the previous tree)" if report.replaced else ""), markup=False)
        for ids, what in ((report.missing_from_store, "in the document but not in the store (skipped)"),
                          (report.unmapped_in_store, "in the store but not in the document (unmapped — `kt build` places them)"),
                          (report.changed, "changed since the export (kept; `kt build` re-places them)")):
            if ids:
                more = f" … (+{len(ids) - EXAMPLES_SHOWN} more; --json lists all)" if len(ids) > EXAMPLES_SHOWN else ""
                out.print(f"  {counted(len(ids), 'chunk')} {what}: {', '.join(ids[:EXAMPLES_SHOWN])}{more}", markup=False)
        if report.relinked:
            out.print(f"  {counted(len(report.relinked), 'chunk')} found under another id by their text (an edit shifted "
                      "the ids, or a file was renamed): mapped there", markup=False)
        if report.dropped_nodes:
            out.print(f"  {counted(report.dropped_nodes, 'category')} left out: none of their chunks is in the store", markup=False)
