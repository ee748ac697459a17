"""Plain text by paragraphs; a line underlined (or overlined too) with ``===``/``---``/… is a heading,
and so is a ``* Title`` line of an Emacs outline (GNU ``NEWS``: ``* Noteworthy changes in release 2.4``)."""

from __future__ import annotations

import re

from .base import Block, Document, SectionTrail, parser_version

_ADORNMENT = re.compile(r"^([=\-~^\"'`:#*+_<>])\1{2,}[ \t]*$")
#: An outline-mode heading: one to six stars (Emacs's outline levels; Markdown's six), a space, a title.
_STARRED = re.compile(r"^(\*{1,6}) +(\S.*?)\s*$")
#: Emacs's file-variable mode line (``GNU coreutils NEWS  -*- outline -*-``, ``-*- mode: outline; -*-``),
#: which says the file is an outline; it is markup, not text.
_MODE_LINE = re.compile(r"[ \t]*-\*-(?:[ \t]*outline[ \t]*|[^\n]*?\bmode:[ \t]*outline\b[^\n]*?)-\*-[ \t]*", re.I)
#: Emacs's other place for the mode: a ``Local Variables:`` list in the last 3000 characters
#: (``mode: outline``), as GNU tar's NEWS ends.
_LOCAL_MODE = re.compile(r"^.*Local Variables:.*\n(?:.*\n)*?.*\bmode: *outline\b", re.I | re.M)
_LOCAL_VARIABLES_TAIL = 3000
#: Any mode line (``-*-text-*-``, ``-*- coding: utf-8 -*-``) on a file's first line (its second after
#: ``#!``): settings for an editor, not text.
_ANY_MODE_LINE = re.compile(r"[ \t]*-\*-[^\n]*?-\*-[ \t]*")
#: The first line of a ``Local Variables:`` list; each line of the list, up to ``End:``, repeats
#: the prefix (and suffix) written around it here (``# Local Variables:`` ... ``# End:``).
_LOCAL_START = re.compile(r"^(.*?)Local Variables:[ \t]*(.*?)[ \t]*$", re.I)
#: A file that does not say it is an outline is one when more than this share of the lines of one
#: number of stars read as headings (`_heads_a_body`): an outline's headings stand alone above their
#: text, while the items of a ``* `` list touch each other or wrap. More than half: the file's own
#: majority decides, with no figure tuned to a corpus.
_HEADING_SHARE = 0.5
#: A file without a mode line is an outline only with at least this many heading lines: one starred
#: line with text under it is a coincidence, two make a structure.
_MIN_OUTLINE_HEADINGS = 2
#: A heading is one line; a longer line is a sentence, as `_heading_at` holds for underlined titles.
_MAX_TITLE = 120


def _heading_at(lines: list[str], index: int) -> tuple[int, str, bool] | None:
    """If ``lines[index]`` is a title with an adornment below, return (lines used, char, overlined)."""
    title = lines[index].strip()
    if not title or index + 1 >= len(lines) or _ADORNMENT.match(lines[index].strip()):
        return None
    under = lines[index + 1].rstrip()
    match = _ADORNMENT.match(under)
    if not match or len(under) < min(len(title), 3) or len(title) > 120:
        return None
    above = lines[index - 1].rstrip() if index > 0 else ""
    if above == under:
        return 3, match.group(1), True
    return (2, match.group(1), False) if not above.strip() else None


def _stars(line: str) -> int:
    """The number of stars of an outline heading's line, 0 for another line (``* * *`` is a rule)."""
    match = _STARRED.match(line)
    return len(match.group(1)) if match and match.group(2).strip("* \t") else 0


def _heads_a_body(lines: list[str], index: int, stars: int) -> bool:
    """Whether the starred line ``lines[index]`` reads as a heading: a line of its own (a blank line
    or a heading of another level on either side, where a list's items touch each other and an entry
    wraps onto the next line) above text or deeper headings, with no sibling of one line next to it
    with nothing between: that is a list whose items stand apart (``* a`` blank ``* b``)."""
    if len(lines[index]) > _MAX_TITLE:
        return False
    for near in (index - 1, index + 1):
        if 0 <= near < len(lines) and lines[near].strip() and _stars(lines[near]) in (0, stars):
            return False
    below = next((lines[near] for near in range(index + 1, len(lines)) if lines[near].strip()), None)
    if below is None or _stars(below) == stars:
        return False
    above = next((near for near in range(index - 1, -1, -1) if lines[near].strip()), None)
    # a sibling above standing alone as well: one more of a list whose items stand apart
    return above is None or _stars(lines[above]) != stars or bool(above and lines[above - 1].strip())


def outline_headings(lines: list[str]) -> dict[int, int]:
    """The heading lines of an outline-mode text (line index -> number of stars); none for another text.

    A file is an outline when its first line says so (`_MODE_LINE`), its local variables do, or, with
    `_MIN_OUTLINE_HEADINGS` headings, most lines of one number of stars read as headings
    (`_HEADING_SHARE`). In an outline, a starred line that does not (a list's item, an entry that
    wraps) is text.
    """
    by_stars: dict[int, dict[int, bool]] = {}
    for index, line in enumerate(lines):
        if stars := _stars(line):
            by_stars.setdefault(stars, {})[index] = _heads_a_body(lines, index, stars)
    headings = {index: stars for stars, heads in by_stars.items() for index, head in heads.items() if head}
    if lines and _MODE_LINE.search(lines[0]) or _LOCAL_MODE.search("\n".join(lines)[-_LOCAL_VARIABLES_TAIL:]):
        return headings
    ruled = any(sum(heads.values()) > _HEADING_SHARE * len(heads) for heads in by_stars.values())
    return headings if ruled and len(headings) >= _MIN_OUTLINE_HEADINGS else {}


def _drop_file_variables(lines: list[str]) -> None:
    """Blank Emacs's file variables in place (line numbers stay): the mode line and a ``Local
    Variables:`` list that starts in the last `_LOCAL_VARIABLES_TAIL` characters and ends with
    ``End:``, every line of it between the same prefix and suffix (Emacs's rule)."""
    first = 1 if len(lines) > 1 and lines[0].startswith("#!") else 0
    if lines and _ANY_MODE_LINE.search(lines[first]):
        rest = _ANY_MODE_LINE.sub(" ", lines[first]).strip()
        lines[first] = rest if any(ch.isalnum() for ch in rest) else ""  # a comment's ``#`` alone goes
    tail = 0
    for start in range(len(lines) - 1, -1, -1):
        tail += len(lines[start]) + 1
        if tail > _LOCAL_VARIABLES_TAIL:
            return
        if match := _LOCAL_START.match(lines[start]):
            break
    else:
        return
    prefix, suffix = match.group(1).strip(), match.group(2).strip()
    for end in range(start + 1, len(lines)):
        inner = lines[end].strip()
        if not (inner.startswith(prefix) and inner.endswith(suffix)):
            return
        if inner[len(prefix):len(inner) - len(suffix)].strip().lower().startswith("end:"):
            lines[start:end + 1] = [""] * (end + 1 - start)
            return


def parse_text(text: str, *, name: str = "") -> Document:
    """Sections of a plain-text document.

    Adornment styles get heading levels in order of first appearance, the rule reStructuredText
    and setext Markdown share; a line of adornment alone is a rule and is left out. In an outline
    (`outline_headings`) a starred heading opens a section, its title without the stars, each number
    of stars a level of its own ranked the same way; Emacs's ``-*- outline -*-`` mode line is left
    out of the text.
    """
    lines = text.replace("\r\n", "\n").replace("\r", "\n").split("\n")
    outline = outline_headings(lines)
    _drop_file_variables(lines)
    styles: dict[tuple[str, bool], int] = {}
    trail = SectionTrail()
    paragraph: list[int] = []
    dropped = 0

    def flush() -> None:
        if paragraph:
            body = "\n".join(lines[paragraph[0] : paragraph[-1] + 1]).strip("\n")
            trail.blocks.append(Block(body, paragraph[0] + 1, paragraph[-1] + 1))
            paragraph.clear()

    def open_section(level: int, title: str, first: int, last: int) -> None:
        flush()
        trail.open(level, title, first + 1, last + 1)

    index = 0
    while index < len(lines):
        line = lines[index]
        if index in outline:
            # ranked by first appearance too: a file opens with its top level, which GDB's NEWS
            # writes ``*** Changes in GDB 13`` above its ``* New commands`` topics
            level = styles.setdefault(("*" * outline[index] + " ", False), len(styles) + 1)
            open_section(level, _STARRED.match(line).group(2), index, index)  # type: ignore[union-attr]
            index += 1
            continue
        heading = _heading_at(lines, index)
        if heading is not None and not (heading[2] and paragraph and paragraph[-1] == index - 1):
            used, char, overlined = heading
            if overlined and paragraph and paragraph[-1] == index - 1:
                paragraph.pop()
            level = styles.setdefault((char, overlined), len(styles) + 1)
            open_section(level, line.strip(), index - 1 if overlined else index, index + 1)
            index += 2
            continue
        if not line.strip():
            flush()
        elif _ADORNMENT.match(line.strip()) and not paragraph:
            dropped += 1  # a rule on its own line
        else:
            paragraph.append(index)
        index += 1
    flush()
    return Document(format="text", unit="line", sections=trail.close(), parser=parser_version("text"),
                    dropped=dropped)
