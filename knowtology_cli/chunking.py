"""Split a document into token-sized chunks along its own structure.

Boundaries are preferred in this order: headings (Markdown ``#`` and setext, reST underlined or
over-and-underlined titles), blank lines, sentence ends, line ends, spaces, and, last, a cut
between two tokens. Each chunk is a contiguous slice of the (CRLF-normalised, BOM-stripped)
text with surrounding whitespace trimmed, so the chunks in order hold every non-whitespace
character exactly once. ``title`` is the heading trail, e.g. ``Refund policy › Perishables``.
"""

from __future__ import annotations

import re
from bisect import bisect_left
from collections.abc import Callable, Iterator
from dataclasses import dataclass
from pathlib import PurePath

from knowtology_cli.errors import ConfigError
from knowtology_cli.tokens import DEFAULT_ENCODING, count_tokens, prefix_within

TITLE_SEPARATOR = " › "
DEFAULT_TARGET_TOKENS = 300
DEFAULT_MAX_TOKENS = 450
#: No token of cl100k_base / o200k_base spans more than 128 bytes, hence no more characters.
MAX_TOKEN_CHARS = 128

_ATX = re.compile(r"^ {0,3}(#{1,6})(?:[ \t]+(.*?))?(?:[ \t]+#+)?[ \t]*$")
_FENCE = re.compile(r"^ {0,3}(`{3,}|~{3,})")
_ADORNMENT = re.compile(r"^([=\-~^\"'`:#*+_<>])\1{2,}[ \t]*$")
_PARAGRAPH = re.compile(r"\n[ \t]*\n\s*")
_SENTENCE = re.compile(r"(?:[.!?…][\"'”’)\]]*\s+|[。！？]\s*)")
_LINE = re.compile(r"\n\s*")
_SPACE = re.compile(r"\s+")


@dataclass(frozen=True)
class DocChunk:
    """One chunk of a document.

    Attributes:
        index: position of the chunk in the document (0-based).
        text: the chunk's text (a slice of the normalised document, whitespace-trimmed).
        title: heading trail joined by `` › ``; the file name when no heading applies.
        start: offset of the chunk's first character in the original text.
        end: offset just past the chunk's last character in the original text.
        tokens: token count of ``text``.
    """

    index: int
    text: str
    title: str
    start: int
    end: int
    tokens: int


@dataclass(frozen=True)
class Heading:
    """A heading found in a normalised text.

    Attributes:
        start: offset of the heading's first line (its overline, if any).
        level: 1 for the top level; ATX by ``#`` count, underlines by order of appearance.
        title: the heading text, markup stripped.
    """

    start: int
    level: int
    title: str


@dataclass
class _Draft:
    start: int
    end: int
    trail: tuple[str, ...]


def normalise(text: str) -> tuple[str, Callable[[int], int]]:
    """Strip a BOM and turn CRLF / CR into LF; returns the text and a map back to original offsets."""
    bom = 1 if text.startswith("\ufeff") else 0
    body = text[bom:]
    # Offsets (in the normalised text) of each "\n" that was "\r\n": every one shifts what follows.
    crlf_at = [match.start() - shift for shift, match in enumerate(re.finditer("\r\n", body))]

    def to_original(offset: int) -> int:
        return offset + bom + bisect_left(crlf_at, offset)

    return body.replace("\r\n", "\n").replace("\r", "\n"), to_original


def _lines(text: str) -> list[tuple[int, str]]:
    out, offset = [], 0
    for line in text.split("\n"):
        out.append((offset, line))
        offset += len(line) + 1
    return out


def _front_matter_end(lines: list[tuple[int, str]]) -> int:
    """Index of the first line after a YAML front matter block (0 when there is none)."""
    if not lines or lines[0][1].rstrip() != "---":
        return 0
    for index in range(1, min(len(lines), 200)):
        if lines[index][1].rstrip() in ("---", "..."):
            return index + 1
    return 0


def find_headings(text: str, *, atx: bool = True) -> list[Heading]:
    """Headings of a normalised text: ATX (``# Title``) and underlined / overlined titles.

    Lines inside fenced code blocks and YAML front matter are never headings. Underline styles
    get levels in order of first appearance (the reST rule; setext ``=`` then ``-`` gives 1, 2).
    """
    lines = _lines(text)
    headings: list[Heading] = []
    styles: dict[tuple[str, bool], int] = {}
    fence: str | None = None
    index = _front_matter_end(lines)
    while index < len(lines):
        offset, line = lines[index]
        fence_match = _FENCE.match(line)
        if fence is not None:
            if fence_match and fence_match.group(1)[0] == fence[0] and len(fence_match.group(1)) >= len(fence):
                fence = None
            index += 1
            continue
        if fence_match:
            fence = fence_match.group(1)
            index += 1
            continue
        atx_match = _ATX.match(line) if atx else None
        if atx_match:
            headings.append(Heading(offset, len(atx_match.group(1)), (atx_match.group(2) or "").strip()))
            index += 1
            continue
        underline = _underline_heading(lines, index)
        if underline is not None:
            start_line, char, overline = underline
            level = styles.setdefault((char, overline), len(styles) + 1)
            headings.append(Heading(lines[start_line][0], level, line.strip()))
            index += 2
            continue
        index += 1
    return headings


def _underline_heading(lines: list[tuple[int, str]], index: int) -> tuple[int, str, bool] | None:
    """If line ``index`` is a title with an underline, return (first line, char, has overline)."""
    line = lines[index][1]
    title = line.strip()
    if not title or index + 1 >= len(lines) or line.startswith("    ") or _ADORNMENT.match(line):
        return None
    under = lines[index + 1][1].rstrip()
    match = _ADORNMENT.match(under)
    if not match:
        return None
    char = match.group(1)
    # Markdown setext headings may be underlined short; other adornments follow reST (>= title).
    if char not in "=-" and len(under) < len(title):
        return None
    above = lines[index - 1][1].rstrip() if index > 0 else ""
    if above and above == under:  # over- and underlined (reST)
        before = lines[index - 2][1].strip() if index > 1 else ""
        return None if before else (index - 1, char, True)
    return None if above.strip() else (index, char, False)


def _trim(text: str, start: int, end: int) -> tuple[int, int]:
    while start < end and text[start].isspace():
        start += 1
    while end > start and text[end - 1].isspace():
        end -= 1
    return start, end


class _Splitter:
    """Recursive splitting and greedy packing of one normalised text."""

    def __init__(self, text: str, *, target: int, maximum: int, minimum: int, encoding: str) -> None:
        self.text = text
        self.target = target
        self.maximum = maximum
        self.minimum = minimum
        self.encoding = encoding
        self._counts: dict[tuple[int, int], int] = {}

    def tokens(self, start: int, end: int) -> int:
        start, end = _trim(self.text, start, end)
        key = (start, end)
        if key not in self._counts:
            self._counts[key] = count_tokens(self.text[start:end], self.encoding)
        return self._counts[key]

    def fits(self, start: int, end: int, limit: int) -> bool:
        """Whether [start, end) has at most ``limit`` tokens (huge spans are not even counted)."""
        return end - start <= MAX_TOKEN_CHARS * limit and self.tokens(start, end) <= limit

    def units(self, start: int, end: int, level: int = 0) -> Iterator[tuple[int, int]]:
        """Consecutive spans covering [start, end), each within ``maximum`` tokens."""
        if self.fits(start, end, self.maximum):
            yield start, end
            return
        separators = (_PARAGRAPH, _SENTENCE, _LINE)
        if level >= len(separators):
            yield from self._cut_by_tokens(start, end)
            return
        cuts = [m.end() for m in separators[level].finditer(self.text, start, end) if start < m.end() < end]
        bounds = [start, *cuts, end]
        for piece_start, piece_end in zip(bounds, bounds[1:], strict=False):
            yield from self.units(piece_start, piece_end, level + 1)

    def _cut_by_tokens(self, start: int, end: int) -> Iterator[tuple[int, int]]:
        """Pieces of about ``target`` tokens, cut at the last space before the token limit.

        Only when a piece has no space at all is it cut between two tokens.
        """
        start, end = _trim(self.text, start, end)
        while start < end:
            budget = self.target
            while True:
                cut = self._token_prefix_end(start, end, budget)
                if cut >= end:
                    break
                spaces = [m.start() for m in _SPACE.finditer(self.text, start + 1, cut)]
                if spaces and not self.text[cut].isspace():
                    cut = spaces[-1]
                # A prefix can tokenise differently from the token prefix; shrink until it fits.
                if cut - start <= 1 or self.tokens(start, cut) <= self.maximum:
                    break
                budget = max(1, budget - max(1, budget // 8))
            yield start, cut
            start, end = _trim(self.text, cut, end)

    def _token_prefix_end(self, start: int, end: int, budget: int) -> int:
        """End of the longest token-aligned prefix of [start, end) within ``budget`` tokens.

        Only a window is tokenised (grown while it holds fewer than ``budget`` tokens), which
        keeps splitting a long unbroken text linear.
        """
        size = 8 * budget
        while True:
            limit = min(end, start + size)
            cut = start + prefix_within(self.text[start:limit], budget, self.encoding)
            if cut < limit or limit == end:
                return cut
            size *= 4

    def pack(self, units: Iterator[tuple[int, int]]) -> list[tuple[int, int]]:
        """Greedy packing of consecutive units into spans of about ``target`` tokens.

        Sizes are summed rather than recounted for every candidate (the text is recounted only
        when the sum says the target is reached); a span over ``maximum`` is repacked exactly.
        """
        groups: list[list[tuple[int, int]]] = []
        current: list[tuple[int, int]] = []
        estimate = 0
        for unit in units:
            if not self.text[unit[0] : unit[1]].strip():
                continue
            size = self.tokens(*unit)
            if current:
                previous = self.text[current[-1][0] : current[-1][1]]
                # A line break between units costs a token; a space usually joins the next word.
                junction = 1 if "\n" in previous[len(previous.rstrip()) :] else 0
                if estimate + junction + size > self.target:
                    # The estimate runs high (joined text tokenises tighter): check before closing.
                    exact = self.tokens(current[0][0], unit[1])
                    if exact > self.target:
                        groups.append(current)
                        current, estimate = [unit], size
                        continue
                    estimate = exact - size - junction
                estimate += size + junction
            else:
                estimate = size
            current.append(unit)
        if current:
            groups.append(current)
        spans: list[tuple[int, int]] = []
        for group in groups:
            span = (group[0][0], group[-1][1])
            spans.extend([span] if self.tokens(*span) <= self.maximum else self._pack_exact(group))
        # A small tail reads better as the end of the previous chunk.
        if len(spans) > 1 and self.tokens(*spans[-1]) < self.minimum:
            merged = (spans[-2][0], spans[-1][1])
            if self.tokens(*merged) <= self.maximum:
                spans[-2:] = [merged]
        return spans

    def _pack_exact(self, group: list[tuple[int, int]]) -> list[tuple[int, int]]:
        spans: list[tuple[int, int]] = []
        current = group[0]
        for unit in group[1:]:
            if self.tokens(current[0], unit[1]) <= self.maximum:
                current = (current[0], unit[1])
            else:
                spans.append(current)
                current = unit
        spans.append(current)
        return spans


def _common_prefix(a: tuple[str, ...], b: tuple[str, ...]) -> tuple[str, ...]:
    out = []
    for x, y in zip(a, b, strict=False):
        if x != y:
            break
        out.append(x)
    return tuple(out)


def split_document(
    text: str,
    *,
    file_name: str,
    max_tokens: int = DEFAULT_MAX_TOKENS,
    target_tokens: int = DEFAULT_TARGET_TOKENS,
    min_tokens: int | None = None,
    encoding: str = DEFAULT_ENCODING,
) -> list[DocChunk]:
    """Split a document into chunks of about ``target_tokens`` (never above ``max_tokens``).

    Args:
        text: the document (a BOM is stripped, CRLF and CR become LF).
        file_name: used for the title of text under no heading, and to recognise ``.rst``
            (where ``#`` lines are not headings).
        max_tokens: hard limit per chunk; only a single character that alone exceeds it
            could break it.
        target_tokens: adjacent small sections and paragraphs are packed up to this size.
        min_tokens: a section's last piece below this joins the previous piece
            (default ``target_tokens // 4``).
        encoding: tiktoken encoding used for counting.

    Returns:
        Chunks in document order; offsets refer to the original ``text``.

    Raises:
        ConfigError: inconsistent token limits.
    """
    if not 1 <= target_tokens <= max_tokens:
        raise ConfigError(
            f"chunk sizes must satisfy 1 <= target ({target_tokens}) <= max ({max_tokens})"
        )
    minimum = target_tokens // 4 if min_tokens is None else min_tokens
    normalised, to_original = normalise(text)
    if not normalised.strip():
        return []
    is_rst = PurePath(file_name).suffix.lower() in {".rst", ".rest"}
    splitter = _Splitter(
        normalised, target=target_tokens, maximum=max_tokens, minimum=minimum, encoding=encoding
    )
    drafts = _section_drafts(normalised, splitter, atx=not is_rst)
    drafts = _merge_small_neighbours(drafts, splitter)
    fallback_title = PurePath(file_name).name
    chunks: list[DocChunk] = []
    for draft in drafts:
        start, end = _trim(normalised, draft.start, draft.end)
        if start == end:
            continue
        chunks.append(
            DocChunk(
                index=len(chunks),
                text=normalised[start:end],
                title=TITLE_SEPARATOR.join(draft.trail) or fallback_title,
                start=to_original(start),
                end=to_original(end),
                tokens=splitter.tokens(start, end),
            )
        )
    return chunks


def _section_drafts(text: str, splitter: _Splitter, *, atx: bool) -> list[_Draft]:
    """One draft per section, or several when a section exceeds the maximum."""
    headings = find_headings(text, atx=atx)
    bounds: list[tuple[int, int, tuple[str, ...]]] = []
    if not headings or headings[0].start > 0:
        bounds.append((0, headings[0].start if headings else len(text), ()))
    stack: list[tuple[int, str]] = []
    for position, heading in enumerate(headings):
        while stack and stack[-1][0] >= heading.level:
            stack.pop()
        stack.append((heading.level, heading.title))
        end = headings[position + 1].start if position + 1 < len(headings) else len(text)
        bounds.append((heading.start, end, tuple(title for _, title in stack if title)))
    drafts: list[_Draft] = []
    for start, end, trail in bounds:
        if not text[start:end].strip():
            continue
        if splitter.fits(start, end, splitter.maximum):
            drafts.append(_Draft(start, end, trail))
        else:
            drafts.extend(_Draft(s, e, trail) for s, e in splitter.pack(splitter.units(start, end)))
    return drafts


def _merge_small_neighbours(drafts: list[_Draft], splitter: _Splitter) -> list[_Draft]:
    """Join adjacent drafts under a common heading while they fit the target together.

    The merged draft keeps the common part of the heading trails (``A › B`` + ``A › C`` → ``A``);
    drafts sharing no heading (different top-level sections) stay apart.
    """
    merged: list[_Draft] = []
    for draft in drafts:
        previous = merged[-1] if merged else None
        if previous is not None:
            common = _common_prefix(previous.trail, draft.trail)
            related = bool(common) or (not previous.trail and not draft.trail)
            if related and splitter.fits(previous.start, draft.end, splitter.target):
                merged[-1] = _Draft(previous.start, draft.end, common)
                continue
        merged.append(_Draft(draft.start, draft.end, draft.trail))
    return merged


__all__ = [
    "DEFAULT_MAX_TOKENS",
    "DEFAULT_TARGET_TOKENS",
    "DocChunk",
    "Heading",
    "find_headings",
    "normalise",
    "split_document",
]
