"""What every parser returns: a `Document` of titled `Section`s made of clean `Block`s, and parser versions."""

from __future__ import annotations

import os
import re
from collections.abc import Callable, Iterator
from dataclasses import dataclass
from pathlib import Path

TITLE_SEPARATOR = " › "
#: The largest file an include (reST ``include``, MkDocs ``--8<--``) reads, in bytes: a fragment of a
#: page, not a data dump.
MAX_INCLUDE_BYTES = 2_000_000

#: An AsciiDoc inline macro ``name:target[text]`` (the target may be empty): the name is no URL
#: scheme and is longer than a Vim scope (``s:var[1]``). Groups: target, text.
ADOC_INLINE_MACRO = re.compile(r"(?<![\w:/.@|\[\\-])[A-Za-z][\w-]+:(?!//|:)([^\s\[\]|]*)\[([^\]\n]*)\](?![\w\[(])")

#: A document compressed with gzip (``user_guide.rst.gz``, as Debian ships docs): read as the
#: document it holds, named by the extension before this one.
COMPRESSED = ".gz"

#: A heading is about as long as this many words at most; a longer line is a sentence.
HEADING_WORDS = 12
#: reStructuredText's admonition names: a bold "**Note**" sets off the paragraph after it, no part
#: of the document.
ADMONITIONS = frozenset({"attention", "caution", "danger", "error", "hint", "important", "note", "tip",
                         "warning", "see also", "seealso"})
_LABEL_MARKS = re.compile(r"\A[*_\s]+|[*_\s]+\Z")


def bold_heading(label: str) -> str | None:
    """The heading a paragraph of one bold phrase stands for (``**Example 2: To create a user**``,
    ``**Installation**``), or None: a bold sentence (ending ``.``, ``!``, ``;`` or ``,``) is emphasis,
    one ending in ``:`` introduces what follows, an admonition name sets off one paragraph, and
    one longer than `HEADING_WORDS` reads as prose."""
    text = " ".join(_LABEL_MARKS.sub("", label).split())
    if (not text or len(text.split()) > HEADING_WORDS or text[-1] in ".:;,!" or not any(c.isalpha() for c in text)
            or text.casefold() in ADMONITIONS):
        return None
    return text


#: Bumped whenever a parser's output for the same input changes; stored with every chunk.
PARSER_VERSIONS: dict[str, int] = {"markdown": 28, "rst": 27, "html": 18, "pdf": 5, "text": 4, "asciidoc": 2}


@dataclass(frozen=True)
class Block:
    """One unit of a section: a paragraph, list, table, code block or heading, as clean text.

    Attributes:
        text: the block's text; structure kept the Markdown way (``- `` items, ``| a | b |``
            table rows, fenced code, inline code as ```code``` spans), other inline markup gone
            (Markdown sources keep their own).
        start: first source line (text formats) or page (PDF), 1-based.
        end: last source line or page, inclusive.
        kind: ``heading``, ``text``, ``list``, ``table``, ``code``, ``quote``, ``label`` (a
            paragraph that is all bold, ``**Example 2: Create a table**``: a heading in all but
            markup) or ``lead`` (a paragraph that introduces the next block, as reST's ``Output ::``
            does its literal block); chunking keeps labels and leads with what follows them.
        lines: the source line of each line of ``text``, when the parser knows them and they are
            not simply ``start`` onwards (an HTML list whose items span many source lines each), so
            a chunk cut from the block cites where its own text is.
    """

    text: str
    start: int
    end: int
    kind: str = "text"
    lines: tuple[int, ...] = ()


@dataclass(frozen=True)
class Section:
    """Blocks under one heading; ``titles`` is the heading trail from the document's top."""

    titles: tuple[str, ...]
    blocks: tuple[Block, ...]


class SectionTrail:
    """Sections as a parser meets headings in reading order: blocks go to the open section; a heading
    at ``level`` closes the open ones at that level or deeper, opens its own and is its first block,
    written as ``## Title`` (as Markdown writes one) so chunk text and snippets know it for one."""

    def __init__(self) -> None:
        self.sections: list[Section] = []
        self.blocks: list[Block] = []
        self.titles: tuple[str, ...] = ()
        self._stack: list[tuple[int, str]] = []

    def open(self, level: int, title: str, start: int, end: int) -> None:
        """Open the section of the heading ``title`` at ``level``, found at ``start``-``end``."""
        self.close()
        while self._stack and self._stack[-1][0] >= level:
            self._stack.pop()
        self._stack.append((level, title))
        self.titles = tuple(t for _, t in self._stack)
        self.blocks.append(Block("#" * min(len(self.titles), 6) + " " + title, start, end, "heading"))

    def close(self) -> tuple[Section, ...]:
        """End the open section; every section so far."""
        if self.blocks:
            self.sections.append(Section(self.titles, tuple(self.blocks)))
            self.blocks = []
        return tuple(self.sections)


@dataclass(frozen=True)
class Document:
    """A parsed document.

    Attributes:
        format: ``markdown``, ``rst``, ``html``, ``pdf`` or ``text``.
        unit: ``line`` or ``page``: what `Block.start` / `Block.end` count.
        sections: in document order.
        title: the document's own title when it states one (front matter, ``<title>``, PDF
            metadata); headings are in the sections' title paths already.
        parser: the parser's name and version as recorded in the store, e.g. ``markdown/1``.
        dropped: blocks left out as no content (comments, directives like ``toctree``,
            navigation, running page headers), for the ingest summary.
        redirect: where the page sends its reader (an HTML ``<meta http-equiv="refresh">`` or a reST
            ``.. meta::`` refresh naming another address, whatever its delay); such a page is a
            pointer with nothing of its own to index, and its ``sections`` are empty.
        includes: files whose text this document took in (reST ``include``, MkDocs ``--8<--``), as
            resolved paths.
        unread: includes that were not read, each ``argument (why)``.
        docstrings: directives whose text comes from docstrings of code Sphinx imports (``..
            autoclass::`` …, `sphinx.DOCSTRING_DIRECTIVES`), which were not read.
    """

    format: str
    unit: str
    sections: tuple[Section, ...]
    title: str = ""
    parser: str = ""
    dropped: int = 0
    redirect: str = ""
    includes: tuple[str, ...] = ()
    unread: tuple[str, ...] = ()
    docstrings: int = 0


#: A refresh's content (``0; url=…``): a delay (digits, maybe a fraction), then an optional ``;``
#: or ``,`` and ``url=`` with the address, maybe quoted (the HTML standard's parsing).
_REFRESH = re.compile(r"\s*(\d+)(?:\.[\d.]*)?\s*(?:[;,]\s*(?:url\s*=\s*)?(?P<url>.*?))?\s*$", re.I | re.S)


def refresh_of(content: str) -> tuple[int | None, str]:
    """``(delay, address)`` of a ``http-equiv="refresh"`` content (``"3; url=../x/"`` -> ``(3, "../x/")``);
    ``(None, "")`` when it is none, ``""`` for a page that reloads itself."""
    match = _REFRESH.match(content)
    if match is None:
        return None, ""
    return int(match.group(1)), (match.group("url") or "").strip().strip("'\"").strip()


def parser_version(fmt: str) -> str:
    """``format/version`` as recorded with every chunk of a file parsed as ``fmt``."""
    return f"{fmt}/{PARSER_VERSIONS[fmt]}"


def read_fragment(target: Path, root: Path, stack: tuple[str, ...] = ()) -> tuple[Path, list[str] | None, str]:
    """An included file's lines, read only when it lies inside ``root`` (resolved), is not one of the
    files being read (``stack``: a loop) and holds at most `MAX_INCLUDE_BYTES` of UTF-8 text.

    Returns the resolved path, its lines (line ends normalised), and why not when they are None.
    """
    try:
        real = target.resolve()
        if not real.is_relative_to(root):
            return real, None, "outside the ingested folder"
        if not real.is_file():
            return real, None, "not found"
        if real.as_posix() in stack:
            return real, None, "circular inclusion"
        if real.stat().st_size > MAX_INCLUDE_BYTES:
            return real, None, f"larger than {MAX_INCLUDE_BYTES:,} bytes"
        text = real.read_bytes().decode("utf-8-sig")
    except (OSError, RuntimeError, UnicodeDecodeError):  # a link loop, a permission error, not UTF-8
        return target, None, "not a readable UTF-8 text file"
    return real, text.replace("\r\n", "\n").replace("\r", "\n").split("\n"), ""


def select_lines(lines: list[str], options: dict[str, str]) -> list[str]:
    """The part of an included file its directive's options ask for, as Sphinx and docutils read
    them: ``start-after``/``end-before`` (text markers), ``start-line``/``end-line`` (0-based, end
    excluded) and ``lines`` (1-based, ``1,3,5-10,20-``); any option that does not parse is ignored."""
    text = "\n".join(lines)
    if options.get("start-after") and options["start-after"] in text:
        text = text.split(options["start-after"], 1)[1].split("\n", 1)[-1]
    if options.get("end-before") and options["end-before"] in text:
        text = text.split(options["end-before"], 1)[0].rsplit("\n", 1)[0]
    out = text.split("\n")
    first, last = options.get("start-line", ""), options.get("end-line", "")
    out = out[int(first) if first.isdigit() else 0: int(last) if last.isdigit() else len(out)]
    spans = options.get("lines", "").replace(" ", "")
    if spans and all(part.replace("-", "").isdigit() or part.endswith("-") and part[:-1].isdigit()
                     for part in spans.split(",")):
        picked: list[str] = []
        for part in spans.split(","):
            start, _, end = part.partition("-")
            begin = max(int(start or 1), 1) - 1
            picked.extend(out[begin:(int(end) if end else len(out)) if "-" in part else begin + 1])
        out = picked
    return out


def code_language_of(path: Path, named: str = "") -> str:
    """The language to name on a fence of code read from ``path``: ``named`` (a ``:language:``
    option) when given, else what Pygments, the highlighter Sphinx uses, says of the file name
    ("" for plain text)."""
    if named.strip():
        return named.strip().split()[0].lower()
    from pygments.lexers import find_lexer_class_for_filename  # deferred: only for included code
    from pygments.util import ClassNotFound  # deferred: with the lexers above

    try:
        lexer = find_lexer_class_for_filename(path.name)
    except ClassNotFound:
        return ""
    aliases = getattr(lexer, "aliases", None) or []
    return "" if lexer is None or not aliases or aliases[0] == "text" else str(aliases[0])


def walk_files(root: Path, on_error: Callable[[OSError], None] | None = None,
               on_hidden: Callable[[Path], None] | None = None) -> Iterator[Path]:
    """The files under ``root`` in name order, as `kt ingest` walks a folder: hidden files and
    folders (a leading ``.``) are skipped, links to folders followed once (a link loop ends);
    ``on_error`` hears of folders that cannot be read, ``on_hidden`` of each hidden folder skipped."""
    seen: set[tuple[int, int]] = set()
    for directory, dirnames, filenames in os.walk(root, followlinks=True, onerror=on_error):
        try:
            stat = os.stat(directory)
        except OSError:
            continue
        key = (stat.st_dev, stat.st_ino)
        if key in seen:  # a symlink loop or a second link to the same directory
            dirnames[:] = []
            continue
        seen.add(key)
        if on_hidden is not None:
            for name in sorted(d for d in dirnames if d.startswith(".")):
                on_hidden(Path(directory, name))
        dirnames[:] = sorted(d for d in dirnames if not d.startswith("."))
        for name in sorted(filenames):
            if not name.startswith("."):
                yield Path(directory, name)
