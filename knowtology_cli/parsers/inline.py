"""Small text helpers the parsers share: tag stripping, whitespace, Markdown-style tables."""

from __future__ import annotations

import html
import re
from collections.abc import Sequence

_TAG = re.compile(r"<!--.*?-->|</?[A-Za-z][^<>]*>", re.S)
_SPACES = re.compile(r"[ \t\r\f\v\u00a0]+")


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
    lines = ["| " + " | ".join([*r, *[""] * (width - len(r))]) + " |" for r in rows]
    if header and len(rows) > 1:
        lines.insert(1, "|" + " --- |" * width)
    return "\n".join(lines)
