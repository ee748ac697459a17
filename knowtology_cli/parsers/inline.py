"""Small text helpers the parsers share: tag stripping, whitespace, Markdown-style tables."""

from __future__ import annotations

import html
import re
from collections.abc import Sequence

_TAG = re.compile(r"<!--.*?-->|</?[A-Za-z][^<>]*>", re.S)
_SPACES = re.compile(r"[ \t\r\f\v\u00a0]+")
#: Inline HTML elements that hold code (``<code>``, ``<samp>``, ``<kbd>``; the old ``<tt>``): they
#: read as Markdown code spans, in an HTML page and in HTML a Markdown page embeds.
INLINE_CODE_TAGS = ("code", "tt", "samp", "kbd")


#: Splits a line around its code spans (``re.split`` keeps each span as an odd-numbered part).
CODE_SPAN_SPLIT = re.compile(r"(`+[^`]*`+)")
#: A fenced code block's fence line: its marks (``group(1)``) and its info string (``group(2)``).
FENCE_LINE = re.compile(r"[ \t]*(`{3,}|~{3,})(.*)$")


def closes_fence(fence: str, line: str) -> bool:
    """Whether ``line`` closes the code block ``fence`` (its marks) opened: CommonMark's rule, the
    same mark at least as long, and no info string."""
    mark = FENCE_LINE.match(line)
    return (mark is not None and mark.group(1)[0] == fence[0] and len(mark.group(1)) >= len(fence)
            and not mark.group(2).strip())


def code_span(text: str) -> str:
    """``text`` as a Markdown code span, as CommonMark writes one: in single backticks, or in a run
    longer than any it holds, padded with a space where it starts or ends with a backtick."""
    fence = "`" * (max((len(run) for run in re.findall(r"`+", text)), default=0) + 1)
    pad = " " if text.startswith("`") or text.endswith("`") else ""
    return f"{fence}{pad}{text}{pad}{fence}"


#: A code span as `code_span` writes one: its backtick run, an optional pad, the code, the same run.
_CODE_SPAN = re.compile(r"(?<!`)(`+) ?(.+?) ?\1(?!`)")


def plain_spans(text: str) -> str:
    """``text`` with its code spans as their bare code (a title path shows ``The Flask object``
    for the heading ``The `Flask` object``, as Markdown sources' titles do)."""
    return _CODE_SPAN.sub(r"\2", text)


#: A token of prose: a word or a number, maybe quoted or bracketed, maybe followed by punctuation
#: (``dots,`` and ``"word"`` are; ``invoke(dots,`` and ``args=['-v'])`` are not).
PROSE_WORD = re.compile(r"""[("'\[“‘]*(?:[^\W\d]\w*(?:[.'’-]\w+)*|\d+(?:[.,:]\d+)*%?)[)"'\]”’]*[.,;:!?…]*""")
#: Below this share of its characters in words, directive content with no markup is code:
#: prose is mostly words even where it names a call or two (over 0.9 in Sphinx's and Jinja's
#: descriptions), while ``import os`` over ``invoke(cmd, env={...})`` is mostly expression.
CODE_WORD_SHARE = 0.5
OPENING, CLOSING = "([{", ")]}"


#: The first line of a terminal session: a shell's or Python's prompt (``$ pip install x``, ``>>> f()``).
SESSION_PROMPT = re.compile(r"[ \t]*(?:\$|>>>)[ \t]+\S")


def reads_as_code(text: str) -> bool:
    """Whether text with no markup of its own is code: a terminal session (its first line opens
    with a prompt), or mostly no words (`word_share` below `CODE_WORD_SHARE`)."""
    first = next((line for line in text.split("\n") if line.strip()), "")
    return bool(SESSION_PROMPT.match(first)) or word_share(text) < CODE_WORD_SHARE


def word_share(text: str) -> float:
    """The share of ``text``'s characters (spaces aside) in words (`PROSE_WORD`). A bracket that follows a
    character directly opens an expression (a call ``f(a, b)``, an index, ``args=['-v']``), which is
    no word however many its arguments hold; a bracket after a space is prose's ("(see below)")."""
    kept: list[str] = []
    depth = 0
    for i, char in enumerate(text):
        if depth:
            depth += (char in OPENING) - (char in CLOSING)
            kept.append("\0")  # part of the expression: no space splits it, no word is found in it
        elif char in OPENING and i and not text[i - 1].isspace():
            depth = 1
            kept.append("\0")
        else:
            kept.append(char)
    tokens = "".join(kept).split()
    total = sum(len(token) for token in tokens)
    return sum(len(token) for token in tokens if PROSE_WORD.fullmatch(token)) / total if total else 1.0


def strip_tags(fragment: str) -> str:
    """Text of an HTML fragment embedded in another format (entities decoded, tags and comments gone)."""
    return html.unescape(_TAG.sub(" ", fragment))


def squeeze(text: str) -> str:
    """Collapse runs of spaces (not line breaks) and trim every line."""
    return "\n".join(_SPACES.sub(" ", line).strip() for line in text.split("\n")).strip()


def flow(text: str) -> str:
    """All whitespace, line breaks included, as single spaces."""
    return " ".join(text.split())


def table_text(rows: Sequence[Sequence[str]], header: bool = True) -> str:
    """A table as Markdown pipe rows: readable as text and recognised as a table by snippets."""
    rows = [[flow(cell).replace("|", "/") for cell in row] for row in rows if any(c.strip() for c in row)]
    if not rows:
        return ""
    width = max(len(r) for r in rows)
    rows = [[*r, *[""] * (width - len(r))] for r in rows]
    kept = [i for i in range(width) if any(r[i].strip() for r in rows)]  # a spacer column says nothing
    rows = [[r[i] for i in kept] for r in rows]
    width = len(kept)
    lines = ["| " + " | ".join(r) + " |" for r in rows]
    if header and len(rows) > 1:
        lines.insert(1, "|" + " --- |" * width)
    return "\n".join(lines)


#: ``Title <target>`` in a reST role: as docutils reads embedded targets, whitespace must come
#: before the ``<``, so ``IMPORTED_LOCATION_<CONFIG>`` and ``$<TARGET_FILE:t>`` are names, and a
#: target may hold ``<...>`` itself (``CMAKE_CXX_FLAGS <CMAKE_<LANG>_FLAGS>``).
TITLED_TARGET = re.compile(r"^(.*?\S)\s+<(.+)>$", re.S)


def role_text(text: str) -> str:
    """What a reST role shows: the title of ``Title <target>``, else the target as Sphinx displays
    it (``!a`` -> ``a``, ``~a.b.c`` -> ``c``)."""
    titled = TITLED_TARGET.match(text)
    if titled:
        return titled.group(1)
    text = text.lstrip("!")
    return text[1:].rsplit(".", 1)[-1] if text.startswith("~") else text
