"""Compact text for agents: one line per hit; identical in MCP, LangChain, FastAPI and the CLI."""

from __future__ import annotations

from collections.abc import Sequence

from .models import MISSING_HINT, BrowseResult, Hit, ReadResult, SearchResult
from .provenance import cite
from .textutil import counted

ALREADY_READ = "(already read — skip)"


def _count(n: int) -> str:
    return counted(n, "chunk")


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


#: Characters of a snippet on an agent's hit line (~10 tokens): keeps a grouped hit ≤ 25 tokens; `kt bench tokens`.
SNIPPET_CHARS = 48
ELLIPSIS = "…"


def trim(text: str, limit: int) -> str:
    """``text`` cut at a word boundary to at most ``limit`` characters, ``…`` marking the cut."""
    text = " ".join(text.split())
    if len(text) <= limit:
        return text
    cut = text.rfind(" ", 0, limit)
    return (text[:cut] if cut > limit // 2 else text[: limit - 1]).rstrip(" ,;:.-—") + ELLIPSIS


def trim_marked(text: str, limit: int, marks: Sequence[tuple[int, int]] = ()) -> tuple[str, list[tuple[int, int]]]:
    """`trim`, keeping the first of the matched spans ``marks`` in view: when it ends past the cut, the
    line starts at a word shortly before it, ``…`` marking that cut too. Returns the line and the spans
    that are whole in it, at their places there."""
    kept: list[int] = []  # index in ``text`` of each character of the line, spaces collapsed
    for i, ch in enumerate(text):
        if ch.isspace():
            if kept and not text[kept[-1]].isspace():
                kept.append(i)
        else:
            kept.append(i)
    while kept and text[kept[-1]].isspace():
        kept.pop()
    line = "".join(" " if text[i].isspace() else text[i] for i in kept)
    at = {index: n for n, index in enumerate(kept)}
    spans = sorted((at[s], at[e - 1] + 1) for s, e in marks if 0 <= s < e <= len(text) and s in at and e - 1 in at)
    begin = 0
    if spans and spans[0][1] > limit - len(ELLIPSIS) and len(line) > limit:
        start, end = spans[0]
        room = limit - 2 * len(ELLIPSIS)  # between the two cuts
        # a third of the room before the match, the rest after it, unless the line ends sooner
        target = max(end - room, min(start - max(0, room - (end - start)) // 3, len(line) - (room + len(ELLIPSIS))))
        space = line.find(" ", max(0, target), start)
        begin = space + 1 if space >= 0 else start
    shown = (ELLIPSIS if begin else "") + trim(line[begin:], limit - (len(ELLIPSIS) if begin else 0))
    shift = (len(ELLIPSIS) if begin else 0) - begin
    kept_to = len(shown) - (len(ELLIPSIS) if shown.endswith(ELLIPSIS) and not line.endswith(ELLIPSIS) else 0)
    return shown, [(s + shift, e + shift) for s, e in spans if s >= begin and e + shift <= kept_to]


def hit_group(hit: Hit) -> str:
    """The heading a hit is listed under: its category path, else its file, else ``(unmapped)``."""
    return hit.path or hit.file_name or "(unmapped)"


def grouped_hits(hits: list[Hit]) -> dict[str, list[Hit]]:
    """Hits by `hit_group`, groups in order of their best hit, hits in rank order within a group."""
    groups: dict[str, list[Hit]] = {}
    for h in hits:
        groups.setdefault(hit_group(h), []).append(h)
    return groups


def score_text(score: float) -> str:
    """A score with two decimals, ``.95`` rather than ``0.95`` (2 tokens instead of 4)."""
    text = f"{score:.2f}"
    return text[1:] if text.startswith("0.") else text.replace("-0.", "-.", 1)


def hit_line(hit: Hit) -> str:
    """`` [chunk_id] snippet score`` — one hit under its group heading (and the copies of its text)."""
    snippet, _ = trim_marked(hit.snippet, SNIPPET_CHARS, hit.marks)
    return f" [{hit.chunk_id}] {snippet} {score_text(hit.score)}{copies_text(hit)}"


def copies_text(hit: Hit, shown: int = 2) -> str:
    """`` (same text: a, b +N)`` for a hit that other chunks copy word for word, else ``""``."""
    if not hit.copies:
        return ""
    more = f" +{len(hit.copies) - shown}" if len(hit.copies) > shown else ""
    return f" (same text: {', '.join(hit.copies[:shown])}{more})"


def search_text(result: SearchResult, *, context: bool = False) -> str:
    """Hits grouped under their path (``path`` line, then `` [chunk_id] snippet score`` lines, best
    group first); or a context block with ``context``."""
    if not result.hits:
        return f"No results for '{result.query}'."
    if context:
        return "\n".join(f"- [{h.chunk_id}] ({h.path or h.file_name}) {h.snippet}{copies_text(h)}"
                         for h in result.hits)
    lines: list[str] = []
    for group, hits in grouped_hits(result.hits).items():
        lines.append(group)
        lines.extend(hit_line(h) for h in hits)
    return "\n".join(lines)


def read_text(result: ReadResult, *, context: bool = False, missing_hint: str = MISSING_HINT) -> str:
    """Full text per chunk with a header line; repeats as ``[chunk_id] (already read — skip)``.

    The header cites the source: ``file.md:120-164`` (lines) or ``file.pdf:p3-4`` (pages) for
    document chunks, ``file#index`` otherwise; then `` — `` and the section's title path. Ids the
    collection does not hold end the text: each with its own hint when one names what was likely
    meant, the others with ``missing_hint`` (the agent tools pass theirs).
    """
    blocks = []
    for c in result.chunks:
        if c.already_read:
            blocks.append(f"[{c.chunk_id}] {ALREADY_READ}" + (f" (same text as {c.same_as})" if c.same_as else "")
                          + (f" (context of {c.context_of})" if c.context_of else ""))
            continue
        where = c.path or "(unmapped)"
        if c.file_name and (c.lines or c.pages):
            source = cite(c.file_name, c.lines, c.pages)
        else:
            source = f"{c.file_name}#{c.chunk_index}" if c.file_name else c.doc_id
        if c.context_of:  # a neighbour returned by read(context=N)
            source += f" (context of {c.context_of})"
        if context:
            blocks.append(f'<chunk id="{c.chunk_id}" source="{source}" path="{where}">\n{c.text}\n</chunk>')
        else:
            title = f" — {c.title}" if c.title else ""
            blocks.append(f"[{c.chunk_id}] {where} · {source}{title}\n{c.text}")
    generic = [i for i in result.missing if i not in result.missing_hints]
    blocks.extend(f"(not found: {i} — {hint})" for i, hint in result.missing_hints.items())
    if generic:
        blocks.append(f"(not found: {', '.join(generic)} — {missing_hint})")
    return "\n\n".join(blocks)
