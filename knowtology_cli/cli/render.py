"""Human rendering with rich; the lines match the agent text of ``knowtology_cli.render``."""

from __future__ import annotations

import sys
from typing import Any

from .. import render as text
from ..models import BrowseResult, ReadResult, SearchResult, StatusReport
from .common import command_line, console, hint, output_width, styled_output, with_named_options

#: narrowest room (in cells) worth giving a description or snippet; below it the text is left out
MIN_TEXT_CELLS = 8
#: a word-boundary cut may drop at most this share of the room (else the word itself is cut)
MAX_WORD_LOSS = 0.5
ELLIPSIS = "…"
GUIDES = {"branch": "├── ", "last": "└── ", "pipe": "│   ", "space": "    "}


def fit_path(path: str, room: int | None) -> str:
    """A category path cut from the left (``…Groceries/Refund Windows``): its last segments say most."""
    if room is None:
        return path
    from rich.cells import cell_len  # deferred: heavy

    if cell_len(path) <= room:
        return path
    return fit(path[::-1], room)[::-1]


def fit(value: str, room: int | None, *, whole_words: bool = False) -> str:
    """``value`` cut to ``room`` terminal cells with ``…``.

    Lines are fitted to the output width (``COLUMNS``, else the terminal's; pipes get whole lines):
    descriptions and snippets give way first, cut at a word boundary with ``…``; chunk ids and
    counts are never cut.

    The cut goes back to a word boundary when that keeps most of the room (``MAX_WORD_LOSS``), or
    always with ``whole_words`` (then ``""`` when not even the first word fits).
    """
    if room is None:
        return value
    from rich.cells import cell_len  # deferred: heavy

    if cell_len(value) <= room:
        return value
    if room <= 1:
        return "" if whole_words else ELLIPSIS[:room]
    budget, used, cut = room - 1, 0, 0
    for i, char in enumerate(value):
        used += cell_len(char)
        if used > budget:
            break
        cut = i + 1
    head = value[:cut]
    if cut < len(value) and not value[cut].isspace():  # the cut falls inside a word
        space = max(head.rfind(" "), head.rfind("/") + 1)  # a path may break after a "/"
        if whole_words:
            head = head[:space] if space > 0 else ""
        elif space > 0 and cell_len(head[:space]) >= budget * (1 - MAX_WORD_LOSS):
            head = head[:space]
    head = head.rstrip(" ,;:—–-/(")
    return head + ELLIPSIS if head or not whole_words else ""


Segments = list[tuple[str, str]]  # (text, rich style) pieces of one line


def _line(parts: Segments, tail: tuple[tuple[str, str], str] | None, room: int | None) -> Segments:
    """``parts`` kept whole, ``tail`` ((separator, text), style) fitted into what is left of ``room``."""
    line = [p for p in parts if p[0]]
    if tail is None or not tail[0][1]:
        return line
    sep, value = tail[0]
    if room is None:  # a pipe: whole lines, nothing to measure
        return line + [(sep, "dim"), (value, tail[1])]
    from rich.cells import cell_len  # deferred: heavy

    left = room - sum(cell_len(t) for t, _ in line) - cell_len(sep)
    shown = fit(value, left, whole_words=True) if left >= MIN_TEXT_CELLS else ""
    if cell_len(shown) >= MIN_TEXT_CELLS // 2:
        line += [(sep, "dim"), (shown, tail[1])]
    return line


def write_lines(lines: list[Segments]) -> None:
    """Print styled lines: through rich when styles can show, else as plain text (pipes, NO_COLOR).

    Plain output skips importing rich's console, which is a fifth of ``kt browse``'s start-up.
    """
    if not styled_output():
        sys.stdout.write("".join("".join(t for t, _ in line) + "\n" for line in lines))
        return
    from rich.text import Text  # deferred: heavy

    out = console()
    for line in lines:
        text = Text()
        for value, style in line:
            text.append(value, style)
        out.print(text, no_wrap=True, overflow="ignore", crop=False)


def _chunks(n: int) -> str:
    return f"{n} chunk" if n == 1 else f"{n} chunks"


def _named(prefix: str, name: str, count: str, room: int | None, style: str = "bold cyan") -> list[tuple[str, str]]:
    """Guide, name and count; the name is cut only when even it does not fit."""
    if room is not None:
        from rich.cells import cell_len  # deferred: heavy

        name = fit(name, max(1, room - cell_len(prefix) - cell_len(count)))
    return [(prefix, "dim"), (name, style), (count, "")]


def print_browse(result: BrowseResult, *, store: str | None = None, collection: str | None = None) -> None:
    room = output_width()
    count = f" ({_chunks(result.chunk_count)})"
    head = fit_path(result.path, None if room is None else max(1, room - len(count)))
    lines = [_line([(head, "bold"), (count, "")], ((" — ", result.description), "dim"), room)]
    by_parent: dict[str, list[Any]] = {}
    for child in result.children:
        by_parent.setdefault(child.path.rsplit("/", 1)[0] if "/" in child.path else "", []).append(child)
    top = "" if result.path == "root" else result.path

    def walk(parent: str, indent: str) -> None:
        kids = by_parent.get(parent, [])
        for i, child in enumerate(kids):
            last = i == len(kids) - 1 and not (parent == top and result.chunks)
            guide = indent + GUIDES["last" if last else "branch"]
            lines.append(_line(_named(guide, child.name, f" ({child.chunk_count})", room),
                               ((" — ", child.description), "dim"), room))
            walk(child.path, indent + GUIDES["space" if last else "pipe"])

    walk(top, "")
    for i, lead in enumerate(result.chunks):
        guide = GUIDES["last" if i == len(result.chunks) - 1 else "branch"]
        lines.append(_line([(guide, "dim"), (f"[{lead.chunk_id}]", "green")], ((" ", lead.snippet), ""), room))
    if not result.children and not result.chunks:
        empty = "(no categories yet)" if result.path == "root" else "(no chunks)"
        lines.append(_line([(GUIDES["last"], "dim"), (empty, "dim")], None, room))
    write_lines(lines)
    if result.unmapped:
        hint(f"{_chunks(result.unmapped)} not in the map yet; to map "
             f"{'them' if result.unmapped > 1 else 'it'}, run: {command_line('build', store=store, collection=collection)}")


def print_hits(result: SearchResult, fmt: str = "text") -> None:
    from rich.markup import escape  # deferred: heavy

    out = console()
    if fmt == "context":
        out.print(text.search_text(result, context=True), markup=False)
        return
    if not result.hits:
        out.print(f"No results for '{result.query}'.", markup=False)
        return
    for group, hits in text.grouped_hits(result.hits).items():
        out.print(f"[cyan]{escape(group)}[/]")
        for h in hits:
            snippet, marks = text.trim_marked(h.snippet, text.SNIPPET_CHARS, h.marks)
            out.print(f" [green]\\[{escape(h.chunk_id)}][/] {marked(snippet, marks)} [dim]{text.score_text(h.score)}"
                      f"{escape(text.copies_text(h))}[/]")
            if h.explain is not None:
                out.print(f"   [dim]{escape(explain_line(h.explain))}[/]")
    if result.expansion:
        terms = " ".join(f"{t}:{w:.2f}" for t, w in result.expansion.items())
        out.print(f"[dim]feedback query: {escape(terms)}[/]")


def marked(snippet: str, marks: list[tuple[int, int]]) -> str:
    """Rich markup of ``snippet`` with the matched spans in bold yellow (escaped everywhere else)."""
    from rich.markup import escape  # deferred: heavy

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
STAGE_LABELS = (("dense", "dense"), ("keyword", "bm25"), ("fused", "fused"), ("smoothed", "smoothed"),
                ("prf_dense", "rocchio"),
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
    repeats = [c.chunk_id for c in result.chunks if c.already_read]
    if repeats:
        which, it = ("this chunk", "it") if len(repeats) == 1 else (f"{len(repeats)} of these chunks", "them")
        hint(f"session {result.session!r} has already read {which}; --force prints {it} again, "
             "--session NAME keeps a separate read history (kt session reset forgets this one)")


def print_status(report: StatusReport) -> None:
    from rich.table import Table  # deferred: heavy

    out = console()
    if not report.collections:
        out.print(f"store {report.store}: no collections yet — run `kt ingest PATH`", markup=False)
        return
    table = Table(title=f"store {report.store}", title_justify="left")
    for col in ("collection", "chunks", "mapped", "unmapped", "categories", "embedder", "builder", "state"):
        table.add_column(col)
    for c in report.collections:
        # an edited chunk keeps its old place until kt build: the state says unmapped, so the column counts it
        unplaced = f"{c.unmapped} + {c.changed} changed" if c.changed else str(c.unmapped)
        table.add_row(c.name, str(c.chunks), str(c.mapped), unplaced, str(c.nodes), c.embedder or "-",
                      c.builder or "-", c.state or ("stale" if c.stale else "current"))
    out.print(table)
    several = len(report.collections) > 1  # then a command to copy names its collection
    for c in report.collections:
        if c.advice:
            out.print(f"{c.name}: {with_named_options(c.advice, c.name if several else None)}", markup=False)


def print_sessions(payload: dict) -> None:
    out = console()
    if not payload["sessions"]:
        out.print("no sessions yet")
    for s in payload["sessions"]:
        reads = ", ".join(f"{c}: {n}" for c, n in s["reads"].items()) or "nothing read"
        out.print(f"{s['name']}  ({reads})", markup=False)
