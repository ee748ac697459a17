"""Plain text by paragraphs; a line underlined (or overlined too) with ``===``/``---``/… is a heading."""

from __future__ import annotations

import re

from .base import Block, Document, Section, parser_version

_ADORNMENT = re.compile(r"^([=\-~^\"'`:#*+_<>])\1{2,}[ \t]*$")


def _heading_at(lines: list[str], index: int) -> tuple[int, str, bool] | None:
    """If ``lines[index]`` is a title with an adornment below, return (lines used, char, overlined)."""
    title = lines[index].strip()
    if not title or index + 1 >= len(lines) or _ADORNMENT.match(lines[index].strip()):
        return None
    under = lines[index + 1].rstrip()
    match = _ADORNMENT.match(under)
    if not match or len(under) < min(len(title), 3) or len(title) > 120:
        return None
    above = lines[index - 1].rstrip() if index > 0 else ""
    if above == under:
        return 3, match.group(1), True
    return (2, match.group(1), False) if not above.strip() else None


def parse_text(text: str, *, name: str = "") -> Document:
    """Sections of a plain-text document.

    Adornment styles get heading levels in order of first appearance, the rule reStructuredText
    and setext Markdown share; a line of adornment alone is a rule and is left out.
    """
    lines = text.replace("\r\n", "\n").replace("\r", "\n").split("\n")
    styles: dict[tuple[str, bool], int] = {}
    stack: list[tuple[int, str]] = []
    sections: list[Section] = []
    titles: tuple[str, ...] = ()
    blocks: list[Block] = []
    paragraph: list[int] = []
    dropped = 0

    def flush() -> None:
        if paragraph:
            body = "\n".join(lines[paragraph[0] : paragraph[-1] + 1]).strip("\n")
            blocks.append(Block(body, paragraph[0] + 1, paragraph[-1] + 1))
            paragraph.clear()

    index = 0
    while index < len(lines):
        line = lines[index]
        heading = _heading_at(lines, index)
        if heading is not None and not (heading[2] and paragraph and paragraph[-1] == index - 1):
            used, char, overlined = heading
            if overlined and paragraph and paragraph[-1] == index - 1:
                paragraph.pop()
            flush()
            if blocks:
                sections.append(Section(titles, tuple(blocks)))
                blocks = []
            level = styles.setdefault((char, overlined), len(styles) + 1)
            while stack and stack[-1][0] >= level:
                stack.pop()
            stack.append((level, line.strip()))
            titles = tuple(t for _, t in stack)
            first = index - 1 if overlined else index
            # written as the other parsers write a heading (``## Title``), so that chunk text and
            # snippets know it for one rather than as the first line of what it heads
            blocks.append(Block("#" * min(len(titles), 6) + " " + line.strip(), first + 1, index + 2, "heading"))
            index += 2
            continue
        if not line.strip():
            flush()
        elif _ADORNMENT.match(line.strip()) and not paragraph:
            dropped += 1  # a rule on its own line
        else:
            paragraph.append(index)
        index += 1
    flush()
    if blocks:
        sections.append(Section(titles, tuple(blocks)))
    return Document(format="text", unit="line", sections=tuple(sections), parser=parser_version("text"),
                    dropped=dropped)
