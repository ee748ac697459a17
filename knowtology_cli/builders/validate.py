"""Validation and repair of one tree-building reply: only the wire schema gets through."""

from __future__ import annotations

import re
import unicodedata
from collections.abc import Callable, Iterable, Sequence
from dataclasses import dataclass
from typing import Any

from partial_json_parser import Allow
from partial_json_parser import loads as loads_partial
from pydantic import BaseModel, ConfigDict, Field, StrictInt, StrictStr, ValidationError

from knowtology_cli.errors import LLMOutputError
from knowtology_cli.models import Assignment, Category, TreeReply

from .prompts import TreeCaps

OTHER = "Other"
GENERAL = "General"
MAX_SNIPPET = 160
MAX_DESCRIPTION = 200
MAX_SEGMENT = 60

_WS = re.compile(r"\s+")


class _Lenient(BaseModel):
    model_config = ConfigDict(extra="ignore")


class _RawCategory(_Lenient):
    path: StrictStr
    description: StrictStr | None = None


class _RawAssignment(_Lenient):
    chunk_id: StrictStr | StrictInt
    path: StrictStr
    snippet: StrictStr | None = None


class _RawReply(_Lenient):
    categories: list[Any] = Field(default_factory=list)
    assignments: list[Any]


class ValidAssignment(BaseModel):
    """An accepted assignment: the chunk, its leaf path, and its snippet (None: fill it in)."""

    model_config = ConfigDict(frozen=True)

    chunk_id: str
    path: str
    snippet: str | None = None


class RejectedName(BaseModel):
    """A proposed path refused by :class:`NameCheck`: the chunk, the path, the bad name and why."""

    model_config = ConfigDict(frozen=True)

    chunk_id: str
    path: str
    name: str
    reason: str
    index: int = 0  # which segment of ``path`` (its valid prefix is ``path.split("/")[:index]``)


class ValidatedReply(BaseModel):
    """What one reply contributes, and what must be retried.

    Attributes:
        categories: new nodes to create (parents first), each holding assigned chunks.
        assignments: accepted assignments, in reply order, all at leaves.
        missing_ids: sent ids with no valid assignment, in the order they were sent.
        unknown_ids: ids the reply assigned that were not sent (ignored).
        duplicate_ids: ids assigned more than once (first valid assignment kept).
        invalid_items: items dropped for not matching the schema or having an empty path.
        notes: what was repaired, one line each (deep paths cut, moves to General/Other, ...).
        rejected: assignments whose path holds a name :class:`NameCheck` refused (not applied;
            the builder re-asks for these chunks with the reasons).
        dropped_descriptions: descriptions refused by :class:`NameCheck` (path, reason).
    """

    model_config = ConfigDict(frozen=True)

    categories: list[Category] = Field(default_factory=list)
    assignments: list[ValidAssignment] = Field(default_factory=list)
    missing_ids: list[str] = Field(default_factory=list)
    unknown_ids: list[str] = Field(default_factory=list)
    duplicate_ids: list[str] = Field(default_factory=list)
    invalid_items: int = 0
    notes: list[str] = Field(default_factory=list)
    rejected: list[RejectedName] = Field(default_factory=list)
    dropped_descriptions: list[tuple[str, str]] = Field(default_factory=list)

    @property
    def complete(self) -> bool:
        """True when every sent chunk got a valid assignment."""
        return not self.missing_ids

    def to_tree_reply(self, fill_snippet: Callable[[str], str]) -> TreeReply:
        """The wire-contract record, with empty snippets filled by ``fill_snippet(chunk_id)``."""
        return TreeReply(
            categories=list(self.categories),
            assignments=[
                Assignment(chunk_id=a.chunk_id, path=a.path, snippet=a.snippet or fill_snippet(a.chunk_id))
                for a in self.assignments
            ],
        )


def _clean_line(text: str) -> str:
    text = "".join(ch if unicodedata.category(ch)[0] != "C" else " " for ch in text)
    return _WS.sub(" ", text).strip()


def _cut(text: str, limit: int) -> str:
    if len(text) <= limit:
        return text
    head = text[: limit - 1]
    space = head.rfind(" ")
    if space >= limit // 2:
        head = head[:space]
    return head.rstrip(" ,;:.-") + "…"


def clean_snippet(value: str | None) -> str | None:
    """One line, ≤160 characters, outer quotes removed; None when nothing is left."""
    if not value:
        return None
    text = _clean_line(value).strip("\"'“”‘’`").strip()
    return _cut(text, MAX_SNIPPET) if text else None


def clean_name(value: str) -> str:
    """A proposed name as one line without outer quotes, cut to the segment limit."""
    return _cut(_clean_line(value).strip("\"'“”‘’` "), MAX_SEGMENT)


def clean_description(value: str) -> str:
    """A proposed description as one line, cut to the description limit."""
    return _cut(_clean_line(value), MAX_DESCRIPTION)


def normalize_path(path: str, max_depth: int = 3) -> tuple[str | None, bool]:
    """``(normalised path or None, was it cut to max_depth?)`` — see rule 2 of the module."""
    if "/" not in path and " > " in path:
        path = path.replace(" > ", "/")
    segments = []
    for raw in path.split("/"):
        seg = _clean_line(raw)
        if not seg or set(seg) <= {"."}:
            continue
        segments.append(seg[:MAX_SEGMENT].rstrip())
    if segments and segments[0].casefold() == "root":
        segments = segments[1:]
    cut = len(segments) > max_depth
    segments = segments[:max_depth]
    return ("/".join(segments) if segments else None), cut


def _depth(path: str) -> int:
    return path.count("/") + 1 if path else 0


def _parent(path: str) -> str:
    return path.rsplit("/", 1)[0] if "/" in path else ""


# ------------------------------------------------------------------------------------ names
_STOP = frozenset({"and", "of", "the", "for", "in", "on", "to", "a", "an", "with"})
_CATCH_ALL = frozenset({"other", "others", "misc", "miscellaneous", "various", "uncategorized", "uncategorised",
                        "unsorted", "topic", "topics", "other topics"})
_NONWORD = re.compile(r"[^0-9a-z]+")


def _singular(word: str) -> str:
    if len(word) > 4 and word.endswith("ies"):
        return word[:-3] + "y"
    if len(word) > 3 and word.endswith("s") and not word.endswith(("ss", "us", "is")):
        return word[:-1]
    return word


def name_key(name: str) -> str:
    """What two category names must share to count as the same: words, singular, sorted."""
    words = [w for w in _NONWORD.split(name.casefold().replace("&", " and ")) if w and w not in _STOP]
    if not words or set(words) <= _CATCH_ALL:
        return "\x00other"
    return " ".join(sorted(_singular(w) for w in words))


@dataclass(frozen=True)
class NameRules:
    """Limits of a category name and of a description; each value says why.

    Attributes:
        max_words: a label people browse by is a few words (the prompts ask for 1-4); past this many
            it is a sentence, a heading copied whole or a table row.
        copied_run: this many consecutive words shared with the instructions means a name or a
            description repeats the prompt instead of describing the node (shorter runs are common
            phrases; a real 0.5B model wrote "A reader would browse by this category, as it covers…",
            five words of "a topic label a reader would browse by").
        copied_passage_run: a description repeating this many consecutive words of a passage it was
            shown quotes that passage instead of describing the node (descriptions may reuse the
            passages' terms, so the run is longer than for the instructions).
    """

    max_words: int = 8
    copied_run: int = 5
    copied_passage_run: int = 8


_URL = re.compile(r"(?i)\b(?:[a-z][a-z0-9+.-]*://|www\.[a-z0-9-]|mailto:)")
# HTML/XML tags, Markdown emphasis, code, links and headings, JSON braces, and the heading-trail
# separator kt writes into chunk titles (chunking.TITLE_SEPARATOR): none belongs in a label
_MARKUP = re.compile(r"<[^<>]*>|[`{}\[\]›»]|\*\*|__|^\s*[#>*+-]\s|\]\(")
_WORDS = re.compile(r"[^\W_]+(?:['’][^\W_]+)*")
_EXTENSION = re.compile(r"\.([A-Za-z][A-Za-z0-9]{0,6})$")
# what a version number or a calendar date is made of: numbers (with their separators, a leading
# "v", ordinal suffixes) and the English month and weekday names; a label with a number and nothing
# else names a release or a day, not a topic
_DATE_OR_VERSION = re.compile(
    r"(?i)\b(?:v(?=\d))?\d+(?:st|nd|rd|th)?\b|\b(?:jan(?:uary)?|feb(?:ruary)?|mar(?:ch)?|apr(?:il)?|may|june?|"
    r"july?|aug(?:ust)?|sep(?:t(?:ember)?)?|oct(?:ober)?|nov(?:ember)?|dec(?:ember)?|mon(?:day)?|tue(?:s(?:day)?)?|"
    r"wed(?:nesday)?|thu(?:rs(?:day)?)?|fri(?:day)?|sat(?:urday)?|sun(?:day)?)\b\.?")


def _tails(path: str) -> list[str]:
    parts = path.split("/")
    return ["/".join(parts[i:]) for i in range(len(parts) - 1)]


def _words(text: str) -> list[str]:
    return [w.casefold() for w in _WORDS.findall(text)]


class NameCheck:
    """Decides whether a proposed category name is a name at all (rule 10 of the module).

    Built once per build from what the collection holds (chunk ids, file names, document ids) and
    what the prompts show (example paths, placeholder values, the instructions themselves), so it
    carries no word of any corpus. :meth:`segment_problem`, :meth:`path_problem` and
    :meth:`description_problem` return the reason something is rejected, or None.

    Args:
        chunk_ids: every chunk id the model may have seen (a name equal to one is a chunk id).
        files: file names / paths and document ids of the collection.
        examples: example category paths the prompts show.
        placeholders: placeholder values of the prompts and the reply schema's field names.
        instructions: the prompt text (names and descriptions must not copy runs of it).
        titles: document id → document title; a new node named exactly like a document that fewer
            than half of its chunks come from is a title copied onto unrelated chunks.
        doc_of: chunk id → document id (for ``titles``).
        extensions: file extensions that make a one-word name a file name (the formats kt reads),
            besides those of the collection's own files.
        markers: the prompt's own layout labels (e.g. ``Subcategories:``); a name or description
            holding one copies the prompt.
        rules: the limits.
    """

    def __init__(
        self,
        *,
        chunk_ids: Iterable[str] = (),
        files: Iterable[str] = (),
        examples: Iterable[str] = (),
        placeholders: Iterable[str] = (),
        instructions: str = "",
        titles: dict[str, str] | None = None,
        doc_of: dict[str, str] | None = None,
        extensions: Iterable[str] = (),
        markers: Iterable[str] = (),
        rules: NameRules = NameRules(),
    ) -> None:
        self.rules = rules
        self.markers = tuple(m for m in markers if m)
        self.title_docs: dict[str, set[str]] = {}
        for doc, title in (titles or {}).items():
            if title and title.strip():
                self.title_docs.setdefault(title.strip().casefold(), set()).add(doc)
        self.doc_of = dict(doc_of or {})
        self.chunk_ids = {c.strip() for c in chunk_ids if c and c.strip()}
        self.paths: set[str] = set()  # file paths (with and without extension), as written
        self.slugs: set[str] = set()  # path components and stems that are identifiers, as written
        self.extensions: set[str] = {e.lstrip(".").casefold() for e in extensions}
        for raw in files:
            path = str(raw or "").strip().strip("/")
            if not path:
                continue
            ext = _EXTENSION.search(path)
            if ext:
                self.extensions.add(ext.group(1).casefold())
            stem = path[: ext.start()] if ext else path
            if "/" in path or ext:
                self.paths.update({path, stem})
            for part in path.split("/"):
                part_ext = _EXTENSION.search(part)
                for piece in {part, part[: part_ext.start()] if part_ext else part}:
                    if piece and (re.search(r"[-_.]", piece) or any(ch.isdigit() for ch in piece)):
                        self.slugs.add(piece)
        # every tail of two or more components: a model drops or rewrites the leading folders
        self.id_suffixes = {t for c in self.chunk_ids if "/" in c for t in _tails(c)}
        self.path_suffixes = {t for p in self.paths if "/" in p for t in _tails(p)}
        self.examples = [tuple(s.casefold() for s in e.split("/") if s) for e in examples]
        self.placeholders = {p.strip().casefold() for p in placeholders if p.strip()}
        words = _words(instructions)
        n = max(2, rules.copied_run)
        self.instruction_runs = {tuple(words[i:i + n]) for i in range(len(words) - n + 1)}

    def _copies_instructions(self, text: str) -> bool:
        words = _words(text)
        n = max(2, self.rules.copied_run)
        return any(tuple(words[i:i + n]) in self.instruction_runs for i in range(len(words) - n + 1))

    def copies_passage(self, text: str, passages: Iterable[str]) -> bool:
        """True when ``text`` repeats a run of ``rules.copied_passage_run`` words of one of ``passages``."""
        words = _words(text)
        n = max(2, self.rules.copied_passage_run)
        runs = {tuple(w[i:i + n]) for p in passages for w in [_words(p)] for i in range(len(w) - n + 1)}
        return any(tuple(words[i:i + n]) in runs for i in range(len(words) - n + 1))

    def _file_like(self, text: str) -> bool:
        if text in self.slugs or text in self.paths:
            return True
        ext = _EXTENSION.search(text)
        return bool(ext and " " not in text and ext.group(1).casefold() in self.extensions)

    def segment_problem(self, segment: str) -> str | None:
        """Why ``segment`` (one name) is not a category name, or None when it is one."""
        seg = segment.strip()
        if not any(ch.isalpha() for ch in seg):
            return "has no letters (only digits or punctuation)"
        if any(ch.isdigit() for ch in seg) and not any(ch.isalpha() for ch in _DATE_OR_VERSION.sub(" ", seg)):
            return "is a version number or a date, not a topic"
        if seg in self.chunk_ids or seg.lstrip("/") in self.chunk_ids:
            return "is a chunk id"
        if "#" in seg:
            return "contains '#' (a chunk id or a heading marker)"
        if "|" in seg:
            return "contains '|' (a table row)"
        if _URL.search(seg):
            return "is a URL"
        if _MARKUP.search(seg):
            return "contains markup"
        if self._file_like(seg):
            return "is a file or document name"
        if seg.casefold() in self.placeholders:
            return "is a placeholder from the instructions"
        if any(m.casefold() in seg.casefold() for m in self.markers):
            return "copies the layout of the prompt"
        if len(_words(seg)) > self.rules.max_words:
            return f"is a sentence, not a short label (more than {self.rules.max_words} words)"
        if self._copies_instructions(seg):
            return "copies the instructions"
        return None

    def path_problem(self, raw: str, segments: Sequence[str]) -> tuple[int, str] | None:
        """``(index of the first bad segment, reason)`` for a proposed path, or None.

        ``raw`` is the path as the model wrote it (a chunk id or file path spans several segments).
        """
        parts = [p.strip() for p in raw.split("/") if p.strip()]
        for i in range(len(parts)):
            for j in range(i + 2, len(parts) + 1):
                span = "/".join(parts[i:j])
                if span in self.id_suffixes:
                    return 0, "is a chunk id"
                if span in self.path_suffixes:
                    return 0, "is a file path"
        folded = tuple(s.casefold() for s in segments)
        for example in self.examples:
            shared = min(len(example), len(folded))
            if shared >= 2 and folded[:shared] == example[:shared] or (len(example) == 1 and folded[:1] == example):
                return 0, "repeats the example path of the instructions"
        for i, seg in enumerate(segments):
            reason = self.segment_problem(seg)
            if reason:
                return i, reason
            if i and name_key(seg) == name_key(segments[i - 1]):
                return i, "repeats its parent's name"
        return None

    def title_problem(self, name: str, chunk_ids: Iterable[str]) -> str | None:
        """Why a node called ``name`` holding ``chunk_ids`` wears another document's title, or None."""
        docs = self.title_docs.get(name.strip().casefold())
        if not docs:
            return None
        members = list(chunk_ids)
        own = sum(1 for c in members if self.doc_of.get(c) in docs)
        if 2 * own >= len(members):  # at least half of them: the title says what the node holds
            return None
        if own:
            return f"is the title of a document only {own} of its {len(members)} chunks come from"
        return "is the title of a document none of its chunks come from"

    def description_problem(self, description: str) -> str | None:
        """Why ``description`` says nothing about the node, or None when it may stay."""
        text = description.strip()
        if not text:
            return None
        if not any(ch.isalpha() for ch in text):
            return "has no letters"
        if text.strip(" .").casefold() in self.placeholders:
            return "is a placeholder from the instructions"
        if "|" in text:
            return "contains '|' (a table row)"
        if any(len(c) > 2 and c in text for c in self.chunk_ids):
            return "contains a chunk id"
        if any(m.casefold() in text.casefold() for m in self.markers):
            return "copies the layout of the prompt"
        if self._copies_instructions(text):
            return "copies the instructions"
        return None


class _Tree:
    """Existing and new nodes with case-insensitive lookup; creates nodes under the rules 3-5."""

    def __init__(self, existing: Iterable[str], caps: TreeCaps) -> None:
        self.caps = caps
        self.index: dict[str, str] = {}
        self.children: dict[str, list[str]] = {}
        self.new: list[str] = []
        for path in sorted(existing, key=_depth):
            parts = path.split("/")
            for i in range(1, len(parts) + 1):
                self._add("/".join(parts[:i]))
        self.existing = set(self.index.values())
        self.existing_leaves = {p for p in self.existing if not self.children.get(p)}
        self.spellings: dict[str, str] = {}  # casefolded new path -> preferred last segment

    def prefer_spelling(self, path: str) -> None:
        """Remember the spelling of ``path`` (from the reply's categories) for nodes created later."""
        parts = path.split("/")
        for i in range(1, len(parts) + 1):
            self.spellings.setdefault("/".join(parts[:i]).casefold(), parts[i - 1])

    def _add(self, path: str) -> None:
        if path.casefold() in self.index:
            return
        self.index[path.casefold()] = path
        self.children.setdefault(_parent(path), []).append(path)
        self.children.setdefault(path, [])

    def _create(self, path: str) -> str:
        self._add(path)
        self.new.append(path)
        return path

    def _other(self, parent: str) -> str:
        path = f"{parent}/{OTHER}" if parent else OTHER
        return self.index.get(path.casefold()) or self._create(path)

    def resolve(self, segments: Sequence[str], notes: list[str]) -> str:
        """The node for ``segments``, created as needed within the rules; never empty."""
        parent = ""
        queue = list(segments)
        while queue:
            if parent in self.existing_leaves:
                notes.append(f"{'/'.join(segments)!r} goes below the existing leaf {parent!r}; kept at the leaf")
                break
            if _depth(parent) >= self.caps.max_depth:
                break
            seg = queue.pop(0)
            candidate = f"{parent}/{seg}" if parent else seg
            hit = self.index.get(candidate.casefold())
            if hit is not None:
                parent = hit
                continue
            cap = self.caps.max_top if not parent else self.caps.max_children
            if len(self.children.get(parent, [])) >= cap:
                other = self._other(parent)
                notes.append(f"{candidate!r} exceeds {cap} children of {parent or 'the root'!r}; placed under {other!r}")
                if seg.casefold() != OTHER.casefold():
                    queue.insert(0, seg)
                parent = other
                continue
            seg = self.spellings.get(candidate.casefold(), seg)
            parent = self._create(f"{parent}/{seg}" if parent else seg)
        return parent

    def is_internal(self, path: str) -> bool:
        return bool(self.children.get(path))

    def creates(self, segments: Sequence[str]) -> bool:
        """Would :meth:`resolve` create a node for ``segments`` (rather than reuse existing ones)?"""
        parent = ""
        for seg in segments[: self.caps.max_depth]:
            if parent in self.existing_leaves:
                return False
            candidate = f"{parent}/{seg}" if parent else seg
            hit = self.index.get(candidate.casefold())
            if hit is None:
                return True
            parent = hit
        return False


def parse_reply(
    data: Any,
    expected_ids: Sequence[str],
    *,
    existing_paths: Iterable[Any] = (),
    caps: TreeCaps = TreeCaps(),
    names: NameCheck | None = None,
) -> ValidatedReply:
    """Validate and repair one reply.

    The rules, in order:

    1. The reply must be an object with an ``assignments`` list (``categories`` optional); anything
       else raises :class:`~knowtology_cli.errors.LLMOutputError` (the client retries the call).
       Items that don't match the schema (wrong types, missing fields) are dropped and counted.
       A numeric ``chunk_id`` is read as its decimal string (models unquote numeric ids).
    2. Paths are normalised: segments split on ``/``, stripped, inner whitespace collapsed, control
       characters removed, empty or dot-only segments dropped (so ``A//B`` is ``A/B``), a leading
       ``root`` segment dropped, segments cut to 60 characters; more than ``max_depth`` segments are
       cut to ``max_depth`` (noted). A path with no segment left makes the assignment invalid.
    3. Spelling: a path matches an existing or earlier node case-insensitively, segment by segment,
       and takes that node's spelling (existing tree first, then the reply's ``categories``, then the
       first assignment that used it).
    4. Existing leaves stay leaves: a path going below an existing leaf is cut back to that leaf.
    5. Breadth: a new child beyond ``max_top`` (top level) or ``max_children`` goes under the parent's
       catch-all ``Other`` child instead (created when needed; so breadth is at most cap + 1).
    6. Ids: unknown ids are ignored and listed; for a duplicated id the first valid assignment wins;
       expected ids without a valid assignment are listed as missing (to retry in a smaller call).
    7. Leaves: an assignment at a node that has children (in the existing tree or in this reply) goes
       to that node's ``General`` child (created when needed), so every chunk sits at a leaf.
    8. Categories are the new nodes that hold assigned chunks, parents first, with the reply's
       description for that path when given; categories no chunk uses are not created.
    9. Snippets are collapsed to one line and cut to 160 characters; empty ones come back as None for
       the builder to fill from the chunk text. Descriptions are cut to 200 characters.
    10. Names (with a :class:`NameCheck`): a new path segment that is not a category name — a chunk id,
        a file path or file name, text with ``#``, ``|``, markup or a URL, digits or punctuation only,
        the prompt's example values or placeholders, a sentence rather than a label, or its parent's
        name again — is rejected with the reason; its chunks are listed in ``rejected`` (never mapped)
        for the builder to re-ask. Descriptions that are placeholders or copy the instructions are
        dropped.

    Args:
        data: the decoded JSON object of the reply.
        expected_ids: the chunk ids sent in this call.
        existing_paths: paths of the current tree (strings or nodes with ``.path``), any subset
            that includes the leaves.
        caps: depth and breadth limits.
        names: when given, new names and descriptions are checked (rule 10).

    Raises:
        LLMOutputError: ``data`` is not an object with an ``assignments`` list.
    """
    try:
        raw = _RawReply.model_validate(data)
    except ValidationError as exc:
        first = exc.errors()[0]
        where = ".".join(str(p) for p in first["loc"]) or "reply"
        raise LLMOutputError(
            f"reply does not match the tree schema: {where}: {first['msg']}",
            hint="the model ignored the reply format; it is retried",
        ) from exc

    notes: list[str] = []
    invalid = 0
    tree = _Tree((p if isinstance(p, str) else p.path for p in existing_paths), caps)
    expected = list(dict.fromkeys(expected_ids))
    expected_set = set(expected)
    stripped = {i.strip(): i for i in expected}

    descriptions: dict[str, str] = {}
    dropped: list[tuple[str, str]] = []
    rejected: list[RejectedName] = []
    for item in raw.categories:
        try:
            cat = _RawCategory.model_validate(item)
        except ValidationError:
            invalid += 1
            continue
        path, _ = normalize_path(cat.path, caps.max_depth)
        if not path:
            continue
        tree.prefer_spelling(path)
        desc = _cut(_clean_line(cat.description or ""), MAX_DESCRIPTION)
        bad = names.description_problem(desc) if names is not None and desc else None
        if bad:
            dropped.append((path, f"description {desc[:60]!r} {bad}"))
            continue
        if desc:
            descriptions.setdefault(path.casefold(), desc)

    accepted: dict[str, tuple[str, str | None] | None] = {}  # None: its path was rejected
    unknown: list[str] = []
    duplicates: list[str] = []
    for item in raw.assignments:
        try:
            a = _RawAssignment.model_validate(item)
        except ValidationError:
            invalid += 1
            continue
        chunk_id = str(a.chunk_id)
        if chunk_id not in expected_set:
            chunk_id = stripped.get(chunk_id.strip(), chunk_id)
        if chunk_id not in expected_set:
            if chunk_id not in unknown:
                unknown.append(chunk_id)
            continue
        if chunk_id in accepted:
            if chunk_id not in duplicates:
                duplicates.append(chunk_id)
            continue
        path, cut = normalize_path(a.path, caps.max_depth)
        if path is None:
            invalid += 1
            notes.append(f"chunk {chunk_id!r}: empty path {a.path!r}; left for retry")
            continue
        segments = path.split("/")
        if names is not None and tree.creates(segments):
            problem = names.path_problem(a.path, segments)
            if problem is not None:
                index, reason = problem
                rejected.append(RejectedName(chunk_id=chunk_id, path=path, name=segments[index], reason=reason,
                                             index=index))
                accepted[chunk_id] = None
                continue
        if cut:
            notes.append(f"chunk {chunk_id!r}: path {a.path!r} cut to {caps.max_depth} levels: {path!r}")
        accepted[chunk_id] = (tree.resolve(segments, notes), clean_snippet(a.snippet))

    if names is not None and names.title_docs:  # a new node named after a document none of its chunks is from
        for node in tree.new:
            under = [c for c, placed in accepted.items()
                     if placed is not None and (placed[0] == node or placed[0].startswith(node + "/"))]
            name = node.rsplit("/", 1)[-1]
            why = names.title_problem(name, under) if under else None
            if why:
                for c in under:
                    rejected.append(RejectedName(chunk_id=c, path=node, name=name, reason=why,
                                                 index=node.count("/")))
                    accepted[c] = None

    # rule 7: every chunk at a leaf (decided once all paths of this reply exist)
    assignments = []
    for chunk_id, placed in accepted.items():
        if placed is None:
            continue
        path, snippet = placed
        final = path
        while tree.is_internal(final):
            deeper = tree.resolve([*final.split("/"), GENERAL], notes)
            if deeper == final:  # an existing tree deeper than caps.max_depth
                break
            final = deeper
        if final != path:
            notes.append(f"chunk {chunk_id!r}: {path!r} has subcategories; placed at {final!r}")
        assignments.append(ValidAssignment(chunk_id=chunk_id, path=final, snippet=snippet))

    used: set[str] = set()
    for done in assignments:
        parts = done.path.split("/")
        used.update("/".join(parts[: i + 1]) for i in range(len(parts)))
    order = {p: i for i, p in enumerate(tree.new)}
    new_nodes = sorted((p for p in tree.new if p in used), key=lambda p: (_depth(p), order[p]))
    categories = [Category(path=p, description=descriptions.get(p.casefold(), "")) for p in new_nodes]
    if unknown:
        notes.append(f"ignored {len(unknown)} unknown chunk id(s)")
    missing = [i for i in expected if i not in accepted]
    if rejected:
        shown = "; ".join(f"{r.name!r} {r.reason}" for r in rejected[:3])
        notes.append(f"rejected {len(rejected)} assignment(s) to names that are not category names ({shown})")
    return ValidatedReply(
        categories=categories,
        assignments=assignments,
        missing_ids=missing,
        unknown_ids=unknown,
        duplicate_ids=duplicates,
        invalid_items=invalid,
        notes=notes,
        rejected=rejected,
        dropped_descriptions=dropped,
    )


def check_reply(data: Any) -> None:
    """Raise ``LLMOutputError`` unless ``data`` has the reply's top-level shape (for ``validate=``)."""
    try:
        _RawReply.model_validate(data)
    except ValidationError as exc:
        raise LLMOutputError(f"reply does not match the tree schema: {exc.errors()[0]['msg']}") from exc


def salvage_cut_reply(text: str | None) -> dict[str, Any] | None:
    """The complete part of a tree reply cut at the output limit, or None when it has no whole assignment.

    A small model often writes a dozen good assignments, then copies a chunk into a snippet until the
    output limit: the whole reply fails to parse, but what came before the cut was paid for. The text
    is read by ``partial_json_parser`` (the parser vLLM and LangChain use for streamed JSON) with no
    incomplete string or number allowed, and only categories and assignments with every field whole
    are kept; the result still goes through :func:`parse_reply` like any reply.
    """
    if not text:
        return None
    try:
        data = loads_partial(text, Allow.ARR | Allow.OBJ)
    except ValueError:  # MalformedJSON and JSONDecodeError are ValueErrors
        return None
    if not isinstance(data, dict):
        return None

    def whole(items: Any, keys: tuple[str, ...]) -> list[dict[str, str]]:
        return [{k: item[k] for k in keys} for item in items if isinstance(item, dict)
                and all(isinstance(item.get(k), str) for k in keys)] if isinstance(items, list) else []

    assignments = whole(data.get("assignments"), ("chunk_id", "path", "snippet"))
    if not assignments:
        return None
    return {"categories": whole(data.get("categories"), ("path", "description")), "assignments": assignments}
