"""HTML through lxml (libxml2's HTML parser): headings open sections, page furniture is dropped."""

from __future__ import annotations

import re
from typing import Any

import lxml.html

from .base import Block, Document, Section, parser_version
from .inline import flow, table_text

DROPPED_TAGS = frozenset({
    "script", "style", "noscript", "template", "nav", "aside", "form", "button", "select", "textarea",
    "iframe", "object", "embed", "svg", "canvas", "map", "dialog", "head", "input", "label",
})
DROPPED_ROLES = frozenset({"navigation", "banner", "contentinfo", "search", "complementary", "menu",
                           "menubar", "toolbar", "dialog", "alertdialog", "tablist"})
#: Words in a class or id that name page furniture (the vocabulary readability's cleaner uses).
BOILERPLATE_TOKENS = frozenset({"nav", "navbar", "navigation", "menu", "sidebar", "breadcrumb", "breadcrumbs",
                                "footer", "cookie", "cookies", "banner", "skip", "toc", "pagination",
                                "pager", "share", "social", "masthead", "topbar"})
#: A container with at least `LINK_MIN` links whose text is at least this share link text is a
#: link list (a menu, a table of contents), not prose — readability's link-density rule.
LINK_DENSITY = 0.5
LINK_MIN = 3
_BLOCK_TAGS = frozenset({"p", "pre", "ul", "ol", "dl", "table", "blockquote", "figure", "address", "hr",
                         "h1", "h2", "h3", "h4", "h5", "h6", "div", "section", "article", "main", "header",
                         "footer", "details", "summary", "figcaption", "center", "li", "dt", "dd", "body"})
_TOKEN_SPLIT = re.compile(r"[^a-z0-9]+")


def _tag(el: Any) -> str:
    return el.tag.lower() if isinstance(el.tag, str) else ""


def _is_furniture(el: Any, page_level: bool) -> bool:
    tag = _tag(el)
    if not tag or tag in DROPPED_TAGS or (page_level and tag in ("header", "footer")):
        return True
    if el.get("hidden") is not None or el.get("aria-hidden") == "true":
        return True
    if (el.get("role") or "").lower() in DROPPED_ROLES:
        return True
    style = (el.get("style") or "").replace(" ", "").lower()
    if "display:none" in style or "visibility:hidden" in style:
        return True
    names = f"{el.get('class') or ''} {el.get('id') or ''}".lower()
    return bool(BOILERPLATE_TOKENS.intersection(_TOKEN_SPLIT.split(names)))


def _is_link_list(el: Any) -> bool:
    links = el.findall(".//a")
    if len(links) < LINK_MIN:
        return False
    total = len(flow(el.text_content()))
    linked = sum(len(flow(a.text_content())) for a in links)
    return total > 0 and linked / total >= LINK_DENSITY


def _clean(root: Any, page_level: bool) -> int:
    """Remove furniture and link lists under ``root``; returns how many elements went."""
    removed = 0
    for el in list(root.iter()):
        if el is root or el.getparent() is None:
            continue
        if not isinstance(el.tag, str):  # comments, processing instructions
            el.drop_tree()
            continue
        if _is_furniture(el, page_level) or (_tag(el) in ("ul", "ol", "div", "table", "section", "p") and _is_link_list(el)):
            el.drop_tree()
            removed += 1
    return removed


def _content_root(doc: Any) -> tuple[Any, bool]:
    main = doc.xpath("//main | //*[@role='main']")
    if main:
        return main[0], False
    articles = doc.xpath("//article")
    if len(articles) == 1:
        return articles[0], False
    body = doc.find(".//body")
    return (body if body is not None else doc), True


def _text(el: Any) -> str:
    """Text of a paragraph-like element: source line breaks are spaces, ``<br>`` breaks the line."""
    for br in el.iter("br"):
        br.tail = "\u2028" + (br.tail or "")
    return "\n".join(flow(line) for line in el.text_content().split("\u2028") if line.strip())


def _list(el: Any, depth: int = 0) -> str:
    lines = []
    for number, item in enumerate((c for c in el if _tag(c) == "li"), start=1):
        nested = [c for c in item if _tag(c) in ("ul", "ol")]
        mark = f"{number}." if _tag(el) == "ol" else "-"
        # the item's own text: everything but its nested lists (their tails, text after them, stay)
        own = flow((item.text or "") + "".join(
            (c.tail or "") if c in nested else c.text_content() + (c.tail or "") for c in item))
        if own:
            lines.append("  " * depth + f"{mark} {own}")
        lines.extend(_list(sub, depth + 1) for sub in nested)
    return "\n".join(line for line in lines if line)


def _table(el: Any) -> str:
    rows = [[flow(cell.text_content()) for cell in row if _tag(cell) in ("td", "th")] for row in el.iter("tr")]
    first = next(el.iter("tr"), None)
    header = first is not None and (first.getparent() is not None and _tag(first.getparent()) == "thead"
                                    or any(_tag(c) == "th" for c in first))
    return table_text(rows, header=header)


#: ``<meta http-equiv="refresh" content="0; url=…">``: a delay (digits, maybe a fraction), then an
#: optional ``;`` or ``,`` and ``url=`` with the address, maybe quoted (the HTML standard's parsing).
_REFRESH = re.compile(r"\s*(\d+)(?:\.[\d.]*)?\s*(?:[;,]\s*(?:url\s*=\s*)?(?P<url>.*?))?\s*$", re.I | re.S)


def redirect_target(doc: Any) -> str | None:
    """The address of an immediate ``<meta http-equiv="refresh">`` (delay 0, an address given), else
    None. A page that refreshes after a delay, or reloads itself, is read like any other."""
    for meta in doc.iter("meta"):
        if (meta.get("http-equiv") or "").strip().lower() != "refresh":
            continue
        match = _REFRESH.match(meta.get("content") or "")
        url = (match.group("url") or "").strip().strip("'\"").strip() if match else ""
        if match and int(match.group(1)) == 0 and url:
            return url
    return None


def parse_html(data: bytes | str, *, name: str = "") -> Document:
    """Sections of an HTML page.

    lxml was chosen over faster tree builders because every element knows its source line
    (``sourceline``), which is what provenance needs, and it is what the field's extractors
    (trafilatura, readability, jusText) are built on; `benchmarks/parser_choice.py` has the figures.

    What is kept: the page's main content — ``<main>`` / ``role=main``, else its one ``<article>``,
    else ``<body>`` — rendered as clean text: ``h1``-``h6`` as Markdown headings that open sections,
    paragraphs, ``- `` list items, pipe-table rows, fenced ``<pre>`` blocks. What is dropped:
    ``script``, ``style``, ``template``, forms, ``nav``, ``aside``, page-level ``header``/``footer``,
    landmark roles of navigation (`DROPPED_ROLES`), hidden elements, elements whose class or id
    names them navigation (`BOILERPLATE_TOKENS`), and link lists (`LINK_DENSITY`).
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
    target = redirect_target(doc)
    if target is not None:  # a browser leaves at once: the page is a pointer, not content
        return Document(format="html", unit="line", sections=(), title=title, parser=parser_version("html"),
                        redirect=target)
    root, page_level = _content_root(doc)
    dropped = _clean(root, page_level)
    raw: list[tuple[tuple[str, ...], str, int, str]] = []
    stack: list[tuple[int, str]] = []
    pending: list[tuple[str, int]] = []

    def titles() -> tuple[str, ...]:
        return tuple(t for _, t in stack)

    def flush() -> None:
        text = flow(" ".join(t for t, _ in pending))
        if text:
            raw.append((titles(), text, pending[0][1], "text"))
        pending.clear()

    def walk(el: Any, line: int) -> None:
        line = el.sourceline or line
        if el.text and el.text.strip():
            pending.append((el.text, line))
        for child in el:
            tag = _tag(child)
            child_line = child.sourceline or line
            if tag not in _BLOCK_TAGS:
                pending.append((child.text_content(), child_line))
            else:
                flush()
                block(child, tag, child_line)
            if child.tail and child.tail.strip():
                pending.append((child.tail, child_line))
        flush()

    def block(el: Any, tag: str, line: int) -> None:
        if tag in ("h1", "h2", "h3", "h4", "h5", "h6"):
            level = int(tag[1])
            text = flow(el.text_content())
            if not text:
                return
            while stack and stack[-1][0] >= level:
                stack.pop()
            stack.append((level, text))
            raw.append((titles(), "#" * level + " " + text, line, "heading"))
        elif tag == "p" or tag in ("figcaption", "address", "summary", "dt", "dd"):
            text = _text(el)
            if text:
                raw.append((titles(), text, line, "text"))
        elif tag == "pre":
            text = el.text_content().strip("\n")
            if text.strip():
                raw.append((titles(), f"```\n{text}\n```", line, "code"))
        elif tag in ("ul", "ol"):
            text = _list(el)
            if text:
                raw.append((titles(), text, line, "list"))
        elif tag == "dl":
            parts = [(_tag(c), flow(c.text_content())) for c in el if _tag(c) in ("dt", "dd")]
            text = "\n".join(f"{t}:" if k == "dt" else f"  {t}" for k, t in parts if t)
            if text:
                raw.append((titles(), text, line, "list"))
        elif tag == "table":
            text = _table(el)
            if text:
                raw.append((titles(), text, line, "table"))
        elif tag == "blockquote":
            text = _text(el)
            if text:
                raw.append((titles(), text, line, "quote"))
        elif tag != "hr":
            walk(el, line)

    walk(root, root.sourceline or 1)
    starts = sorted({start for _, _, start, _ in raw})
    sections: list[Section] = []
    blocks: list[Block] = []
    current: tuple[str, ...] | None = None
    for trail, text, start, kind in raw:
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
        blocks.append(Block(text, start, max(start, end), kind))
    if blocks:
        sections.append(Section(current or (), tuple(blocks)))
    return Document(format="html", unit="line", sections=tuple(sections), title=title,
                    parser=parser_version("html"), dropped=dropped)


def _closing_lines(lines: list[str], start: int) -> int:
    """Lines after ``start`` that continue the last block before a line that only closes tags."""
    count = 0
    for line in lines[start:]:
        stripped = line.strip()
        if not stripped or re.fullmatch(r"(</[A-Za-z][^>]*>\s*)+", stripped):
            break
        count += 1
    return count
