"""Search presets: which retrievers run, how deep, how they are fused, and which stages follow."""

from __future__ import annotations

from dataclasses import dataclass

from ..errors import ConfigError

SEARCH_MODES = ("semantic", "hybrid", "keyword")


@dataclass(frozen=True)
class SearchPreset:
    """One speed/quality trade-off.

    Every number here was chosen once, by measurement over all five development collections together
    (`kt bench retrieval`, docs/benchmarks.md "Presets"), never per collection.

    Attributes:
        name: ``fast``, ``default`` or ``thorough``.
        mode: the retrievers used when the caller gives no mode (``keyword``, ``semantic`` or ``hybrid``).
        depth: candidates taken from each retriever before fusion (min-max needs a deep list: its
            floor is the score at this depth).
        fusion: the fusion rule (see `fusion.FUSION_RULES`).
        feedback: run the pseudo-relevance-feedback second pass (RM3 + Rocchio, `prf`).
        feedback_docs: feedback documents for that pass.
        keep_first: fuse the feedback lists together with the first-pass lists (guards against
            query drift) instead of replacing them.
        tree_lift: λ of the tree signal: a hit gains λ × the mean score of the candidates that share
            its leaf (cluster-based smoothing; 0 turns it off; unmapped hits count as their own leaf).
            No shipped preset uses it: measured on the five development collections with their
            offline trees it changed thorough's mean nDCG@10 by +0.0002 and then −0.0021 as the trees
            changed (docs/benchmarks.md, "The tree as a signal"), so it stays for experiments only.
        smoothing: α of score regularization (Diaz 2005) of the first pass before the feedback
            documents are chosen: each of the top `SMOOTH_TOP` candidates' min-max score is mixed
            with the similarity-weighted mean score of its nearest candidates, so feedback comes from
            documents whose neighbours score well too (0 turns it off).
        smoothing_neighbours: how many nearest candidates (cosine of their stored vectors) each one
            is smoothed with.
        summary: one line for help texts.
    """

    name: str
    mode: str
    depth: int
    fusion: str
    feedback: bool
    summary: str
    feedback_docs: int = 10
    keep_first: bool = False
    tree_lift: float = 0.0
    smoothing: float = 0.0
    smoothing_neighbours: int = 10


PRESETS: dict[str, SearchPreset] = {
    "fast": SearchPreset(
        "fast", mode="keyword", depth=100, fusion="minmax", feedback=False,
        summary="one retriever (BM25), no model load, no rerank",
    ),
    "default": SearchPreset(
        "default", mode="hybrid", depth=300, fusion="minmax", feedback=False,
        summary="hybrid: BM25 + vectors, min-max fusion over the top 300 of each",
    ),
    "thorough": SearchPreset(
        "thorough", mode="hybrid", depth=300, fusion="minmax", feedback=True, feedback_docs=3, keep_first=True,
        smoothing=0.5, smoothing_neighbours=10,
        summary="hybrid + pseudo-relevance feedback (RM3 on BM25, Rocchio on vectors) from a first pass "
                "smoothed over its nearest neighbours, then an optional rerank",
    ),
}
DEFAULT_PRESET = "default"


def get_preset(name: str | None) -> SearchPreset:
    """The preset called ``name`` (``default`` when None); a clear error otherwise."""
    preset = PRESETS.get(name or DEFAULT_PRESET)
    if preset is None:
        raise ConfigError(f"unknown search preset {name!r}", hint="use " + ", ".join(PRESETS))
    return preset
