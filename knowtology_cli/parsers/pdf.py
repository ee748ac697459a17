"""PDF through pypdfium2 (Google's PDFium, the engine of Chrome's PDF viewer); pages are the provenance."""

from __future__ import annotations

import ctypes
import re
import unicodedata
from collections import Counter
from typing import Any, NamedTuple

import pypdfium2 as pdfium
import pypdfium2.raw as pdfium_c

from ..errors import InputError
from .base import HEADING_WORDS, Block, Document, SectionTrail, parser_version
from .inline import flow

#: Line spacing (in font heights) above this multiple of the document's usual spacing starts a paragraph.
PARAGRAPH_GAP = 1.45
#: A first/last line whose digit-free form is on at least this share of pages is a running header.
RUNNING_SHARE = 0.5
#: ... and on at least this many pages (a two-page PDF needs the line on both).
RUNNING_MIN_PAGES = 2
#: A chapter's running header repeats on pages near each other: a line at the edge of at least
#: `RUNNING_RUN` pages, each at most `RUNNING_REACH` pages from the next (a book alternates two headers),
#: is one. Two is not enough: a reference can repeat a parameter's line at two nearby page edges.
RUNNING_REACH = 2
RUNNING_RUN = 3
#: A line at a page's edge that ends with the page's printed number is a running header however
#: rarely its words repeat (a short chapter's ``Chapter 3: Utilities 7`` heads one or two pages). The
#: printed number is the page's index plus the document's offset (front matter, a cover), taken as the
#: offset most edge numbers show, seen on at least `RUNNING_RUN` pages.
_EDGE_NUMBER = re.compile(r"(?:^|\s)(\d{1,5})$")
#: A line standing alone as a paragraph, in type at least this many times the body text's height, is
#: a heading the outline does not list (a manual's subsections, a paper without bookmarks): the usual
#: heading sizes of LaTeX and word processors are 1.2x the body and more.
HEADING_SCALE = 1.15
#: Distinct heading sizes nested under each other; smaller ones count as the smallest.
HEADING_LEVELS = 3
#: A line set in bold from its first character to its last, at the body's size or a little above, is a
#: heading below the larger ones (LaTeX's subsubsections, a word processor's third heading level) —
#: unless bold is this share of the body's text or more, when bold marks nothing.
BOLD_BODY_SHARE = 0.5
#: PDFium's weight of a bold font (the CSS scale); fonts without one say bold in their name: Times-Bold,
#: LMRoman10-Bold, Arial-BoldMT, TeX's CMBX10 ("bold extended"), NimbusRomNo9L-Medi.
BOLD_WEIGHT = 600
_BOLD_NAME = re.compile(r"bold|black|heavy|demi|semibold|medi(?:um)?\b|-medi|^(?:[A-Z]{6}\+)?cmbx", re.I)
#: A heading holds a word of two letters at least (an index's letter ``A`` over its entries heads nothing).
_WORD = re.compile(r"[^\W\d_]{2}")
_HEADING_END = re.compile(r"[.,;:)\]}\-–—]$")
#: PDFium's mark for a hyphen at the end of a line, whose line it joins to the next.
LINE_END_HYPHEN = "\ufffe"
#: A line ending in a dot leader and a page number is an entry of a table of contents or an index:
#: navigation (as the HTML parser drops a page's), wherever it stands on the page.
_LEADER = re.compile(r"(?:\s*\.){4,}\s*(?:\d+|[ivxlcdm]+)$", re.I)
_PAGE_NUMBER = re.compile(r"^[-–—\s]*(?:page\s*)?\d+(?:\s*(?:of|/)\s*\d+)?[-–—\s]*$", re.I)
#: A front matter's page number: a lower-case Roman numeral (``ii``, ``xiv``) alone on its line.
_ROMAN_PAGE = re.compile(r"\s*(?=[ivxlcdm])m{0,3}(?:cm|cd|d?c{0,3})(?:xc|xl|l?x{0,3})(?:ix|iv|v?i{0,3})\s*")
#: TeX sets an accent as a glyph of its own before the letter; PDFium gives the spacing accent
#: (``M¨oller``): with the letter it is one accented letter (``Möller``).
_SPACING_ACCENT = re.compile("([\u00a8\u00b4\u00af\u00b8\u02c6\u02c7\u02d8\u02d9\u02da\u02dc\u02dd])([^\W\d_])")
_COMBINING = dict(zip("\u00a8\u00b4\u00af\u00b8\u02c6\u02c7\u02d8\u02d9\u02da\u02dc\u02dd",
                      "\u0308\u0301\u0304\u0327\u0302\u030c\u0306\u0307\u030a\u0303\u030b", strict=True))
_DIGITS = re.compile(r"\d+")
_LINE = re.compile(r"[^\r\n]+")
#: A letter; a line of one alone is an index's letter heading (or a stray glyph): no text.
_LETTER = re.compile(r"[^\W\d_]")
_WORDS = re.compile(r"[\w-]+")
_NUMBER_AFTER_HYPHEN = re.compile(rf"{LINE_END_HYPHEN}(\d{{1,5}})$")
_SECTION_NUMBER = re.compile(r"^(?:\d+ )+(?=[a-z])")
_BROKEN = re.compile(rf"([\w-]*){LINE_END_HYPHEN}([\w-]*)")


class _Line(NamedTuple):
    """A text line of a page: its text, the top and bottom of its first character's font box (in
    points from the page's foot), that character's font size, and whether the line is bold from its
    first character to its last."""

    text: str
    top: float
    bottom: float
    size: float
    bold: bool


def _open(data: bytes, name: str) -> Any:
    try:
        return pdfium.PdfDocument(data)
    except pdfium.PdfiumError as exc:
        raise InputError(
            f"{name}: cannot read the PDF ({exc}) — it is damaged or password-protected; export it again"
        ) from exc


def _page_lines(page: Any) -> list[_Line]:
    """Each text line of a page, top to bottom.

    The page text comes in one call; each line's height is the font box of its first character
    (one cheap call per line, where asking for the text inside each line's box costs ten times more).
    """
    text_page = page.get_textpage()
    try:
        text = text_page.get_text_range()
        ascii_text = text.isascii()
        rows: list[_Line] = []
        for match in _LINE.finditer(text):
            line = _SPACING_ACCENT.sub(_accented, flow(match.group().replace("\x02", "")))
            if not line:
                continue
            first = match.start() + (len(match.group()) - len(match.group().lstrip()))
            final = match.end() - 1 - (len(match.group()) - len(match.group().rstrip()))
            index, end = (first, final) if ascii_text else (_char_index(text, first), _char_index(text, final))
            _, bottom, _, top = text_page.get_charbox(index, loose=True)
            rows.append(_Line(line, top, bottom, pdfium_c.FPDFText_GetFontSize(text_page.raw, index),
                              _bold(text_page, index) and _bold(text_page, end)))
        # A page whose last line ends in a hyphen: PDFium joins the page number to it ("--leak-check-82")
        if rows and (cut := _NUMBER_AFTER_HYPHEN.search(rows[-1].text)):
            last = rows.pop()
            rows += [last._replace(text=last.text[: cut.start(1)]), last._replace(text=cut.group(1))]
        return rows
    finally:
        text_page.close()


def _accented(match: re.Match[str]) -> str:
    """A spacing accent and the letter after it as one letter, when Unicode has one (else unchanged)."""
    letter = unicodedata.normalize("NFC", match.group(2) + _COMBINING[match.group(1)])
    return letter if len(letter) == 1 else match.group()


def _char_index(text: str, position: int) -> int:
    """PDFium's index of the character at ``position`` of the page text (it counts UTF-16 units)."""
    return len(text[:position].encode("utf-16-le")) // 2


def _bold(text_page: Any, index: int) -> bool:
    """Whether the character at ``index`` is set in a bold font (by weight, else by the font's name)."""
    if pdfium_c.FPDFText_GetFontWeight(text_page.raw, index) >= BOLD_WEIGHT:
        return True
    name = ctypes.create_string_buffer(128)
    pdfium_c.FPDFText_GetFontInfo(text_page.raw, index, name, len(name), None)
    return bool(_BOLD_NAME.search(name.value.decode("latin-1")))


def _spacing(above: _Line, below: _Line) -> float:
    """Distance between two lines' tops in units of the upper line's font height (0 when not below)."""
    pitch = above.top - below.top
    return pitch / max(above.top - above.bottom, 1.0) if pitch > 0 else 0.0


def _line_spacing(pages: list[list[_Line]]) -> float:
    """The document's usual line spacing: the lower quartile over all consecutive lines (most are
    inside paragraphs; the larger ones are the breaks). Font-relative, so headings count alike."""
    found = sorted(x for lines in pages for a, b in zip(lines, lines[1:]) if (x := _spacing(a, b)) > 0)
    return found[len(found) // 4] if found else 0.0


def _paragraphs(lines: list[_Line], usual: float,
                styles: dict[tuple[float, bool], int]) -> list[list[_Line]]:
    """Lines grouped into paragraphs: a gap (`PARAGRAPH_GAP`) or a change into or out of a heading
    style (`_heading_styles`) starts one."""
    out: list[list[_Line]] = []
    previous: _Line | None = None
    for line in lines:
        if previous is None or (usual and _spacing(previous, line) > PARAGRAPH_GAP * usual) or (
                _style(line) != _style(previous) and (_style(line) in styles or _style(previous) in styles)):
            out.append([])
        out[-1].append(line)
        previous = line
    return out


def _key(line: str) -> str:
    """A line's digit-free form: a running header with its page or chapter number is one line."""
    return _DIGITS.sub("#", line.lower())


def _edge_keys(lines: list[_Line]) -> set[str]:
    """Digit-free forms of a page's first and last two lines (where headers and footers sit)."""
    return {_key(line.text) for line in lines[:2] + lines[-2:]}


def _running(pages: list[list[_Line]]) -> list[set[str]]:
    """Per page, the digit-free forms of its edge lines that are running headers or footers.

    A line is one when it heads or foots most pages of the document (the title on every page), or,
    with a letter in it, when it heads or foots a run of nearby pages (a chapter's title over each of
    its pages; body text does not repeat at the same place page after page).
    """
    edges = [_edge_keys(lines) for lines in pages]
    running: list[set[str]] = [set() for _ in pages]
    if len(pages) >= RUNNING_MIN_PAGES:
        need = max(RUNNING_MIN_PAGES, RUNNING_SHARE * len(pages))
        seen = Counter(key for keys in edges for key in keys)
        everywhere = {key for key, count in seen.items() if count >= need}
        for found in running:
            found |= everywhere
    where: dict[str, list[int]] = {}
    for index, keys in enumerate(edges):
        for key in keys:
            if _LETTER.search(key):
                where.setdefault(key, []).append(index)
    for index, key in _numbered_edges(pages):
        running[index].add(key)
    for key, indexes in where.items():
        runs = [[indexes[0]]]
        for index in indexes[1:]:
            if index - runs[-1][-1] <= RUNNING_REACH:
                runs[-1].append(index)
            else:
                runs.append([index])
        for page in (page for run in runs if len(run) >= RUNNING_RUN for page in run):
            running[page].add(key)
    return running


def _numbered_edges(pages: list[list[_Line]]) -> list[tuple[int, str]]:
    """``(page index, key)`` of the edge lines with words that end with their page's printed number."""
    found = [(index, int(m.group(1)), text) for index, lines in enumerate(pages)
             for text in (line.text for line in lines[:2] + lines[-2:]) if (m := _EDGE_NUMBER.search(text))]
    offsets = Counter(offset for index, offset in {(index, number - index) for index, number, _ in found})
    if not offsets:
        return []
    offset, pages_seen = offsets.most_common(1)[0]
    if pages_seen < RUNNING_RUN:
        return []
    return [(index, _key(text)) for index, number, text in found
            if number - index == offset and _LETTER.search(text)]


def _dehyphenate(pages: list[list[_Line]]) -> list[list[_Line]]:
    """Resolve PDFium's line-end hyphens with the document's own words as the evidence.

    A hyphen that ends a line is either the typesetter's (a word split into syllables: ``manip-
    ulation``) or the word's own (``day-to-day``, ``--gen-suppressions``); the PDF does not say which.
    The rest of the document usually does: the form it writes elsewhere wins. Without that, a hyphen
    next to a non-letter or inside a word that already has one stays (identifiers, options, compounds,
    dash rules), and a plain word follows what the document did where it could tell (typeset books
    split syllables; generated manuals break lines only at real hyphens), splitting when it could not.
    """
    words = Counter(w.lower() for lines in pages for line in lines for w in _WORDS.findall(line.text))
    votes: Counter[bool] = Counter()

    def evidence(before: str, after: str) -> bool | None:
        kept, joined = words[f"{before}-{after}".lower()], words[f"{before}{after}".lower()]
        return None if kept == joined else kept > joined

    for lines in pages:
        for line in lines:
            for m in _BROKEN.finditer(line.text):
                if _plain(m.group(1), m.group(2)) and (said := evidence(m.group(1), m.group(2))) is not None:
                    votes[said] += 1
    style = votes[True] > votes[False]

    def resolve(m: re.Match[str]) -> str:
        before, after = m.group(1), m.group(2)
        if not before or not after:  # the word goes on over the page: nothing here to join it to
            return f"{before}-{after}"
        said = evidence(before, after)
        if said is None:
            said = style if _plain(before, after) else True
        return f"{before}-{after}" if said else before + after

    return [[line._replace(text=_BROKEN.sub(resolve, line.text)) for line in lines] for lines in pages]


def _plain(before: str, after: str) -> bool:
    """Letters on both sides of the break and no other hyphen: a word a typesetter could have split."""
    return (before[-1:].isalpha() and after[:1].isalpha()
            and "-" not in before and "-" not in after)


def _height(line: _Line) -> float:
    """A line's type size to a tenth of a point."""
    return round(line.size, 1)


def _style(line: _Line) -> tuple[float, bool]:
    return _height(line), line.bold


def _heading_styles(pages: list[list[_Line]]) -> dict[tuple[float, bool], int]:
    """Heading type styles (size, bold) to their rank, largest first: sizes of at least `HEADING_SCALE`
    times the body's (the size most characters are set in), then bold lines at the body's size or a
    little above, when the body is not mostly bold (`BOLD_BODY_SHARE`)."""
    sizes: Counter[float] = Counter()
    bold: Counter[float] = Counter()
    for lines in pages:
        for line in lines:
            sizes[_height(line)] += len(line.text)
            bold[_height(line)] += len(line.text) if line.bold else 0
    if not sizes:
        return {}
    body = sizes.most_common(1)[0][0]
    larger = sorted((h for h in sizes if h >= HEADING_SCALE * body), reverse=True)
    styles = {(h, b): min(rank, HEADING_LEVELS - 1) for rank, h in enumerate(larger) for b in (False, True)}
    if bold[body] < BOLD_BODY_SHARE * sizes[body]:
        styles |= {(h, True): min(len(larger), HEADING_LEVELS - 1)
                   for h in bold if body <= h < HEADING_SCALE * body and bold[h]}
    return styles


def _font_heading(paragraph: list[_Line], styles: dict[tuple[float, bool], int]) -> int | None:
    """The rank of a paragraph set in one heading style that reads as a title, else None."""
    text = " ".join(line.text.strip() for line in paragraph)
    style = _style(paragraph[0])
    rank = styles.get(style)
    if (rank is None or any(_style(line) != style for line in paragraph)
            or not _WORD.search(text) or len(text.split()) > HEADING_WORDS or _HEADING_END.search(text)
            or _PAGE_NUMBER.match(text)):  # a form's "PAGE 1" says where, not what
        return None
    return rank


def _text(paragraph: list[_Line]) -> str:
    return "\n".join(line.text for line in paragraph if line.text).strip()


def _prose(paragraph: list[_Line]) -> bool:
    """Whether a paragraph is running text: longer than a heading may be (so no heading either)."""
    return len(_text(paragraph).split()) > HEADING_WORDS


def _norm(text: str) -> str:
    """A title as compared with a line: lower case, words only, without a leading section number
    (an outline may say ``Invoking asn1Decoding`` where the page says ``3.3 Invoking asn1Decoding``)."""
    return _SECTION_NUMBER.sub("", re.sub(r"[^0-9a-z]+", " ", text.lower()).strip())


def parse_pdf(data: bytes, *, name: str = "") -> Document:
    """Sections of a PDF, each block on its page.

    PDFium was chosen by measurement (`benchmarks/parser_choice.py`): on the same generated PDFs it
    extracts text as faithfully as pdfminer.six and pypdf and an order of magnitude faster, and it
    reads the outline. Text comes line by line with each line's box: a vertical gap clearly larger
    than the document's usual line spacing (`PARAGRAPH_GAP`) starts a new paragraph, as pdfminer's
    ``line_margin`` does. Running headers and footers — a first or last line that repeats, digits
    aside, on most pages (`RUNNING_SHARE`) or over a run of nearby pages, or that ends with the
    page's printed number — and bare page numbers are dropped.

    The outline (bookmarks) gives the sections: an entry's title opens a section on its page, at the
    line that reads as the title when there is one (a leading section number aside). Headings it does
    not list — a short line of its own in type `HEADING_SCALE` times the body's — open sections
    below its deepest level (nested by type size), after its first entry (a title page is no section);
    without an outline they are the sections, and until the first paragraph of prose only the first of
    them (the title) and those with prose right under them count: a title page's authors and
    affiliations are no sections. A line in bold from end to end at about the body's size is a heading
    below the larger ones.
    """
    pdf = _open(data, name)
    try:
        outline: list[tuple[int, str, int]] = []
        for mark in pdf.get_toc():
            dest = mark.get_dest()
            index = dest.get_index() if dest is not None else None
            title = flow(mark.get_title() or "")
            if title and index is not None and 0 <= index < len(pdf):
                outline.append((mark.level, title, index))
        title = flow((pdf.get_metadata_dict(skip_empty=True) or {}).get("Title", ""))
        pages = []
        for number in range(len(pdf)):
            page = pdf[number]
            try:
                pages.append(_page_lines(page))
            finally:
                page.close()
    finally:
        pdf.close()
    pages = _dehyphenate(pages)
    running = _running(pages)
    usual = _line_spacing(pages)
    styles = _heading_styles(pages)
    # headings the outline does not list nest under its deepest level
    below = max((level for level, _, _ in outline), default=-1) + 1
    dropped = 0
    # Until the first paragraph of prose, a heading after the first (the title) must have prose
    # right under it: a title page sets authors and affiliations in large or bold type too.
    prose = bool(outline)
    entries = sorted(outline, key=lambda e: e[2])
    trail = SectionTrail()

    def open_section(level: int, heading: str, page_no: int) -> None:
        trail.open(level, heading, page_no, page_no)

    for index, lines in enumerate(pages):
        page_no = index + 1
        kept = []
        for pos, line in enumerate(lines):
            edge = pos < 2 or pos >= len(lines) - 2
            if (edge and (_PAGE_NUMBER.match(line.text) or _ROMAN_PAGE.fullmatch(line.text)
                          or _key(line.text) in running[index])
                    or _LEADER.search(line.text) or _LETTER.fullmatch(line.text.strip())):
                dropped += 1
                continue
            kept.append(line)
        # Where each bookmark of this page opens its section: at the line reading as its title, else
        # where the previous one opened (the page top for the first).
        opens: dict[int, list[tuple[int, str]]] = {}
        cursor = 0
        normed = [_norm(line.text) for line in kept] if any(e[2] == index for e in entries) else []
        for level, heading, _ in (e for e in entries if e[2] == index):
            wanted = _norm(heading)
            found = next((i for i in range(cursor, len(kept)) if normed[i] == wanted), None)
            at = cursor if found is None else found
            opens.setdefault(at, []).append((level, heading))
            if found is not None:
                kept[found] = kept[found]._replace(text="")  # the title line is the heading now
            cursor = at
        segments = sorted({0, *opens, len(kept)})
        for first, last in zip(segments, segments[1:]):
            for level, heading in opens.get(first, []):
                open_section(level, heading, page_no)
            paragraphs = _paragraphs(kept[first:last], usual, styles)
            for at, paragraph in enumerate(paragraphs):
                text = _text(paragraph)
                # before the outline's first entry lie a title page and contents, not sections
                rank = _font_heading(paragraph, styles) if text and (trail.titles or not outline) else None
                if rank is not None and not prose and trail.titles and not (
                        at + 1 < len(paragraphs) and _prose(paragraphs[at + 1])):
                    rank = None  # a title page's author, affiliation or date line: no prose under it
                if rank is not None:
                    open_section(below + rank, " ".join(text.split()), page_no)
                elif text:
                    trail.blocks.append(Block(text, page_no, page_no))
                    prose = prose or _prose(paragraph)
        for level, heading in opens.get(len(kept), []):
            open_section(level, heading, page_no)
    return Document(format="pdf", unit="page", sections=trail.close(), title=title,
                    parser=parser_version("pdf"), dropped=dropped)
