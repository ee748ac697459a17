"""One-line extractive snippets: what a chunk contains, in ~50-120 characters, no markup."""

from __future__ import annotations

import functools
import re
import unicodedata

from ..parsers.inline import CODE_SPAN_SPLIT, role_text
from .params import SNIPPET_PARAMS

__all__ = ["GENERIC_TITLES", "clean_markdown", "clean_parts", "make_snippet", "one_line"]

ELLIPSIS = "…"
_EMPTY = "(no readable text)"

_FENCE = re.compile(r"^\s*(```|~~~)")
_FRONT_MATTER = re.compile(r"\A---\s*\n.*?\n---\s*(\n|\Z)", re.S)
_HEADING = re.compile(r"^\s{0,3}(#{1,6})\s+(.*?)\s*#*\s*$")
_BOLD_LINE = re.compile(r"^(\*\*|__)([^*_].{0,80}?)\1:?$")
_SETEXT = re.compile(r"^\s*(=+|-+)\s*$")
_ADORNMENT = re.compile(r"^\s*([=\-~^\"'`:#*+_<>.])\1{2,}\s*$")
_ROLE = re.compile(r"(?<![\w`]):(?:[A-Za-z][\w.+-]*:)+`([^`]+)`")
_REST_LINK = re.compile(r"(?<![\w`])`([^`<]+?)(?:\s*<[^>`]*>)?`__?(?!\w)")
_DIRECTIVE = re.compile(r"^\s*\.\.\s+([A-Za-z][\w.+:-]*)::\s*(.*)$")
_REST_COMMENT = re.compile(r"^\s*\.\.(?:\s|$)")
_SUBSTITUTION = re.compile(r"^\s*\.\.\s+\|[^|]+\|\s+[\w:-]+::")
_OPTION = re.compile(r"^\s*:[\w-]+:(?:\s|$)")
_MODELINE = re.compile(r"^\W*(?:(?:vim?|ex)\s*:\s*(?:set?\s+)?[\w=:,.+\- ]+:?|-\*-.*-\*-)\W*$", re.I)
_EM_DASH = re.compile(r"(?<=\s)---?(?=\s)")
#: Directives that build navigation or indexes: their lines and arguments say nothing.
_NAV_DIRECTIVES = frozenset({"toctree", "index", "contents", "sectnum", "autosummary", "highlight",
                             "currentmodule", "module", "tabularcolumns", "include", "literalinclude",
                             "raw", "meta", "default-role", "role", "only"})
_RULE = re.compile(r"^\s*([-*_]\s*){3,}$")
_TABLE_SEP = re.compile(r"^\s*\|?\s*:?-{2,}:?\s*(\|\s*:?-{2,}:?\s*)*\|?\s*$")
_LIST_MARK = re.compile(r"^\s*(?:[-*+]|\d{1,3}[.)])\s+(?:\[[ xX]\]\s+)?")
_QUOTE = re.compile(r"^\s*(>\s*)+")
_IMAGE = re.compile(r"!\[([^\]]*)\]\([^)]*\)")
_LINK = re.compile(r"\[([^\]]+)\]\([^)]*\)")
_REF_LINK = re.compile(r"\[([^\]]+)\]\[[^\]]*\]")
_LINK_DEF = re.compile(r"^\s*\[[^\]]+\]:\s*\S+.*$")
_AUTOLINK = re.compile(r"<(https?://[^>\s]+)>")
_HTML_TAG = re.compile(r"</?([A-Za-z][A-Za-z0-9-]*)(\s[^<>]*)?/?>")
_CLOSING_TAG = re.compile(r"</([A-Za-z][A-Za-z0-9-]*)\s*>")
#: The HTML elements (WHATWG, with the obsolete ones Markdown still carries): a ``<name>`` that is
#: none of these, a custom element (with a hyphen) or a tag with attributes is a placeholder the text
#: means (``<filename>``, ``<CONFIG>``, ``Vec<S>``), not markup.
HTML_ELEMENTS = frozenset("""
a abbr address area article aside audio b base bdi bdo big blockquote body br button canvas caption
center cite code col colgroup data datalist dd del details dfn dialog div dl dt em embed fieldset
figcaption figure font footer form h1 h2 h3 h4 h5 h6 head header hgroup hr html i iframe img input
ins kbd label legend li link main map mark math menu meta meter nav noscript object ol optgroup option
output p param picture pre progress q rp rt ruby s samp script search section select slot small source
span strike strong style sub summary sup svg table tbody td template textarea tfoot th thead time title
tr track tt u ul var video wbr""".split())
_HTML_COMMENT = re.compile(r"<!--.*?-->", re.S)
#: Bold and italic marks; ``__word__`` alone is a dunder name (``Model.__str__()``), not bold.
_EMPHASIS = re.compile(r"(\*\*)(?=\S)(.+?)(?<=\S)\*\*"
                       r"|(?<!\w)__(?!\w+__(?!\w))(?=\S)(.+?)(?<=\S)__(?!\w)"
                       r"|(?<![\w*_])([*_])(?=[^\s_])(.+?)(?<=[^\s_])\4(?![\w*_])")
_CODE_SPAN = re.compile(r"`+([^`]*)`+")
_STRIKE = re.compile(r"~~(.+?)~~")
_SPACES = re.compile(r"\s+")
_INLINE_MARK = re.compile(r"[\[*_`<~]")
_ANCHOR_ITEM = re.compile(r"^\[[^\]]+\]\(#[^)]*\)\W*$")
_NAV_HEADING = re.compile(
    r"^(table of contents|contents|toc|on this page|in this (article|section|document|page)|navigation)\W*$", re.I
)
_SENTENCE_END = re.compile(r"(?<=[.!?])[\"')\]]*\s+(?=[\"'(\[]?[A-Z0-9])")
_WORD = re.compile(r"[A-Za-z][A-Za-z'’-]*|\d+")

# Lines that say nothing about a chunk's content.
_BOILERPLATE = re.compile(
    r"^(table of contents|contents|toc|on this page|in this (article|section|document|page)|"
    r"back to top|top of page|skip to (main )?content|click here|read more|see also|related( articles| pages)?|"
    r"last (updated|reviewed|modified)\b.*|updated\b.*|copyright\b.*|©.*|all rights reserved.*|"
    r"page \d+( of \d+)?|draft|confidential|internal use only|todo|tbd|n/?a|"
    r"(policy |document )?owner:.*|version:?\s*[\d.]+.*|"
    r"(new in|changed in|deprecated since|removed in) version\s+[\w.-]+|"
    # a documentation generator's controls and bare version marks ("1.0.0 · Source", "Expand description")
    r"(expand|collapse|show|hide)( all| more| less| description| details| code)?|(view |edit )?source|"
    r"edit (this|on) \w+( page)?|copy( code| to clipboard)?|v?\d+(\.\d+)+( · (view )?source)?)\W*$",
    re.I,
)
GENERIC_TITLES = frozenset(
    {"introduction", "overview", "summary", "background", "contents", "table of contents", "notes",
     "details", "general", "misc", "miscellaneous", "other", "appendix", "index", "faq", "readme",
     "untitled", "document", "section", "chapter", "part", "main", "home"}
)
_FUNCTION_WORDS = frozenset(
    "a an the and or but of to in on at by for with from as is are was were be been it its this that "
    "these those we you they he she our your their i".split()
)


def one_line(text: str) -> str:
    """Collapse every kind of line break, tab and control character into single spaces."""
    if not text.isprintable():
        text = "".join(" " if unicodedata.category(ch)[0] in "CZ" else ch for ch in text)
    return _SPACES.sub(" ", text).strip()


def _markup_gap(tag: re.Match[str], closed: frozenset[str] = frozenset()) -> str:
    """A space for an HTML tag (see `HTML_ELEMENTS`), the text itself for a placeholder. A custom
    element's name has a hyphen, and so has many a placeholder (``git subtree split <local-commit>``):
    it is markup when it has attributes, is a closing tag, or is closed on the same line (``closed``)."""
    name = tag.group(1)
    custom = "-" in name and (tag.group(0).startswith("</") or name in closed)
    html = tag.group(2) or custom or (name.islower() and name in HTML_ELEMENTS)
    return " " if html else tag.group(0)


def _inline(text: str, slots: bool = True) -> str:
    """Strip inline Markdown (links, emphasis, code spans, HTML) from one line; with ``slots``
    False every tag-like ``<word>`` goes too (terms want the topic, not the placeholders)."""
    if ":`" in text:
        text = _ROLE.sub(lambda m: role_text(m.group(1)), text)
    if " -" in text:
        text = _EM_DASH.sub("—", text)
    if not _INLINE_MARK.search(text):
        return text
    text = _REST_LINK.sub(r"\1", text)
    text = _HTML_COMMENT.sub(" ", text)
    text = _IMAGE.sub(r"\1", text)
    text = _LINK.sub(r"\1", text)
    text = _REF_LINK.sub(r"\1", text)
    text = _AUTOLINK.sub(r"\1", text)
    if slots:  # markup outside code spans only: `tool get <field>` keeps its placeholder
        closed = frozenset(_CLOSING_TAG.findall(text))
        text = "".join(part if n % 2 else _HTML_TAG.sub(functools.partial(_markup_gap, closed=closed), part)
                       for n, part in enumerate(CODE_SPAN_SPLIT.split(text)))
    else:
        text = _HTML_TAG.sub(" ", text)
    text = _CODE_SPAN.sub(r"\1", text)
    text = _STRIKE.sub(r"\1", text)
    for _ in range(2):  # nested emphasis such as ***x***
        text = _EMPHASIS.sub(lambda m: m.group(2) or m.group(3) or m.group(5) or "", text)
    return text


def _blocks(text: str, slots: bool = True) -> tuple[list[str], list[tuple[str, str, bool]], list[str]]:
    """Split Markdown into headings, ``(heading above, prose block, is a table row)`` and code lines.

    Everything is stripped of syntax. A prose block is a paragraph, a list item or a table row
    (cells joined with ``; ``).
    """
    text = _FRONT_MATTER.sub("", text.replace("\r\n", "\n").replace("\r", "\n"))
    headings: list[str] = []
    blocks: list[tuple[str, str, bool]] = []
    code: list[str] = []
    paragraph: list[str] = []
    in_fence = False
    in_directive = False
    previous_directive = False

    def in_navigation() -> bool:
        return bool(headings) and bool(_NAV_HEADING.match(headings[-1]))

    def flush() -> None:
        if paragraph and not in_navigation():
            blocks.append((headings[-1] if headings else "", " ".join(paragraph), False))
        paragraph.clear()

    lines = text.split("\n")
    fences = [i for i, raw in enumerate(lines) if _FENCE.match(raw)]
    if len(fences) % 2:  # an unclosed fence (a chunk cut inside code): treat the rest as text
        del lines[fences[-1]]
    for raw in lines:
        if _FENCE.match(raw):
            flush()
            in_fence = not in_fence
            continue
        if in_fence:
            if raw.strip():
                code.append(raw.strip())
            continue
        line = raw.strip()
        if not line or _LINK_DEF.match(line):
            flush()
            continue
        if in_directive and raw[:1] in (" ", "\t"):  # the indented body of a dropped directive / comment
            continue
        in_directive = False
        directive = _DIRECTIVE.match(line)
        if directive or _SUBSTITUTION.match(line) or _REST_COMMENT.match(line) or _MODELINE.match(line):
            flush()
            name = directive.group(1).rsplit(":", 1)[-1].lower() if directive else ""
            if directive and name not in _NAV_DIRECTIVES and not _SUBSTITUTION.match(line):
                if directive.group(2).strip():
                    paragraph.append(directive.group(2).strip())
                previous_directive = True
                continue
            in_directive = True
            continue
        if previous_directive and _OPTION.match(line):
            continue
        previous_directive = False
        heading = _HEADING.match(line)
        if heading:
            flush()
            headings.append(one_line(_inline(heading.group(2), slots)))
            continue
        bold = _BOLD_LINE.match(line)
        if bold and not paragraph:  # a bold line on its own acts as a sub-heading
            headings.append(one_line(_inline(bold.group(2), slots)))
            continue
        if (_SETEXT.match(line) or _ADORNMENT.match(line)) and len(paragraph) == 1:
            headings.append(one_line(_inline(" ".join(paragraph), slots)))
            paragraph.clear()
            continue
        if _RULE.match(line) or _TABLE_SEP.match(line) or _ADORNMENT.match(line):
            flush()
            continue
        if line.startswith("|") or (line.count("|") >= 2 and not paragraph and not _LIST_MARK.match(line)):
            flush()
            cells = [one_line(_inline(c, slots)) for c in line.strip("|").split("|")]
            row = "; ".join(c for c in cells if c)
            if row and not in_navigation():
                blocks.append((headings[-1] if headings else "", row, True))
            continue
        line = _QUOTE.sub("", line)
        if _LIST_MARK.match(line):
            flush()
            item = _LIST_MARK.sub("", line)
            if not _ANCHOR_ITEM.match(item):  # table-of-contents entries link to anchors
                paragraph.append(item)
            continue
        paragraph.append(line)
    flush()
    cleaned = [(h, one_line(_inline(b, slots)), row) for h, b, row in blocks]
    return [h for h in headings if h], [(h, b, row) for h, b, row in cleaned if b], code


def clean_markdown(text: str, *, slots: bool = True) -> str:
    """Plain text of a Markdown chunk (headings, prose and code), one line, syntax removed;
    ``slots`` keeps placeholders such as ``<filename>`` (see `_inline`)."""
    return clean_parts(text, slots=slots)[0]


def clean_parts(text: str, *, slots: bool = True) -> tuple[str, str, str]:
    """`clean_markdown` of ``text``, the same without its code blocks (what the chunk says in words),
    and its code alone, from one pass over the Markdown."""
    headings, blocks, code = _blocks(text, slots)
    words = [*headings, *(b for _, b, _ in blocks)]
    return one_line(" ".join([*words, *code])), one_line(" ".join(words)), one_line(" ".join(code))


def _content_words(text: str) -> list[str]:
    return [w for w in _WORD.findall(text.lower()) if w not in _FUNCTION_WORDS and len(w) > 1]


def _is_boilerplate(sentence: str) -> bool:
    return bool(_BOILERPLATE.match(sentence.strip())) or not _content_words(sentence)


def _informative_title(title: str) -> bool:
    words = title.split()
    return (
        0 < len(title) <= SNIPPET_PARAMS.title_max_chars
        and 1 <= len(words) <= SNIPPET_PARAMS.title_max_words
        and title.lower().strip(" :.") not in GENERIC_TITLES
        and not _BOILERPLATE.match(title)
        and any(ch.isalpha() for ch in title)
    )


def _sentences(block: str) -> list[str]:
    return [s.strip() for s in _SENTENCE_END.split(block) if s.strip()]


def _cut(text: str, max_chars: int) -> str:
    """Cut ``text`` to at most ``max_chars`` characters at a word boundary, ending with ``…``."""
    if len(text) <= max_chars:
        return text
    if max_chars <= 1:
        return ELLIPSIS[:max_chars]
    head = text[: max_chars - 1]
    space = head.rfind(" ")
    if space >= max_chars // 2:
        head = head[:space]
    return head.rstrip(" ,;:-–—([{") + ELLIPSIS


def _same_start(title: str, sentence: str) -> bool:
    """True when the sentence already says the title (no need to prefix it)."""
    t = _content_words(title)
    s = _content_words(sentence)[: len(t) + 3]
    return bool(t) and all(w in s for w in t)


def make_snippet(text: str, title: str = "", max_chars: int = 120) -> str:
    """A one-line extractive snippet saying what a chunk contains.

    Markdown is stripped, and so is reStructuredText that reaches a snippet through JSONL chunks:
    roles show their text; directive, comment, option and substitution lines, editor modelines and
    title adornments are left out.

    Markdown syntax is stripped; the first informative sentence is picked (boilerplate such as
    "Table of contents" or "Last updated ..." is skipped) and extended with the next one while it
    stays short; a short, informative section title (the chunk's first heading, else ``title``) is
    prefixed as ``Title: sentence``. The result is cut at a word boundary with ``…`` and is at most
    ``max_chars`` characters. It is never empty for a non-empty ``text`` and never has line breaks.

    Args:
        text: The chunk text (Markdown or plain).
        title: The chunk's title or section heading, if known.
        max_chars: Upper bound on the snippet length.
    """
    max_chars = max(1, int(max_chars))
    headings, blocks, code = _blocks(text or "")
    title = one_line(_inline(title or ""))
    # what the chunk says in words comes first: a table leading it (a change history, a parameter
    # grid) is data, quoted only when no sentence follows
    blocks = [b for b in blocks if not b[2]] + [b for b in blocks if b[2]]
    sentences = [(h, s) for h, b, _ in blocks for s in _sentences(b)]
    chosen = [(h, s) for h, s in sentences[:8] if not _is_boilerplate(s)]
    if not chosen:
        chosen = sentences or [("", c) for c in code[:2]]
    section = chosen[0][0] if chosen else (headings[-1] if headings else "")
    if not chosen and section:
        label = section
    elif _informative_title(section):
        label = section
    else:
        label = title if _informative_title(title) else ""
    label = label.rstrip(" :")  # a heading ending in a colon would read "Heading:: sentence"
    body = ""
    for _, sentence in chosen[: SNIPPET_PARAMS.max_sentences]:
        glue = " " if not body or body[-1] in ".!?:;" else "; "
        candidate = f"{body}{glue}{sentence}".strip()
        if body and (len(body) >= SNIPPET_PARAMS.body_enough_chars or len(candidate) > max_chars):
            break
        body = candidate

    if label and body and not _same_start(label, body):
        room = max_chars - len(label) - 2
        if room >= min(40, max_chars // 2):
            snippet = f"{label}: {body}"
        else:
            snippet = body
    else:
        snippet = body or label

    snippet = one_line(snippet)
    if not snippet:
        raw = one_line(text or "")
        snippet = raw if any(ch.isalnum() for ch in raw) else one_line(title) or _EMPTY
    return _cut(snippet, max_chars)
