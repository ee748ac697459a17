"""AsciiDoc through asciidoc-py (the reference implementation) in safe mode, read as its HTML5 output."""

from __future__ import annotations

import contextlib
import io
import os
import re
import threading
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import asciidoc.asciidoc as _engine
import lxml.etree
import lxml.html
from asciidoc.api import AsciiDocAPI
from asciidoc.exceptions import AsciiDocError

from ..errors import InputError
from .base import ADOC_INLINE_MACRO, Block, Document, Section, parser_version, read_fragment, select_lines
from .html import parse_html

#: An include line as asciidoc-py's reader matches it (``include::`` / ``include1::``, not escaped).
_INCLUDE = re.compile(r"^(?<!\\)include1?::(?P<target>\S*?)\[(?P<attrs>.*?)\]\s*$")
#: How deep includes nest before the rest are left out (asciidoc-py's own default is 10).
MAX_INCLUDE_DEPTH = 10
#: Attributes given on the command line, which win over the document's: no table of contents,
#: footer, scripts, embedded CSS or icons, and no ``data-uri`` (it would read image files).
_ATTRIBUTES: dict[str, str | None] = {
    "linkcss": "", "disable-javascript": "", "nofooter": "", "footer-style": "none", "toc": None, "toc2": None,
    "icons": None, "data-uri": None, "badges": None, "source-highlighter": None,
}
#: asciidoc-py keeps its state in module globals: one conversion at a time.
_LOCK = threading.Lock()
#: kt's own configuration: listings name their language, no highlighter runs.
_CONF = Path(__file__).with_name("asciidoc-html5.conf")
#: Folders of configuration asciidoc-py may load: its own, kt's and the user's ``~/.asciidoc``.
_TRUSTED_CONF = tuple(os.path.realpath(d) for d in (_engine.CONF_DIR, _CONF.parent, os.path.expanduser("~/.asciidoc")))
_WORDS = re.compile(r"\w+")
#: How many words of a block's first line find it in the source.
_PROBE_WORDS = 4
#: A manual section (``1``, ``3p``): ``page[1]`` cites a man page, written ``page(1)``.
_MAN_SECTION = re.compile(r"\d[a-z]{0,3}")
#: Elements whose text is literal: a macro there is what the author shows.
_LITERAL_TAGS = frozenset({"pre", "code", "kbd", "samp", "tt", "script", "style"})


def _trusted(fname: str) -> bool:
    real = os.path.realpath(fname)
    return any(real == d or real.startswith(d + os.sep) for d in _TRUSTED_CONF)


@contextlib.contextmanager
def _sandbox() -> Iterator[None]:
    """asciidoc-py in safe mode, hardened where its safe mode stops short.

    - Its bundled ``html5.conf`` uses ``ifeval``, which safe mode refuses, so configuration files
      it trusts (`_TRUSTED_CONF`) load with safe mode off; any other is not loaded.
    - Filters (``[source]`` highlighters, ``[graphviz]``, ``a|`` table cells) run shell commands
      named in configuration: they pass their text through unchanged instead.
    - Its reader opens no file but trusted configuration: the document comes as text, with its
      includes already resolved inside the ingested folder (`_expand`).
    """
    config_cls, reader_cls = _engine.Config, _engine.Reader1
    load_file, reader_open, filter_lines = config_cls.load_file, reader_cls.open, _engine.filter_lines

    def guarded_load(self: Any, fname: str, dir: str | None = None, include: Any = (),  # noqa: A002
                     exclude: Any = ()) -> bool:
        path = os.path.join(dir, fname) if dir else fname
        if not _trusted(path):
            return False
        was, _engine.document.safe = _engine.document.safe, False
        try:
            return bool(load_file(self, fname, dir, list(include), list(exclude)))
        finally:
            _engine.document.safe = was

    def guarded_open(self: Any, fname: str) -> None:
        if fname != "<stdin>" and not _trusted(fname):
            raise _engine.EAsciiDoc(f"unsafe: reading {fname}")
        reader_open(self, fname)

    config_cls.load_file = guarded_load
    reader_cls.open = guarded_open
    _engine.filter_lines = lambda cmd, lines, attrs=None: lines
    try:
        yield
    finally:
        config_cls.load_file, reader_cls.open, _engine.filter_lines = load_file, reader_open, filter_lines


def to_html(text: str, *, name: str = "<document>") -> str:
    """The HTML5 page asciidoc-py makes of AsciiDoc ``text`` in safe mode; warnings are kept, not
    printed. `InputError` when it cannot convert the document."""
    api = AsciiDocAPI()
    api.options("--safe")
    api.options("--conf-file", str(_CONF))
    api.attributes.update(_ATTRIBUTES)
    out, err = io.StringIO(), io.StringIO()
    failure = ""
    with _LOCK, contextlib.redirect_stderr(err), _sandbox():
        try:
            api.execute(io.StringIO(text), out, backend="html5")
        except (AsciiDocError, IndexError) as exc:  # IndexError: it failed before saying why
            failure = str(exc) or "conversion failed"
        except Exception as exc:  # noqa: BLE001 - a bug of asciidoc-py on one document
            failure = f"{type(exc).__name__}: {exc}"
    html = out.getvalue()
    if "</html>" not in html:  # an unsafe macro is an error that leaves the page whole; this is not
        said = list(_engine.message.messages)  # the API's own copy is of a list asciidoc-py replaced
        why = next((m for m in reversed(said) if m.startswith("FAILED")), "") or next(
            (m for m in said if m.startswith("ERROR")), "") or failure or "conversion failed"
        why = re.sub(r"^(?:FAILED|ERROR): (?:<stdin>: )?", "", why.strip())
        raise InputError(f"{name}: asciidoc cannot convert it ({why}) — fix that markup; "
                         "`asciidoc --safe FILE` shows every message")
    return _tidy(html)


def _macro_text(match: re.Match[str]) -> str:
    """What an inline macro asciidoc-py does not define (a project's own, left in its page as
    written) says: ``page(1)`` for a man page, else its text, else its target."""
    target, text = match.group(1), match.group(2).strip()
    if target and _MAN_SECTION.fullmatch(text):
        return f"{target}({text})"
    return text or target


def _tidy(html: str) -> str:
    """asciidoc-py's page in the markup the HTML parser reads: the author and revision lines under
    the title dropped, ``monospaced`` spans as ``<code>``, an admonition's table as ``Note: text``,
    an inline macro it does not define as its text (`_macro_text`)."""
    page = lxml.html.document_fromstring(html)
    for el in page.xpath('//div[@id="header"]/*[not(self::h1)]'):
        el.drop_tree()
    for el in page.xpath('//span[contains(concat(" ", @class, " "), " monospaced ")]'):
        el.tag = "code"
    for table in page.xpath('//div[contains(concat(" ", @class, " "), " admonitionblock ")]/table'):
        label = " ".join(table.xpath('string(.//td[@class="icon"]//div[@class="title"])').split())
        content = table.xpath('.//td[@class="content"]')
        box = lxml.html.Element("div")
        if content:
            cell = content[0]
            box.text = cell.text
            box.extend(list(cell))
        first = next((el for el in box.iter("p") if (el.text or "").strip()), None)
        if label and box.text and box.text.strip():
            box.text = f"{label}: {box.text.lstrip()}"
        elif label and first is not None:
            first.text = f"{label}: {(first.text or '').lstrip()}"
        table.getparent().replace(table, box)
    for el in page.iter(lxml.etree.Element):
        literal = any(up.tag in _LITERAL_TAGS for up in el.iterancestors())  # a tail is its parent's text
        if el.text and not literal and el.tag not in _LITERAL_TAGS:
            el.text = ADOC_INLINE_MACRO.sub(_macro_text, el.text)
        if el.tail and not literal:
            el.tail = ADOC_INLINE_MACRO.sub(_macro_text, el.tail)
    return str(lxml.html.tostring(page, encoding="unicode", doctype="<!DOCTYPE html>"))


def _expand(text: str, path: Path | None, root: Path | None) -> tuple[list[str], list[int], list[str], list[str]]:
    """The document's lines with its includes read in (only inside ``root``, as reST's are), each
    line's line in the document itself, the files included and the includes left out (why)."""
    lines: list[str] = []
    origins: list[int] = []
    included: list[str] = []
    unread: list[str] = []
    top = root.resolve() if root is not None else path.parent.resolve() if path is not None else None

    def take(source: list[str], base: Path | None, at: int | None, stack: tuple[str, ...]) -> None:
        for number, line in enumerate(source, 1):
            here = at if at is not None else number
            match = _INCLUDE.match(line)  # expanded everywhere, as asciidoc-py's reader does
            if match is None:
                lines.append(line)
                origins.append(here)
                continue
            target = match.group("target")
            if base is None or top is None:
                unread.append(f"{target} (no folder to read it from)")
            elif len(stack) > MAX_INCLUDE_DEPTH:
                unread.append(f"{target} (nested more than {MAX_INCLUDE_DEPTH} deep)")
            else:
                real, got, why = read_fragment(base / target, top, stack)
                if got is None:
                    unread.append(f"{target} ({why})")
                else:
                    included.append(real.as_posix())
                    spans = re.search(r"lines=\"?([\d.,;]+)", match.group("attrs"))
                    if spans:
                        got = select_lines(got, {"lines": spans.group(1).replace(";", ",").replace("..", "-")})
                    take(got, real.parent, here, (*stack, real.as_posix()))
                    continue
            lines.append("")  # the include is left out; line numbers stay
            origins.append(here)

    start = (path.resolve().as_posix(),) if path is not None else ()
    take(text.replace("\r\n", "\n").replace("\r", "\n").split("\n"), path.parent if path is not None else None,
         None, start)
    return lines, origins, included, unread


def _source_line(text: str, words: list[str], cursor: int) -> int:
    """Where in the source (``words``: each line's words, from ``cursor``) a block's text starts: the
    first line holding the first words of its first line; ``cursor`` when none does."""
    first = next((line for line in text.split("\n") if line.strip() and not line.startswith("```")), "")
    probe = " ".join(_WORDS.findall(first.lower())[:_PROBE_WORDS])
    if probe:
        for index in range(cursor, len(words)):
            if words[index].startswith(probe) or f" {probe}" in words[index]:
                return index
    return cursor


def parse_asciidoc(text: str, *, name: str = "", path: Path | None = None, root: Path | None = None) -> Document:
    """Sections of an AsciiDoc document.

    asciidoc-py converts it to HTML5 in safe mode (`_sandbox`: no ``sys::``, ``eval`` or filters,
    no file read but its includes inside ``root``), and the HTML parser reads the page: the ``= Title``
    is the document's title, ``==``/``===`` headings open sections, listings are fenced code.
    Blocks are placed back on the document's own lines by their text (an included file's lines count
    as its include line's).
    """
    lines, origins, included, unread = _expand(text, path, root)
    page = parse_html(to_html("\n".join(lines), name=name or "<document>"), name=name)
    words = [" ".join(_WORDS.findall(line.lower())) for line in lines]
    sections: list[Section] = []
    cursor = 0
    for section in page.sections:
        blocks: list[Block] = []
        for block in section.blocks:
            index = _source_line(block.text, words, cursor)
            cursor = index
            last = index + block.text.count("\n")
            if block.kind == "code":  # the fences stand for the listing's delimiter lines
                index, last = max(index - 1, 0), last - 1
            start = origins[index] if origins else 1
            end = origins[min(last, len(origins) - 1)] if origins else 1
            blocks.append(Block(block.text, start, max(start, end), block.kind))
        sections.append(Section(section.titles, tuple(blocks)))
    return Document(format="asciidoc", unit="line", sections=tuple(sections), title=page.title,
                    parser=parser_version("asciidoc"), dropped=page.dropped, includes=tuple(included),
                    unread=tuple(unread))
