"""Score fusion: combine ranked lists from several retrievers into one ranking."""

from __future__ import annotations

import math
from collections.abc import Mapping, Sequence

from ..stores.base import ScoredId

FUSION_RULES = ("minmax", "zscore", "rrf")
#: RRF's constant from Cormack, Clarke & Büttcher (SIGIR 2009); used as published.
RRF_K = 60


def normalise(items: Sequence[ScoredId], rule: str) -> dict[str, float]:
    """Per-list normalised scores: ``minmax`` to [0, 1], ``zscore`` to (s − mean) / std,
    ``rrf`` to 1 / (60 + rank)."""
    if not items:
        return {}
    if rule == "rrf":
        ranked = sorted(items, key=lambda s: (-s.score, s.chunk_id))
        return {s.chunk_id: 1.0 / (RRF_K + rank) for rank, s in enumerate(ranked, start=1)}
    scores = [s.score for s in items]
    if rule == "minmax":
        low, high = min(scores), max(scores)
        span = high - low
        return {s.chunk_id: (s.score - low) / span if span > 0 else 1.0 for s in items}
    if rule == "zscore":
        mean = sum(scores) / len(scores)
        std = math.sqrt(sum((x - mean) ** 2 for x in scores) / len(scores))
        return {s.chunk_id: (s.score - mean) / std if std > 0 else 0.0 for s in items}
    raise ValueError(f"unknown fusion rule {rule!r} (choose from {', '.join(FUSION_RULES)})")


def fuse_lists(
    lists: Mapping[str, Sequence[ScoredId]], *, rule: str = "minmax", weights: Mapping[str, float] | None = None
) -> list[ScoredId]:
    """Weighted sum of normalised scores over named lists (equal weights unless given), best first.

    Each rule is a published, parameter-light method; `kt bench retrieval` measures them side by side
    (docs/benchmarks.md, "Hybrid: fusion rule and depth") and `presets.FUSION` names the one in use.
    A chunk missing from a list gets that list's lowest normalised score (it ranked below the depth).

    Ties are broken by chunk id so a ranking is reproducible.
    """
    normed = {name: normalise(items, rule) for name, items in lists.items()}
    total = sum((weights or {}).get(name, 1.0) for name in lists) or 1.0
    # each list as (its share of the weight, its scores, its floor); every chunk's sum is added up in
    # list order, starting from zero, exactly as ``sum()`` over the lists would
    parts = [((weights or {}).get(name, 1.0) / total, n, 0.0 if rule == "rrf" else min(n.values(), default=0.0))
             for name, n in normed.items()]
    combined: dict[str, float] = {}
    for n in normed.values():
        for i in n:
            if i not in combined:
                acc = 0.0
                for w, scores, floor in parts:
                    acc += w * scores.get(i, floor)
                combined[i] = acc
    return [ScoredId(i, v) for i, v in sorted(combined.items(), key=lambda kv: (-kv[1], kv[0]))]
