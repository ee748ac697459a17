"""Forgiving lookups: category paths case-insensitive when unambiguous, chunk ids copied with their
brackets, and "did you mean" from real paths and ids."""

from __future__ import annotations

import re
from collections import Counter
from collections.abc import Sequence

from .errors import NotFoundError

#: most paths a "did you mean" hint names
MAX_SUGGESTIONS = 3
#: letters per allowed edit (insert, delete, replace, swap of neighbours) for a name to count as a
#: typo of another: 'Vanx' and 'Passwrods' are one slip from 'Van' and 'Passwords', while 'Nothing'
#: (7 letters: two edits allowed) is three from 'String' and is not offered for it
LETTERS_PER_EDIT = 4
#: most edits for any length: a long path three slips off is a different path, not a typo
MAX_EDITS = 3
#: what to do when nothing is close: the advice the CLI prints (agent surfaces name their tool instead)
BROWSE_HINT = "`kt browse` lists the top categories"
EMPTY_MAP_HINT = "the map is empty: run `kt build`"

_WORD = re.compile(r"\w+")
#: what an id copied from output may carry around it: the brackets hits show it in, quotes, backticks
_WRAPPERS = (("[", "]"), ("(", ")"), ("<", ">"), ("`", "`"), ("'", "'"), ('"', '"'))
#: an id as documents number their chunks: the document, then ``#`` and the chunk's index
_NUMBERED = re.compile(r"(.+)#(\d+)")


def path_key(path: str) -> str:
    """Case-folded path with single spaces and no blanks around ``/`` (the comparison key)."""
    return "/".join(" ".join(seg.split()).casefold() for seg in path.split("/") if seg.strip())


def edit_distance(a: str, b: str, limit: int | None = None) -> int:
    """Edits turning ``a`` into ``b``: inserts, deletes, replacements and swaps of neighbours (optimal
    string alignment, computed by rapidfuzz). With ``limit``, anything further is ``limit + 1``."""
    from rapidfuzz.distance import OSA  # deferred: only a lookup that failed asks, and kt browse starts fast

    return int(OSA.distance(a, b, score_cutoff=limit))


def _typo_of(wanted: str, real: str) -> int | None:
    """How many edits ``wanted`` is from ``real`` when that few make it a typo, else None."""
    allowed = min((len(wanted) + 1) // LETTERS_PER_EDIT, MAX_EDITS)
    edits = edit_distance(wanted, real, allowed)
    return edits if edits <= allowed else None


def suggest_paths(wanted: str, paths: Sequence[str], limit: int = MAX_SUGGESTIONS) -> list[str]:
    """Real paths close to ``wanted``, closest first; none when nothing is close.

    In order: the same last segment; the whole path, or its last segment, a typo away; every word
    of the last segment a typo away from (or equal to) a word of a real last segment. A typo is at
    most one edit per four letters and three in all (:data:`LETTERS_PER_EDIT`, :data:`MAX_EDITS`),
    so an unrelated name of similar letters is not offered.
    """
    key = path_key(wanted)
    if not key:
        return []
    last = key.rsplit("/", 1)[-1]
    words = _WORD.findall(last)
    ranked: list[tuple[tuple[int, int], str]] = []
    for real_key, real in {path_key(p): p for p in paths}.items():
        leaf = real_key.rsplit("/", 1)[-1]
        if leaf == last:
            ranked.append(((0, 0), real))
        elif (edits := _typo_of(key, real_key)) is not None:
            ranked.append(((1, edits), real))
        elif (edits := _typo_of(last, leaf)) is not None:
            ranked.append(((2, edits), real))
        elif words and all(any(_typo_of(w, v) is not None for v in _WORD.findall(leaf)) for w in words):
            ranked.append(((3, len(real_key)), real))
    return [real for _, real in sorted(ranked, key=lambda item: item[0])][:limit]


def resolve_path(wanted: str, paths: Sequence[str], *, collection: str, original: str | None = None) -> str:
    """The one real path matching ``wanted`` regardless of case and spacing.

    People and models type ``returns/refunds`` for ``Returns/Refunds``, or only a leaf's name. Like
    git's command suggestions and gh's path completion, a lookup that fits exactly one category is
    taken, and so is a leaf's name (or the last segments of its path) when only one path ends with
    it; otherwise the error names the closest real paths (:func:`suggest_paths`, on case-folded
    paths), or where to look when none is close.

    Raises:
        NotFoundError: no path matches, or several differ only in case; the hint names real paths.
    """
    key = path_key(wanted)
    shown = original if original is not None else wanted
    matches = [p for p in paths if path_key(p) == key]
    if len(matches) == 1:
        return matches[0]
    if not matches and key:  # a leaf's name alone, or the end of its path, when one path ends so
        ending = [p for p in paths if path_key(p).endswith("/" + key)]
        if len(ending) == 1:
            return ending[0]
    if matches:
        listed = ", ".join(repr(p) for p in sorted(matches))
        raise NotFoundError(f"{shown!r} matches several categories in collection {collection!r}: {listed}",
                            hint="give the path with its exact letter case")
    hint = _did_you_mean(suggest_paths(wanted, paths)) or (BROWSE_HINT if paths else EMPTY_MAP_HINT)
    raise NotFoundError(f"no category {shown!r} in collection {collection!r}", hint=hint)


def id_forms(raw: str) -> list[str]:
    """The ids ``raw`` stands for when it is no id itself: unwrapped of the brackets, quotes or
    backticks it was copied with (``[guide.md#3]``), and split at commas (``"a#1, a#2"``)."""
    forms: list[str] = []
    for part in raw.split(","):
        part = part.strip()
        while len(part) > 1 and any(part[0] == o and part[-1] == c for o, c in _WRAPPERS):
            part = part[1:-1].strip()
        if part:
            forms.append(part)
    return forms


def suggest_ids(wanted: str, ids: Sequence[str], limit: int = MAX_SUGGESTIONS) -> str | None:
    """A hint naming real chunk ids close to ``wanted``, or None when nothing is close.

    A document's own id: the range of its chunks. For ``doc#N`` ids: when the document exists, the
    range of its chunks; else documents whose path ends with the one given (``guide.md`` for
    ``docs/guide.md``), equal but for case, or a typo away (see :func:`suggest_paths`). Other ids:
    real ids a typo away.
    """
    chunks: dict[str, list[int]] = {}
    for real in ids:
        if numbered := _NUMBERED.fullmatch(real):
            chunks.setdefault(numbered.group(1), []).append(int(numbered.group(2)))
    match = _NUMBERED.fullmatch(wanted)
    if not match and wanted in chunks:  # a document's id: its chunks are read one by one
        return f"{wanted!r} is a document: read its chunks, #{min(chunks[wanted])} to #{max(chunks[wanted])}"
    if not match:
        close = sorted((edits, real) for real in ids if (edits := _typo_of(wanted, real)) is not None)
        return _did_you_mean([real for _, real in close][:limit])
    doc, index = match.group(1), int(match.group(2))
    if doc in chunks:
        return f"{doc!r} has chunks #{min(chunks[doc])} to #{max(chunks[doc])}"
    key, ranked = doc.casefold(), []
    parts = key.split("/")
    named = Counter(real.casefold().rsplit("/", 1)[-1] for real in chunks)
    for real in chunks:
        real_key = real.casefold()
        same = _same_ending(parts, real_key.split("/"))
        if real_key == key:
            ranked.append(((0, 0), real))
        elif real_key.endswith("/" + key):
            ranked.append(((1, len(real)), real))
        elif same > 1 or same and named[parts[-1]] == 1:
            # a file moved to another folder or source, its name (and more of its path) the same:
            # before a typo of its path (``s3api/put-object.rst`` for ``s3api/get-object.rst``)
            ranked.append(((2, -same), real))
        elif (edits := _typo_of(key, real_key)) is not None:
            ranked.append(((3, edits), real))
    docs = [real for _, real in sorted(ranked)][:limit]
    return _did_you_mean([f"{real}#{index}" if index in chunks[real] else
                          f"{real}#{min(chunks[real])}" for real in docs])


def _same_ending(wanted: Sequence[str], real: Sequence[str]) -> int:
    """How many last components two split paths share."""
    n = 0
    while n < min(len(wanted), len(real)) and wanted[-1 - n] == real[-1 - n]:
        n += 1
    return n


def _did_you_mean(candidates: Sequence[str]) -> str | None:
    """``did you mean 'a' or 'b'?`` naming ``candidates``; None when there are none."""
    return "did you mean " + " or ".join(repr(c) for c in candidates) + "?" if candidates else None
