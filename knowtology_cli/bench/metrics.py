"""Retrieval metrics through ranx (never hand-rolled), plus small latency and fusion helpers."""

from __future__ import annotations

import os
from collections.abc import Mapping, Sequence
from pathlib import Path

import numpy as np

METRICS = ("ndcg@10", "recall@10", "recall@100", "mrr@10")
Ranked = Mapping[str, Mapping[str, float]]  # query id -> doc id -> score


def evaluate(qrels: Mapping[str, Mapping[str, int]], run: Ranked, metrics: Sequence[str] = METRICS) -> dict[str, float]:
    """Mean metrics over the judged queries of ``run`` with ranx (a query with no hits scores 0)."""
    os.environ.setdefault("NUMBA_CACHE_DIR", str(_numba_cache()))
    from ranx import Qrels, Run  # deferred: optional extra
    from ranx import evaluate as ranx_evaluate  # deferred: optional extra

    judged = {q: {d: int(s) for d, s in rel.items()} for q, rel in qrels.items() if q in run and rel}
    filled = {q: (dict(run[q]) or {"__no_hit__": 0.0}) for q in judged}
    scores = ranx_evaluate(Qrels(judged), Run(filled), list(metrics), make_comparable=True)
    if isinstance(scores, float):
        scores = {metrics[0]: scores}
    return {m: round(float(v), 4) for m, v in scores.items()}


def per_query(qrels: Mapping[str, Mapping[str, int]], run: Ranked, metric: str) -> dict[str, float]:
    """One metric per query (ranx), for sessions and plots."""
    from ranx import Qrels, Run  # deferred: optional extra
    from ranx import evaluate as ranx_evaluate  # deferred: optional extra

    judged = {q: {d: int(s) for d, s in rel.items()} for q, rel in qrels.items() if q in run and rel}
    filled = {q: (dict(run[q]) or {"__no_hit__": 0.0}) for q in judged}
    r = Run(filled)
    ranx_evaluate(Qrels(judged), r, metric, make_comparable=True)
    return {q: float(v) for q, v in r.scores[metric].items()}


def _numba_cache():
    path = Path.home() / ".cache" / "knowtology" / "numba"
    path.mkdir(parents=True, exist_ok=True)
    return path


def latency(seconds: Sequence[float], cpu_seconds: Sequence[float] | None = None) -> dict[str, float]:
    """p50 / p95 / mean wall time in milliseconds (and median CPU time when given)."""
    if not seconds:
        return {"p50_ms": 0.0, "p95_ms": 0.0, "mean_ms": 0.0}
    arr = np.asarray(seconds) * 1000.0
    out = {"p50_ms": round(float(np.percentile(arr, 50)), 2), "p95_ms": round(float(np.percentile(arr, 95)), 2),
           "mean_ms": round(float(arr.mean()), 2)}
    if cpu_seconds:
        out["cpu_p50_ms"] = round(float(np.percentile(np.asarray(cpu_seconds) * 1000.0, 50)), 2)
    return out


def minmax_fuse(dense: Mapping[str, float], sparse: Mapping[str, float], weight: float = 0.5) -> dict[str, float]:
    """Convex combination of min-max normalised scores (missing = 0); the same rule as ``kb.fuse``."""

    def norm(d: Mapping[str, float]) -> dict[str, float]:
        if not d:
            return {}
        lo, hi = min(d.values()), max(d.values())
        return {k: (v - lo) / (hi - lo) if hi > lo else 1.0 for k, v in d.items()}

    a, b = norm(dense), norm(sparse)
    return {k: weight * a.get(k, 0.0) + (1 - weight) * b.get(k, 0.0) for k in {*a, *b}}


def rrf_fuse(*lists: Mapping[str, float], k: int = 60) -> dict[str, float]:
    """Reciprocal rank fusion: sum of 1 / (k + rank) over the lists (rank from 1)."""
    out: dict[str, float] = {}
    for scores in lists:
        for rank, doc in enumerate(sorted(scores, key=lambda d: -scores[d]), start=1):
            out[doc] = out.get(doc, 0.0) + 1.0 / (k + rank)
    return out


def top(scores: Mapping[str, float], n: int) -> dict[str, float]:
    """The ``n`` best entries of a score map (ties broken by id, for determinism)."""
    return dict(sorted(scores.items(), key=lambda kv: (-kv[1], kv[0]))[:n])
