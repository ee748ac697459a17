"""Keyword snippets: the line (or window of it) that best matches a query, with the matches marked."""

from __future__ import annotations

import re
from collections.abc import Callable, Iterable
from dataclasses import dataclass

from ..textutil import identifier_terms
from .prf import stem

_WORD = re.compile(r"[0-9A-Za-z]+")
#: An HTML/XML tag written in Markdown (``<a id="ERR_X"></a>``): a match inside one is markup.
_TAG = re.compile(r"</?[A-Za-z][^<>]*>")
_ATX = re.compile(r"^#{1,6} (?=\S)")
#: Characters of a keyword snippet (about a tree snippet's length, ~20 tokens).
WINDOW = 100
ELLIPSIS = "…"


@dataclass(frozen=True)
class Window:
    """A snippet cut from a chunk's text and the spans inside it that matched."""

    text: str
    marks: list[tuple[int, int]]


def keyword_matcher(query: str) -> Callable[[str], list[tuple[int, int, str]]]:
    """A function giving ``(start, end, key)`` of each word of a text whose stem is a query stem.

    A word matches a keyword when their English Snowball stems agree — the analyser of the full-text
    index — so the marked words are the ones BM25 scored. A regular expression marks its own matches.
    """
    stems = {stem(w.lower()) for w in _WORD.findall(query)}
    # an identifier of the query (``@define``, ``MAX_RETRY``) also matches whole, as its own key, so
    # the line that writes it beats one that only shares a stem with it ("Defining")
    whole = [re.compile(r"(?<![\w@$-])" + re.escape(term) + r"(?![\w-])", re.I) for term in identifier_terms(query)]

    def find(text: str) -> list[tuple[int, int, str]]:
        out = [(m.start(), m.end(), "=" + pattern.pattern) for pattern in whole for m in pattern.finditer(text)]
        for m in _WORD.finditer(text):
            key = stem(m.group().lower())
            if key in stems:
                out.append((m.start(), m.end(), key))
        return sorted(out)

    return find


def regex_matcher(pattern: str) -> Callable[[str], list[tuple[int, int, str]]]:
    """A function giving the non-empty matches of ``pattern`` (the matched text is the key)."""
    compiled = re.compile(pattern)

    def find(text: str) -> list[tuple[int, int, str]]:
        return [(m.start(), m.end(), m.group()) for m in compiled.finditer(text) if m.end() > m.start()]

    return find


def best_window(text: str, find: Callable[[str], list[tuple[int, int, str]]], width: int = WINDOW) -> Window | None:
    """The line with the most distinct matches outside HTML tags (then most distinct matches, most
    matches, earliest), cut to ``width`` characters around its densest run of matches; None when
    nothing in ``text`` matches. An anchor such as ``<a id="ERR_X"></a>`` above a heading that
    writes ``ERR_X`` loses to the heading."""
    best: tuple[tuple[int, int, int, int], str, list[tuple[int, int, str]]] | None = None
    for number, line in enumerate(_lines(text)):
        found = find(line)
        if not found:
            continue
        tags = [m.span() for m in _TAG.finditer(line)] if "<" in line else []
        read = {key for s, e, key in found if not any(a <= s and e <= b for a, b in tags)}
        rank = (len(read), len({key for *_, key in found}), len(found), -number)
        if best is None or rank > best[0]:
            best = (rank, line, found)
    if best is None:
        return None
    _, line, found = best
    return _cut(line, found, width)


def _lines(text: str) -> Iterable[str]:
    """Each non-blank line, whitespace collapsed and a Markdown heading's leading ``#`` marks dropped
    (``### `fs.readFile` `` shows as ``fs.readFile`` in backquotes; they say nothing and cost tokens)."""
    for raw in text.splitlines():
        line = _ATX.sub("", " ".join(raw.split()), count=1)
        if line:
            yield line


def _cut(line: str, found: list[tuple[int, int, str]], width: int) -> Window:
    if len(line) <= width:
        return Window(line, _outer([(s, e) for s, e, _ in found]))
    # the start (a match's start) whose window holds the most distinct keys
    best_start, best_rank = found[0][0], (-1, -1)
    for s, _, _ in found:
        inside = [(a, b, key) for a, b, key in found if a >= s and b <= s + width]
        rank = (len({key for *_, key in inside}), len(inside))
        if rank > best_rank:
            best_start, best_rank = s, rank
    # centre the run a little: keep some words before the first match
    start = max(0, best_start - width // 4)
    if start > 0:  # back to the start of the word it falls in, unless that word is long (a JSON string)
        word = line.rfind(" ", 0, start + 1) + 1
        start = word if best_start - word < width // 2 else start
    end = min(len(line), start + width)
    if end < len(line):
        space = line.rfind(" ", start, end)
        end = space if space > max((s for s, _, _ in found if s < end), default=start) else end
    prefix = ELLIPSIS if start > 0 else ""
    suffix = ELLIPSIS if end < len(line) else ""
    shift = len(prefix) - start
    marks = [(a + shift, b + shift) for a, b, _ in found if a >= start and b <= end]
    return Window(prefix + line[start:end] + suffix, _outer(marks))


def _outer(spans: list[tuple[int, int]]) -> list[tuple[int, int]]:
    """``spans`` without those inside another (a word of a whole identifier that is marked too)."""
    return [(s, e) for s, e in spans if not any(a <= s and e <= b and (a, b) != (s, e) for a, b in spans)]
