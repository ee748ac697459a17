"""Forgiving category-path lookup: case-insensitive when unambiguous, else "did you mean" from real paths."""

from __future__ import annotations

import difflib
from collections.abc import Sequence

from .errors import NotFoundError

#: most paths a "did you mean" hint names
MAX_SUGGESTIONS = 3
#: difflib ratio a path must reach to be suggested (difflib's own default)
CLOSE_RATIO = 0.6
#: what to do when nothing is close: the advice the CLI prints (agent surfaces name their tool instead)
BROWSE_HINT = "`kt browse` lists the top categories"
EMPTY_MAP_HINT = "the map is empty: run `kt build`"


def path_key(path: str) -> str:
    """Case-folded path with single spaces and no blanks around ``/`` (the comparison key)."""
    return "/".join(" ".join(seg.split()).casefold() for seg in path.split("/") if seg.strip())


def suggest_paths(wanted: str, paths: Sequence[str], limit: int = MAX_SUGGESTIONS) -> list[str]:
    """Real paths closest to ``wanted``: same last segment first, then difflib-close, then containing it."""
    key = path_key(wanted)
    if not key:
        return []
    keyed = {path_key(p): p for p in paths}
    last = key.rsplit("/", 1)[-1]
    same_leaf = [p for k, p in keyed.items() if k.rsplit("/", 1)[-1] == last]
    close = [keyed[k] for k in difflib.get_close_matches(key, list(keyed), n=limit, cutoff=CLOSE_RATIO)]
    leaf_close = [p for k, p in keyed.items()
                  if difflib.SequenceMatcher(None, last, k.rsplit("/", 1)[-1]).ratio() >= CLOSE_RATIO]
    containing = [p for k, p in keyed.items() if key in (k if "/" in key else k.rsplit("/", 1)[-1])]
    ordered = dict.fromkeys([*same_leaf, *close, *sorted(leaf_close, key=len), *sorted(containing, key=len)])
    return list(ordered)[:limit]


def resolve_path(wanted: str, paths: Sequence[str], *, collection: str, original: str | None = None) -> str:
    """The one real path matching ``wanted`` regardless of case and spacing.

    People and models type ``returns/refunds`` for ``Returns/Refunds``, or only a leaf's name. Like
    git's command suggestions and gh's path completion, a lookup that fits exactly one category is
    taken; otherwise the error names the closest real paths. Closeness is difflib's ratio (the stdlib
    matcher git-style "did you mean" helpers use), computed on case-folded paths.

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
