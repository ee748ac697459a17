"""MyST Markdown (Sphinx's Markdown, as MyST-Parser and Jupyter Book read it) rewritten to the
Markdown it shows, line by line, before the Markdown parser reads it (`read_myst`)."""

from __future__ import annotations

import re
from collections.abc import Callable, Iterator
from dataclasses import dataclass, field
from pathlib import Path

from .base import code_language_of, read_fragment, select_lines
from .inline import FENCE_LINE, closes_fence, reads_as_code
from .sphinx import (
    ADMONITIONS,
    CODE_DIRECTIVES,
    CONDITION_DIRECTIVES,
    DOCSTRING_DIRECTIVES,
    LABELS,
    MYST_TARGET,
    NAVIGATION_DIRECTIVES,
    PATH_ARGUMENT,
    WORD_ROLES,
    Titles,
    code_language,
    cross_reference,
    html_build_shows,
    resolve_target,
    show_role,
    version_label,
)

#: A directive's opening fence: its indent, marks (backticks or colons), name and argument.
_DIRECTIVE = re.compile(r"([ \t]*)(`{3,}|~{3,}|:{3,})[ \t]*\{([A-Za-z][\w:.+-]*)\}[ \t]*(.*?)[ \t]*")
#: A colon fence closing a directive (``:::``).
_COLON_CLOSE = re.compile(r"[ \t]*(:{3,})[ \t]*")
#: A role: ``{name}`text```.
_ROLE = re.compile(r"\{([A-Za-z][\w:.+-]*)\}(`+)(?!`)(.+?)(?<!`)\2(?!`)")
#: A code span's opening backticks, a role's start, or a reference that takes its target's title,
#: ``[](target)`` (as MyST's inline rules see them, left to right).
_INLINE = re.compile(r"\{[A-Za-z][\w:.+-]*\}`|`+|\[\]\(<?([^()\s<>]+)>?\)")
#: An option line right after a directive's opening: ``:caption: Example``, ``:linenos:``.
_OPTION = re.compile(r"[ \t]*:([\w-]+):(?:[ \t]+(.*?))?[ \t]*")
#: A target line: ``(label)=``.
_TARGET = re.compile(rf"^[ \t]*{MYST_TARGET}[ \t]*$", re.M)
#: A target (``(label)=``), a comment (``% text``) or a block break (``+++``): no text.
_NO_TEXT = re.compile(rf"[ \t]*(?:{MYST_TARGET}|%.*|\+\+\+.*)")
#: Lines that open a Markdown block of few words: a table row, a fence, a directive, a list item.
_MARKDOWN_BLOCK = re.compile(r"[ \t]*(?:\||`{3,}|~{3,}|:{3,}|[-*+][ \t]|\d{1,9}[.)][ \t])")
#: Directives that hold the page's text under a title (their argument) or none: tabs, cards, grids.
_CONTAINERS = frozenset({"admonition", "dropdown", "tab-set", "tab-item", "tabbed", "card", "grid",
                         "grid-item", "grid-item-card", "div", "container", "sidebar", "margin", "topic",
                         "epigraph", "pull-quote", "highlights", "compound", "rubric", "glossary",
                         "figure", "table", "list-table", "csv-table", "math", "line-block",
                         "parsed-literal", "centered", "hlist", "productionlist", "tabs", "tab"})
#: Directives that show nothing of their own (an image has only a path and options).
_NOTHING = frozenset({"image", "iframe", "video", "youtube", "bibliography", "tableofcontents",
                      "contents", "embed", "code-cell-output"})


def uses_myst(text: str) -> bool:
    """Whether ``text`` uses MyST's own syntax: a ``{name}`` directive fence, a ``{role}`` use, a
    target line ``(label)=`` or a reference ``[](target)`` that takes its target's title."""
    if ")=" in text and _TARGET.search(text) or "[](" in text:
        return True
    return "{" in text and (any("}`" in line and (roles(line) != line or _opens_role(line))
                                for line in text.split("\n"))
                            or any(_DIRECTIVE.fullmatch(line) for line in text.split("\n") if "{" in line))


def _closes(marks: str, line: str) -> bool:
    """Whether ``line`` closes a directive opened with ``marks`` (colons, or a code fence's marks)."""
    if marks[0] == ":":
        closing = _COLON_CLOSE.fullmatch(line)
        return closing is not None and len(closing.group(1)) >= len(marks)
    return closes_fence(marks, line)


def _role(match: re.Match[str], titles: Callable[[str, str], str] | None = None) -> str:
    name, text = match.group(1), match.group(3)
    base = name.rsplit(":", 1)[-1].lower()
    if base in ("pep", "rfc") and text.strip().isdigit():
        return f"{base.upper()} {text.strip()}"
    shown = show_role(name, text, titles)
    return shown if base in WORD_ROLES else f"`{shown}`"


def _fence_for(code: list[str]) -> str:
    """A code fence that no line of ``code`` closes: four backticks when it holds three."""
    return "````" if any("```" in line for line in code) else "```"


def _holds_code(body: list[str]) -> bool:
    """Whether an unknown directive's content is code, not Markdown: a terminal session or mostly
    no words (`inline.reads_as_code`, as the reST reader judges one), and none of Markdown's own
    blocks that are mostly no words either (a table's ``|`` rows, a fence, a nested directive, a list)."""
    text = "\n".join(body)
    if not text.strip() or any(_MARKDOWN_BLOCK.match(line) for line in body):
        return False
    return reads_as_code(text)


def _reference(target: str, titles: Callable[[str, str], str] | None) -> str:
    """What ``[](target)`` shows: the title of the section a label (``#label``, ``project:#label``)
    or of the page a path names, else the target's last part in words."""
    target = target.removeprefix("project:")
    label = target.lstrip("#")
    if titles is not None and label:
        found = titles("ref", label) if target.startswith("#") or "/" not in target and "." not in target else ""
        found = found or titles("doc", re.sub(r"\.(md|rst|txt)$", "", target.split("#", 1)[0]))
        if found:
            return found
    return cross_reference(label.rsplit("#", 1)[-1].rsplit(".", 1)[0] if label else target)


def _inline(line: str) -> Iterator[tuple[str, int, int, re.Match[str]]]:
    """The inline marks of ``line`` left to right, as MyST's inline rules see them: ``role`` (a
    whole ``{name}`text```), ``open`` (a role start its line does not close), ``reference``
    (``[](target)``) and ``code`` (a code span, to its closing backticks), each with its start, end
    and match."""
    at = 0
    while (found := _INLINE.search(line, at)) is not None:
        mark = found.group(0)
        if mark.startswith("{"):
            role = _ROLE.match(line, found.start())
            kind, match, at = ("role", role, role.end()) if role is not None else ("open", found, found.end())
        elif mark.startswith("[]("):
            kind, match, at = "reference", found, found.end()
        else:
            close = re.compile(rf"(?<!`){mark}(?!`)").search(line, found.end())
            kind, match, at = "code", found, close.end() if close is not None else found.end()
        yield kind, found.start(), at, match


def _opens_role(line: str) -> bool:
    """Whether ``line`` opens a role its own text does not close (``{ref}`the guide`` going on to
    the next line); a code span is code."""
    return any(kind == "open" for kind, _, _, _ in _inline(line))


def roles(line: str, titles: Callable[[str, str], str] | None = None) -> str:
    """``line`` with its roles as the text they show (``titles``: see `sphinx.show_role`); a code
    span is code (```{x}` `` stays)."""
    if "}`" not in line and "[](" not in line:
        return line
    out: list[str] = []
    at = 0
    for kind, start, end, match in _inline(line):
        if kind == "role":
            out.append(line[at:start] + _role(match, titles))
        elif kind == "reference":  # MyST's reference with the target's own title
            out.append(line[at:start] + _reference(match.group(1), titles))
        else:
            out.append(line[at:end])
        at = end
    return "".join(out) + line[at:]


@dataclass
class _Reader:
    """One document's rewrite: the lines out, each line's source line number, includes read and not,
    and how many directives insert docstrings (`sphinx.DOCSTRING_DIRECTIVES`), which are not read."""

    root: Path
    out: list[str] = field(default_factory=list)
    where: list[int] = field(default_factory=list)
    includes: list[str] = field(default_factory=list)
    unread: list[str] = field(default_factory=list)
    docstrings: int = 0
    titles: dict[Path, Titles] = field(default_factory=dict)

    def _titles(self, here: Path | None) -> Titles | None:
        """Titles of what ``{doc}`` and ``{ref}`` roles in a file of ``here`` name."""
        if here is None:
            return None
        if here not in self.titles:
            self.titles[here] = Titles(here, self.root)
        return self.titles[here]

    def add(self, line: str, at: int) -> None:
        self.out.append(line)
        self.where.append(at)

    def read(self, lines: list[str], at: Callable[[int], int], here: Path | None, stack: tuple[str, ...]) -> None:
        """Rewrite ``lines`` (``at(i)`` is line i's number to cite) into `out`."""
        fence = ""  # an open plain code fence: its lines are code
        open_: list[str] = []  # the marks of the open text directives, innermost last
        i = 0
        while i < len(lines):
            line = lines[i]
            if fence:
                self.add(line, at(i))
                fence = "" if closes_fence(fence, line) else fence
                i += 1
                continue
            if open_ and _closes(open_[-1], line):
                self.add("", at(i))
                open_.pop()
                i += 1
                continue
            opened = _DIRECTIVE.fullmatch(line)
            if opened is not None:
                i = self._directive(lines, i, opened, at, here, stack, open_)
                continue
            plain = FENCE_LINE.match(line)
            if plain is not None:
                fence = plain.group(1)
                self.add(line, at(i))
                i += 1
                continue
            if "}`" in line and _opens_role(line) and i + 1 < len(lines) and lines[i + 1].strip() \
                    and not FENCE_LINE.match(lines[i + 1]):  # a role whose text runs on to the next line
                self.add(roles(line.rstrip() + " " + lines[i + 1].strip(), self._titles(here)), at(i))
                self.add("", at(i + 1))
                i += 2
                continue
            self.add("" if _NO_TEXT.fullmatch(line) else roles(line, self._titles(here)), at(i))
            i += 1

    def _directive(self, lines: list[str], i: int, opened: re.Match[str], at: Callable[[int], int],
                   here: Path | None, stack: tuple[str, ...], open_: list[str]) -> int:
        """Rewrite the directive opening at line ``i``; the index of the next line to read."""
        indent, marks, name, argument = opened.groups()
        base = name.rsplit(":", 1)[-1].lower()
        if base in DOCSTRING_DIRECTIVES:
            self.docstrings += 1
        options: dict[str, str] = {}
        start = i + 1  # the first line of the body, after the options
        if start < len(lines) and lines[start].strip() == "---":  # a YAML block of options
            close = next((j for j in range(start + 1, len(lines)) if lines[j].strip() == "---"), None)
            if close is not None:
                start = close + 1
        while start < len(lines) and (option := _OPTION.fullmatch(lines[start])) is not None:
            options[option.group(1)] = (option.group(2) or "").strip().strip("'\"")
            start += 1
        if start > i + 1 and start < len(lines) and not lines[start].strip():
            start += 1  # the blank line that parts options from content
        for j in range(i + 1, start - 1):
            self.add("", at(j))
        head = at(i)  # what the opening becomes cites the directive's line
        hidden = base == "only" and not html_build_shows(argument)  # content for another build
        if base in NAVIGATION_DIRECTIVES or base in _NOTHING or base == "eval-rst" or base in CODE_DIRECTIVES or hidden:
            stop = next((j for j in range(start, len(lines)) if _closes(marks, lines[j])), len(lines))
            body = lines[start:stop]
            if base in CODE_DIRECTIVES:
                self._code_block(lines, start, stop, indent + ("```" if marks[0] == ":" else marks),
                                 code_language(argument, base), head, at)
            else:
                self.add("", head)
                if base in ("include", "literalinclude"):
                    self._include(argument, options, at(i), here, stack, literal=base == "literalinclude")
                elif base == "eval-rst":
                    self._rst(body, at(i))
                self.add("", at(min(stop, len(lines) - 1)))
            return stop + 1
        signature = False  # a line of its own above the text, not its lead
        titled = True  # the label leads the text: a colon ends it
        if base in LABELS and base.startswith(("version", "deprecated")) and argument:
            label = version_label(base, argument)
        elif base in LABELS or base in ADMONITIONS:  # an argument here is the text's first line
            label = f"{LABELS.get(base, base.capitalize())}:" + (f" {argument}" if argument else "")
            titled = False
        elif base in CONDITION_DIRECTIVES or PATH_ARGUMENT.fullmatch(argument):
            label = ""  # a build condition or a file it points at is no text
        else:  # a tab's or card's title ("Python:"), or a description's signature
            label, signature = argument, base not in _CONTAINERS
            stop = next((j for j in range(start, len(lines)) if _closes(marks, lines[j])), len(lines))
            if signature and ":" not in name and not base.startswith("auto") \
                    and not any(line.strip() for line in lines[start:stop]):
                for j in range(start - 1, min(stop + 1, len(lines))):  # an extension's directive with
                    self.add("", at(j))  # nothing to show but its argument ("{towncrier-draft-entries} main")
                return stop + 1
            if signature and _holds_code(lines[start:stop]):  # ```{click:example}: Python, shown as written
                if argument:
                    self.add(indent + roles(argument, self._titles(here)), head)
                    self.add("", head)
                self._code_block(lines, start, stop, indent + _fence_for(lines[start:stop]), "", head, at)
                return stop + 1
        label = roles(label, self._titles(here))
        if label and titled and not signature and not label.endswith((":", ".", "!", "?")):
            label += ":"  # "New in version 2.1: text", as the reST reader words it
        self.add(indent + label if label else "", head)
        if signature and label:
            self.add("", head)
        open_.append(marks)
        return start

    def _code_block(self, lines: list[str], start: int, stop: int, fence: str, language: str, head: int,
                    at: Callable[[int], int]) -> None:
        """``lines[start:stop]`` as a fenced code block: ``fence`` (with its indent) and ``language``
        open it at ``head``, each line cites its own, the closing fence the directive's last line."""
        self.add(fence + language, head)
        for j in range(start, stop):
            self.add(lines[j], at(j))
        self.add(fence, at(min(stop, len(lines) - 1)))

    def _include(self, argument: str, options: dict[str, str], at: int, here: Path | None,
                 stack: tuple[str, ...], literal: bool = False) -> None:
        """Read the file an ``{include}`` (``literal``: a ``{literalinclude}``, as code) names."""
        if here is None:
            self.unread.append(f"{argument} (no file to resolve it from)")
            return
        target = resolve_target(argument, here, self.root)
        real, lines, why = read_fragment(target, self.root, stack)
        if lines is None:
            self.unread.append(f"{argument} ({why})")
            return
        lines = select_lines(lines, options)
        if real.as_posix() not in self.includes:
            self.includes.append(real.as_posix())
        if literal:
            fence = _fence_for(lines)
            for line in [fence + code_language_of(real, options.get("language", "")), *lines, fence]:
                self.add(line, at)
        elif real.suffix.lower() in (".rst", ".rest", ".txt") and not uses_myst("\n".join(lines)):
            self._rst(lines, at)
        else:
            self.read(lines, lambda _: at, real.parent, (*stack, real.as_posix()))

    def _rst(self, lines: list[str], at: int) -> None:
        """reST text (``{eval-rst}``, an included ``.rst``) rendered by the reST reader, citing ``at``."""
        from .rst import parse_rst  # deferred: docutils is heavy

        rendered = parse_rst("\n".join(lines))
        self.docstrings += rendered.docstrings
        for section in rendered.sections:
            for block in section.blocks:
                for text in block.text.split("\n"):
                    self.add(text, at)
                self.add("", at)


def read_myst(lines: list[str], where: list[int] | None, path: Path | None,
              root: Path | None) -> tuple[list[str], list[int], list[str], list[str], int]:
    """``lines`` of a MyST document as the Markdown they show.

    * A role, ``{func}`attrs.define``` or ``{doc}`Overview <overview>```, reads as Sphinx shows it
      (`sphinx.show_role`): code roles as code spans, cross-references and terms as words, a
      ``{doc}`` as the title of the page it names.
    * A directive fenced with backticks or colons (``` ```{note} ```, ``:::{warning}``) reads as what
      it stands for: an admonition or version note as its label and its text (``Note: …``, as the
      reST reader words it), a code directive as a fenced block naming its language, ``{include}``
      as the file's lines and ``{literalinclude}`` as its code (inside the ingested folder only),
      ``{eval-rst}`` as its reST rendered, navigation (``{toctree}``) as nothing, any other directive
      as its argument and its content; its option lines (``:caption: …``, a ``---`` block) are no text.
    * Targets (``(label)=``), comments (``% …``) and block breaks (``+++``) are no text.

    Only a document that uses MyST's syntax is rewritten (`uses_myst`); each line out keeps the
    number of the line it comes from; included lines cite the directive's line.

    ``where`` gives each line's number in the file (None: line i is number i + 1); ``path`` is the
    file (``{include}`` resolves against its folder, a leading ``/`` against ``root``; without it no
    include is read) and ``root`` the folder includes may read from (default: the file's folder).
    Returns the lines, their numbers, the files read (resolved), the includes not read, each
    ``argument (why)``, and how many directives insert docstrings, which are not read.
    """
    base = (root or (path.parent if path is not None else Path("."))).resolve()
    reader = _Reader(base)
    numbers = where if where is not None else list(range(1, len(lines) + 1))
    main = (path.resolve().as_posix(),) if path is not None else ()
    reader.read(lines, numbers.__getitem__, path.parent if path is not None else None, main)
    return reader.out, reader.where, reader.includes, reader.unread, reader.docstrings
