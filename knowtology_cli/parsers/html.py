"""HTML through lxml (libxml2's HTML parser): headings open sections, page furniture is dropped."""

from __future__ import annotations

import posixpath
import re
from dataclasses import dataclass
from typing import Any
from urllib.parse import unquote, urljoin, urlsplit

import lxml.html

from .base import COMPRESSED, Block, Document, Section, parser_version, refresh_of
from .inline import INLINE_CODE_TAGS, code_span, flow, plain_spans, table_text

DROPPED_TAGS = frozenset({
    "script", "style", "noscript", "template", "nav", "aside", "form", "button", "select", "textarea",
    "iframe", "object", "embed", "svg", "canvas", "map", "dialog", "head", "input", "label",
})
DROPPED_ROLES = frozenset({"navigation", "banner", "contentinfo", "search", "complementary", "menu",
                           "menubar", "toolbar", "dialog", "alertdialog", "tablist"})
#: Words in a class or id that name page furniture (the vocabulary readability's cleaner uses);
#: "table of contents" spelled out in any separators counts as ``toc``.
BOILERPLATE_TOKENS = frozenset({"nav", "navbar", "navigation", "menu", "sidebar", "breadcrumb", "breadcrumbs",
                                "footer", "cookie", "cookies", "banner", "skip", "toc", "pagination",
                                "pager", "share", "social", "masthead", "topbar",
                                # DocBook's XSL stylesheets wrap each page's Prev/Home/Next bars in these
                                "navheader", "navfooter"})


#: Link relations that move through a document's structure (HTML 4's link types, and ``up``,
#: ``first``, ``last`` as generators write them): a bar of such links is navigation, whatever its
#: class (Texinfo's "Next: …, Previous: …, Up: … [Index]" in ``<div class="header">``).
NAVIGATION_RELS = frozenset({"start", "first", "prev", "previous", "next", "last", "up", "top", "contents",
                             "toc", "index", "glossary", "chapter", "section", "subsection", "appendix"})
_WORDS = re.compile(r"\w+")
#: Files a web server sends for a folder's address (Apache's and nginx's default index names).
DIRECTORY_INDEXES = frozenset({"index.html", "index.htm"})


@dataclass(frozen=True)
class GeneratorMarkup:
    """What a documentation generator that names itself (``<meta name="generator">``) says with its
    own markup, beyond what the generic rules read.

    Attributes:
        furniture: whole class names it gives its page furniture.
        ids_name_items: its ids are anchors made from the documented items' names (``method.skip``,
            ``method.share_mode``), so words in them say nothing about the element's role.
        languages: classes of its ``<pre>`` that name the code's language (rustdoc: ``rust``).
    """

    furniture: frozenset[str] = frozenset()
    ids_name_items: bool = False
    #: classes of its code blocks that name their language without a ``language-`` prefix.
    languages: frozenset[str] = frozenset()


#: Generators by the first word of their ``<meta name="generator">``, lower-cased. rustdoc: the
#: "1.0.0 · Source" at the right of each item (``rightside``; ``out-of-band``, ``since`` and
#: ``srclink`` before 1.58) and of the page (``sub-heading``), and its toggles' labels ("Expand
#: description": ``summary.hideme``).
GENERATORS: dict[str, GeneratorMarkup] = {
    "rustdoc": GeneratorMarkup(furniture=frozenset({"rightside", "sub-heading", "out-of-band", "since", "srclink",
                                                    "hideme"}), ids_name_items=True,
                                languages=frozenset({"rust"})),
}
#: A container with at least `LINK_MIN` links whose text is at least this share link text is a
#: link list (a menu, a table of contents), not prose — readability's link-density rule.
LINK_DENSITY = 0.5
LINK_MIN = 3
#: A list item at least this share link text is a link (a menu entry); below it says something more.
LINK_ITEM = 0.8
#: A link in a heading that is a bracketed lower-case label (``[src]``, ``[edit]``) is an action, not
#: its title; so is one to an anchor whose text has no word (``#``, ``¶``, ``§``): its permalink. A
#: signature's linked types are words of the title: ``()`` (the unit type), ``[T]`` and ``[T; N]``
#: (a slice, an array).
_HEADING_ACTION = re.compile(r"\[[a-z]{2,}(?: [a-z]+)*\]")
_WORD = re.compile(r"\w")
#: The element `_clean` leaves where it removed furniture or a link list.
_REMOVED = "kt-removed"
#: Where `_fenced` marks a block's edges in code (rustdoc breaks a ``where`` clause onto a
#: ``<div>``): one line break, however many the source has around it.
_BLOCK_EDGE = "\u2029"
_BLOCK_EDGES = re.compile("\n*(?:\u2029\n*)+")
#: HTML's embedded content: standing between blocks, it fills one of its own.
_EMBEDDED = frozenset({"audio", "canvas", "embed", "iframe", "img", "math", "object", "picture", "svg", "video"})
_HEADINGS = frozenset({"h1", "h2", "h3", "h4", "h5", "h6"})
_BLOCK_TAGS = frozenset({_REMOVED, "p", "pre", "ul", "ol", "dl", "table", "blockquote", "figure", "address", "hr",
                         "h1", "h2", "h3", "h4", "h5", "h6", "div", "section", "article", "main", "header",
                         "footer", "details", "summary", "figcaption", "center", "li", "dt", "dd", "body"})
#: A class naming a code block's language, as highlighters write it (highlight.js/Prism ``language-``,
#: ``lang-``, Sphinx/Pygments ``highlight-``, GitHub ``highlight-source-``).
_LANGUAGE_CLASS = re.compile(r"(?:language|lang|highlight(?:-source)?)-([A-Za-z][\w+#.-]*)")
#: Highlighter classes that name no language.
_NO_LANGUAGE = frozenset({"default", "none", "text", "plain", "plaintext", "nohighlight", "txt"})
_TOKEN_SPLIT = re.compile(r"[^a-z0-9]+")
_SECTIONING = frozenset({"article", "aside", "main", "nav", "section"})
#: Inside a list item, definition or cell these start a line of their own (the rest flows inline).
_LINE_TAGS = frozenset({"p", "div", "section", "article", "blockquote", "figure", "figcaption", "address",
                        "h1", "h2", "h3", "h4", "h5", "h6", "header", "footer", "details", "summary", "center"})
#: A table whose cells hold these lays a page out; a data table's cells hold phrases.
_LAYOUT_TAGS = frozenset({"pre", "ul", "ol", "dl", "table", "blockquote", "h1", "h2", "h3", "h4", "h5", "h6"})


def _tag(el: Any) -> str:
    return el.tag.lower() if isinstance(el.tag, str) else ""


def _generator(doc: Any) -> GeneratorMarkup:
    """The markup of the generator the page names in ``<meta name="generator">`` (none known: empty)."""
    for meta in doc.iter("meta"):
        if (meta.get("name") or "").strip().lower() == "generator":
            words = (meta.get("content") or "").lower().split()
            if words and words[0] in GENERATORS:
                return GENERATORS[words[0]]
    return GeneratorMarkup()


def _is_furniture(el: Any, page_level: bool, generator: GeneratorMarkup) -> bool:
    tag = _tag(el)
    if not tag or tag in DROPPED_TAGS or (page_level and tag in ("header", "footer") and _is_landmark(el)):
        return True
    if generator.furniture.intersection((el.get("class") or "").split()):
        return True
    if tag == "a" and (el.get("href") or "").startswith("#") and not _WORD.search(el.text_content()):
        return True  # a permalink or in-page control (§, ¶, #, ⓘ): a mark, not text
    if el.get("hidden") is not None or el.get("aria-hidden") == "true":
        return True
    if tag in _BLOCK_TAGS and _is_navigation_bar(el):
        return True
    if (el.get("role") or "").lower() in DROPPED_ROLES:
        return True
    style = (el.get("style") or "").replace(" ", "").lower()
    if "display:none" in style or "visibility:hidden" in style:
        return True
    names = f"{el.get('class') or ''} {'' if generator.ids_name_items else el.get('id') or ''}".lower()
    words = _TOKEN_SPLIT.split(names)
    return bool(BOILERPLATE_TOKENS.intersection(words)) or "tableofcontents" in "".join(words)


def _is_navigation_bar(el: Any) -> bool:
    """Whether a block is a navigation bar: every link in it that shows a word moves through the
    document — it names its relation as one (`NAVIGATION_RELS`: ``rel="next"``) or is one of at
    least `LINK_MIN` jumps within the page to a single character (an index's letter bar, "Jump to:
    A C F") — and it says no more words of its own than it has links (their labels: "Next:",
    "Up:"). A sentence holding such a link says more; links of no word (permalinks ``¶``, anchors)
    are marks, judged alone."""
    links = [a for a in el.iter("a") if _WORD.search(a.text_content())]
    jumps = sum(1 for a in el.iter("a") if _jumps(a))
    if not links or not all(_relates(a) or (_jumps(a) and jumps >= LINK_MIN) for a in links):
        return False  # (fewer jumps are no bar: a footnote's mark, ``X448<a href="#n1">1</a>``)
    return len(_WORDS.findall(" ".join(_own_text(el)))) <= len(links)


def _relates(link: Any) -> bool:
    """Whether a link names its relation to the page as a move through the document (`NAVIGATION_RELS`)."""
    return bool(NAVIGATION_RELS.intersection((link.get("rel") or "").lower().split()))


def _jumps(link: Any) -> bool:
    """Whether a link jumps within the page to what one character names (an index's letter)."""
    return (link.get("href") or "").startswith("#") and len(flow(link.text_content())) == 1


def _is_landmark(el: Any) -> bool:
    """Whether a ``header``/``footer`` is the page's banner or footer: per the HTML accessibility
    mappings (HTML-AAM), only when no article, aside, main, nav or section holds it; inside one it
    is that section's own heading or footnote (a page's title and summary, say)."""
    return not any(_tag(a) in _SECTIONING for a in el.iterancestors())


def _links(el: Any) -> list[Any]:
    """The links of an element's text. The links of a heading that says something besides them are
    words of its title (a signature's linked types: ``impl Clone for OpenOptions``), not a menu's
    entries; a heading of nothing but links (``A-I J-R S-Z``) is a menu."""
    titles: dict[Any, bool] = {}
    links = []
    for a in el.iter("a"):
        heading = next(a.iterancestors(*_HEADINGS), None)
        if heading is not None and heading not in titles:
            titles[heading] = bool(_WORD.search("".join(_own_text(heading))))
        if heading is None or not titles[heading]:
            links.append(a)
    return links


def _own_text(el: Any) -> list[str]:
    """The text of ``el`` outside its links."""
    parts = [el.text or ""] if _tag(el) != "a" else []
    for child in el:
        if _tag(child) != "a":
            parts.extend(_own_text(child))
        parts.append(child.tail or "")
    return parts


def _link_share(el: Any) -> float:
    """The share of an element's text that is link text (1.0 for an element without text)."""
    total = len(flow(el.text_content()))
    return sum(len(flow(a.text_content())) for a in _links(el)) / total if total else 1.0


def _is_link_list(el: Any) -> bool:
    """Whether a container is a menu or index of links (readability's link-density rule). A list or
    table is judged by its items or rows — one whose items say something besides their links
    (``value <any>``: a parameter and its type link; a contributor and their address) is content —
    and one a sentence introduces ("… include:") is content too: menus are not announced. A div or
    section holding such a list or table is content."""
    if len(_links(el)) < LINK_MIN or _link_share(el) < LINK_DENSITY:
        return False
    tag = _tag(el)
    if tag not in ("ul", "ol", "dl", "table"):  # a section or div: a menu unless a list or table in it is content
        return not any(_tag(d) in ("ul", "ol", "dl", "table") and not _is_link_list(d) for d in el.iterdescendants())
    if _introduced(el):
        return False
    items = ([row for row in el.iter("tr") if next(row.iterancestors("table"), None) is el] if tag == "table"
             else [item for item in el if _tag(item) in ("li", "dt", "dd")])
    return not items or sum(_link_share(item) >= LINK_ITEM for item in items) / len(items) >= LINK_DENSITY


def _introduced(el: Any) -> bool:
    """Whether the text just before ``el`` (its previous sibling paragraph, or text) ends with a colon."""
    before = el.getprevious()
    text = (before.tail if before is not None else el.getparent().text) or ""
    if not text.strip() and before is not None and _tag(before) in ("p", "div"):
        text = before.text_content()
    return text.rstrip().endswith(":")


def _holds_prose(el: Any) -> bool:
    """Whether a container holds a paragraph that is mostly words, not links ("See a, b and c for
    details" is a sentence; a menu's items are not paragraphs). Its link lists are judged alone."""
    return any(_link_share(p) < LINK_DENSITY for p in el.iter("p"))


def _clean(root: Any, page_level: bool, generator: GeneratorMarkup) -> int:
    """Remove furniture (the generic kinds and ``generator``'s own), pointers on and then link lists
    under ``root``, so that a link list is judged by what is left; returns how many blocks went."""
    removed = 0
    for el in list(root.iter()):
        if el is root or el.getparent() is None:
            continue
        if not isinstance(el.tag, str):  # comments, processing instructions
            el.drop_tree()
        elif _is_furniture(el, page_level, generator):
            removed += _remove(el)
    _drop_pointers(root)
    for el in list(root.iter()):
        if el is not root and el.getparent() is not None and (
                _tag(el) in ("ul", "ol", "dl", "div", "table", "section") and _is_link_list(el)
                and not _holds_prose(el)):
            removed += _remove(el)
    return removed


def _remove(el: Any) -> int:
    """Take ``el`` out: a phrase goes with nothing in its place (the text around it closes up), a
    block or embedded content (a diagram, a frame) leaves a marker: a heading over nothing but it
    goes too. Returns 1 for a block."""
    if _tag(el) not in _BLOCK_TAGS and _tag(el) not in _EMBEDDED and not _holds_block(el):
        el.drop_tree()
        return 0
    marker = el.makeelement(_REMOVED)
    marker.tail = el.tail
    el.getparent().replace(el, marker)
    return 1


def _holds_block(el: Any) -> bool:
    """Whether a phrase element holds a block (rustdoc's ``<span class="item-info">`` holds a div)."""
    return any(_tag(d) in _BLOCK_TAGS for d in el.iterdescendants())


def _drop_pointers(root: Any) -> None:
    """Drop a link that ends a passage and goes where its heading's own link goes: it points on to
    what the heading already names ("… Read more" after a post's excerpt on a blog's index, after a
    trait method's first line in rustdoc, alone where the method has no summary)."""
    targets: set[str] = set()
    for el in list(root.iter()):
        tag = _tag(el)
        if tag in _HEADINGS:
            targets = {a.get("href") for a in el.iter("a") if a.get("href")}
        elif (tag == "a" and el.get("href") in targets and el.getnext() is None and not flow(el.tail or "")
              and next(el.iterancestors(*_HEADINGS), None) is None):
            el.drop_tree()


def _content_root(doc: Any) -> tuple[Any, bool]:
    main = doc.xpath("//main | //*[@role='main']")
    if main:
        return main[0], False
    articles = doc.xpath("//article")
    if len(articles) == 1:
        return articles[0], False
    body = doc.find(".//body")
    return (body if body is not None else doc), True


def _mark_code(root: Any) -> None:
    """Write each inline code element (``<code>``, ``<tt>``, ``<samp>``, ``<kbd>``; not those in a
    ``<pre>``) as a Markdown code span, as Markdown and reST sources read: ``fopen()`` -> ```fopen()```.
    Its spaces stay outside the span; one holding a backtick or nothing is left as it is."""
    for el in list(root.iter(*INLINE_CODE_TAGS)):
        if any(_tag(up) in INLINE_CODE_TAGS or _tag(up) == "pre" for up in el.iterancestors()):
            continue
        text = el.text_content()
        core = text.strip()
        if not core or "`" in core:
            continue
        if len(el):  # children (Sphinx's <span class="pre"> words, a link) keep their place
            el.text = "`" + (el.text or "").lstrip()
            el[-1].tail = (el[-1].tail or "").rstrip() + "`"
        else:
            el.text = text[: len(text) - len(text.lstrip())] + code_span(core) + text[len(text.rstrip()):]


def _text(el: Any) -> str:
    """Text of a paragraph-like element: source line breaks are spaces, ``<br>`` breaks the line.

    Text laid out with ``<br>`` and ``&nbsp;`` (DocBook's literallayout: READMEs, release notes)
    keeps its shape: no-break spaces that open a line indent it, and an empty line between two
    ``<br>`` stays one blank line."""
    for br in el.iter("br"):
        br.tail = "\u2028" + (br.tail or "")
    lines: list[str] = []
    for line in el.text_content().split("\u2028"):
        text = flow(line)
        if not text:
            if lines and lines[-1]:
                lines.append("")
            continue
        opening = line.lstrip(" \t\r\n")
        lines.append(" " * (len(opening) - len(opening.lstrip("\xa0"))) + text)
    while lines and not lines[-1]:
        lines.pop()
    return "\n".join(lines)


def _content_lines(el: Any) -> list[tuple[str, bool, int]]:
    """The content of a list item, definition or layout cell as ``(line, is_text, source line)``, in
    order: phrases flow into one line, paragraphs and ``<br>`` start a new one, ``<pre>`` stays a
    fenced block line for line, nested lists and definition lists keep their place (``is_text``
    False). A line's source line is where its first element or text starts."""
    lines: list[tuple[str, bool, int]] = []
    run: list[str] = []
    at = [el.sourceline or 0]

    def add(text: str, line: int) -> None:
        if not "".join(run).strip():
            at[0] = line or at[0]
        run.append(text)

    def flush() -> None:
        text = flow("".join(run))
        if text:
            lines.append((text, True, at[0]))
        run.clear()

    add(el.text or "", el.sourceline or 0)
    for child in el:
        tag = _tag(child)
        line = child.sourceline or at[0]
        if tag in ("ul", "ol", "dl", "pre", "table", "br") or tag in _LINE_TAGS:
            flush()
            if tag in ("ul", "ol"):
                lines.extend((text, False, src) for text, src in _list(child))
            elif tag == "dl":
                lines.extend((text, False, src) for text, src in _definitions(child))
            elif tag == "pre":
                rows = _fenced(child)
                if rows:  # code line j is source line line + j; each fence stands by its nearest code line
                    places = [line, *(line + j for j in range(len(rows) - 2)), line + len(rows) - 3]
                    lines.extend((row, False, at) for row, at in zip(rows, places, strict=True))
            elif tag == "table":
                lines.extend((row, False, line) for row in _table(child).split("\n") if row)
            elif tag != "br":
                lines.extend(_content_lines(child))
        else:
            add(child.text_content(), line)
        add(child.tail or "", line)
    flush()
    return lines


def _fenced(pre: Any) -> list[str]:
    """A ``<pre>`` as the lines of a fenced code block (none when it holds only whitespace). Several
    ``<code>`` in one ``<pre>`` are variants of one example (CommonJS and ES module): a blank line
    parts them."""
    for part in pre.iterdescendants():  # a block inside code is a line of its own, as a browser shows it
        if _tag(part) in _LINE_TAGS:
            part.text, part.tail = _BLOCK_EDGE + (part.text or ""), _BLOCK_EDGE + (part.tail or "")
    codes = [c for c in pre if _tag(c) == "code"]
    if len(codes) > 1 and not flow((pre.text or "") + "".join(c.tail or "" for c in codes)):
        code = "\n\n".join(c.text_content().strip("\r\n") for c in codes)
    else:
        code = pre.text_content()
    code = code.replace("\r\n", "\n").replace("\r", "\n")  # DocBook writes &#13; line ends
    code = _BLOCK_EDGES.sub("\n", code).strip("\n")
    return ["```" + _language(pre, codes), *code.split("\n"), "```"] if code.strip() else []


def _language(pre: Any, codes: list[Any]) -> str:
    """The language a code block's markup names (``<code class="language-js">``, Sphinx's
    ``<div class="highlight-python">``, ``data-lang``), or "" when it names none."""
    parent = pre.getparent()
    for el in (*codes, pre, parent, parent.getparent() if parent is not None else None):
        if el is None:
            continue
        named = [el.get("data-lang", "")] + [m.group(1) for m in map(_LANGUAGE_CLASS.fullmatch, el.get("class", "").split()) if m]
        for language in named:
            if language and language.lower() not in _NO_LANGUAGE:
                return language.lower()
    return ""


def _list(el: Any, depth: int = 0) -> list[tuple[str, int]]:
    """A list as ``(line, source line)``: ``- `` / ``1. `` items, each item's paragraphs, code and
    nested lists in their place."""
    out: list[tuple[str, int]] = []
    pad = "  " * depth
    for number, item in enumerate((c for c in el if _tag(c) == "li"), start=1):
        mark = f"{number}." if _tag(el) == "ol" else "-"
        lines = _content_lines(item)
        if lines and lines[0][1]:
            text, _, src = lines.pop(0)
            out.append((f"{pad}{mark} {text}", src))
        out.extend((f"{pad}  {text}", src) for text, _, src in lines)
    return out


def _definitions(el: Any) -> list[tuple[str, int]]:
    """A definition list as ``(line, source line)``: each term with a colon, its definitions
    indented below it."""
    out: list[tuple[str, int]] = []
    for child in el:
        if _tag(child) == "dt" and (term := flow(child.text_content())):
            out.append((f"{term}:", child.sourceline or 0))
        elif _tag(child) == "dd":
            out.extend((f"  {text}", src) for text, _, src in _content_lines(child))
    return out


def _joined(lines: list[tuple[str, int]], first: int) -> tuple[str, tuple[int, ...]]:
    """A block's text and the source line of each of its lines (never before ``first``, never
    going back: a line without a known place is where the one before it is)."""
    places: list[int] = []
    for _, src in lines:
        places.append(max(src, places[-1] if places else first))
    return "\n".join(text for text, _ in lines), tuple(places)


def _cells(el: Any) -> list[Any]:
    """The cells of a table, not of the tables inside it."""
    return [c for c in el.iter("td", "th") if next(c.iterancestors("table"), None) is el]


def _is_layout(el: Any) -> bool:
    """Whether a table lays out a page (its cells hold headings, code, lists, tables or several
    paragraphs) rather than holding data, whose cells are phrases."""
    for cell in _cells(el):
        inner = [_tag(d) for d in cell.iterdescendants()]
        if any(t in _LAYOUT_TAGS for t in inner) or inner.count("p") > 1:
            return True
    return False


def _table(el: Any) -> str:
    rows = [[flow(cell.text_content()) for cell in row if _tag(cell) in ("td", "th")] for row in el.iter("tr")]
    first = next(el.iter("tr"), None)
    header = first is not None and (first.getparent() is not None and _tag(first.getparent()) == "thead"
                                    or any(_tag(c) == "th" for c in first))
    return table_text(rows, header=header)


def redirect_target(doc: Any, name: str = "") -> str | None:
    """The address a ``<meta http-equiv="refresh">`` sends the reader to, whatever its delay, when it
    names another page; None when it names none (``content="300"``) or this page (`_points_here`).

    A browser loads the address after the delay and so does a crawler (Google Search reads a delayed
    refresh as a temporary redirect, an instant one as a permanent one), so a stub that waits
    ("This page has moved", ``3; url=../new/``) is a redirect like one that leaves at once. As the
    HTML standard's declarative refresh does, the first refresh that parses decides; ``name`` is the
    page's path (the ingest label), to know a relative address that names the page itself.
    """
    for meta in doc.iter("meta"):
        if (meta.get("http-equiv") or "").strip().lower() != "refresh":
            continue
        delay, url = refresh_of(meta.get("content") or "")
        if delay is None:
            continue  # a browser ignores a refresh it cannot parse
        return url if url and not _points_here(url, name, _canonical(doc)) else None
    return None


def _canonical(doc: Any) -> str:
    """The page's own absolute address as it declares it (``<link rel="canonical" href>``), or ""."""
    for link in doc.iter("link"):
        href = (link.get("href") or "").strip()
        if "canonical" in (link.get("rel") or "").lower().split() and urlsplit(href).netloc:
            return href
    return ""


def _page_path(path: str) -> str:
    """A page's path as a server finds it: ``a/./b/../c/index.html`` and ``a/c/`` are both ``a/c``."""
    path = posixpath.normpath(unquote(path) or "/")
    return posixpath.dirname(path) if posixpath.basename(path) in DIRECTORY_INDEXES else path


def _points_here(url: str, name: str, canonical: str) -> bool:
    """Whether a refresh's address is the page itself: no path (``?t=1``, ``#top``), a relative path
    that resolves to ``name`` (``page.html`` for ``page.html.gz``), or an address equal to the page's ``canonical`` one. Query and fragment
    are not compared (they pick no other file); a page reloading itself by an address that cannot be
    told from another's (a root-relative or absolute one without a canonical address) is a redirect."""
    target = urlsplit(url)
    if not (target.scheme or target.netloc or target.path):
        return True
    if canonical:
        there, here = urlsplit(urljoin(canonical, url)), urlsplit(canonical)
        if (there.scheme, there.netloc.lower(), _page_path(there.path)) == (
                here.scheme, here.netloc.lower(), _page_path(here.path)):
            return True
    if target.scheme or target.netloc or target.path.startswith("/") or not name:
        return False
    name = name.removesuffix(COMPRESSED)
    return _page_path(posixpath.join(posixpath.dirname(name), target.path)) == _page_path(name)


def parse_html(data: bytes | str, *, name: str = "") -> Document:
    """Sections of an HTML page.

    lxml was chosen over faster tree builders because every element knows its source line
    (``sourceline``), which is what provenance needs, and it is what the field's extractors
    (trafilatura, readability, jusText) are built on; `benchmarks/parser_choice.py` has the figures.

    What is kept: the page's main content — ``<main>`` / ``role=main``, else its one ``<article>``,
    else ``<body>`` — rendered as clean text: ``h1``-``h6`` as Markdown headings that open sections
    (one in a ``<summary>`` too: rustdoc's signatures), paragraphs, ``- `` list items, pipe-table
    rows, fenced ``<pre>`` blocks. What is dropped: ``script``, ``style``, ``template``, forms,
    ``nav``, ``aside``, page-level ``header``/``footer``, landmark roles of navigation
    (`DROPPED_ROLES`), hidden elements, elements whose class or id names them navigation
    (`BOILERPLATE_TOKENS`), the furniture a generator that names itself marks as its own
    (`GENERATORS`), permalink marks, "Read more" pointers (`_drop_pointers`), and link lists
    (`LINK_DENSITY`).
    """
    if isinstance(data, bytes):
        try:
            data.decode("utf-8")
            parser = lxml.html.HTMLParser(encoding="utf-8", remove_comments=True, remove_pis=True, no_network=True)
        except UnicodeDecodeError:  # let libxml2 follow the page's declared charset
            parser = lxml.html.HTMLParser(remove_comments=True, remove_pis=True, no_network=True)
        source_lines = data.decode("utf-8", "replace").replace("\r\n", "\n").split("\n")
    else:
        parser = lxml.html.HTMLParser(remove_comments=True, remove_pis=True, no_network=True)
        source_lines = data.replace("\r\n", "\n").split("\n")
        data = data.encode("utf-8")
        parser = lxml.html.HTMLParser(encoding="utf-8", remove_comments=True, remove_pis=True, no_network=True)
    if not data.strip():
        return Document(format="html", unit="line", sections=(), parser=parser_version("html"))
    doc = lxml.html.document_fromstring(data, parser=parser)
    title_el = doc.find(".//title")
    title = flow(title_el.text_content()) if title_el is not None else ""
    target = redirect_target(doc, name)
    if target is not None:  # a browser leaves for another page: this one is a pointer, not content
        return Document(format="html", unit="line", sections=(), title=title, parser=parser_version("html"),
                        redirect=target)
    root, page_level = _content_root(doc)
    generator = _generator(doc)
    dropped = _clean(root, page_level, generator)
    for pre in root.iter("pre") if generator.languages else ():  # its own language classes, as the generic ones
        named = generator.languages.intersection((pre.get("class") or "").split())
        if named:
            pre.set("class", f"{pre.get('class')} language-{min(named)}")
    _mark_code(root)
    raw: list[tuple[tuple[str, ...], str, int, str, tuple[int, ...]]] = []
    stack: list[tuple[int, str]] = []
    pending: list[tuple[str, int, bool]] = []  # text, source line, whether a phrase element's

    def titles() -> tuple[str, ...]:
        return tuple(t for _, t in stack)

    def add(text: str, line: int, phrase: bool = False) -> None:
        """Add a piece of flowing text as written (``<code>x</code>,`` stays ``x,``), but part two
        phrase elements side by side with nothing between them: they are items a stylesheet sets
        apart (mdBook's version and commit, Node's "Added in" and "Deprecated since")."""
        if not text.strip():
            if text and pending:
                pending.append((" ", line, False))
            return
        if phrase and pending and pending[-1][2]:
            text = " " + text
        pending.append((text, line, phrase))

    def flush() -> None:
        text = flow("".join(t for t, _, _ in pending))
        if text:
            raw.append((titles(), text, pending[0][1], "text", ()))
        pending.clear()

    def walk(el: Any, line: int) -> None:
        line = el.sourceline or line
        add(el.text or "", line)
        for child in el:
            tag = _tag(child)
            child_line = child.sourceline or line
            if tag not in _BLOCK_TAGS and not _holds_block(child):
                add(child.text_content(), child_line, phrase=True)
            else:
                flush()
                block(child, tag, child_line)
            add(child.tail or "", child_line)
        flush()

    def block(el: Any, tag: str, line: int) -> None:
        if tag == _REMOVED:
            raw.append((titles(), "", line, _REMOVED, ()))
        elif tag in _HEADINGS:
            level = int(tag[1])
            _space_lines(el)
            whole = flow(el.text_content())
            for action in [a for a in el.iter("a") if _is_action(a)]:
                if len(flow(action.text_content())) < len(whole):  # mdBook links the whole title: that stays
                    action.drop_tree()
            text = flow(el.text_content())
            if not text:
                return
            while stack and stack[-1][0] >= level:
                stack.pop()
            stack.append((level, plain_spans(text)))
            raw.append((titles(), "#" * level + " " + text, line, "heading", ()))
        elif tag == "summary" and next(el.iter(*_HEADINGS), None) is not None:
            walk(el, line)  # a details' heading (HTML allows one in its summary): rustdoc's signatures
        elif tag == "p" or tag in ("figcaption", "address", "summary", "dt", "dd"):
            text = _text(el)
            if text:
                raw.append((titles(), text, line, "label" if tag == "p" and _all_bold(el) else "text", ()))
        elif tag == "pre":
            rows = _fenced(el)
            if rows:
                raw.append((titles(), "\n".join(rows), line, "code", ()))
        elif tag in ("ul", "ol", "dl"):
            text, places = _joined(_list(el) if tag != "dl" else _definitions(el), line)
            if text:
                raw.append((titles(), text, line, "list", places))
        elif tag == "table" and _is_layout(el):
            for cell in _cells(el):
                walk(cell, cell.sourceline or line)
        elif tag == "table":
            text = _table(el)
            if text:
                raw.append((titles(), text, line, "table", ()))
        elif tag == "blockquote":
            text = _text(el)
            if text:
                raw.append((titles(), text, line, "quote", ()))
        elif tag != "hr":
            walk(el, line)

    walk(root, root.sourceline or 1)
    raw, emptied = _without_empty_headings(raw)
    dropped += emptied
    starts = sorted({start for _, _, start, _, _ in raw})
    sections: list[Section] = []
    blocks: list[Block] = []
    current: tuple[str, ...] | None = None
    for trail, text, start, kind, places in raw:
        later = [s for s in starts if s > start]
        end = later[0] - 1 if later else len(source_lines)
        while end > start and not source_lines[end - 1].strip():
            end -= 1
        if not later:  # the last block: stop at its own closing markup, not the page's end
            end = start + min(end - start, text.count("\n") + _closing_lines(source_lines, start))
        if trail != current or kind == "heading":
            if blocks:
                sections.append(Section(current or (), tuple(blocks)))
            blocks, current = [], trail
        end = max(start, end, *places)  # a list's lines are known (never before start): the block reaches its last
        blocks.append(Block(text, start, end, kind, places))
    if blocks:
        sections.append(Section(current or (), tuple(blocks)))
    return Document(format="html", unit="line", sections=tuple(sections), title=title,
                    parser=parser_version("html"), dropped=dropped)


def _is_action(link: Any) -> bool:
    """Whether a link in a heading is its permalink or an action (see `_HEADING_ACTION`)."""
    text = flow(link.text_content())
    return bool(_HEADING_ACTION.fullmatch(text)) or ("#" in (link.get("href") or "") and not _WORD.search(text))


def _space_lines(el: Any) -> None:
    """Part the words a ``<br>`` or a block inside ``el`` sets on lines of their own, which its text
    would join (rustdoc breaks a signature's ``where`` clause onto a ``<div>``)."""
    for part in el.iterdescendants():
        if _tag(part) == "br" or _tag(part) in _LINE_TAGS:
            part.tail = " " + (part.tail or "")
            if _tag(part) != "br":
                part.text = " " + (part.text or "")


def _all_bold(el: Any) -> bool:
    """Whether a paragraph is one bold phrase (``<p><strong>Example 2</strong></p>``): a label."""
    children = list(el)
    return (len(children) == 1 and _tag(children[0]) in ("strong", "b") and not flow(el.text or "")
            and not flow(children[0].tail or ""))


def _heading_level(text: str) -> int:
    return len(text) - len(text.lstrip("#"))


def _without_empty_headings(raw: list[Any]) -> tuple[list[Any], int]:
    """Drop headings that `_clean` left with nothing under them, neither text nor a subsection: what
    followed them was furniture (a "See also" over a link list). A heading that had nothing under it
    in the page itself (the first of two signatures of one function) stays, as in Markdown."""
    kept: list[Any] = []  # built from the end, so a parent whose only subsection went goes too
    headings = 0
    for entry in reversed(raw):
        if entry[3] == _REMOVED:
            kept.append(entry)
            continue
        after = len(kept) - 1
        while after >= 0 and kept[after][3] == _REMOVED:
            after -= 1
        following = kept[after] if after >= 0 else None
        emptied = after < len(kept) - 1 and (following is None or (
            following[3] == "heading" and _heading_level(following[1]) <= _heading_level(entry[1])))
        if entry[3] == "heading" and emptied:
            headings += 1
            kept.append((entry[0], "", entry[2], _REMOVED, ()))  # its parent may now be empty too
            continue
        kept.append(entry)
    kept.reverse()
    return [entry for entry in kept if entry[3] != _REMOVED], headings


def _closing_lines(lines: list[str], start: int) -> int:
    """Lines after ``start`` that continue the last block before a line that only closes tags."""
    count = 0
    for line in lines[start:]:
        stripped = line.strip()
        if not stripped or re.fullmatch(r"(</[A-Za-z][^>]*>\s*)+", stripped):
            break
        count += 1
    return count
