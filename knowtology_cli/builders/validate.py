"""Validation and repair of one tree-building reply: only the wire schema gets through.

:func:`parse_reply` takes the decoded JSON of one call and the chunk ids that call sent, and
returns what the tree store can apply plus what must be retried. The rules, in order:

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
"""

from __future__ import annotations

import re
import unicodedata
from collections.abc import Callable, Iterable, Sequence
from typing import Any

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
    """

    model_config = ConfigDict(frozen=True)

    categories: list[Category] = Field(default_factory=list)
    assignments: list[ValidAssignment] = Field(default_factory=list)
    missing_ids: list[str] = Field(default_factory=list)
    unknown_ids: list[str] = Field(default_factory=list)
    duplicate_ids: list[str] = Field(default_factory=list)
    invalid_items: int = 0
    notes: list[str] = Field(default_factory=list)

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


def parse_reply(
    data: Any,
    expected_ids: Sequence[str],
    *,
    existing_paths: Iterable[Any] = (),
    caps: TreeCaps = TreeCaps(),
) -> ValidatedReply:
    """Validate and repair one reply (see the module docstring for the rules).

    Args:
        data: the decoded JSON object of the reply.
        expected_ids: the chunk ids sent in this call.
        existing_paths: paths of the current tree (strings or nodes with ``.path``), any subset
            that includes the leaves.
        caps: depth and breadth limits.

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
        if desc:
            descriptions.setdefault(path.casefold(), desc)

    accepted: dict[str, tuple[str, str | None]] = {}
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
        if cut:
            notes.append(f"chunk {chunk_id!r}: path {a.path!r} cut to {caps.max_depth} levels: {path!r}")
        accepted[chunk_id] = (tree.resolve(path.split("/"), notes), clean_snippet(a.snippet))

    # rule 7: every chunk at a leaf (decided once all paths of this reply exist)
    assignments = []
    for chunk_id, (path, snippet) in accepted.items():
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
    for a in assignments:
        parts = a.path.split("/")
        used.update("/".join(parts[: i + 1]) for i in range(len(parts)))
    order = {p: i for i, p in enumerate(tree.new)}
    new_nodes = sorted((p for p in tree.new if p in used), key=lambda p: (_depth(p), order[p]))
    categories = [Category(path=p, description=descriptions.get(p.casefold(), "")) for p in new_nodes]
    if unknown:
        notes.append(f"ignored {len(unknown)} unknown chunk id(s)")
    missing = [i for i in expected if i not in accepted]
    return ValidatedReply(
        categories=categories,
        assignments=assignments,
        missing_ids=missing,
        unknown_ids=unknown,
        duplicate_ids=duplicates,
        invalid_items=invalid,
        notes=notes,
    )


def check_reply(data: Any) -> None:
    """Raise ``LLMOutputError`` unless ``data`` has the reply's top-level shape (for ``validate=``)."""
    try:
        _RawReply.model_validate(data)
    except ValidationError as exc:
        raise LLMOutputError(f"reply does not match the tree schema: {exc.errors()[0]['msg']}") from exc
