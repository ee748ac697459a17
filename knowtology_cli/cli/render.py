"""Human rendering of results with rich; the lines match the agent text of ``knowtology_cli.render``."""

from __future__ import annotations

from typing import Any

from .. import render as text
from ..models import BrowseResult, ReadResult, SearchResult, StatusReport
from .common import console


def print_browse(result: BrowseResult) -> None:
    from rich.markup import escape
    from rich.tree import Tree

    out = console()
    head = f"[bold]{escape(result.path)}[/] ({result.chunk_count} chunks)"
    if result.description:
        head += f" [dim]— {escape(result.description)}[/]"
    tree = Tree(head)
    branches: dict[str, Any] = {}
    for child in result.children:
        parent = branches.get(child.path.rsplit("/", 1)[0], tree) if "/" in child.path else tree
        desc = f" [dim]— {escape(child.description)}[/]" if child.description else ""
        branches[child.path] = parent.add(f"[bold cyan]{escape(child.name)}[/] ({child.chunk_count}){desc}")
    for lead in result.chunks:
        tree.add(f"[green]\\[{escape(lead.chunk_id)}][/] {escape(lead.snippet)}")
    if not result.children and not result.chunks:
        tree.add("[dim](empty — run `kt build` to make the tree)[/]" if result.path == "root" else "[dim](no chunks)[/]")
    out.print(tree)


def print_hits(result: SearchResult, fmt: str = "text") -> None:
    from rich.markup import escape

    out = console()
    if fmt == "context":
        out.print(text.search_text(result, context=True), markup=False)
        return
    if not result.hits:
        out.print(f"No results for {result.query!r}.", markup=False)
        return
    for h in result.hits:
        out.print(f"[green]\\[{escape(h.chunk_id)}][/] [cyan]{escape(h.path or '(unmapped)')}[/] — "
                  f"{escape(h.snippet)} [dim]({h.score:.3f})[/]")


def print_read(result: ReadResult, fmt: str = "text") -> None:
    console().print(text.read_text(result, context=fmt == "context"), markup=False)


def print_status(report: StatusReport) -> None:
    from rich.table import Table

    out = console()
    if not report.collections:
        out.print(f"store {report.store}: no collections yet — run `kt ingest PATH`", markup=False)
        return
    table = Table(title=f"store {report.store}", title_justify="left")
    for col in ("collection", "chunks", "mapped", "unmapped", "categories", "embedder", "builder", "state"):
        table.add_column(col)
    for c in report.collections:
        table.add_row(c.name, str(c.chunks), str(c.mapped), str(c.unmapped), str(c.nodes), c.embedder or "-",
                      c.builder or "-", c.state or ("stale" if c.stale else "current"))
    out.print(table)
    for c in report.collections:
        if c.advice:
            out.print(f"{c.name}: {c.advice}", markup=False)


def print_sessions(payload: dict) -> None:
    out = console()
    if not payload["sessions"]:
        out.print("no sessions yet")
    for s in payload["sessions"]:
        reads = ", ".join(f"{c}: {n}" for c, n in s["reads"].items()) or "nothing read"
        out.print(f"{s['name']}  ({reads})", markup=False)
