"""Markdown through markdown-it-py (CommonMark + GFM tables, YAML front matter)."""

from __future__ import annotations

import html
import re
from functools import lru_cache
from pathlib import Path
from typing import Any

from .base import Block, Document, Section, bold_heading, parser_version, read_fragment
from .inline import (
    CODE_SPAN_SPLIT,
    FENCE_LINE,
    INLINE_CODE_TAGS,
    closes_fence,
    code_span,
    flow,
    plain_spans,
    strip_tags,
)
from .myst import read_myst, uses_myst

_COMMENT_ONLY = re.compile(r"\A(?:\s*<!--.*?-->)+\s*\Z", re.S)
_FRONT_TITLE = re.compile(r"^title\s*:\s*(.+?)\s*$", re.M | re.I)
_FRONT_DESCRIPTION = re.compile(r"^description\s*:\s*(.+?)\s*$", re.M | re.I)
#: A paragraph of abbreviation definitions (Python-Markdown's ``abbr``: ``*[HTML]: Hyper Text Markup
#: Language``), which a site appends to every page for tooltips: no prose of the page.
_ABBREVIATIONS = re.compile(r"\A(?:[ \t]*\*\[[^\]\n]+\]:[^\n]*(?:\n|\Z))+\Z")
#: A paragraph that is one bold phrase on one line (``**Example 2: Create a table**``): a label.
_LABEL = re.compile(r"\A[ \t]*(\*\*|__)(?=\S)[^\n]*?\S\1[ \t]*:?[ \t]*\Z")
_KINDS = {
    "heading_open": "heading", "paragraph_open": "text", "bullet_list_open": "list",
    "ordered_list_open": "list", "blockquote_open": "quote", "table_open": "table",
    "fence": "code", "code_block": "code", "html_block": "text",
}


@lru_cache(maxsize=1)
def _markdown() -> Any:
    from markdown_it import MarkdownIt  # deferred: heavy
    from mdit_py_plugins.front_matter import front_matter_plugin  # deferred: heavy

    # Inline parsing runs only on headings (see `heading_text`): block structure is all chunking needs.
    return MarkdownIt("commonmark").enable("table").use(front_matter_plugin).disable("inline")


@lru_cache(maxsize=1)
def _inline_markdown() -> Any:
    from markdown_it import MarkdownIt  # deferred: heavy

    return MarkdownIt("commonmark")


# A heading's trailing attribute list, as Pandoc, kramdown and Python-Markdown's attr_list write it
# (``## Setup {#setup .note}``, ``## Setup {: #setup }``): ids, classes and key=value pairs only, so
# a heading that ends in a literal ``{a, b}`` keeps it. The closing hashes before it go too.
_HEADING_ATTRS = re.compile(
    r"""(?:\s+#+)?\s*\{:?(?:\s*(?:[#.][\w:.\\-]+|[\w-]+=(?:"[^"]*"|'[^']*'|[^\s}]+)))+\s*\}\s*$""")
#: Python-Markdown attribute lists after an element (``[Go](x){: .md-button }``, ``{ .annotate }``),
#: MkDocs Material's icon shortcodes (``:octicons-file-code-24:``, ``:material-bug:``) and the empty
#: links they leave (``[][ref]``, ``[]()``): markup, no text.
_INLINE_FURNITURE = re.compile(
    r"""\{:?(?:[ \t]*(?:[#.][\w:.\\-]+|[\w-]+=(?:"[^"]*"|'[^']*'|[^\s}]+)))+[ \t]*\}"""
    r"|:(?:octicons|material|fontawesome|simple|twemoji)-[\w-]+:")
_EMPTY_LINK = re.compile(r"\[\]\[[^\]\n]*\]|\[\]\(\)")
#: An ATX heading's opening and optional closing sequence of ``#``.
_ATX_OPEN = re.compile(r"[ ]{0,3}#{1,6}(?:[ \t]|$)")
_ATX_CLOSE = re.compile(r"[ \t]+#+[ \t]*$")


def heading_text(source: str, env: dict[str, Any] | None = None) -> str:
    """Plain text of a heading's inline Markdown (without a trailing ``{#id .class}`` attribute list).

    ``env`` holds the document's link reference definitions, so ``[text][ref]`` reads ``text``; an
    image in a heading (a README's badges) is decoration, not the heading's words."""
    source = _HEADING_ATTRS.sub("", source)
    tokens = _inline_markdown().parseInline(source, dict(env or {}))
    return inline_text(tokens[0], images=False) if tokens else source.strip()


def inline_text(token: Any, *, images: bool = True) -> str:
    """Plain text of an inline token: emphasis, links and code marks gone, HTML tags stripped;
    images give their alt text unless ``images`` is False."""
    parts: list[str] = []
    for child in token.children or []:
        if child.type in ("text", "code_inline"):
            parts.append(child.content)
        elif child.type in ("softbreak", "hardbreak"):
            parts.append(" ")
        elif child.type == "image" and images:
            parts.append(child.content)
        elif child.type == "html_inline" and _is_element(child.content):  # `client.<a>create</a>`: one word
            parts.append(" " if _breaks(child.content) else "")
        elif child.type == "html_inline":
            parts.append(strip_tags(child.content))
    return re.sub(r"\s+", " ", "".join(parts)).strip()


_META_LINE = re.compile(r"^([A-Za-z][\w-]*):(?:\s+(.*?))?\s*$")


def _meta_data(lines: list[str]) -> tuple[str, int]:
    """The title and line count of MultiMarkdown-style meta-data (as MkDocs and Python-Markdown's
    ``meta`` extension read it: unfenced ``key: value`` lines, indented continuations, up to the first
    blank line), when the file opens with such a block holding a ``title``; else ``("", 0)``. Narrower
    than those readers on purpose: a first paragraph such as ``Note: ...`` is prose, not meta-data."""
    title, count = "", 0
    for line in lines:
        if not line.strip():
            break
        match = _META_LINE.match(line)
        if match is None and not (count and line[:1] in " \t"):
            return "", 0
        if match is not None and match.group(1).lower() == "title":
            title = (match.group(2) or "").strip("'\" ")
        count += 1
    return (title, count) if title else ("", 0)


#: A Python-Markdown block marker as MkDocs sites write them: an admonition (``!!! warning "Title"``),
#: a collapsible one (``??? info``, ``???+ tip``) or a content tab (``=== "Python"``), its body the
#: lines indented four spaces below it.
_BLOCK_MARKER = re.compile(r'(?:(!!!|\?\?\?\+?)[ \t]+([A-Za-z][\w-]*)|(===[!+]?))(?:[ \t]+"([^"]*)")?[ \t]*$')
#: An alert marker opening a block quote: GitHub's five kinds (``> [!NOTE]``) and the kinds MkDocs
#: plugins add (``> [!new]``).
_ALERT = re.compile(r"([ \t]*>[ \t]*)\[!([A-Za-z][\w-]*)\][ \t]*(.*?)[ \t]*")
#: mkdocstrings' API insertion: ``::: package.module.Object``, its YAML options indented below.
_AUTODOC = re.compile(r"[ \t]*:::[ \t]+([A-Za-z_][\w.:-]*)[ \t]*")
#: pymdownx Blocks: ``/// note | Title`` opens a block (YAML option lines indented below it), ``///``
#: closes it; more slashes nest.
_BLOCK_OPEN = re.compile(r"[ \t]*(/{3,})[ \t]*([A-Za-z][\w-]*)(?:[ \t]*\|[ \t]*(.*?))?[ \t]*")
_BLOCK_CLOSE = re.compile(r"[ \t]*(/{3,})[ \t]*")
#: Blocks whose header is no text: their content is the page's (a rendered-output wrapper, a
#: definition list, a caption's own line).
_PLAIN_BLOCKS = frozenset({"html", "define", "caption", "markdown"})


def _unwrap_blocks(lines: list[str]) -> list[str]:
    """The lines with MkDocs' admonitions, details and content tabs (and GitHub's ``> [!NOTE]``
    alerts) read as text: the marker line
    becomes its title (``Warning: Title``, the tab's ``Python:``) and the body is dedented, so it is
    parsed as the paragraphs, lists and code it is (CommonMark would take it for an indented code
    block). Line numbers do not change; markers inside fenced code are left alone."""
    out = list(lines)
    fence = ""
    for i, line in enumerate(out):
        if fence:
            fence = "" if closes_fence(fence, line) else fence
            continue
        opened = FENCE_LINE.match(line)
        if opened:
            fence = opened.group(1)
            continue
        if "{" in line or ":" in line:
            tidy = "".join(part if n % 2 else _EMPTY_LINK.sub("", _INLINE_FURNITURE.sub("", part))
                           for n, part in enumerate(CODE_SPAN_SPLIT.split(line)))  # code spans are code
            if tidy != line:
                if _ATX_OPEN.match(tidy):  # `### Title ### {: #id}`: its closing hashes go with the list
                    tidy = _ATX_CLOSE.sub("", tidy)
                out[i] = line = tidy.rstrip() if tidy.strip() else ""
        stripped = line.lstrip()
        indent = len(line) - len(stripped)
        alert = _ALERT.fullmatch(line)
        if alert:  # GitHub's alerts: "> [!WARNING]" reads "> Warning:", "> [!new] New 11.0" "> New 11.0:"
            lead = alert.group(3) or alert.group(2).replace("-", " ").capitalize()
            out[i] = f"{alert.group(1)}{lead}" + ("" if lead.endswith((":", ".", "!", "?")) else ":")
            continue
        autodoc = _AUTODOC.fullmatch(line) if ":::" in line else None
        if autodoc is not None:  # mkdocstrings: the object's name stays (it names the API), its options go
            out[i] = line[:indent] + autodoc.group(1)
            j = i + 1
            while j < len(out) and out[j].startswith(line[:indent] + "    ") and out[j].strip():
                out[j] = ""
                j += 1
            continue
        opened = _BLOCK_OPEN.fullmatch(line) if "///" in line else None
        if opened is not None:  # pymdownx Blocks: the header reads as a label, options and the close go
            kind, title = opened.group(2).lower(), (opened.group(3) or "").strip()
            label = "" if kind in _PLAIN_BLOCKS else title or kind.replace("-", " ").capitalize()
            margin = line[:indent]
            out[i] = margin + label + ("" if not label or label.endswith((":", ".", "!", "?")) else ":")
            j = i + 1
            while j < len(out) and out[j].startswith((margin + "    ", margin + "\t")) and out[j].strip():
                out[j] = ""  # its YAML options ("type: warning", "open: true")
                j += 1
            continue
        if _BLOCK_CLOSE.fullmatch(line) if "///" in line else False:
            out[i] = ""
            continue
        marker = _BLOCK_MARKER.fullmatch(stripped)
        if marker is None:
            continue
        title = marker.group(4)
        label = title if title is not None else (marker.group(2) or "").replace("-", " ").capitalize()
        out[i] = " " * indent + (label if not label or label.endswith((":", ".", "!", "?")) else label + ":")
        end = i + 1
        while end < len(out) and (not out[end].strip() or len(out[end]) - len(out[end].lstrip()) >= indent + 4):
            end += 1
        for j in range(i + 1, end):
            if out[j].strip():
                out[j] = out[j][:indent] + out[j][indent + 4:]
    return out


#: An include of pymdownx.snippets (MkDocs): ``--8<-- "file.md"`` on a line of its own, or a bare
#: ``--8<--`` line opening and closing a block of paths, one per line; a leading ``;`` escapes either.
_SNIPPET = re.compile(r"""([ \t]*)(;*)(?:-+8<-+[ \t]+("(?:\\"|[^"])+?"|'(?:\\'|[^'])+?')|-+8<-+)[ \t]*""")
#: A named part of a file, ``--8<-- [start:name]`` ... ``--8<-- [end:name]``: the markers are no text.
_SNIPPET_SECTION = re.compile(r"(.*?)(;*)-+8<-+[ \t]+\[[ \t]*(start|end)[ \t]*:[ \t]*([A-Za-z][-\w]*)[ \t]*\](.*)")
#: What a snippet path may end with: line ranges (``:3:8``, ``:3:``, ``::8``, ``:3``, several joined
#: by ``,``) or a section name (``:intro``).
_SNIPPET_PART = re.compile(r"(.*?):((?:\d*:?\d*)(?:,\d*:?\d*)*|[A-Za-z][-\w]*)")


def _is_file(path: Path) -> bool:
    try:
        return path.is_file()
    except OSError:  # a name too long, a permission error
        return False


def _snippet_lines(lines: list[str], part: str) -> list[str] | None:
    """The lines a snippet path's ``part`` selects (1-based, inclusive ranges, or a named section);
    None when the section is not in the file."""
    if not part:
        return lines
    if part[0].isalpha():
        marks = [(m.group(3).lower(), m.group(4)) if m and not m.group(2) else None
                 for m in map(_SNIPPET_SECTION.fullmatch, lines)]
        try:
            start = marks.index(("start", part)) + 1
        except ValueError:
            return None
        end = next((i for i in range(start, len(lines)) if marks[i] == ("end", part)), len(lines))
        return lines[start:end]
    out: list[str] = []
    for span in part.split(","):
        first, _, last = span.partition(":")
        out.extend(lines[max(int(first or 1), 1) - 1: int(last) if last else len(lines)])
    return out


def _include_snippets(lines: list[str], path: Path, root: Path) -> tuple[list[str], list[int], list[str], list[str]]:
    """``lines`` with MkDocs' snippet includes (pymdownx.snippets) read in, as MkDocs reads them.

    A snippet path resolves against the ingested folder ``root`` and the folders above it (MkDocs
    resolves against its ``base_path``, by default the project folder that holds ``docs/``), then
    against the including file's folder; it is read only when the file it lands on is inside
    ``root`` (`MAX_INCLUDE_BYTES` at most), and a file already being read is not read again (a
    loop). Included lines take the including line's indent and cite that line of ``path``.

    Returns the lines, each line's 1-based line number in ``path``, the files read (resolved) and
    the includes not read, each ``argument (why)``.
    """
    root = root.resolve()
    files: list[str] = []
    unread: list[str] = []

    def read(argument: str, here: Path, stack: tuple[str, ...]) -> list[str] | None:
        parted = _SNIPPET_PART.fullmatch(argument)
        name, part = (parted.group(1), parted.group(2)) if parted and parted.group(1) else (argument, "")
        candidates = [base / name for base in (root, *root.parents, here)]
        found, lines, why = read_fragment(next((c for c in candidates if _is_file(c)), root / name), root, stack)
        if lines is None:
            unread.append(f"{argument} ({why})")
            return None
        selected = _snippet_lines(lines, part)
        if selected is None:
            unread.append(f"{argument} (no section {part!r} in the file)")
            return None
        if found.as_posix() not in files:
            files.append(found.as_posix())
        return [x for x, _ in expand(selected, found.parent, (*stack, found.as_posix()))]

    def expand(source: list[str], here: Path, stack: tuple[str, ...]) -> list[tuple[str, int]]:
        """``source`` with its includes read in, each line with the index in ``source`` it stands for."""
        out: list[tuple[str, int]] = []
        block = False  # inside a bare ``--8<--`` pair: each line is a path
        for i, line in enumerate(source):
            marker = _SNIPPET.fullmatch(line) if "8<-" in line else None
            section = _SNIPPET_SECTION.fullmatch(line) if marker is None and "8<-" in line else None
            if marker is not None and marker.group(2) or section is not None and section.group(2):
                out.append((line.replace(";", "", 1), i))  # escaped: the line shows the notation
            elif marker is not None and marker.group(3) is None:
                block = not block
            elif marker is not None or block:
                argument = marker.group(3)[1:-1].strip() if marker is not None else line.strip()
                indent = marker.group(1) if marker is not None else ""
                if argument and not argument.startswith(";"):
                    out.extend((indent + x if x else x, i) for x in read(argument, here, stack) or ())
            elif section is None:  # a section marker is no text
                out.append((line, i))
        return out

    read_in = expand(lines, path.parent, (path.resolve().as_posix(),))
    return [x for x, _ in read_in], [i + 1 for _, i in read_in], files, unread


#: HTML's element names (the living standard's, and the obsolete ones READMEs still write:
#: ``<center>``, ``<font>``, ``<tt>``). Only these make a tag, so ``Vec<T>`` and ``<pkg>`` stay words.
HTML_ELEMENTS = frozenset({
    "a", "abbr", "acronym", "address", "area", "article", "aside", "audio", "b", "bdi", "bdo", "big",
    "blockquote", "body", "br", "button", "canvas", "caption", "center", "cite", "code", "col", "colgroup",
    "data", "datalist", "dd", "del", "details", "dfn", "dialog", "div", "dl", "dt", "em", "embed", "fieldset",
    "figcaption", "figure", "font", "footer", "form", "h1", "h2", "h3", "h4", "h5", "h6", "head", "header",
    "hgroup", "hr", "html", "i", "iframe", "img", "input", "ins", "kbd", "label", "legend", "li", "link",
    "main", "map", "mark", "math", "menu", "meta", "meter", "nav", "noscript", "object", "ol", "optgroup",
    "option", "output", "p", "param", "picture", "pre", "progress", "q", "rp", "rt", "ruby", "s", "samp",
    "script", "search", "section", "select", "slot", "small", "source", "span", "strike", "strong", "style",
    "sub", "summary", "sup", "svg", "table", "tbody", "td", "template", "textarea", "tfoot", "th", "thead",
    "time", "title", "tr", "track", "tt", "u", "ul", "var", "video", "wbr"})
#: Elements without content. A bare one is a tag only when it takes no attribute (``<br>``); the
#: others need one (``<img src=...>``), so ``ffmpeg -i <input> <output>`` keeps its placeholders.
_VOID_TAGS = frozenset({"area", "base", "br", "col", "embed", "hr", "img", "input", "link", "meta", "param",
                        "source", "track", "wbr"})
_BARE_VOID_TAGS = frozenset({"br", "hr", "wbr"})
#: Tags that end a line where they stand (HTML's block elements, ``<br>``).
_BREAKING_TAGS = frozenset({
    "address", "article", "aside", "blockquote", "br", "caption", "center", "dd", "details", "dialog", "div",
    "dl", "dt", "fieldset", "figcaption", "figure", "footer", "form", "h1", "h2", "h3", "h4", "h5", "h6",
    "header", "hr", "li", "main", "nav", "ol", "p", "pre", "section", "summary", "table", "tbody", "tfoot",
    "thead", "tr", "ul"})
#: Elements whose content is no text of the page.
_HIDDEN_TAGS = frozenset({"script", "style", "template", "svg", "noscript", "textarea"})
_TAG_NAME = re.compile(r"<(/?)([A-Za-z][A-Za-z0-9-]*)")
#: Where a tag may start, outside what Markdown reads literally: a backslash escape, a code span's
#: backtick run, or a ``<``.
_TAG_SCAN = re.compile(r"\\.|`+|<", re.S)
_TAG_OPEN = re.compile("<")  # in an HTML block every ``<`` may open one
#: What a line's text continues under: its block-quote marks, a list item's indent.
_LINE_PREFIX = re.compile(r"[ \t]*(?:>[ \t]?)*(?:(?:[-*+]|\d{1,9}[.)])[ \t]+)?")
_GAP, _BREAK = "\x1f", "\x1e"  # where a tag was taken out; where one ends the line


@lru_cache(maxsize=1)
def _html_tag() -> re.Pattern[str]:
    from markdown_it.common.html_re import HTML_TAG_RE  # deferred: heavy

    return HTML_TAG_RE


def _html_tags(source: str, *, markdown: bool) -> list[tuple[int, int, str, str]]:
    """The HTML tags of ``source`` as ``(start, end, name, kind)``, kind ``open``, ``close``, ``void``
    or ``comment``, matched by CommonMark's raw-HTML grammar (markdown-it's own pattern). In Markdown
    (``markdown``) a code span, a backslash escape or an autolink holds none, and an element needs a
    known name (`HTML_ELEMENTS`) and, unless void, its closing tag: ``Vec<T>``, ``a < b``,
    ``<https://x>`` and a lone ``<path>`` are text."""
    pattern = _html_tag()
    found: list[tuple[int, int, str, str]] = []
    pos = 0
    scan = _TAG_SCAN if markdown else _TAG_OPEN
    while (mark := scan.search(source, pos)) is not None:
        pos = mark.end()
        if mark.group()[0] == "\\":
            continue
        if mark.group()[0] == "`":  # a code span runs to the next run of as many backticks; else the run is text
            close = re.compile(f"(?<!`){mark.group()}(?!`)").search(source, pos)
            pos = close.end() if close else pos
            continue
        tag = pattern.match(source, mark.start())
        if tag is None:
            continue
        pos = tag.end()
        text = tag.group()
        if text.startswith("<!--"):
            found.append((tag.start(), pos, "", "comment"))
            continue
        named = _TAG_NAME.match(text)
        name = named.group(2).lower() if named else ""
        if name not in HTML_ELEMENTS:
            continue
        if named and named.group(1):
            kind = "close"
        elif name in _VOID_TAGS or text.endswith("/>"):
            if name not in _BARE_VOID_TAGS and not re.search(r"\s", text.rstrip("/> \t\n")):
                continue  # ``<input>``: a placeholder; ``<img src=x>``: an image
            kind = "void"
        else:
            kind = "open"
        found.append((tag.start(), pos, name, kind))
    if markdown:  # an element opens only where it closes: ``Option<b>`` alone is no bold
        found = [t for i, t in enumerate(found)
                 if t[3] != "open" or any(u[3] == "close" and u[2] == t[2] for u in found[i + 1:])]
    return found


def _closing(tags: list[tuple[int, int, str, str]], at: int) -> int | None:
    """The index of the tag that closes the element ``tags[at]`` opens."""
    depth = 0
    for i in range(at, len(tags)):
        if tags[i][2] == tags[at][2] and tags[i][3] in ("open", "close"):
            depth += 1 if tags[i][3] == "open" else -1
            if depth == 0:
                return i
    return None


def _code_text(fragment: str, *, markdown: bool) -> str:
    """The code an inline HTML code element shows: its text without tags; in Markdown with
    escapes and entities read (``\\*\\*params`` is ``**params``), as CommonMark renders it."""
    if markdown:
        tokens = _inline_markdown().parseInline(fragment, {})
        return inline_text(tokens[0], images=False) if tokens else ""
    return flow(html.unescape(_html_tag().sub(lambda tag: " " if _breaks(tag.group()) else "", fragment)))


def _is_element(tag: str) -> bool:
    """Whether a raw HTML tag is a comment or names an element HTML knows (`HTML_ELEMENTS`)."""
    name = _TAG_NAME.match(tag)
    return tag.startswith("<!--") or name is not None and name.group(2).lower() in HTML_ELEMENTS


def _breaks(tag: str) -> bool:
    """Whether an HTML tag ends a line (`_BREAKING_TAGS`): elsewhere a tag joins the text around it."""
    name = _TAG_NAME.match(tag)
    return name is not None and name.group(2).lower() in _BREAKING_TAGS


def read_embedded_html(source: str, *, markdown: bool = True, one_line: bool = False) -> str:
    """``source`` with the HTML it embeds read as text, the rest untouched.

    Tags go and their content stays (``<a href>text</a>`` reads ``text``, ``<sup>``, ``<span>``,
    ``<details>`` likewise); a code element (``<code>``, ``<kbd>``, ``<tt>``, ``<samp>``) reads as a
    code span of the text it shows; ``<img>`` and comments read as nothing, ``<script>`` and
    ``<style>`` with their content; ``<br>`` and a block element's tags (``<p>``, ``<div>``,
    ``<li>``) end the line where text goes on after them (in a table row or heading
    (``one_line``) they part words). In Markdown (``markdown``) see `_html_tags` for what is no tag;
    otherwise (an HTML block) entities are read too. A line left with nothing goes."""
    tags = _html_tags(source, markdown=markdown)
    if not tags:
        return source
    out: list[str] = []
    pos = i = 0
    while i < len(tags):
        start, end, name, kind = tags[i]
        out.append(source[pos:start])
        pos = end
        close = _closing(tags, i) if kind == "open" and (name in INLINE_CODE_TAGS or name in _HIDDEN_TAGS) else None
        if close is not None:
            code = "" if name in _HIDDEN_TAGS else _code_text(source[end:tags[close][0]], markdown=markdown)
            out.append(code_span(code) if code else _GAP)
            pos, i = tags[close][1], close + 1
            continue
        out.append(_BREAK if name in _BREAKING_TAGS and not one_line else _GAP)
        out.append(" " if name in ("td", "th") or (one_line and name in _BREAKING_TAGS) else "")
        i += 1
    out.append(source[pos:])
    text = "".join(out)
    if not markdown:
        text = html.unescape(text)
    lines: list[str] = []
    for line in text.split("\n"):
        if _GAP not in line and _BREAK not in line:
            lines.append(line)
            continue
        marks = _LINE_PREFIX.match(line.replace(_GAP, "").replace(_BREAK, ""))
        prefix = marks.group() if marks else ""
        going_on = re.sub(r"[^>\s]", " ", prefix)  # "- item" goes on under "  ", "> text" under "> "
        pieces = [_closed_up(p) for p in line.split(_BREAK)]
        current = pieces[0]
        for piece in pieces[1:]:
            if current.strip() in ("", prefix.strip()):  # a break before any text breaks nothing
                current = current.rstrip() + (" " if current.strip() else "") + piece.lstrip()
            elif piece.strip():
                lines.append(current)
                current = going_on + piece.lstrip()
        if current.strip() not in ("", prefix.strip()):
            lines.append(current)
    return "\n".join(lines).strip("\n")


def _closed_up(text: str) -> str:
    """``text`` without the marks of tags taken out: one space where the tag stood between spaced
    words (``a <img> b``), none where it stood against a word (``client.<a>create``)."""
    text = re.sub(f"(?<=\\S)[ \t]*{_GAP}+[ \t]*", lambda m: " " if m.group().strip(_GAP) else "", text)
    return re.sub(f"{_GAP}+[ \t]*", "", text).rstrip()


def _html_blocks(source: str) -> list[tuple[str, int, int, str, tuple[int, ...]]] | None:
    """An HTML block of a Markdown page read as the HTML parser reads a page (headings, paragraphs,
    lists, tables, code; furniture dropped), as ``(text, first line, last line, kind, lines)`` with
    lines counted in ``source`` from 1; None when it holds no HTML element (`HTML_ELEMENTS`) or
    comment. Without the optional lxml parser it is read by `read_embedded_html`, as one paragraph."""
    if not _html_tags(source, markdown=False):
        return None
    try:
        from .html import parse_html  # deferred: loads lxml, an optional extra
    except ImportError:
        text = read_embedded_html(source, markdown=False)
        return [(text, 1, source.count("\n") + 1, "text", ())] if text.strip() else []
    page = parse_html(source)
    return [(b.text, b.start, b.end, b.kind, b.lines) for section in page.sections for b in section.blocks]


def parse_markdown(text: str, *, name: str = "", path: Path | None = None, root: Path | None = None) -> Document:
    """Sections of a Markdown document.

    Each top-level block of the token stream becomes a `Block` holding its own source lines, so a
    chunk of Markdown is still Markdown (fenced code whole, tables as written) and its line range is
    exact. Headings — ATX or setext, never a ``#`` line inside a fence — open sections. MkDocs'
    admonitions and content tabs read as their title and text (`_unwrap_blocks`). Front matter,
    thematic breaks, link reference definitions and HTML comments carry no prose and are left out;
    so is an opening block of MultiMarkdown meta-data with a ``title`` (see `_meta_data`). Embedded
    HTML reads as its text: inline tags by `read_embedded_html`, an HTML block as the HTML parser
    reads a page (`_html_blocks`), its headings opening sections like Markdown's.

    MkDocs' snippet includes (``--8<-- "file.md"``) read the file into the page when ``path`` (this
    file) is given and the file lies inside ``root`` (default: this file's folder); see
    `_include_snippets`. MyST (Sphinx's Markdown) reads as the Markdown it shows: roles as their
    text, directives as their text, code or included file (`myst.read_myst`). `Document.includes`
    lists the files read, `Document.unread` the others.
    """
    lines = text.replace("\r\n", "\n").replace("\r", "\n").split("\n")
    where: list[int] | None = None  # each line's number in the file, when includes moved them
    includes: list[str] = []
    unread: list[str] = []
    docstrings = 0
    if path is not None and "8<-" in text:
        lines, where, includes, unread = _include_snippets(lines, path, root or path.parent)
    if uses_myst(text):
        lines, where, read_in, not_read, docstrings = read_myst(lines, where, path, root)
        includes += [f for f in read_in if f not in includes]
        unread += not_read
    unread = list(dict.fromkeys(unread))  # one note per include not read, however often the page asks
    if ("!!!" in text or "???" in text or "===" in text or "[!" in text or "///" in text or ":::" in text
            or _INLINE_FURNITURE.search(text)):
        lines = _unwrap_blocks(lines)
    title, meta_lines = _meta_data(lines)
    env: dict[str, Any] = {}  # the block parse collects link reference definitions here
    tokens = _markdown().parse("\n".join([""] * meta_lines + lines[meta_lines:]), env)
    sections: list[Section] = []
    stack: list[tuple[int, str]] = []
    titles: tuple[str, ...] = ()
    blocks: list[Block] = []
    dropped = 1 if meta_lines else 0
    top = 7  # the highest heading level used
    headed = 0  # the level of the last heading
    labelled = 0  # the level bold headings go at (`bold_heading`), 0: a level below the last heading
    under_label = False  # the last block is such a bold heading

    def close() -> None:
        if blocks:
            sections.append(Section(titles, tuple(blocks)))
        blocks.clear()

    def open_section(level: int, heading: str) -> None:
        """Close the section so far and open one under ``heading`` at ``level`` (1-6)."""
        nonlocal titles
        close()
        while stack and stack[-1][0] >= level:
            stack.pop()
        if heading:
            stack.append((level, heading))
        titles = tuple(t for _, t in stack)

    def span(first: int, last: int) -> tuple[int, int]:
        """The 1-based first and last line in the file of token lines ``first:last``."""
        if where is None:
            return first + 1, max(first + 1, last)
        return where[first], max(where[first], where[max(first, last - 1)])

    for index, token in enumerate(tokens):
        if token.level != 0 or token.nesting == -1 or not token.map:
            continue
        first, last = token.map
        source = "\n".join(lines[first:last]).strip("\n")
        if token.type == "front_matter":
            found = _FRONT_TITLE.search(token.content)
            title = found.group(1).strip("'\" ") if found else ""
            found = _FRONT_DESCRIPTION.search(token.content)
            about = found.group(1).strip("'\" ") if found else ""
            if about:  # the page's one-line summary, as its author wrote it
                blocks.append(Block(about, *span(first, last), "text"))
            else:
                dropped += 1
            continue
        kind = _KINDS.get(token.type)
        if kind is None or not source.strip():  # hr, and anything without text
            dropped += 1
            continue
        if token.type == "html_block":
            if _COMMENT_ONLY.match(source) or not strip_tags(source).strip():
                dropped += 1
                continue
            parts = _html_blocks(source)
            if parts is None:  # no element HTML knows (a line of `<placeholder>`s): Markdown text
                blocks.append(Block(source, *span(first, last), kind))
            elif not parts:
                dropped += 1
            for text, start, end, part, places in parts or ():
                at, to = first + min(start, last - first) - 1, first + min(end, last - first)
                if part == "heading":
                    level = len(text) - len(text.lstrip("#"))
                    top, headed, labelled = min(top, level), level, 0
                    open_section(level, plain_spans(text[level:].strip()))
                lines_at = tuple(span(first + min(p, last - first) - 1, first + min(p, last - first))[0]
                                 for p in places)
                blocks.append(Block(text, *span(at, to), part, lines_at))
                under_label = False
            continue
        emptied = False  # all its text was HTML that shows none (badges, a logo)
        if "<" in source and kind != "code":
            read = read_embedded_html(source, one_line=kind in ("heading", "table"))
            emptied = read != source and not read.strip("# \t\n" if kind == "heading" else None)
            source = read
            if emptied:
                dropped += 1
                if kind != "heading":
                    continue
        if kind == "heading":
            level = int(token.tag[1])
            top = min(top, level)
            headed, labelled = level, 0
            open_section(level, heading_text(tokens[index + 1].content, env))
            source = _HEADING_ATTRS.sub("", source)  # `## Setup {#setup}` reads `## Setup`
            if emptied:
                continue
        if kind == "text" and _ABBREVIATIONS.match(source):
            dropped += 1
            continue
        if kind == "text" and _LABEL.match(source):
            kind = "label"
            after = next((t for t in tokens[index + 1:] if t.level == 0 and t.nesting == 1 and t.map), None)
            heading = bold_heading(heading_text(tokens[index + 1].content, env))
            if heading and after is not None and after.type != "heading_open":
                # a heading in all but markup, a level below the last real one (``**Example 2: …**``),
                # or below the bold heading right above it ("**To set a policy**" over its examples)
                labelled = labelled + 1 if under_label else labelled or headed + 1
                open_section(labelled, heading)
                kind, source = "heading", "#" * min(labelled, 6) + " " + heading
        under_label = kind == "heading" and token.type == "paragraph_open"
        blocks.append(Block(source, *span(first, last), kind))
    close()
    if title and top > 1:
        # A page titled in its front matter whose headings start below h1 (npm's and many static
        # sites' pages: `title: npm-ci`, then `### Synopsis`): the title heads every trail, so a
        # chunk is "npm-ci › Synopsis", not one of a hundred "Synopsis".
        sections = [s if s.titles[:1] and s.titles[0].casefold() == title.casefold()
                    else Section((title, *s.titles), s.blocks) for s in sections]
    return Document(format="markdown", unit="line", sections=tuple(sections), title=title,
                    parser=parser_version("markdown"), dropped=dropped, includes=tuple(includes),
                    unread=tuple(unread), docstrings=docstrings)
