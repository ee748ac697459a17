"""The retrieval stages before reranking: retrieve, fuse, pseudo-relevance feedback."""

from __future__ import annotations

from collections.abc import Callable, Sequence
from dataclasses import dataclass, field
from typing import TYPE_CHECKING

from ..stores.base import ScoredId
from .fusion import fuse_lists
from .presets import SearchPreset
from .prf import FeedbackParams, rm3_query, rocchio

if TYPE_CHECKING:
    import numpy as np

    from ..stores.base import VectorStore


@dataclass
class Retrieved:
    """A candidate ranking and what each stage scored (chunk id -> stage -> value)."""

    ranking: list[ScoredId]
    stages: dict[str, dict[str, float]] = field(default_factory=dict)
    expansion: dict[str, float] = field(default_factory=dict)

    def note(self, stage: str, items: Sequence[ScoredId], *, ranks: bool = False) -> None:
        for rank, s in enumerate(items, start=1):
            entry = self.stages.setdefault(s.chunk_id, {})
            entry[stage] = round(s.score, 6)
            if ranks:
                entry[f"{stage}_rank"] = rank


def retrieve(
    store: VectorStore,
    collection: str,
    query: str,
    *,
    mode: str,
    preset: SearchPreset,
    k: int,
    embed_query: Callable[[str], np.ndarray],
    within: Sequence[str] | None = None,
    feedback: FeedbackParams | None = None,
) -> Retrieved:
    """Run the preset's first-stage retrievers, fuse them, and (``preset.feedback``) a second pass
    with the RM3 query and the Rocchio vector, fused the same way.

    `retrieve` returns the whole candidate ranking with, per chunk, the score every stage gave it
    (``--explain``). It talks to a `VectorStore` only; the façade (`KnowledgeBase.search`) adds the
    reranker, the ``k`` cut and the snippets.
    """
    depth = max(preset.depth, k)
    dense: list[ScoredId] = []
    sparse: list[ScoredId] = []
    vector = None
    if mode in ("semantic", "hybrid"):
        vector = embed_query(query)
        dense = store.vector_search(collection, vector, depth if mode == "hybrid" or preset.feedback else k,
                                    within=within)
    if mode in ("keyword", "hybrid"):
        sparse = store.keyword_search(collection, query, depth if mode == "hybrid" or preset.feedback else k,
                                      within=within)
    out = Retrieved(ranking=[])
    out.note("dense", dense, ranks=True)
    out.note("keyword", sparse, ranks=True)
    ranking = _combine(dense, sparse, preset)
    if mode == "hybrid":
        out.note("fused", ranking)
    if preset.feedback and ranking:
        params = feedback or FeedbackParams(docs=preset.feedback_docs)
        top = ranking[: params.docs]
        floor = ranking[-1].score
        weights = {s.chunk_id: s.score - floor + 1e-9 for s in top}
        dense2: list[ScoredId] = []
        sparse2: list[ScoredId] = []
        if vector is not None:
            vecs = store.vectors(collection, [s.chunk_id for s in top])
            moved = rocchio(vector, [vecs[s.chunk_id] for s in top if s.chunk_id in vecs], params)
            dense2 = store.vector_search(collection, moved, depth, within=within)
        if sparse or mode in ("keyword", "hybrid"):
            docs = {c.chunk_id: f"{c.title}\n{c.text}" if c.title else c.text
                    for c in store.get(collection, [s.chunk_id for s in top])}
            out.expansion = rm3_query(query, [(docs[i], w) for i, w in weights.items() if i in docs], params)
            sparse2 = store.weighted_keyword_search(collection, out.expansion, depth, within=within)
        out.note("prf_dense", dense2)
        out.note("prf_keyword", sparse2)
        lists = {"prf_dense": dense2, "prf_keyword": sparse2}
        if preset.keep_first:
            lists.update(dense=dense, keyword=sparse)
        lists = {name: items for name, items in lists.items() if items}
        ranking = fuse_lists(lists, rule=preset.fusion) if len(lists) > 1 else next(iter(lists.values()), [])
        out.note("prf_fused", ranking)
    out.ranking = ranking
    return out


def tree_lift(ranking: list[ScoredId], leaf_of: dict[str, str], lift: float, top: int = 100) -> tuple[
        list[ScoredId], dict[str, float]]:
    """Cluster-based smoothing over the tree: each of the ``top`` candidates gains ``lift`` × the mean
    score of the candidates in its leaf (Liu & Croft 2004; an unmapped chunk is its own leaf). Returns
    the new ranking (the tail keeps its order below) and each lifted chunk's leaf score."""
    head = ranking[:top]
    members: dict[str, list[float]] = {}
    for s in head:
        members.setdefault(leaf_of.get(s.chunk_id, s.chunk_id), []).append(s.score)
    leaf_score = {s.chunk_id: sum(m) / len(m) for s in head for m in [members[leaf_of.get(s.chunk_id, s.chunk_id)]]}
    lifted = sorted((ScoredId(s.chunk_id, s.score + lift * leaf_score[s.chunk_id]) for s in head),
                    key=lambda s: (-s.score, s.chunk_id))
    return lifted + ranking[top:], leaf_score


def _combine(dense: list[ScoredId], sparse: list[ScoredId], preset: SearchPreset) -> list[ScoredId]:
    if dense and sparse:
        return fuse_lists({"dense": dense, "keyword": sparse}, rule=preset.fusion)
    return list(dense or sparse)
