"""The retrieval stages before reranking: retrieve, fuse, pseudo-relevance feedback."""

from __future__ import annotations

import os
import threading
from collections.abc import Callable, Sequence
from concurrent.futures import Future, ThreadPoolExecutor
from dataclasses import dataclass, field
from typing import TYPE_CHECKING, Any

from ..stores.base import ScoredId
from .fusion import fuse_lists
from .presets import SearchPreset
from .prf import FeedbackParams, rm3_query, rocchio

if TYPE_CHECKING:
    import numpy as np

    from ..stores.base import VectorStore


@dataclass
class Retrieved:
    """A candidate ranking and what each stage scored (chunk id -> stage -> value).

    `note` only keeps the lists; `stages` builds the per-chunk table on first use. Only
    ``--explain`` reads it, and building it for every candidate of a 300-deep hybrid search cost
    more than the fusion itself.
    """

    ranking: list[ScoredId]
    expansion: dict[str, float] = field(default_factory=dict)
    _notes: list[tuple[str, Sequence[ScoredId], bool]] = field(default_factory=list, repr=False)
    _stages: dict[str, dict[str, float]] | None = field(default=None, repr=False)

    def note(self, stage: str, items: Sequence[ScoredId], *, ranks: bool = False) -> None:
        if self._stages is None:
            self._notes.append((stage, tuple(items), ranks))  # a copy: the caller may reorder its list
        else:
            _record(self._stages, stage, items, ranks)

    @property
    def stages(self) -> dict[str, dict[str, float]]:
        if self._stages is None:
            self._stages = {}
            for stage, items, ranks in self._notes:
                _record(self._stages, stage, items, ranks)
            self._notes.clear()
        return self._stages


def _record(stages: dict[str, dict[str, float]], stage: str, items: Sequence[ScoredId], ranks: bool) -> None:
    for rank, s in enumerate(items, start=1):
        entry = stages.setdefault(s.chunk_id, {})
        entry[stage] = round(s.score, 6)
        if ranks:
            entry[f"{stage}_rank"] = rank


_POOL: ThreadPoolExecutor | None = None
_POOL_LOCK = threading.Lock()
#: Worker threads for the keyword side of hybrid searches: one per search in flight; a server that
#: runs more hybrid searches at once queues their keyword searches here.
POOL_WORKERS = 2


def _pool() -> ThreadPoolExecutor:
    """The module's worker pool, created on first use (never one per query)."""
    global _POOL
    with _POOL_LOCK:
        if _POOL is None:
            _POOL = ThreadPoolExecutor(max_workers=POOL_WORKERS, thread_name_prefix="kt-search")
        return _POOL


def _forget_pool() -> None:
    """A forked child does not inherit the parent's threads: it starts a pool of its own."""
    global _POOL, _POOL_LOCK
    _POOL, _POOL_LOCK = None, threading.Lock()


if hasattr(os, "register_at_fork"):
    os.register_at_fork(after_in_child=_forget_pool)


def _start(concurrent: bool, fn: Callable[..., list[ScoredId]], *args: Any, **kwargs: Any) -> Future[list[ScoredId]]:
    """``fn(*args, **kwargs)`` on the worker pool when ``concurrent``, else run here (a done future)."""
    if concurrent:
        return _pool().submit(fn, *args, **kwargs)
    done: Future[list[ScoredId]] = Future()
    try:
        done.set_result(fn(*args, **kwargs))
    except Exception as exc:  # noqa: BLE001 - re-raised by .result(), as the concurrent path does
        done.set_exception(exc)
    return done


def _settle(job: Future[list[ScoredId]] | None) -> None:
    """The other branch failed: cancel ``job``, or wait for it (it only reads) and drop its outcome,
    so no search of this call is still running when the error reaches the caller."""
    if job is not None and not job.cancel():
        job.exception()


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

    In hybrid mode the keyword searches run on a worker thread beside the query embedding and the
    vector searches when the store says two reads may overlap (`VectorStore.concurrent_reads`); an
    error in either branch is raised here as it would be one after the other, once both have ended.
    """
    depth = max(preset.depth, k)
    deep = mode == "hybrid" or preset.feedback
    # The two retrievers are independent: the keyword list is fetched on a worker thread while the
    # query is embedded and the vector list fetched (Lance and onnxruntime release the GIL), when the
    # store allows two reads at once. The lists, and so the ranking, are the same either way.
    concurrent = mode == "hybrid" and store.concurrent_reads(collection)
    sparse_job = None
    if mode in ("keyword", "hybrid"):
        sparse_job = _start(concurrent, store.keyword_search, collection, query, depth if deep else k,
                            within=within)
    dense: list[ScoredId] = []
    vector = None
    if mode in ("semantic", "hybrid"):
        try:
            vector = embed_query(query)
            dense = store.vector_search(collection, vector, depth if deep else k, within=within)
        except BaseException:
            _settle(sparse_job)
            raise
    sparse = sparse_job.result() if sparse_job is not None else []
    out = Retrieved(ranking=[])
    out.note("dense", dense, ranks=True)
    out.note("keyword", sparse, ranks=True)
    ranking = _combine(dense, sparse, preset)
    if mode == "hybrid":
        out.note("fused", ranking)
    if preset.feedback and ranking:
        params = feedback or FeedbackParams(docs=preset.feedback_docs)
        chooser = ranking
        head_vectors: dict[str, np.ndarray] = {}
        if preset.smoothing > 0 and vector is not None:
            head_vectors = store.vectors(collection, [s.chunk_id for s in ranking[:SMOOTH_TOP]])
            chooser = smooth_scores(ranking, head_vectors, preset.smoothing, preset.smoothing_neighbours)
            out.note("smoothed", chooser[:SMOOTH_TOP])
        top = chooser[: params.docs]
        floor = chooser[-1].score
        weights = {s.chunk_id: s.score - floor + 1e-9 for s in top}
        dense2: list[ScoredId] = []
        sparse2_job = None
        if sparse or mode in ("keyword", "hybrid"):
            docs = {c.chunk_id: f"{c.title}\n{c.text}" if c.title else c.text
                    for c in store.get(collection, [s.chunk_id for s in top])}
            out.expansion = rm3_query(query, [(docs[i], w) for i, w in weights.items() if i in docs], params)
            sparse2_job = _start(concurrent and vector is not None, store.weighted_keyword_search, collection,
                                 out.expansion, depth, within=within)
        if vector is not None:
            try:
                missing = [s.chunk_id for s in top if s.chunk_id not in head_vectors]
                vecs = {**head_vectors, **store.vectors(collection, missing)} if missing else head_vectors
                moved = rocchio(vector, [vecs[s.chunk_id] for s in top if s.chunk_id in vecs], params)
                dense2 = store.vector_search(collection, moved, depth, within=within)
            except BaseException:
                _settle(sparse2_job)
                raise
        sparse2 = sparse2_job.result() if sparse2_job is not None else []
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


#: Candidates the first-pass smoothing reads vectors for and reorders (the tail keeps its order below).
SMOOTH_TOP = 100


def smooth_scores(ranking: list[ScoredId], vectors: dict[str, np.ndarray], alpha: float, neighbours: int,
                  top: int = SMOOTH_TOP) -> list[ScoredId]:
    """Score regularization over a k-nearest-neighbour graph of the candidates (Diaz 2005, "Regularizing
    ad hoc retrieval scores"): each of the ``top`` candidates' score, min-max normalised over the head,
    becomes (1 − α) × its own + α × the mean of its ``neighbours`` most similar candidates' scores,
    weighted by their (non-negative) cosine similarity. A candidate without a vector keeps its own
    score. Returns the head reordered by the new scores (ties in the incoming order), then the rest
    unchanged: the feedback pass reads the head's order and its scores above the list's last."""
    import numpy as np  # deferred: heavy

    head = [s for s in ranking[:top] if s.chunk_id in vectors]
    if len(head) < 3 or alpha <= 0:
        return ranking
    matrix = np.stack([np.asarray(vectors[s.chunk_id], dtype=np.float64) for s in head])
    norms = np.linalg.norm(matrix, axis=1, keepdims=True)
    matrix /= np.where(norms > 0, norms, 1.0)
    sims = matrix @ matrix.T
    np.fill_diagonal(sims, -np.inf)
    scores = np.array([s.score for s in head])
    spread = scores.max() - scores.min()
    own = (scores - scores.min()) / spread if spread > 0 else np.ones_like(scores)
    n = min(neighbours, len(head) - 1)
    nearest = np.argpartition(-sims, n - 1, axis=1)[:, :n]
    weights = np.clip(np.take_along_axis(sims, nearest, axis=1), 0.0, None)
    total = weights.sum(axis=1)
    around = np.where(total > 0, (weights * own[nearest]).sum(axis=1) / np.where(total > 0, total, 1.0), own)
    smoothed = (1 - alpha) * own + alpha * around
    order = sorted(range(len(head)), key=lambda i: -smoothed[i])  # stable: ties keep the incoming order
    kept = {s.chunk_id for s in head}
    return [ScoredId(head[i].chunk_id, float(smoothed[i])) for i in order] + [
        s for s in ranking if s.chunk_id not in kept]


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
