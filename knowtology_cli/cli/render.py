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
    for group, hits in text.grouped_hits(result.hits).items():
        out.print(f"[cyan]{escape(group)}[/]")
        for h in hits:
            snippet = text.trim(h.snippet, text.SNIPPET_CHARS)
            out.print(f" [green]\\[{escape(h.chunk_id)}][/] {marked(snippet, h.marks)} [dim]{text.score_text(h.score)}[/]")
            if h.explain is not None:
                out.print(f"   [dim]{escape(explain_line(h.explain))}[/]")
    if result.expansion:
        terms = " ".join(f"{t}:{w:.2f}" for t, w in result.expansion.items())
        out.print(f"[dim]feedback query: {escape(terms)}[/]")


def marked(snippet: str, marks: list[tuple[int, int]]) -> str:
    """Rich markup of ``snippet`` with the matched spans in bold yellow (escaped everywhere else)."""
    from rich.markup import escape

    parts, at = [], 0
    for start, end in sorted(marks):
        if start < at or end > len(snippet):
            continue
        parts.append(escape(snippet[at:start]))
        parts.append(f"[bold yellow]{escape(snippet[start:end])}[/]")
        at = end
    parts.append(escape(snippet[at:]))
    return "".join(parts)


#: Stage names as ``--explain`` prints them, in pipeline order.
STAGE_LABELS = (("dense", "dense"), ("keyword", "bm25"), ("fused", "fused"), ("prf_dense", "rocchio"),
                ("prf_keyword", "rm3"), ("prf_fused", "prf fused"), ("tree", "tree"), ("rerank", "rerank"))


def explain_line(stages: dict[str, float]) -> str:
    """``dense 0.61 #3 · bm25 12.4 #1 · fused 0.93 · … → #1``: each stage's score (and rank)."""
    parts = []
    for key, label in STAGE_LABELS:
        if key in stages:
            rank = stages.get(f"{key}_rank")
            parts.append(f"{label} {stages[key]:.3g}" + (f" #{int(rank)}" if rank else ""))
        elif key in ("dense", "keyword") and any(k in stages for k in ("fused", "prf_fused")):
            parts.append(f"{label} –")
    final = stages.get("final_rank")
    return " · ".join(parts) + (f" → #{int(final)}" if final else "")


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
                      c.builder or "-", "stale: run kt build" if c.stale else "up to date")
    out.print(table)


def print_sessions(payload: dict) -> None:
    out = console()
    if not payload["sessions"]:
        out.print("no sessions yet")
    for s in payload["sessions"]:
        reads = ", ".join(f"{c}: {n}" for c, n in s["reads"].items()) or "nothing read"
        out.print(f"{s['name']}  ({reads})", markup=False)
