"""Token-sized chunks over a parsed document's sections, each with its title path and source range."""

from __future__ import annotations

import re
from collections.abc import Iterator
from dataclasses import dataclass, field

from knowtology_cli.errors import ConfigError
from knowtology_cli.parsers import TITLE_SEPARATOR, Block, Document, display_name, parse
from knowtology_cli.parsers.inline import FENCE_LINE, closes_fence
from knowtology_cli.tokens import DEFAULT_ENCODING, count_tokens, prefix_within

DEFAULT_TARGET_TOKENS = 300
DEFAULT_MAX_TOKENS = 450
#: No token of cl100k_base / o200k_base spans more than 128 bytes, hence no more characters.
MAX_TOKEN_CHARS = 128
#: Blocks are joined with a blank line, which costs one token.
JOIN = "\n\n"

_PARAGRAPH = re.compile(r"\n[ \t]*\n\s*")
_SENTENCE = re.compile(r"(?:[.!?…][\"'”’)\]]*\s+|[。！？]\s*)")
_LINE = re.compile(r"\n\s*")
_SPACE = re.compile(r"\s+")
#: A pipe table's header row and the separator row under it.
_TABLE_HEAD = re.compile(r"[ \t]*\|[^\n]*\n[ \t]*\|?[ \t]*:?-{2,}[^\n]*\n")
#: The opening line of a fenced code block (its fence, ``group(1)``, closes it).
_FENCE = re.compile(r"[ \t]*(`{3,}|~{3,})[^\n]*\n")
_WORD = re.compile(r"[^\W_]")
#: vim / vi / ex modelines and Emacs file-variable lines, wherever a format leaves them as text.
_MODELINE = re.compile(
    r"^\W*(?:(?:vim?|ex)\s*:\s*(?:set?\s+)?[\w=:,.+\- ]+:?|-\*-.*-\*-|Local Variables:|End:)\W*$", re.I
)


@dataclass(frozen=True)
class DocChunk:
    """One chunk of a document.

    Attributes:
        index: position of the chunk in the document (0-based).
        text: the chunk's clean text, its blocks joined by blank lines.
        title: the section's heading trail joined by `` › ``; the document's title (else its
            file name without extensions) when no heading applies.
        section: the heading trail alone (empty when no heading applies).
        unit: ``line`` or ``page``.
        start: first source line or page (1-based).
        end: last source line or page (inclusive).
        tokens: its pieces' token counts plus one per blank line joining them: the count of
            ``text``, or a little above where a join merges into a neighbouring token.
    """

    index: int
    text: str
    title: str
    section: str
    unit: str
    start: int
    end: int
    tokens: int


@dataclass
class ChunkedDocument:
    """Chunks of one document and what was set aside on the way.

    ``junk_merged`` counts would-be chunks with headings only that were merged into a neighbour;
    ``junk_dropped`` counts pieces without prose left out (by the parser and here).
    """

    chunks: list[DocChunk]
    parser: str
    format: str
    junk_merged: int = 0
    junk_dropped: int = 0


@dataclass
class _Piece:
    text: str
    start: int
    end: int
    heading: bool
    tokens: int
    #: opens what follows (a heading, a label, "Output:"): a chunk does not end with it
    leads: bool = False
    #: the heading trail of the section it comes from
    trail: tuple[str, ...] = ()


@dataclass
class _Draft:
    trail: tuple[str, ...]
    pieces: list[_Piece] = field(default_factory=list)

    @property
    def text(self) -> str:
        return JOIN.join(p.text for p in self.pieces)

    @property
    def estimate(self) -> int:
        return sum(p.tokens for p in self.pieces) + max(0, len(self.pieces) - 1)

    @property
    def prose(self) -> bool:
        return any(not p.heading for p in self.pieces)

    @property
    def label(self) -> tuple[str, ...]:
        """The heading trail that names the draft: the common trail when the draft holds that
        section's own text (``A``'s intro, then its subsections ``A › B`` and ``A › C``); for
        sibling sections alone, the one holding most of the tokens when one does (``A › B`` for
        ``A › B`` plus a short ``A › C``), else the common trail."""
        sizes: dict[tuple[str, ...], int] = {}
        for p in self.pieces:
            sizes[p.trail] = sizes.get(p.trail, 0) + p.tokens
        if self.trail in sizes:
            return self.trail
        trail, size = max(sizes.items(), key=lambda item: item[1], default=(self.trail, 0))
        return trail if 2 * size > sum(sizes.values()) and trail[:len(self.trail)] == self.trail else self.trail


def has_prose(text: str) -> bool:
    """Whether a block says anything: a word or a number, and not only an editor modeline."""
    return bool(_WORD.search(text)) and not all(_MODELINE.match(line.strip()) for line in text.split("\n") if line.strip())


class _Splitter:
    """Splits one over-long text into spans within ``maximum`` tokens, at the best boundaries."""

    def __init__(self, text: str, *, target: int, maximum: int, encoding: str, lines_first: bool = False) -> None:
        self.text = text
        self.target = target
        self.maximum = maximum
        self.encoding = encoding
        # a table, list or code block is made of lines: cut between rows and items before sentences
        # ("(e.g." inside a row is no place to cut a table)
        self.separators = (_PARAGRAPH, _LINE, _SENTENCE) if lines_first else (_PARAGRAPH, _SENTENCE, _LINE)
        self._counts: dict[tuple[int, int], int] = {}

    def tokens(self, start: int, end: int) -> int:
        start, end = _trim(self.text, start, end)
        key = (start, end)
        if key not in self._counts:
            self._counts[key] = count_tokens(self.text[start:end], self.encoding)
        return self._counts[key]

    def fits(self, start: int, end: int, limit: int) -> bool:
        return end - start <= MAX_TOKEN_CHARS * limit and self.tokens(start, end) <= limit

    def units(self, start: int, end: int, level: int = 0) -> Iterator[tuple[int, int]]:
        if self.fits(start, end, self.maximum):
            yield start, end
            return
        separators = self.separators
        if level >= len(separators):
            yield from self._cut_by_tokens(start, end)
            return
        cuts = [m.end() for m in separators[level].finditer(self.text, start, end) if start < m.end() < end]
        bounds = [start, *cuts, end]
        for piece_start, piece_end in zip(bounds, bounds[1:]):
            yield from self.units(piece_start, piece_end, level + 1)

    def _cut_by_tokens(self, start: int, end: int) -> Iterator[tuple[int, int]]:
        """Pieces of about ``target`` tokens, cut at the last space before the limit when there is one."""
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
        size = 8 * budget
        while True:
            limit = min(end, start + size)
            cut = start + prefix_within(self.text[start:limit], budget, self.encoding)
            if cut < limit or limit == end:
                return cut
            size *= 4

    def spans(self) -> list[tuple[int, int]]:
        """Units packed greedily up to ``target`` tokens (never above ``maximum``)."""
        spans: list[tuple[int, int]] = []
        for unit in self.units(0, len(self.text)):
            if not self.text[unit[0] : unit[1]].strip():
                continue
            if spans and self.fits(spans[-1][0], unit[1], self.target):
                spans[-1] = (spans[-1][0], unit[1])
            else:
                spans.append(unit)
        return [_trim(self.text, s, e) for s, e in spans]


def _trim(text: str, start: int, end: int) -> tuple[int, int]:
    while start < end and text[start].isspace():
        start += 1
    while end > start and text[end - 1].isspace():
        end -= 1
    return start, end


def _pieces(block: Block, unit: str, *, target: int, maximum: int, encoding: str) -> list[_Piece]:
    """The block as one piece, or split into pieces within ``maximum`` tokens with their own ranges."""
    code = block.kind == "code"
    text = block.text.strip("\n") if code else block.text.strip()  # code keeps its first line's indent
    heading = block.kind in ("heading", "label")
    if len(text) <= MAX_TOKEN_CHARS * maximum:
        tokens = count_tokens(text, encoding)
        if tokens <= maximum:
            # a short paragraph ending in a colon introduces the next block ("Output:", "… as follows:"),
            # as does one the parser knows introduces it (reST's "Output ::" before a literal block)
            leads = heading or (block.kind == "lead" or block.kind == "text" and text.endswith(":")) and (
                tokens <= target // 4)
            return [_Piece(text, block.start, block.end, heading, tokens, leads)]
    # A piece cut from a fenced block is fenced again; one cut from a table repeats its header rows,
    # so every chunk reads as what it is (code, a table) on its own.
    fence = _FENCE.match(text) if code else None
    header = _TABLE_HEAD.match(text) if block.kind == "table" else None
    opening = fence.group(0).rstrip("\n") + "\n" if fence else header.group(0) if header else ""
    closing = "\n" + fence.group(1) if fence else ""
    body_start = fence.start(1) if fence else header.end() if header else 0
    # room for what a piece gains (+2: joining may tokenise a little worse),
    lines_first = block.kind in ("table", "list", "code")
    inner = not code and "```" in text  # code inside a note or a list item: its pieces are re-fenced below
    reserve = (count_tokens(opening, encoding) + count_tokens(closing, encoding) + 2 if opening else 0) + (
        4 if lines_first else 0) + (12 if inner else 0)  # and for the indent a piece's first line keeps
    splitter = _Splitter(text, target=target, maximum=maximum - reserve, encoding=encoding, lines_first=lines_first)
    out = []
    mapped = unit == "line" and len(block.lines) == text.count("\n") + 1 and block.text == text
    for start, end in splitter.spans():
        if mapped:  # the parser said where each line of the block is
            first, last = block.lines[text.count("\n", 0, start)], block.lines[text.count("\n", 0, max(start, end - 1))]
        elif unit == "line":  # lines of a piece: the block's first line plus the line breaks before it
            first = min(block.end, block.start + text.count("\n", 0, start))
            last = min(block.end, block.start + text.count("\n", 0, end))
        else:
            first, last = block.start, block.end
        line_start = text.rfind("\n", 0, start) + 1
        if lines_first and not text[line_start:start].strip():
            start = line_start  # a line keeps its indent (code, a nested item)
        piece = text[start:end]
        if opening and start > body_start:
            piece = opening + piece
        if closing and not piece.rstrip().endswith(closing.strip()):
            piece += closing
        out.append(_Piece(piece, first, max(first, last), heading, count_tokens(piece, encoding)))
    return _refenced(out, encoding) if inner else out


def _refenced(pieces: list[_Piece], encoding: str) -> list[_Piece]:
    """Pieces of a block that holds fenced code inside other text: one cut inside a fence is closed,
    and the next opens it again, so no chunk holds half a fence (CommonMark's fence rules)."""
    out: list[_Piece] = []
    carried = ""  # the opening fence line the next piece inherits
    for piece in pieces:
        text = f"{carried}\n{piece.text}" if carried else piece.text
        opener, fence = "", ""  # the open fence's line and its marks
        for line in text.split("\n"):
            if fence:
                opener, fence = ("", "") if closes_fence(fence, line) else (opener, fence)
            elif mark := FENCE_LINE.match(line):
                opener, fence = line.strip(), mark.group(1)
        if opener:
            text += "\n" + fence
        carried = opener
        tokens = piece.tokens if text == piece.text else count_tokens(text, encoding)
        out.append(_Piece(text, piece.start, piece.end, piece.heading, tokens, piece.leads))
    return out


def _common_prefix(a: tuple[str, ...], b: tuple[str, ...]) -> tuple[str, ...]:
    out = []
    for x, y in zip(a, b):
        if x != y:
            break
        out.append(x)
    return tuple(out)


def chunk_document(
    document: Document,
    *,
    file_name: str = "",
    max_tokens: int = DEFAULT_MAX_TOKENS,
    target_tokens: int = DEFAULT_TARGET_TOKENS,
    min_tokens: int | None = None,
    encoding: str = DEFAULT_ENCODING,
) -> ChunkedDocument:
    """Pack a parsed document's blocks into chunks of about ``target_tokens`` (never above ``max_tokens``).

    A parser (`knowtology_cli.parsers`) turns a file into sections of blocks (paragraphs, lists,
    tables, code, headings) that know their lines or pages. Chunking packs consecutive blocks of a
    section up to ``target_tokens``, never above ``max_tokens``: a block too big alone is split at
    paragraph, sentence, line and space boundaries, last between two tokens. Small neighbouring
    sections that share a heading are packed together under the common part of their trails; a
    chunk of sibling sections alone is titled by the one holding most of its tokens when one does.

    No chunk is without prose: blocks with no word in them (rules, markup alone, editor modelines)
    are dropped, and a chunk that would hold only headings is merged into the chunk that follows
    (or precedes) it. `ChunkedDocument` counts both for the ingest summary.

    Args:
        document: the parser's output.
        file_name: names text under no heading when the document states no title.
        max_tokens: hard limit per chunk; only a single character that alone exceeds it could break it.
        target_tokens: adjacent small blocks and sections are packed up to this size.
        min_tokens: a section's last piece below this joins the previous piece (default ``target // 4``).
        encoding: tiktoken encoding used for counting.

    Raises:
        ConfigError: inconsistent token limits.
    """
    if not 1 <= target_tokens <= max_tokens:
        raise ConfigError(f"chunk sizes must satisfy 1 <= target ({target_tokens}) <= max ({max_tokens})")
    minimum = target_tokens // 4 if min_tokens is None else min_tokens
    dropped = document.dropped
    drafts: list[_Draft] = []
    for section in document.sections:
        kept = [b for b in section.blocks if has_prose(b.text)]
        dropped += len(section.blocks) - len(kept)
        if not kept:
            continue
        pieces: list[_Piece] = []
        for block in kept:
            pieces.extend(_pieces(block, document.unit, target=target_tokens, maximum=max_tokens, encoding=encoding))
        for piece in pieces:
            piece.trail = section.titles
        drafts.extend(_pack(section.titles, pieces, target_tokens, max_tokens, minimum, encoding))
    drafts, merged, lost = _absorb_headings(drafts, max_tokens, encoding)
    drafts = _merge_small_neighbours(drafts, target_tokens, encoding)
    fallback = document.title or display_name(file_name)
    chunks: list[DocChunk] = []
    for draft in drafts:
        text = draft.text
        trail = TITLE_SEPARATOR.join(draft.label)
        chunks.append(DocChunk(
            index=len(chunks), text=text, title=trail or fallback, section=trail, unit=document.unit,
            start=min(p.start for p in draft.pieces), end=max(p.end for p in draft.pieces),
            tokens=draft.estimate,
        ))
    return ChunkedDocument(chunks=chunks, parser=document.parser, format=document.format,
                           junk_merged=merged, junk_dropped=dropped + lost)


def _fits(pieces: list[_Piece], limit: int, encoding: str) -> bool:
    """Whether the pieces joined stay within ``limit`` tokens.

    Counted, not re-tokenised: pieces are whitespace-trimmed and joined by a blank line, which the
    tokenisers' pre-split keeps apart from words, so the joined count is at most the sum plus one
    per join (less when the blank line merges into a punctuation token). Each piece is thus
    tokenised once, however many packings are tried.
    """
    return sum(p.tokens for p in pieces) + len(pieces) - 1 <= limit


def _pack(trail: tuple[str, ...], pieces: list[_Piece], target: int, maximum: int, minimum: int,
          encoding: str) -> list[_Draft]:
    """Greedy packing of one section's pieces; a small last draft joins the one before it.

    A draft never ends with what introduces the next piece — a heading, a label, a short lead-in
    ending in a colon ("Output:") — when a new draft starts: those open the new draft with what they
    introduce (the printer's rule against a heading at the foot of a page), as long as both fit and
    the draft left behind keeps some prose.
    """
    drafts: list[_Draft] = []
    for number, piece in enumerate(pieces):
        current = drafts[-1] if drafts else None
        # A heading stays with what follows it, up to the maximum; so does a short closing remark
        # ("For more information, see …") with what it closes, when a label or the section's end is next.
        following = pieces[number + 1] if number + 1 < len(pieces) else None
        closes = not piece.leads and piece.tokens <= minimum and (following is None or following.heading)
        limit = target if current is None or (current.prose and not closes) else maximum
        if current is not None and _fits([*current.pieces, piece], limit, encoding):
            current.pieces.append(piece)
            continue
        carried: list[_Piece] = []
        if current is not None:
            keep = len(current.pieces)
            while keep > 1 and current.pieces[keep - 1].leads:
                keep -= 1
            stay, carried = current.pieces[:keep], current.pieces[keep:]
            if carried and any(not p.heading for p in stay) and _fits([*carried, piece], maximum, encoding):
                current.pieces[:] = stay
            else:
                carried = []
        drafts.append(_Draft(trail, [*carried, piece]))
    if len(drafts) > 1 and drafts[-1].estimate < minimum and _fits(drafts[-2].pieces + drafts[-1].pieces, maximum, encoding):
        drafts[-2].pieces.extend(drafts.pop().pieces)
    return drafts


def _absorb_headings(drafts: list[_Draft], maximum: int, encoding: str) -> tuple[list[_Draft], int, int]:
    """Merge drafts holding only headings into the next draft (else the previous one).

    Returns the drafts, how many heading-only drafts were merged and how many did not fit anywhere.
    """
    out: list[_Draft] = []
    waiting: list[_Draft] = []
    merged = lost = 0
    for draft in drafts:
        if not draft.prose:
            waiting.append(draft)
            continue
        while waiting and not _fits([p for w in waiting for p in w.pieces] + draft.pieces, maximum, encoding):
            waiting.pop(0)
            lost += 1
        if waiting:
            merged += len(waiting)
            draft = _Draft(draft.trail, [p for w in waiting for p in w.pieces] + draft.pieces)
            waiting = []
        out.append(draft)
    for draft in waiting:
        if out and _fits(out[-1].pieces + draft.pieces, maximum, encoding):
            out[-1].pieces.extend(draft.pieces)
            merged += 1
        else:
            lost += 1
    return out, merged, lost


def _merge_small_neighbours(drafts: list[_Draft], target: int, encoding: str) -> list[_Draft]:
    """Join adjacent drafts under a common heading while they fit the target together, deepest
    common heading first.

    One left-to-right pass per heading depth, from the deepest trail up: first the parts of one
    subsection join, then whole subsections of one section, and so on. A chunk thus holds whole
    sections where they fit, not the tail of one section and the head of the next (an API page of
    many short entries gets one chunk per entry, titled by it). The merged draft keeps the common
    part of the trails (``A › B`` + ``A › C`` -> ``A``); drafts sharing no heading (different
    top-level sections) stay apart. Text under no heading at all is packed in one pass, in order.
    """
    deepest = max((len(d.trail) for d in drafts), default=0)
    for depth in range(deepest, -1, -1):
        out: list[_Draft] = []
        for draft in drafts:
            previous = out[-1] if out else None
            if previous is not None:
                common = _common_prefix(previous.trail, draft.trail)
                related = bool(common) or (not previous.trail and not draft.trail)
                if related and len(common) >= depth and _fits(previous.pieces + draft.pieces, target, encoding):
                    out[-1] = _Draft(common, previous.pieces + draft.pieces)
                    continue
            out.append(draft)
        drafts = out
    return drafts


def split_document(
    text: str | bytes,
    *,
    file_name: str,
    max_tokens: int = DEFAULT_MAX_TOKENS,
    target_tokens: int = DEFAULT_TARGET_TOKENS,
    min_tokens: int | None = None,
    encoding: str = DEFAULT_ENCODING,
    format: str | None = None,  # noqa: A002
) -> list[DocChunk]:
    """Parse ``text`` as the format its ``file_name`` says (or ``format``) and chunk it."""
    document = parse(text, name=file_name, format=format)
    return chunk_document(document, file_name=file_name, max_tokens=max_tokens, target_tokens=target_tokens,
                          min_tokens=min_tokens, encoding=encoding).chunks


__all__ = [
    "DEFAULT_MAX_TOKENS",
    "DEFAULT_TARGET_TOKENS",
    "ChunkedDocument",
    "DocChunk",
    "chunk_document",
    "has_prose",
    "split_document",
]
