"""reStructuredText through docutils, rendered to clean text; includes read only inside the ingested folder."""

from __future__ import annotations

import io
import re
from functools import cache
from pathlib import Path
from typing import Any

from .base import (
    MAX_INCLUDE_BYTES,
    Block,
    Document,
    Section,
    bold_heading,
    code_language_of,
    parser_version,
    read_fragment,
    refresh_of,
    select_lines,
)
from .inline import CLOSING, OPENING, code_span, reads_as_code, table_text
from .sphinx import (
    CODE_DIRECTIVES,
    CONDITION_DIRECTIVES,
    DOCSTRING_DIRECTIVES,
    GENERATED_PAGE_ITEM,
    LABELS,
    NAVIGATION_DIRECTIVES,
    PATH_ARGUMENT,
    WORD_ROLES,
    Titles,
    code_language,
    html_build_shows,
    resolve_target,
    show_role,
    source_folder,
    version_label,
)

#: A ``.. meta::`` field that makes the built page refresh (``:http-equiv=refresh: 3; url=../x/``).
_META_REFRESH = re.compile(r"^\.\.[ \t]+meta::[ \t]*\n(?:[ \t]*\n|[ \t]+:[^\n]*\n)*?"
                           r"[ \t]+:http-equiv=refresh:[ \t]*([^\n]+)$", re.M | re.I)
#: The role's name leading interpreted text: ``:py:func:`` of ``:py:func:`parse```.
_ROLE_NAME = re.compile(r":([\w:.+-]+):`")
#: A ``class`` argument that is a description's signature, not a style class name.
_SIGNATURE = re.compile(r"[(.A-Z]")
#: What docutils reports when a block's indentation fits no reST structure (a line indented right
#: under a paragraph, a block that ends without a blank line): in a directive's content, the sign of
#: code, whose lines indent as its own syntax says (a function's body), rather than reST.
_INDENT_WARNINGS = ("Unexpected indentation.", "unexpected unindent.")
#: What reST makes of text with no markup: paragraphs, and the definition lists and quotes its
#: indentation alone makes. Directive content read into anything else (inline markup, lists, nested
#: directives) is reST its author wrote.
_PLAIN_NODES = frozenset({"paragraph", "definition_list", "definition_list_item", "term", "classifier",
                          "definition", "block_quote", "system_message", "problematic"})
#: The class a kept directive's lone argument paragraph carries (`parse_rst` makes it a label).
_LABEL_CLASS = "kt-label"
_ROLE_USE = re.compile(r"(?<![\w`]):((?:[A-Za-z][\w.+-]*:)*[A-Za-z][\w.+-]*):`")
_DIRECTIVE_USE = re.compile(r"^[ \t]*\.\.[ \t]+([A-Za-z][\w.+:-]*?)::", re.M)
_SKIP = ("comment", "substitution_definition", "target", "system_message", "pending", "raw",
         "transition", "meta", "decoration", "problematic")


class _AnyOptions(dict):
    """An option spec that accepts every option (unknown directives' options are not content)."""

    def __missing__(self, key: str) -> Any:
        from docutils.parsers.rst import directives  # deferred: heavy

        return directives.unchanged

    def __bool__(self) -> bool:  # docutils parses a directive's options only when its spec is truthy
        return True


def _role_text(name: str, text: str, scope: _Includes | None = None) -> str:
    """What a role shows (`sphinx.show_role`), docutils' backslash escapes undone first; with the
    document's ``scope``, a ``:doc:`` shows the title of the document it names."""
    from docutils.utils import unescape  # deferred: heavy

    return show_role(name, unescape(text), scope.titles if scope is not None else None)


def _generic_role(name: str, rawtext: str, text: str, lineno: int, inliner: Any,
                  options: Any = None, content: Any = None) -> tuple[list[Any], list[Any]]:
    from docutils import nodes  # deferred: heavy

    scope = getattr(inliner.document.settings, "kt_includes", None)
    return [nodes.literal(rawtext, _role_text(name, text, scope))], []


@cache
def _directive_class(name: str) -> Any:
    from docutils import nodes  # deferred: heavy
    from docutils.parsers.rst import Directive  # deferred: heavy

    class KeptDirective(Directive):
        """An unknown directive kept as text: its label and arguments, then its content."""

        has_content = True
        optional_arguments = 1
        final_argument_whitespace = True
        option_spec = _AnyOptions()

        def run(self) -> list[Any]:
            inserted = getattr(self.state.document.settings, "kt_docstrings", None)
            if inserted is not None and name.rsplit(":", 1)[-1] in DOCSTRING_DIRECTIVES:
                inserted.append(name)  # text Sphinx takes from imported code: not read (`Document.docstrings`)
            # ``class`` with content or a signature (``CharField(max_length=None)``, ``db.Model``) is
            # Sphinx's class description; docutils' own sets a lower-case style class on what follows
            described = name == "class" and (self.content or _SIGNATURE.search(" ".join(self.arguments)))
            if name in NAVIGATION_DIRECTIVES and not described:
                marker = nodes.comment()
                _place(self, marker)
                return [marker]
            if name == "only" and not html_build_shows(" ".join(self.arguments)):
                marker = nodes.comment()  # content for another build (``.. only:: latex``)
                _place(self, marker)
                return [marker]
            label = LABELS.get(name.rsplit(":", 1)[-1], "")
            if not label and name not in CONDITION_DIRECTIVES:
                _take_content_under_marker(self)
            box = nodes.container(classes=["kt-directive"])
            _place(self, box)
            argument = " ".join(self.arguments).strip()
            base = name.rsplit(":", 1)[-1]
            code = base in CODE_DIRECTIVES
            if name in CONDITION_DIRECTIVES or PATH_ARGUMENT.match(argument):
                argument = ""  # a build condition ("html") or a file it points at is no text
            if label and name.startswith(("version", "deprecated")) and argument:
                lead = version_label(base, argument)
            else:
                lead = f"{label} {argument}".strip() if label else argument
            if code:
                block = nodes.literal_block("\n".join(self.content), "\n".join(self.content))
                if code_language(argument, base):  # ``.. code-block:: python``: the fence says so
                    block["language"] = code_language(argument, base)
                _place(self, block)
                return [block]
            if lead:
                text = lead + (":" if label and self.content and not lead.endswith((":", ".", "!", "?", ";")) else "")
                inline, _ = self.state.inline_text(text, self.lineno)
                para = nodes.paragraph(text, "", *inline)
                _place(self, para)
                if not self.content:  # a signature or a name alone opens what follows it: a label
                    para["classes"].append(_LABEL_CLASS)
                box += para
            if self.content:
                head = list(box.children)
                self.state.nested_parse(self.content, self.content_offset, box)
                source = "\n".join(self.content)
                prose = bool(label) or name in CONDITION_DIRECTIVES  # a note's or a page's own text
                if not prose and _reads_as_code(source, box.children[len(head):]):
                    # ``.. click:example::`` and ``.. click:run::`` hold Python: shown as written
                    block = nodes.literal_block(source, source)
                    _place(self, block)
                    if not head:
                        return [block]
                    box.children = []
                    box.extend([*head, block])
            if name in CONDITION_DIRECTIVES:  # the page's own text: its tables, lists and code as such
                return list(box.children)
            return [box]

    return KeptDirective


def _take_content_under_marker(directive: Any) -> None:
    """Read the lines right under a directive's empty first line as its content, not its argument.

    docutils gives a directive that takes an argument the lines up to the first blank one as that
    argument, wherever they start; an unknown directive's argument is on its own line (``.. py:function::
    name(args)``), so lines under an empty ``.. click:example::`` are its content, as docutils reads
    them for a directive that takes none. They keep their own indentation (code's is its syntax).
    """
    marker = re.match(rf"\.\.\s+{re.escape(directive.name)} ?::(.*)", directive.block_text.lstrip())
    if not directive.arguments or directive.options or marker is None or marker.group(1).strip():
        return
    machine = directive.state_machine
    start = directive.lineno - machine.input_offset  # the line under the marker, in the machine's lines
    end = (directive.content_offset - machine.input_offset + len(directive.content) if directive.content
           else start + len(directive.arguments[0].split("\n")))
    lines = machine.input_lines[start:end]
    indent = min(len(line) - len(line.lstrip()) for line in lines if line.strip())
    lines.trim_left(indent)
    directive.content, directive.content_offset, directive.arguments = lines, directive.lineno, []


def _reads_as_code(source: str, parsed: list[Any]) -> bool:
    """Whether an unknown directive's content (``source``, ``parsed`` as reST) is code, not reST.

    It is when reading it as reST makes structure the source does not mean — docutils warns that
    its indentation fits no reST block, or a definition list's term leaves a bracket open (the
    indented line below continues a call: ``invoke(cmd, env={...},``) — or when the reading finds
    no reST markup at all and it is a terminal session or less than `inline.CODE_WORD_SHARE` of its
    text is words (``invoke(cmd, args=['-v'])``): `inline.reads_as_code`.
    """
    plain = True
    stack = list(reversed(parsed))
    while stack:
        node = stack.pop()
        kind = getattr(node, "tagname", "#text")
        if kind == "system_message":
            message = node.children[0].astext() if node.children else ""
            if any(warning in message for warning in _INDENT_WARNINGS):
                return True
            continue  # its children quote the source
        if kind == "term" and _leaves_open(node.rawsource):
            return True
        if kind != "#text" and kind not in _PLAIN_NODES:
            plain = False
        stack.extend(reversed(getattr(node, "children", [])))
    return plain and reads_as_code(source)


def _leaves_open(line: str) -> bool:
    """Whether ``line`` opens more brackets than it closes, or ends as a line that continues does."""
    depth = 0
    for char in line:
        depth += (char in OPENING) - (char in CLOSING)
    return depth > 0 or line.rstrip().endswith((",", "\\"))


#: ````code```` written inside bold or italic text, which reST leaves as it is.
_NESTED_LITERAL = re.compile(r"``(\S(?:.*?\S)?)``")
#: Interpreted text with a role, as written (``:rfc:`RFC 7231 <7231>```).
_ROLE_TEXT = re.compile(r":[A-Za-z][\w.+:-]*:`(.+)`", re.S)
#: A hyperlink reference (```text`_``, ```text`__``, ``word_``) docutils could not resolve.
_REFERENCE = re.compile(r"`([^`<]+?)\s*(?:<[^`>]*>)?`__?|([\w.-]+)__?")
#: The comment docutils leaves where an included text ends.
_INCLUDE_END = "end of inclusion from "


class _Includes:
    """What the ``include`` directives of one document may read, and what they read.

    ``root`` is the folder being ingested: an include resolves against the including file's folder (a
    leading ``/`` against ``root``, as Sphinx reads it) and is read only when it lands inside ``root``
    or docutils' own standard includes (``<isonum.txt>``). ``lines`` maps each included file to the
    line of the top-level directive that brought it in, so its blocks cite the including document.
    """

    def __init__(self, root: Path, main: str) -> None:
        self.root = root.resolve()
        self.main = main
        self.lines: dict[str, int] = {}
        self.files: list[str] = []
        self.unread: list[str] = []
        self.titles = Titles(Path(main).parent, self.root)  # what :doc: and :ref: targets are titled


@cache
def _include_directive() -> Any:
    from docutils import nodes  # deferred: heavy
    from docutils.parsers.rst import DirectiveError, directives  # deferred: heavy
    from docutils.parsers.rst.directives.misc import Include, adapt_path  # deferred: heavy

    class ReadInclude(Include):
        """docutils' ``include``, confined to the ingested folder (`_Includes`); anything else is skipped."""

        def run(self) -> list[Any]:
            marker = nodes.comment()
            _place(self, marker)
            settings = self.state.document.settings
            scope: _Includes | None = getattr(settings, "kt_includes", None)
            if scope is None or not self.arguments:
                return [marker]
            argument = directives.path(self.arguments[0])
            if argument.startswith("<") and argument.endswith(">"):
                allowed = Path(self.standard_include_path).resolve()
                target = allowed / argument[1:-1]
            else:
                allowed = scope.root
                current = Path(self.state.document.current_source or scope.main)
                target = Path(adapt_path(argument, str(current), str(source_folder(current.parent, scope.root))))
            try:
                real = target.resolve()
                inside = real.is_relative_to(allowed)
                readable = inside and real.is_file() and real.stat().st_size <= MAX_INCLUDE_BYTES
            except (OSError, RuntimeError):  # a link loop, a permission error
                inside = readable = False
            if not readable:
                why = "outside the ingested folder" if not inside else "not found" if not real.exists() else "not a readable text file"
                scope.unread.append(f"{argument} ({why})")
                return [marker]
            if real.as_posix() == scope.main:  # docutils' own loop check knows the page by another spelling
                scope.unread.append(f"{argument} (circular inclusion: the page includes itself)")
                return [marker]
            current = self.state.document.current_source
            where = (self.state_machine.get_source_and_line(self.lineno)[1] if current == scope.main
                     else scope.lines.get(current, 1)) or 1
            scope.lines.setdefault(real.as_posix(), where)
            if allowed == scope.root and real.as_posix() not in scope.files:
                scope.files.append(real.as_posix())
            self.settings = settings
            self.tab_width = self.options.get("tab-width", settings.tab_width)
            self.clip_options = (self.options.get("start-line"), self.options.get("end-line"),
                                 self.options.get("start-after"), self.options.get("end-before"))
            self.options["source"] = real.as_posix()
            self.options.setdefault("encoding", "utf-8-sig")
            try:
                text = self.read_file(real)
                if "literal" in self.options:  # the file's code: its fence names the language Pygments reads
                    found = list(self.as_literal_block(text))
                    language = code_language_of(real)
                    for block in found:
                        if language and isinstance(block, nodes.literal_block):
                            block["language"] = language
                    return found
                if "code" in self.options:
                    return list(self.as_code_block(text))
                if "parser" in self.options:  # another markup language: not this parser's to read
                    scope.unread.append(f"{argument} (written for another parser)")
                    return [marker]
                _prepare(text)  # the fragment may use roles and directives the page does not
                self.insert_into_input_lines(text)
            except DirectiveError as exc:  # circular inclusion, bad encoding, a clip text not found
                scope.unread.append(f"{argument} ({' '.join(str(exc.msg).split())})")
                return [marker]
            return []

    return ReadInclude


@cache
def _literal_include_directive() -> Any:
    from docutils import nodes  # deferred: heavy
    from docutils.parsers.rst import Directive  # deferred: heavy

    class ReadLiteralInclude(Directive):
        """Sphinx's ``literalinclude``: the file's lines (``lines``, ``start-after`` … as asked) as a
        code block naming its language, read only inside the ingested folder (`_Includes`)."""

        required_arguments = 1
        final_argument_whitespace = True
        option_spec = _AnyOptions()

        def run(self) -> list[Any]:
            marker = nodes.comment()
            _place(self, marker)
            scope: _Includes | None = getattr(self.state.document.settings, "kt_includes", None)
            if scope is None:
                return [marker]
            argument = self.arguments[0].strip()
            current = Path(self.state.document.current_source or scope.main)
            target = resolve_target(argument, current.parent, scope.root)
            real, lines, why = read_fragment(target, scope.root, (scope.main,))
            if lines is None:
                scope.unread.append(f"{argument} ({why})")
                return [marker]
            options = {k: str(v) for k, v in self.options.items()}
            text = "\n".join(select_lines(lines, options)).strip("\n")
            block = nodes.literal_block(text, text)
            language = code_language_of(real, options.get("language", ""))
            if language:
                block["language"] = language
            if real.as_posix() not in scope.files:
                scope.files.append(real.as_posix())
            _place(self, block)
            return [block]

    return ReadLiteralInclude


def _place(directive: Any, node: Any) -> None:
    """Give ``node`` the file and line docutils maps the directive to (its lineno counts included lines)."""
    node.source, node.line = directive.state_machine.get_source_and_line(directive.lineno)


def _prepare(text: str) -> None:
    """Register every role and directive the text uses that docutils does not know."""
    from docutils.parsers.rst import directives, roles  # deferred: heavy
    from docutils.parsers.rst.languages import en  # deferred: heavy

    for name in set(_ROLE_USE.findall(text)):
        known = name in roles._roles or name in roles._role_registry or en.roles.get(name)  # noqa: SLF001
        if not known:
            roles.register_local_role(name, _generic_role)
    for name in set(_DIRECTIVE_USE.findall(text)):
        if name == "include":
            directives.register_directive(name, _include_directive())
            continue
        if name == "literalinclude":
            directives.register_directive(name, _literal_include_directive())
            continue
        if name in ("code-block", "sourcecode", "contents", "sectnum", "raw", "header", "footer", "meta", "title", "class",
                    "role", "target-notes"):
            directives.register_directive(name, _directive_class(name))
            continue
        known = name in directives._directives or name in directives._directive_registry  # noqa: SLF001
        if not known and not en.directives.get(name):
            directives.register_directive(name, _directive_class(name))


def _doctree(text: str, name: str, includes: _Includes | None = None, docstrings: list[str] | None = None) -> Any:
    from docutils.core import publish_doctree  # deferred: heavy

    _prepare(text)
    overrides = {
        "report_level": 5, "halt_level": 5, "warning_stream": io.StringIO(), "file_insertion_enabled": False,
        "raw_enabled": False, "_disable_config": True, "doctitle_xform": False, "docinfo_xform": False,
        "sectsubtitle_xform": False, "syntax_highlight": "none", "input_encoding": "unicode",
        "line_length_limit": 1_000_000, "kt_includes": includes, "kt_docstrings": docstrings,
    }
    source = includes.main if includes is not None else name
    return publish_doctree(text, source_path=source or None, settings_overrides=overrides)


def _line(node: Any, included: dict[str, int] | None = None) -> int | None:
    """The source line of ``node``; text an include brought in cites the including directive's line."""
    for item in node.findall(include_self=True):
        line = getattr(item, "line", None)
        if line:
            source = getattr(item, "source", None)
            if included and source in included:
                return included[source]
            return int(line)
    return None


def _indent(text: str, prefix: str) -> str:
    if not text:  # an item with nothing in it ("7." alone) keeps its marker: no text is lost
        return prefix.rstrip()
    pad = " " * len(prefix)
    return "\n".join((prefix if i == 0 else pad) + line if line else "" for i, line in enumerate(text.split("\n")))


def render(node: Any) -> str:
    """Clean text of one body element."""
    from docutils import nodes  # deferred: heavy

    kind = node.tagname
    if kind in _SKIP or (kind == "topic" and "contents" in node.get("classes", [])):
        return ""
    if isinstance(node, nodes.paragraph) or kind in ("rubric", "caption", "attribution", "term", "line"):
        return _text(node).strip()
    if kind in ("literal_block", "doctest_block", "math_block"):
        language = node.get("language", "pycon" if kind == "doctest_block" else "")  # ">>>" lines: a Python session
        return "```" + language + "\n" + node.astext().rstrip("\n") + "\n```"
    if kind == "bullet_list":
        return "\n".join(_indent(_children(item), "- ") for item in node.children)
    if kind == "enumerated_list":
        start = int(node.get("start", 1))
        return "\n".join(_indent(_children(item), f"{start + i}. ") for i, item in enumerate(node.children))
    if kind == "definition_list":
        out = []
        for item in node.children:
            term = " ".join(_text(c) for c in item.children if c.tagname in ("term", "classifier"))
            body = "\n".join(_children(c) for c in item.children if c.tagname == "definition")
            term = term.rstrip(":")  # a term written with its colon ("timezone:") keeps one
            out.append(f"{term}: {body}" if "\n" not in body else f"{term}:\n{_indent(body, '  ')}")
        return "\n".join(out)
    if kind in ("field_list", "docinfo"):
        out = []
        for item in node.children:
            name = _text(item.children[0]) if item.children else ""
            body = _children(item.children[1]) if len(item.children) > 1 else ""
            out.append(f"{name}: {body}".strip())
        return "\n".join(out)
    if kind == "table":
        return _table(node)
    if kind == "line_block":
        return "\n".join(render(c) for c in node.children)
    if kind == "title":
        return _text(node).strip()
    if kind == "admonition" or isinstance(node, nodes.Admonition):
        titles = [c for c in node.children if c.tagname == "title"]
        label = _text(titles[0]) if titles else kind.replace("_", " ").capitalize()
        body = "\n\n".join(filter(None, (render(c) for c in node.children if c.tagname != "title")))
        if not body:
            return label
        return f"{label} {body}" if label.endswith((":", ".", "!", "?")) else f"{label}: {body}"
    if kind == "image":
        return node.get("alt", "")
    if kind in ("footnote", "citation"):
        label = next((c.astext() for c in node.children if c.tagname == "label"), "")
        body = "\n".join(render(c) for c in node.children if c.tagname != "label")
        return f"[{label}] {body}".strip()
    if isinstance(node, nodes.Element) and node.children:
        return _children(node)
    return node.astext().strip() if isinstance(node, nodes.Text) else ""


def _shows_code(rawsource: str) -> bool:
    """Whether interpreted text (``:func:`parse```, ``:code:`x```) is a role that shows code."""
    role = _ROLE_NAME.match(rawsource)
    return role is not None and role.group(1).rsplit(":", 1)[-1].lower() not in WORD_ROLES


def _text(node: Any) -> str:
    """The text of an element of inline content, each inline literal (````x````) a Markdown code span
    (```x```), as Markdown sources show theirs; roles show their text (`show_role`), as a code span
    when the role shows code (not one of `WORD_ROLES`)."""
    if node.tagname == "#text":
        return str(node.astext())
    if node.tagname == "literal" and (node.rawsource.startswith("``") or _shows_code(node.rawsource)):
        return code_span(node.astext())
    return "".join(_text(child) for child in node.children)


def _children(node: Any) -> str:
    return "\n\n".join(part for part in (render(c) for c in node.children) if part.strip())


def _table(node: Any) -> str:
    rows: list[list[str]] = []
    header = False
    for part in node.findall():
        if part.tagname == "thead":
            header = True
        if part.tagname == "row":
            rows.append([" ".join(_children(entry).split()) for entry in part.children])
    return table_text(rows, header=header)


def parse_rst(text: str, *, name: str = "", path: Path | None = None, root: Path | None = None) -> Document:
    """Sections of a reStructuredText document.

    docutils is the real parser, so titles of any adornment (overlines too), roles, directives
    and substitutions mean what they mean in the format.

    The doctree is rendered to clean text: roles become their text (``:func:`parse``` -> ``parse``,
    ``:ref:`Refunds <refunds>``` -> ``Refunds``, ``~pkg.mod.f`` -> ``f`` as Sphinx shows it), inline
    literals are Markdown code spans (````x```` -> ```x```, as Markdown sources show theirs), other
    inline markup marks vanish, lists keep ``- `` items, tables become pipe rows, literal blocks stay
    whole and fenced. Directives docutils does not know (Sphinx's and extensions') are kept as text —
    ``.. note::`` reads ``Note: …``, ``.. versionadded:: 2.1`` reads ``New in version 2.1: …`` —
    except the ones that only build navigation or indexes (`NAVIGATION_DIRECTIVES`), which are
    dropped with comments, substitution definitions, link targets and editor modelines. An unknown
    directive's content that is code rather than reST (``.. click:example::``, see `_reads_as_code`)
    is a literal block, exactly as written.

    ``.. include::`` reads the file into the page as docutils and Sphinx do — a fragment shared by
    several pages (``.. include:: shared-note.txt``) is part of each — when ``path`` (this file) is
    given and the included file lies inside ``root`` (default: this file's folder); its text cites
    the directive's line. `Document.includes` lists the files read that way, `Document.unread` the
    includes that were not (outside ``root``, missing, circular). `Document.docstrings` counts the
    autodoc directives (`DOCSTRING_DIRECTIVES`): their signatures are read, the docstrings they
    insert are not (that takes importing the code).

    Safety: ``raw`` and every other file insertion are disabled, an include never reads outside
    ``root`` (nor more than `MAX_INCLUDE_BYTES`), and docutils reports nothing to stderr: a
    malformed construct is kept as the text it is.
    """
    from docutils import nodes  # deferred: heavy

    source = text.replace("\r\n", "\n").replace("\r", "\n")
    lines = source.split("\n")
    moved = _META_REFRESH.search(source)
    if moved is not None and (target := refresh_of(moved.group(1))[1]):
        # a source that sends its page elsewhere is a moved page's stub, whatever the delay: a
        # documentation source is never a page that reloads itself to show live data
        return Document(format="rst", unit="line", sections=(), parser=parser_version("rst"), redirect=target)
    scope = _Includes(root or path.parent, path.resolve().as_posix()) if path is not None else None
    docstrings: list[str] = []  # the directives that insert docstrings (`sphinx.DOCSTRING_DIRECTIVES`)
    tree = _doctree(source, name, scope, docstrings)
    for mark in list(tree.findall(lambda n: isinstance(n, (nodes.strong, nodes.emphasis)) and "``" in n.astext())):
        # reST does not nest inline markup: ``code`` inside **bold** stays literal; it reads as code
        # there too (a code span, as `_text` writes an inline literal; the text is no literal node)
        mark.children = [nodes.Text(_NESTED_LITERAL.sub(lambda m: code_span(m.group(1)), mark.astext()))]
    for bad in list(tree.findall(nodes.problematic)):  # a link whose target is missing reads as its text
        reference = _REFERENCE.fullmatch(bad.astext())
        role = _ROLE_TEXT.fullmatch(bad.astext())
        if reference:
            bad.parent.replace(bad, nodes.Text(reference.group(1) or reference.group(2)))
        elif role:  # a role docutils knows, used in a form it does not (``:rfc:`RFC 7231 <7231#s6>```)
            bad.parent.replace(bad, nodes.Text(_role_text("", role.group(1))))
    included = scope.lines if scope is not None else None
    raw: list[tuple[tuple[str, ...], str, int, str]] = []  # (titles, text, start line, kind)
    bounds: list[int] = []  # start lines of every top-level element, kept or not
    dropped = 0

    own_title = ""  # the document's own, from a ``:title:`` field
    navigation: set[tuple[str, ...]] = set()  # trails under which a toctree or index links were dropped

    def walk(parent: Any, titles: tuple[str, ...]) -> None:
        nonlocal dropped, own_title
        here = titles  # under a bold label that reads as a heading (`bold_heading`), a level below
        base = titles  # what such labels go under: a label right under another is a level below it
        for at, child in enumerate(parent.children):
            start = _line(child, included)
            if isinstance(child, nodes.section):
                title = next((c for c in child.children if c.tagname == "title"), None)
                heading = title.astext().strip() if title is not None else ""  # the title path's: words
                trail = (*titles, heading) if heading else titles
                line = _line(title, included) if title is not None else start
                if line:
                    bounds.append(_title_start(lines, line))
                    shown = "#" * min(len(trail), 6) + " " + _text(title).strip()  # its code as code spans
                    raw.append((trail, shown, _title_start(lines, line), "heading"))
                walk(child, trail)
                continue
            if child.tagname == "title" or (child.tagname == "comment" and child.astext().startswith(_INCLUDE_END)):
                continue
            if start:
                bounds.append(start)
            if child.tagname in ("field_list", "docinfo") and parent is tree and not raw:
                dropped += 1  # a field list before anything else is file-wide metadata (Sphinx's ``:orphan:``)
                fields = {f.children[0].astext().strip().lower(): f.children[1].astext().strip()
                          for f in child.findall(nodes.field) if len(f.children) == 2}
                own_title = own_title or " ".join(fields.get("title", "").split())  # Pelican's and many sites'
                continue
            body = render(child)
            generated = child.tagname == "bullet_list" and start and _links_generated_pages(
                lines, start, len(child.children))
            if not body.strip() or start is None or generated:
                dropped += 1
                if generated or start and start <= len(lines) and _TOCTREE.match(lines[start - 1]):
                    navigation.add(here)
                continue
            kind = {"bullet_list": "list", "enumerated_list": "list", "table": "table",
                    "literal_block": "code", "doctest_block": "code", "block_quote": "quote"}.get(child.tagname, "text")
            if isinstance(child, nodes.paragraph) and _all_bold(child) or _is_label_box(child):
                kind = "label"
                after = parent.children[at + 1] if at + 1 < len(parent.children) else None
                heading = bold_heading(child.astext()) if isinstance(child, nodes.paragraph) else None
                if heading and after is not None and not isinstance(after, nodes.section):
                    if raw and raw[-1][3] == "heading" and raw[-1][0] == here and here != titles:
                        base = here  # "**To set a policy**" right above "**Example 1: …**"
                    here = (*base, heading)
                    raw.append((here, "#" * min(len(here), 6) + " " + heading, start, "heading"))
                    continue
            elif isinstance(child, nodes.paragraph) and child.rawsource.rstrip().endswith("::"):
                kind = "lead"  # it introduces the literal block after it ("Output ::" reads "Output")
            raw.append((here, body, start, kind))

    walk(tree, ())
    # a name marked for the index just before the section that shows it (``.. setting:: DEBUG`` over
    # the title "DEBUG") would say it twice
    raw = [entry for i, entry in enumerate(raw) if not (
        entry[3] == "label" and i + 1 < len(raw) and raw[i + 1][3] == "heading"
        and entry[1].strip() in (raw[i + 1][0][-1:] + (raw[i + 1][1].lstrip("#").strip(),)))]
    # a section left with nothing under it once its navigation went (a toctree, links to the generated
    # index and search pages: `navigation`) was navigation: its heading goes too, rather than joining a neighbour's
    # chunk (an empty section with nothing dropped keeps its heading, as context for the next)
    empty = {i for i, entry in enumerate(raw) if entry[3] == "heading" and entry[0] in navigation and not (
        i + 1 < len(raw) and raw[i + 1][0][:len(entry[0])] == entry[0])}
    dropped += len(empty)
    raw = [entry for i, entry in enumerate(raw) if i not in empty]
    bounds = sorted(set(bounds))
    sections: list[Section] = []
    current: tuple[str, ...] | None = None
    blocks: list[Block] = []
    floor = 1
    for titles, body, start, kind in raw:
        start = max(start, floor)
        later = [b for b in bounds if b > start]
        end = _last_text_line(lines, start, (later[0] - 1) if later else len(lines))
        floor = start
        if titles != current or kind == "heading":
            if blocks:
                sections.append(Section(current or (), tuple(blocks)))
            blocks, current = [], titles
        blocks.append(Block(body, start, end, kind))
    if blocks:
        sections.append(Section(current or (), tuple(blocks)))
    return Document(format="rst", unit="line", sections=tuple(sections), title=own_title,
                    parser=parser_version("rst"),
                    dropped=dropped, includes=tuple(scope.files) if scope else (),
                    unread=tuple(scope.unread) if scope else (), docstrings=len(docstrings))


#: The line of a ``toctree`` directive: the table of contents Sphinx builds from other pages.
_TOCTREE = re.compile(r"[ \t]*\.\.[ \t]+toctree::")


def _links_generated_pages(lines: list[str], start: int, items: int) -> bool:
    """Whether the bullet list whose first line is ``start`` only links Sphinx's generated pages, one
    item per line (`GENERATED_PAGE_ITEM`)."""
    bullets = []
    for line in lines[start - 1:]:
        if line.strip() and line.lstrip()[:1] not in "-*+":
            break
        if line.strip():
            bullets.append(line)
    return len(bullets) == items and all(GENERATED_PAGE_ITEM.fullmatch(b) for b in bullets)


def _is_label_box(node: Any) -> bool:
    """A kept directive holding only its argument (``.. setting:: DEBUG``, a ``class`` signature)."""
    return (node.tagname == "container" and len(node.children) == 1
            and _LABEL_CLASS in node.children[0].get("classes", []))


def _all_bold(paragraph: Any) -> bool:
    """Whether a paragraph is one bold phrase (``**Example 2: Create a table**``): a label."""
    parts = [c for c in paragraph.children if not (c.tagname == "#text" and not c.astext().strip())]
    return len(parts) == 1 and parts[0].tagname == "strong"


def _title_start(lines: list[str], line: int) -> int:
    """First line of a section title (its overline when it has one); ``line`` is docutils' title line."""
    index = max(0, min(line, len(lines)) - 1)
    # docutils gives the underline's line for underlined titles: step back onto the text.
    adornment = re.compile(r"^([=\-~^\"'`:#*+_<>.!$%&,;?@\\|/])\1{2,}\s*$")
    while index > 0 and adornment.match(lines[index]) and lines[index - 1].strip():
        index -= 1
    if index > 0 and adornment.match(lines[index - 1]):
        index -= 1
    return index + 1


def _last_text_line(lines: list[str], start: int, end: int) -> int:
    end = min(max(end, start), len(lines))
    while end > start and not lines[end - 1].strip():
        end -= 1
    return end
