"""Document parsers behind one interface: a file (path or bytes) in, titled sections of clean blocks out."""

from __future__ import annotations

import functools
import mimetypes
import re
from collections.abc import Callable
from pathlib import Path, PurePosixPath

from ..errors import ConfigError, InputError
from .base import (
    ADOC_INLINE_MACRO,
    COMPRESSED,
    PARSER_VERSIONS,
    TITLE_SEPARATOR,
    Block,
    Document,
    Section,
    parser_version,
)
from .markdown import parse_markdown
from .rst import parse_rst
from .text import parse_text

__all__ = [
    "COMPRESSED",
    "DOCUMENT_FORMATS",
    "DOCUMENT_SUFFIXES",
    "PARSER_VERSIONS",
    "RST_HEAD",
    "TITLE_SEPARATOR",
    "Block",
    "Document",
    "Section",
    "detect_format",
    "display_name",
    "parse",
    "parser_version",
    "plain_text_name",
]

#: File-name extensions of each format (the last one, or the last two for compound names).
_EXTENSIONS: dict[str, str] = {
    ".md": "markdown", ".markdown": "markdown", ".mdown": "markdown", ".mkd": "markdown",
    ".rst": "rst", ".rest": "rst",
    ".html": "html", ".htm": "html", ".xhtml": "html",
    ".pdf": "pdf",
    ".txt": "text", ".text": "text",
    ".adoc": "asciidoc", ".asciidoc": "asciidoc", ".asc": "asciidoc",
}
#: Every file-name extension a document format is read by.
DOCUMENT_SUFFIXES = frozenset(_EXTENSIONS)
#: ``X.txt`` where X is another format's extension is that format saved as text (Sphinx writes
#: its sources as ``page.rst.txt``; Markdown exports often end ``.md.txt``).
_TEXT_WRAPPERS = (".txt", ".text")
_CONTENT_TYPES: dict[str, str] = {
    "text/markdown": "markdown", "text/x-markdown": "markdown",
    "text/x-rst": "rst", "text/prs.fallenstein.rst": "rst",
    "text/html": "html", "application/xhtml+xml": "html",
    "application/pdf": "pdf",
    "text/asciidoc": "asciidoc", "text/x-asciidoc": "asciidoc",
    "text/plain": "text",
}
DOCUMENT_FORMATS = frozenset(_CONTENT_TYPES.values())
_EXTRAS = {"html": ("html", "lxml"), "pdf": ("pdf", "pypdfium2")}
_HTML_START = re.compile(rb"\A(?:\xef\xbb\xbf)?\s*(?:<!--.*?-->\s*)*<(?:!doctype\s+html|html[\s>])", re.I | re.S)
#: reStructuredText markup that plain text does not hold by chance: a directive, hyperlink target or
#: substitution definition opening a line (``.. note::``, ``.. _label:``), interpreted text with a
#: role (``:func:`parse```), an inline literal (````code````), a title with an overline and an
#: underline of one character, or a paragraph ending ``::`` before an indented literal block.
_RST_MARKUP = re.compile(
    rb"^[ \t]*\.\. (?:[A-Za-z][\w.+-]*::|_[^:\n]+:|\|[^|\n]+\|[ \t]+[\w-]+::)"
    rb"|:[A-Za-z][\w.+-]*(?::[\w.+-]+)?:`[^`\n]+`"
    rb"|(?<![`\w])``[^`\s](?:[^`\n]*[^`\s])?``(?![`\w])"
    rb"|\S::[ \t]*\r?\n[ \t]*\r?\n[ \t]+\S",
    re.M,
)
#: A title between an overline and an underline of one character, both as long as each other and at
#: least as long as the title (as docutils requires; AsciiDoc's listing delimiters are not).
_RST_OVERLINED = re.compile(rb"^(([=\-~*#^+])\2{2,})[ \t]*\r?\n([^\n]*\S)[ \t]*\r?\n(\2{3,})[ \t]*$", re.M)
#: A ``.txt`` file whose first `RST_HEAD` bytes hold this many such constructs is reStructuredText:
#: Django's and many Sphinx projects' sources are ``.txt``. One alone could be a coincidence; an
#: overlined title counts twice (plain text and Markdown do not write one).
_RST_EVIDENCE = 2
#: How much of a ``.txt`` file is looked at for reStructuredText markup.
RST_HEAD = 65536
#: AsciiDoc markup that plain text, Markdown and reST do not hold by chance, by kind: a block macro
#: line (``include::part.txt[]``, ``image::a.png[]``, ``endif::[]``); an inline macro with a target
#: (`ADOC_INLINE_MACRO`, found in `_looks_like_asciidoc`); an attribute entry (``:toc:``, ``:name: value``) among the first `_ADOC_TOP_LINES`; a ``= Title``
#: first line whose header lines reach an attribute entry; a cross reference (``<<id,text>>``).
#: Delimited blocks and block attribute lines are found line by line (`_adoc_blocks`).
_ADOC_MARKUP: dict[str, re.Pattern[str]] = {
    "block macro": re.compile(r"^[A-Za-z][\w-]*::(?!:)(?:(?!::)[^\s\[])*\[[^\]\n]*\][ \t]*$", re.M),
    "attribute entry": re.compile(r"^:!?\w[\w-]*!?:(?:[ \t]+\S.*)?$", re.M),
    "document title": re.compile(r"\A= \S.*\n(?:[^\n:].*\n)*:!?\w[\w-]*!?:"),
    "cross reference": re.compile(r"(?<![\w<])<<[A-Za-z_][\w:.-]*,[^<>\n]+>>(?![\w>])"),
}
#: A delimited block's opening and closing line: listing, literal, example, sidebar, quote,
#: passthrough, comment, table.
_ADOC_DELIMITER = re.compile(r"-{4,}|\.{4,}|={4,}|\*{4,}|_{4,}|\+{4,}|/{4,}|\|={3,}")
#: A block attribute line (``[source,python]``, ``[quote, Author]``, ``[options="header"]``) ...
_ADOC_ATTRIBUTES = re.compile(r"\[[A-Za-z\"][^\]]*\]")
#: ... which says AsciiDoc over any block when it names one of AsciiDoc's own styles or admonitions.
_ADOC_STYLE = re.compile(r"\[(?:NOTE|TIP|IMPORTANT|WARNING|CAUTION|source|listing|literal|verse|quote|"
                         r"sidebar|example|abstract|partintro|comment|pass)(?:[,#.%][^\]]*)?\]")
#: A block title line (``.Example``).
_ADOC_TITLE = re.compile(r"\.[^\s.]")
#: How many lines from the top an attribute entry counts in: a document's header sets them there.
_ADOC_TOP_LINES = 40
#: Kinds that reST holds as well: a field list (``:orphan:``) reads as attribute entries, an
#: overlined title as a delimited block round one line.
_ADOC_LIKE_RST = frozenset({"attribute entry", "delimited block"})
#: A ``.txt`` file whose first `RST_HEAD` bytes hold this many different kinds of AsciiDoc markup,
#: one of them none of `_ADOC_LIKE_RST`, is AsciiDoc. Kinds, not occurrences: a text that boxes its
#: titles in ``----`` lines does so throughout.
_ADOC_EVIDENCE = 2
#: Names of the plain-text documents a source release carries without an extension for its users
#: (the GNU coding standards' README, NEWS, INSTALL ... and their common kin): read as text, so a
#: project's folder is indexed with its README. Compared without case; ``NEWS.gz`` counts too, and so
#: does a name with a suffix that is no file format (``README.Debian``: `plain_text_name`). A
#: ``ChangeLog`` is left out: the standards' log of every change for developers (git's is 3 MB of
#: commit messages), which would outweigh the documentation in the map; NEWS says what users need.
PLAIN_TEXT_NAMES = frozenset({"readme", "news", "install", "copying", "changes", "history", "authors",
                              "thanks", "todo", "bugs", "hacking", "contributing", "license", "notice",
                              "credits", "faq"})
#: Suffixes of source code, configuration, patches, keys and packages that Python's table of media
#: types (`_other_format`) does not know: ``README.rs`` or ``NEWS.yml`` is no plain-text note.
_CODE_AND_DATA_SUFFIXES = frozenset({
    "rs", "go", "java", "kt", "scala", "swift", "rb", "ts", "tsx", "jsx", "cc", "cpp", "cxx", "hh", "hpp",
    "cs", "lua", "el", "lisp", "scm", "hs", "ml", "php", "r", "jl", "dart", "sql", "ps1", "vim", "m4",
    "cmake", "mk", "yml", "yaml", "toml", "ini", "cfg", "conf", "proto", "po", "pot", "mo", "gmo",
    "patch", "diff", "sig", "gpg", "pem", "key", "crt", "deb", "rpm", "jar", "whl", "so", "dll", "exe",
    "bin", "dat", "db", "sqlite", "zst", "7z", "lz", "lzma", "jsonl", "ndjson", "ipynb", "svgz", "ico",
})


#: File names that say what a file is to its folder, not what it is about: such a file is named
#: with its folder (``nopt/README.md`` -> ``nopt README``).
CONVENTIONAL_NAMES = frozenset({"readme", "index", "changelog", "changes", "history", "news", "license",
                                "contributing", "authors", "notes", "todo"})


def display_name(file_name: str) -> str:
    """A file's name as shown to people: no folder, no document extensions, case kept.

    ``docs/api/os.path.rst.txt`` -> ``os.path``; ``faq-billing.md`` (or ``.md.gz``) -> ``faq-billing``. Only
    extensions of document formats (and JSONL) are removed, so dotted identifiers survive. A
    conventional name (`CONVENTIONAL_NAMES`) keeps its folder: ``nopt/README.md`` -> ``nopt README``.
    """
    path = PurePosixPath(file_name.replace("\\", "/"))
    name = path.name or file_name
    if name.lower().endswith(COMPRESSED) and detect_format(name) is not None:
        name = name[: -len(COMPRESSED)]
    for _ in range(2):
        stem, dot, ext = name.rpartition(".")
        if not dot or not stem or f".{ext.lower()}" not in (*_EXTENSIONS, ".jsonl", ".ndjson"):
            break
        name = stem
    if name.lower() in CONVENTIONAL_NAMES and path.parent.name:
        return f"{path.parent.name} {name}"
    return name


def detect_format(name: str, *, content_type: str | None = None, head: bytes | None = None) -> str | None:
    """The document format of a file, or None when it is not a document this package reads.

    Args:
        name: the file's name or path; compound extensions count (``a.rst.txt`` is reST, and so is
            ``a.rst.gz``, whose bytes the caller decompresses: `COMPRESSED`).
        content_type: a MIME type (``text/html; charset=utf-8``), which wins when it is known.
        head: the file's first bytes (up to `RST_HEAD`), to recognise a PDF or an HTML page behind
            another name, and a ``.txt`` file written in AsciiDoc (`_looks_like_asciidoc`) or
            reStructuredText (its directives and roles).
    """
    if content_type:
        known = _CONTENT_TYPES.get(content_type.split(";", 1)[0].strip().lower())
        if known and not (known == "text" and name):
            return known
    suffixes = [s.lower() for s in PurePosixPath(name.replace("\\", "/")).suffixes]
    if len(suffixes) >= 2 and suffixes[-1] == COMPRESSED:
        suffixes.pop()  # ``guide.rst.gz``: the document inside names the format (``head`` is its bytes)
    by_name = _EXTENSIONS.get(suffixes[-1]) if suffixes else None
    if by_name is None and plain_text_name(name):
        by_name = "text"
    if by_name == "text" and len(suffixes) >= 2 and suffixes[-1] in _TEXT_WRAPPERS:
        inner = _EXTENSIONS.get(suffixes[-2])
        if inner in ("markdown", "rst", "html"):
            by_name = inner
    if head is not None:
        if by_name == "asciidoc" and head.lstrip().startswith(b"-----BEGIN PGP "):
            return None  # ``release.tar.gz.asc``: a signature, not AsciiDoc
        if head.lstrip(b"\xef\xbb\xbf \t\r\n").startswith(b"%PDF-"):
            return "pdf"
        if by_name in (None, "text") and _HTML_START.match(head[:4096]):
            return "html"
        if by_name == "text" and _looks_like_asciidoc(head[:RST_HEAD]):
            return "asciidoc"  # first: a listing of one short line looks like a reST overlined title
        if by_name == "text" and _looks_like_rst(head[:RST_HEAD]):
            return "rst"
    return by_name


def plain_text_name(name: str) -> bool:
    """Whether ``name`` is a plain-text document by its name (`PLAIN_TEXT_NAMES`): ``README``,
    ``NEWS.gz``, and one with a suffix that is no file format (``README.Debian``, ``NEWS.Debian.gz``,
    ``README.source``: a note for a platform or a reader) — `_other_format` says which suffixes are."""
    base = PurePosixPath(name.replace("\\", "/")).name.lower()
    if base.endswith(COMPRESSED):
        base = base[: -len(COMPRESSED)]
    stem, *suffixes = base.split(".")
    return stem in PLAIN_TEXT_NAMES and not any(not suffix or _other_format(suffix) for suffix in suffixes)


@functools.cache
def _other_format(suffix: str) -> bool:
    """Whether ``.suffix`` names a file format of its own: a document format read by its parser, one
    Python's built-in table of media types knows (``.py``, ``.json``, ``.png``, ``.tar``, ``.bz2``; not
    the machine's own table, so the answer is the same everywhere), or `_CODE_AND_DATA_SUFFIXES`."""
    if f".{suffix}" in _EXTENSIONS or suffix in _CODE_AND_DATA_SUFFIXES:
        return True
    kind, encoding = mimetypes.MimeTypes().guess_type(f"x.{suffix}", strict=False)
    return kind is not None or encoding is not None


def _looks_like_rst(head: bytes) -> bool:
    """Whether a text file's first bytes are written in reStructuredText (`_RST_EVIDENCE` constructs)."""
    found = 0
    for title in _RST_OVERLINED.finditer(head):
        over, text, under = title.group(1), title.group(3).strip(), title.group(4)
        if len(over) == len(under) >= len(text):
            found += 2
            break
    if found >= _RST_EVIDENCE:
        return True
    for _ in _RST_MARKUP.finditer(head):
        found += 1
        if found >= _RST_EVIDENCE:
            return True
    return False


def _looks_like_asciidoc(head: bytes) -> bool:
    """Whether a text file's first bytes are written in AsciiDoc: `_ADOC_EVIDENCE` kinds of its markup
    (`_ADOC_MARKUP`, `_adoc_blocks`), one that reST does not hold too (`_ADOC_LIKE_RST`)."""
    text = head.decode("utf-8", "replace").removeprefix("\ufeff").replace("\r\n", "\n")
    top = "\n".join(text.split("\n", _ADOC_TOP_LINES)[:_ADOC_TOP_LINES])
    kinds = {kind for kind, pattern in _ADOC_MARKUP.items()
             if pattern.search(top if kind == "attribute entry" else text)}
    if any(macro.group(1) for macro in ADOC_INLINE_MACRO.finditer(text)):  # evidence needs a target
        kinds.add("inline macro")
    kinds |= _adoc_blocks([line.rstrip() for line in text.split("\n")])
    return len(kinds) >= _ADOC_EVIDENCE and bool(kinds - _ADOC_LIKE_RST)


def _adoc_blocks(lines: list[str]) -> set[str]:
    """Which of ``delimited block`` and ``block attributes`` the lines hold.

    A delimited block opens on a `_ADOC_DELIMITER` line after a blank line, a block attribute line,
    a ``.Title`` line or a list continuation ``+`` (after a line of text it would be a title's
    underline) and closes on the same line further down. A block attribute line counts over a
    delimited block, or over any block when it names a built-in style (`_ADOC_STYLE`).
    """
    found: set[str] = set()
    index = 0
    while index < len(lines):
        line, above = lines[index], lines[index - 1] if index else ""
        if _ADOC_STYLE.fullmatch(line) and index + 1 < len(lines) and lines[index + 1].strip():
            found.add("block attributes")
        elif _ADOC_DELIMITER.fullmatch(line) and (
                not above.strip() or above == "+" or _ADOC_TITLE.match(above) or _ADOC_ATTRIBUTES.fullmatch(above)):
            if _ADOC_ATTRIBUTES.fullmatch(above):
                found.add("block attributes")
            try:
                close = lines.index(line, index + 1)
            except ValueError:
                close = index
            # a block's last line touches its closing line; a rule after a blank line parts sections
            if close > index + 1 and lines[close - 1].strip():
                found.add("delimited block")
                index = close  # a block's content is not markup
        index += 1
    return found


def _parser(fmt: str) -> Callable[..., Document]:
    if fmt == "markdown":
        return parse_markdown
    if fmt == "rst":
        return parse_rst
    if fmt == "text":
        return parse_text
    if fmt == "asciidoc":
        try:
            from .adoc import parse_asciidoc  # deferred: loads asciidoc-py and lxml
        except ImportError as exc:
            package = "asciidoc" if (exc.name or "").startswith("asciidoc") else "lxml"
            raise ConfigError(f"reading AsciiDoc needs the {package} package, which is not installed",
                              hint=f"pip install {package}") from exc
        return parse_asciidoc
    if fmt in _EXTRAS:
        extra, module = _EXTRAS[fmt]
        parser: Callable[..., Document]
        try:
            if fmt == "html":
                from .html import parse_html as parser  # deferred: loads lxml
            else:
                from .pdf import parse_pdf as parser  # deferred: loads pypdfium2
        except ImportError as exc:
            raise ConfigError(
                f"reading {fmt.upper()} needs the optional {module} parser, which is not installed",
                hint=f"pip install 'knowtology-cli[{extra}]' (make install includes it)",
            ) from exc
        return parser
    raise ConfigError(f"unknown document format {fmt!r}", hint=f"use one of {', '.join(sorted(DOCUMENT_FORMATS))}")


def _asciidoc_or_text(text: str, *, name: str, path: Path | None = None, root: Path | None = None) -> Document:
    """A ``.txt`` file whose markup says AsciiDoc (`_looks_like_asciidoc`), read as AsciiDoc; as plain
    text when asciidoc-py cannot convert it or is not installed, as it was read before the guess."""
    try:
        return _parser("asciidoc")(text, name=name, path=path, root=root)
    except (InputError, ConfigError):
        return parse_text(text, name=name)


def decode_text(data: bytes, label: str) -> str:
    """UTF-8 text of a text-format file (a BOM is dropped); `InputError` naming the line otherwise."""
    if b"\x00" in data[:8192]:
        raise InputError(f"{label}: binary file — ingest Markdown, reST, HTML, PDF, text or JSONL only")
    try:
        return data.decode("utf-8-sig")
    except UnicodeDecodeError as exc:
        line = data[: exc.start].count(b"\n") + 1
        raise InputError(
            f"{label}:{line}: not valid UTF-8 (byte {exc.start}) — re-encode the file as UTF-8"
        ) from exc


def parse(
    source: str | Path | bytes,
    *,
    name: str | None = None,
    format: str | None = None,  # noqa: A002 - the natural keyword for callers
    content_type: str | None = None,
    path: Path | None = None,
    root: Path | None = None,
) -> Document:
    """Parse one document into sections of clean, located blocks.

    Every format has a parser made for it: Markdown (markdown-it-py, CommonMark), reStructuredText
    (docutils), HTML (lxml), PDF (pypdfium2) and plain text (paragraphs). Each returns a `Document`:
    sections with their title path (``Billing › Refunds › Partial refunds``) made of `Block`s whose
    text is clean (no markup a reader would trip over) and which know their place in the source —
    lines for text formats, pages for PDF — so a chunk can be cited and the original opened there.

    Formats are recognised by content type first, then by the file name with compound extensions
    (``guide.rst.txt`` is reStructuredText, ``page.htm`` HTML), then by the content itself (``%PDF-``,
    an HTML doctype, AsciiDoc or reST markup in a ``.txt``). A ``.txt`` taken for AsciiDoc that
    asciidoc-py cannot convert is read as plain text, as its name says. The parsers of HTML and PDF
    are optional extras (``knowtology-cli[html]``, ``knowtology-cli[pdf]``); a missing one is a
    `ConfigError` naming the extra.

    Each parser has a version (`PARSER_VERSIONS`); the store records it per chunk, so a new parser
    version re-chunks the files it reads while unchanged files under the same version embed nothing.

    Args:
        source: a path, or the file's bytes (``str`` is taken as the text of a text format).
        name: the file name used for format detection and messages (default: the path).
        format: force a format (``markdown``, ``rst``, ``html``, ``pdf``, ``text``).
        content_type: a MIME type, used before the name to detect the format.
        path: where the file is (default: ``source`` when it is a path); a reST ``include`` resolves
            against it and reads only inside ``root`` (default: the file's folder). Without a path,
            includes are not read.
        root: the folder includes may read from (`kt ingest` passes the folder it reads).

    Raises:
        InputError: undecodable text or a damaged PDF (message ``name: what — what to do``).
        ConfigError: the format cannot be recognised, or its optional parser is not installed.
    """
    if isinstance(source, Path):
        label = name or source.as_posix()
        data: bytes | str = source.read_bytes()
        path = path or source
    else:
        label = name or "<document>"
        data = source
    head = data[:RST_HEAD] if isinstance(data, bytes) else data[:RST_HEAD].encode("utf-8", "replace")
    fmt = format or detect_format(label, content_type=content_type, head=head)
    if fmt is None:
        raise ConfigError(
            f"{label}: cannot tell the document format",
            hint="use a .md, .rst, .html, .pdf or .txt name, or give the format",
        )
    # AsciiDoc only guessed from a text file's markup: the file stays readable as the text its name says
    guessed = fmt == "asciidoc" and detect_format(label, content_type=content_type) == "text"
    parser: Callable[..., Document] = _asciidoc_or_text if guessed else _parser(fmt)
    if fmt == "pdf":
        if isinstance(data, str):
            raise InputError(f"{label}: a PDF must be given as bytes")
        return parser(data, name=label)
    if fmt == "html" and isinstance(data, bytes):
        return parser(data, name=label)
    text = decode_text(data, label) if isinstance(data, bytes) else data.removeprefix("\ufeff")
    if fmt in ("rst", "markdown", "asciidoc"):
        return parser(text, name=label, path=path, root=root)
    return parser(text, name=label)
