"""Compact text for agents: one line per hit; identical in MCP, LangChain, FastAPI and the CLI."""

from __future__ import annotations

from .models import BrowseResult, ReadResult, SearchResult
from .provenance import cite

ALREADY_READ = "(already read — skip)"


def _count(n: int) -> str:
    return f"{n} chunk" if n == 1 else f"{n} chunks"


def browse_text(result: BrowseResult) -> str:
    """``[Category] Name (N chunks) — description`` per child; ``[chunk_id] snippet`` at a leaf."""
    lines = [f"{result.path} ({_count(result.chunk_count)})" + (f" — {result.description}" if result.description else "")]
    base = 0 if result.path == "root" else result.path.count("/") + 1
    for child in result.children:
        indent = "  " * (child.level - base - 1)
        desc = f" — {child.description}" if child.description else ""
        lines.append(f"{indent}[Category] {child.path} ({_count(child.chunk_count)}){desc}")
    for lead in result.chunks:
        lines.append(f"[{lead.chunk_id}] {lead.snippet}")
    if not result.children and not result.chunks:
        lines.append("(empty — run `kt build` to make the tree)" if result.path == "root" else "(no chunks)")
    return "\n".join(lines)


def search_text(result: SearchResult, *, context: bool = False) -> str:
    """One line per hit: ``[chunk_id] path — snippet (score)``; or a context block with ``context``."""
    if not result.hits:
        return f"No results for {result.query!r}."
    if context:
        return "\n".join(f"- [{h.chunk_id}] ({h.path or h.file_name}) {h.snippet}" for h in result.hits)
    return "\n".join(
        f"[{h.chunk_id}] {h.path or '(unmapped)'} — {h.snippet} ({h.score:.3f})" for h in result.hits
    )


def read_text(result: ReadResult, *, context: bool = False) -> str:
    """Full text per chunk with a header line; repeats as ``[chunk_id] (already read — skip)``.

    The header cites the source: ``file.md:120-164`` (lines) or ``file.pdf:p3-4`` (pages) for
    document chunks, ``file#index`` otherwise; then `` — `` and the section's title path.
    """
    blocks = []
    for c in result.chunks:
        if c.already_read:
            blocks.append(f"[{c.chunk_id}] {ALREADY_READ}")
            continue
        where = c.path or "(unmapped)"
        if c.file_name and (c.lines or c.pages):
            source = cite(c.file_name, c.lines, c.pages)
        else:
            source = f"{c.file_name}#{c.chunk_index}" if c.file_name else c.doc_id
        if context:
            blocks.append(f'<chunk id="{c.chunk_id}" source="{source}" path="{where}">\n{c.text}\n</chunk>')
        else:
            title = f" — {c.title}" if c.title else ""
            blocks.append(f"[{c.chunk_id}] {where} · {source}{title}\n{c.text}")
    return "\n\n".join(blocks)
