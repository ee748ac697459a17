"""Sphinx's vocabulary, shared by the reST and MyST Markdown readers: which directives are navigation,
code or conditions, how Sphinx words its notes, and what a role shows."""

from __future__ import annotations

import re
import time
from collections.abc import Callable
from functools import lru_cache
from pathlib import Path

from .base import walk_files
from .inline import TITLED_TARGET, role_text

#: Directives whose output is navigation, an index or build configuration, not content. (autodoc's
#: ``autoclass:: Name(args)`` and the like are kept like any unknown directive: the signature names
#: the API, and content written under one is the page's own prose.)
NAVIGATION_DIRECTIVES = frozenset({
    "toctree", "index", "contents", "sectnum", "section-numbering", "autosummary", "tabularcolumns",
    "highlight", "default-role", "currentmodule", "module", "sectionauthor", "moduleauthor",
    "codeauthor", "literalinclude", "include", "raw", "meta", "header", "footer", "title",
    "testsetup", "testcleanup", "ifconfig-only", "role", "class", "target-notes", "graphviz",
    "inheritance-diagram", "autoprogram", "program", "c:namespace",
    "cpp:namespace", "py:currentmodule", "py:module",
})
#: Directives whose text Sphinx takes from the docstrings of code it imports (sphinx.ext.autodoc's
#: and autosummary's): Knowtology imports no code, so only what the page itself writes (a signature,
#: prose under it) is read; ingest reports how many there were.
DOCSTRING_DIRECTIVES = frozenset({"automodule", "autoclass", "autoexception", "autofunction", "autodecorator",
                                  "autodata", "automethod", "autoattribute", "autoproperty", "autonewtypedata",
                                  "autonewvarattribute", "autosummary"})
#: Sphinx's roles that point at a document or a labelled section, shown with the target's title.
CROSS_REFERENCE_ROLES = frozenset({"doc", "ref", "numref", "download"})
#: Roles whose text is words, not code: cross-references, glossary terms and inline markup. Every
#: other role (``func``, ``class``, ``envvar``, ``file``, ``kbd`` …) shows code, as Sphinx's HTML
#: renders it, and reads as a Markdown code span in both reST and MyST.
WORD_ROLES = CROSS_REFERENCE_ROLES | {"term", "abbr", "dfn", "guilabel", "menuselection", "sub", "sup",
                                      "pep", "rfc", "sub-ref", "index"}
#: Roles of Sphinx's Python domain, whose target may start with ``.`` (look in the current module
#: first): the dot is not shown.
PYTHON_ROLES = frozenset({"mod", "func", "data", "const", "class", "meth", "attr", "exc", "obj", "type"})
#: Directives whose content is code or a terminal session, shown as written (Sphinx's, and those of
#: widely used extensions: sphinx-prompt, sphinx.ext.doctest, IPython, MyST-NB, Django's console).
CODE_DIRECTIVES = frozenset({"code-block", "sourcecode", "code", "highlight-block", "console", "prompt",
                             "doctest", "testcode", "testoutput", "ipython", "jupyter-execute",
                             "code-cell"})
#: Directives whose argument is a build condition; their content is the page's text.
CONDITION_DIRECTIVES = frozenset({"only", "ifconfig"})
#: Admonitions (docutils' and Sphinx's): their content reads after their name, ``Note: …``.
ADMONITIONS = frozenset({"attention", "caution", "danger", "error", "hint", "important", "note", "tip",
                         "warning", "todo"})
#: How Sphinx words its version and cross-reference notes.
LABELS = {
    "versionadded": "New in version", "versionchanged": "Changed in version",
    "deprecated": "Deprecated since version", "versionremoved": "Removed in version",
    "seealso": "See also",
}
#: A list item that only links one of the pages Sphinx generates for every project (its standard
#: labels ``genindex``, ``modindex``, ``py-modindex``, ``search``): the "Indices and tables" footer of
#: ``sphinx-quickstart``'s index page, navigation and no text.
GENERATED_PAGE_ITEM = re.compile(r"[ \t]*[-*+][ \t]+:ref:`(?:genindex|modindex|py-modindex|search)`[ \t]*")
#: A MyST target, ``(label)=`` (the label is ``group(1)``).
MYST_TARGET = r"\(([^()\s][^()]*)\)="
#: A code directive's argument that names the code's language (``python``, ``c++``, ``shell-session``).
LANGUAGE = re.compile(r"[A-Za-z][\w+#.-]*")
#: A directive argument that is a path (``.. cmake-module:: ../../Modules/FindBoost.cmake``).
PATH_ARGUMENT = re.compile(r"^\S*[/\\]\S*$")
#: Sphinx's explicit title of a cross-reference: ``title<target>``, a space before ``<`` optional.
_EXPLICIT_TITLE = re.compile(r"^(.+?)\s*<([^<>]*)>$", re.S)


#: The language of a code directive that names none, as Sphinx highlights it (Pygments' names).
DIRECTIVE_LANGUAGES = {"doctest": "pycon", "testcode": "python", "console": "console"}


#: The tags an HTML build of a Sphinx project sets, which ``.. only::`` expressions test: what a
#: reader of the documentation sees is its HTML build.
HTML_TAGS = frozenset({"html", "format_html", "builder_html"})
_TAG_TOKEN = re.compile(r"\(|\)|[^\s()]+")


def html_build_shows(expression: str) -> bool:
    """Whether an HTML build shows the content of ``.. only:: expression`` (``html``, ``not latex``,
    ``html or epub``, parentheses); an expression that does not parse is shown."""
    tokens = _TAG_TOKEN.findall(expression)
    at = 0

    def disjunction() -> bool:
        nonlocal at
        value = conjunction()
        while at < len(tokens) and tokens[at] == "or":
            at += 1
            value = conjunction() or value
        return value

    def conjunction() -> bool:
        nonlocal at
        value = negation()
        while at < len(tokens) and tokens[at] == "and":
            at += 1
            value = negation() and value
        return value

    def negation() -> bool:
        nonlocal at
        if at < len(tokens) and tokens[at] == "not":
            at += 1
            return not negation()
        if at < len(tokens) and tokens[at] == "(":
            at += 1
            value = disjunction()
            if at >= len(tokens) or tokens[at] != ")":
                raise ValueError(expression)
            at += 1
            return value
        if at >= len(tokens) or tokens[at] in ("and", "or", ")"):
            raise ValueError(expression)
        at += 1
        return tokens[at - 1] in HTML_TAGS

    try:
        shown = disjunction()
    except ValueError:
        return True
    return shown if at == len(tokens) else True


def code_language(argument: str, directive: str = "") -> str:
    """The language a code directive's argument names (its first word: ``python``, ``bash`` of
    ``prompt:: bash $``), lower case; else the one its kind implies (`DIRECTIVE_LANGUAGES`), or ""."""
    first = argument.split(None, 1)[0] if argument.strip() else ""
    return first.lower() if LANGUAGE.fullmatch(first) else DIRECTIVE_LANGUAGES.get(directive, "")


def cross_reference(text: str) -> str:
    """What a reader sees for a ``:doc:`` or ``:ref:`` without the title Sphinx would look up: the
    explicit title (Sphinx needs no space before ``<`` here), else the target's last part in words
    (``/topics/db/queries`` -> "queries", ``configuring-sessions`` -> "configuring sessions")."""
    titled = _EXPLICIT_TITLE.match(text)
    if titled:
        return titled.group(1).strip()
    last = text.strip().lstrip("~!").rstrip("/").rsplit("/", 1)[-1]
    return " ".join(last.replace("-", " ").replace("_", " ").split()) or text


def show_role(name: str, text: str, titles: Callable[[str, str], str] | None = None) -> str:
    """What the role ``name`` (``func``, ``py:meth``, ``doc``) shows for ``text``, as Sphinx renders
    it; ``titles(role, target)`` gives the title a ``:doc:`` or ``:ref:`` target names ("" when
    unknown; see `Titles`)."""
    base = name.rsplit(":", 1)[-1]
    if base in ("doc", "ref") and titles is not None and not _EXPLICIT_TITLE.match(text):
        found = titles(base, text.strip().lstrip("~!"))
        if found:
            return found
    if base in CROSS_REFERENCE_ROLES:
        return cross_reference(text)
    shown = role_text(text)
    return shown.lstrip(".") if base in PYTHON_ROLES and shown.startswith(".") and shown != "." else shown


def version_label(name: str, argument: str) -> str:
    """The lead of a version note: ``New in version 2.1: what`` from ``versionadded`` and ``2.1 what``."""
    version, *rest = argument.split(None, 1)
    return f"{LABELS[name]} {version}: {' '.join(rest[0].split())}" if rest else f"{LABELS[name]} {version}"


#: How many bytes of a document are read for its title.
_TITLE_HEAD = 65536
#: A reST section title: an optional overline, the title, an underline of one punctuation character.
_RST_TITLE = re.compile(r"^(?:([=\-~^\"'`:#*+_<>.])\1{2,}[ \t]*\n)?[ \t]*(\S[^\n]*?)[ \t]*\n"
                        r"([=\-~^\"'`:#*+_<>.])\3{2,}[ \t]*$", re.M)
#: A Markdown document's title: front matter ``title:`` or its first ``#`` heading.
_MD_TITLE = re.compile(r"\A---[ \t]*\n(?:.*\n)*?title:[ \t]*(.+?)[ \t]*\n|^#[ \t]+(.+?)[ \t#]*$", re.M)
#: Inline markup marks in a title (``*attrs*``, ````code````, a role's name).
_TITLE_MARKS = re.compile(r"(?<![\w`]):[\w:.+-]+:(?=`)|[*`]+|\{[\w:.+-]+\}(?=`)")
#: File names a ``:doc:`` target may stand for, in Sphinx's usual source suffixes.
DOC_SUFFIXES = (".rst", ".txt", ".md", ".rest")


def source_folder(folder: Path, root: Path) -> Path:
    """The Sphinx project's source folder of a document in ``folder``: the nearest folder from
    ``folder`` up to ``root`` (the ingested folder) holding a ``conf.py``, else ``root``."""
    try:
        inside = folder.resolve().relative_to(root.resolve())
    except (OSError, ValueError):
        return root
    for depth in range(len(inside.parts), 0, -1):
        candidate = root.joinpath(*inside.parts[:depth])
        if (candidate / "conf.py").is_file():
            return candidate
    return root


def resolve_target(target: str, folder: Path, root: Path) -> Path:
    """Where a cited path points, as Sphinx reads it: relative to the citing document's ``folder``,
    or with a leading ``/`` from the project's :func:`source_folder`."""
    if not target.startswith("/"):
        return folder / target
    return source_folder(folder, root) / target.lstrip("/")


def doc_title(target: str, folder: Path, root: Path) -> str:
    """The title of the document a ``:doc:`` target names, as Sphinx shows it: ``target`` counts
    from ``folder``, the citing document's (a leading ``/`` from the source folder, see
    :func:`resolve_target`), with or without its
    suffix; "" when no such file lies inside ``root`` or it has no title."""
    if not target or TITLED_TARGET.match(target):
        return ""
    base = resolve_target(target, folder, root)
    for suffix in ("", *DOC_SUFFIXES):
        candidate = base.with_name(base.name + suffix)
        try:
            real = candidate.resolve()
            if real.is_relative_to(root.resolve()) and real.is_file():
                stat = real.stat()
                return _title(real.as_posix(), stat.st_mtime_ns, stat.st_size)
        except (OSError, RuntimeError, ValueError):
            continue
    return ""


@lru_cache(maxsize=4096)
def _title(path: str, _mtime: int, _size: int) -> str:
    """The first title of the file at ``path`` (the stamp keys the cache to its version)."""
    with open(path, "rb") as handle:
        head = handle.read(_TITLE_HEAD).decode("utf-8", "replace").replace("\r\n", "\n")
    found = _MD_TITLE.search(head) if path.endswith(".md") else _RST_TITLE.search(head)
    if found is None:
        return ""
    title = (found.group(1) or found.group(2)) if path.endswith(".md") else found.group(2)
    return " ".join(_TITLE_MARKS.sub("", title).split()).strip("'\"")


#: A label line, ``.. _label:``.
_LABEL_LINE = re.compile(r"\.\. _(?:`([^`\n]+)`|([^:`\n][^:\n]*)):[ \t]*$")  # the quoted form may hold ":"
#: A MyST target line, ``(label)=``.
_MYST_LABEL_LINE = re.compile(rf"{MYST_TARGET}[ \t]*$")
#: A line of one punctuation character repeated: a reST title's adornment.
_ADORNMENT = re.compile(r"([=\-~^\"'`:#*+_<>.])\1{2,}[ \t]*$")
#: A Markdown ATX heading.
_ATX = re.compile(r"#{1,6}[ \t]+(.+?)[ \t#]*$")


class Titles:
    """The titles Sphinx shows for cross-references made from a document in ``folder``: a ``:doc:``
    target's page title (`doc_title`), a ``:ref:`` label's section title. Labels are those of the
    documents inside ``root`` (``.. _label:`` or MyST's ``(label)=`` right above a title), read once
    per instance, when the first ``:ref:`` asks."""

    def __init__(self, folder: Path, root: Path) -> None:
        self.folder, self.root = folder, root
        self._labels: dict[str, str] | None = None

    def __call__(self, role: str, target: str) -> str:
        if role == "doc":
            return doc_title(target, self.folder, self.root)
        if self._labels is None:
            self._labels = label_titles(self.root)
        return self._labels.get(target.strip().lower(), "")


def label_titles(root: Path) -> dict[str, str]:
    """Every section label of the documents inside ``root`` (lower case, as Sphinx compares them)
    with the title it stands above; cached per version of the folder's documents (the folder is
    listed again at most every `LISTING_SECONDS`, so a run over many pages lists it a few times)."""
    key = root.as_posix()
    listed = _listings.get(key)
    if listed is None or time.monotonic() - listed[0] > LISTING_SECONDS:
        stamps = []
        for path in walk_files(root):  # as `kt ingest` walks: hidden folders and link loops skipped
            if path.suffix.lower() in DOC_SUFFIXES:
                try:
                    stat = path.stat()
                except OSError:
                    continue
                if stat.st_size <= MAX_LABEL_FILE_BYTES:
                    stamps.append((path.as_posix(), stat.st_mtime_ns, stat.st_size))
        listed = (time.monotonic(), tuple(stamps))
        _listings[key] = listed
    return _labels_of(listed[1])


#: The largest document read for its labels (bytes).
MAX_LABEL_FILE_BYTES = 2_000_000
#: How long a listing of a folder's documents serves `label_titles` (seconds).
LISTING_SECONDS = 5.0
_listings: dict[str, tuple[float, tuple[tuple[str, int, int], ...]]] = {}


@lru_cache(maxsize=8)
def _labels_of(stamps: tuple[tuple[str, int, int], ...]) -> dict[str, str]:
    found: dict[str, str] = {}
    for stamp in stamps:
        for name, title in _file_labels(*stamp):
            found.setdefault(name, title)
    return found


@lru_cache(maxsize=65536)
def _file_labels(path: str, _mtime: int, _size: int) -> tuple[tuple[str, str], ...]:
    """The ``(label, title)`` pairs of one document (the stamp keys the cache to its version)."""
    try:
        lines = Path(path).read_bytes().decode("utf-8", "replace").replace("\r\n", "\n").split("\n")
    except OSError:
        return ()
    found: list[tuple[str, str]] = []
    pending: list[str] = []
    for i, line in enumerate(lines):
        label = _LABEL_LINE.match(line) or _MYST_LABEL_LINE.match(line)
        if label:
            pending.append(next(g for g in label.groups() if g).strip().lower())
            continue
        if not line.strip() or not pending:
            continue
        title = ""
        after = lines[i + 1] if i + 1 < len(lines) else ""
        heading = _ATX.match(line) if path.endswith(".md") else None
        if heading:
            title = heading.group(1)
        elif _ADORNMENT.match(line) and i + 2 < len(lines) and _ADORNMENT.match(lines[i + 2]):
            continue  # an overline: the title is on the next line
        elif _ADORNMENT.match(after) and len(after.strip()) >= len(line.strip()):
            title = line
        if title:
            found.extend((name, " ".join(_TITLE_MARKS.sub("", title).split())) for name in pending)
        pending = []
    return tuple(found)
