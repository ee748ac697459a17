"""Forgiving category-path lookup: case-insensitive when unambiguous, else "did you mean" from real paths."""

from __future__ import annotations

import re
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
    taken; otherwise the error names the closest real paths (:func:`suggest_paths`, on case-folded
    paths), or where to look when none is close.

    Raises:
        NotFoundError: no path matches, or several differ only in case; the hint names real paths.
    """
    key = path_key(wanted)
    shown = original if original is not None else wanted
    matches = [p for p in paths if path_key(p) == key]
    if len(matches) == 1:
        return matches[0]
    if matches:
        listed = ", ".join(repr(p) for p in sorted(matches))
        raise NotFoundError(f"{shown!r} matches several categories in collection {collection!r}: {listed}",
                            hint="give the path with its exact letter case")
    suggestions = suggest_paths(wanted, paths)
    if suggestions:
        hint = "did you mean " + " or ".join(repr(p) for p in suggestions) + "?"
    else:
        hint = BROWSE_HINT if paths else EMPTY_MAP_HINT
    raise NotFoundError(f"no category {shown!r} in collection {collection!r}", hint=hint)
