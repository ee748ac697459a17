"""Pseudo-relevance feedback: RM3 on the keyword side, Rocchio on the vectors."""

from __future__ import annotations

import re
from collections import Counter
from collections.abc import Sequence
from dataclasses import dataclass
from typing import TYPE_CHECKING

from ..textutil import STOP_WORDS, stem

if TYPE_CHECKING:
    import numpy as np

_WORD = re.compile(r"[0-9a-z]+")


@dataclass(frozen=True)
class FeedbackParams:
    """Parameters of both feedback stages (published defaults.

    Both read the same feedback set — the top documents of the first (fused) pass — and build a second
    query; nothing here is fitted to a collection. Defaults are the published ones:

    * RM3 (Abdul-Jaleel et al., UMass at TREC 2004; Anserini's defaults): 10 feedback documents,
      10 expansion terms, original-query weight 0.5, term model P(w|d) = tf / |d| weighted by the
      document's first-pass score, terms analysed like the full-text index (English Snowball stems).
    * Rocchio (1971) on embeddings: q' = α·q + β·centroid(feedback vectors), α = 1, β = 0.75 as in the
      SMART experiments, re-normalised to unit length.
    """

    docs: int = 10  # feedback documents (Anserini fbDocs)
    terms: int = 10  # expansion terms (Anserini fbTerms)
    original_weight: float = 0.5  # RM3 interpolation λ (Anserini originalQueryWeight)
    min_term_len: int = 2  # Anserini keeps [a-z0-9]{2,20} terms
    max_term_len: int = 20
    rocchio_alpha: float = 1.0
    rocchio_beta: float = 0.75


def analyse(text: str, params: FeedbackParams = FeedbackParams()) -> list[tuple[str, str]]:
    """``(stem, surface word)`` pairs of ``text``: lower-cased alphanumeric words, stop words out."""
    return [(stem(w), w) for w in _WORD.findall(text.lower())
            if w not in STOP_WORDS and params.min_term_len <= len(w) <= params.max_term_len]


def rm3_query(
    query: str, feedback: Sequence[tuple[str, float]], params: FeedbackParams = FeedbackParams()
) -> dict[str, float]:
    """The RM3 query: surface word -> weight (weights sum to 1).

    Args:
        query: the user's query.
        feedback: ``(text, weight)`` of the feedback documents; weights are non-negative
            first-pass scores (only their ratios matter).
        params: feedback parameters.

    Each stem is sent as its most frequent surface form, so the index's analyser maps it back to
    the same stem.
    """
    surfaces: dict[str, Counter[str]] = {}
    original: Counter[str] = Counter()
    for s, w in analyse(query, params):
        original[s] += 1
        surfaces.setdefault(s, Counter())[w] += 1
    relevance: dict[str, float] = {}
    total_weight = sum(max(0.0, w) for _, w in feedback)
    for text, weight in feedback:
        terms = analyse(text, params)
        if not terms or total_weight <= 0 or weight <= 0:
            continue
        counts = Counter(s for s, _ in terms)
        for s, w in terms:
            surfaces.setdefault(s, Counter())[w] += 1
        for s, n in counts.items():
            relevance[s] = relevance.get(s, 0.0) + (weight / total_weight) * n / len(terms)
    expansion = dict(sorted(relevance.items(), key=lambda kv: -kv[1])[: params.terms])
    norm = sum(expansion.values())
    qlen = sum(original.values())
    lam = params.original_weight if qlen else 0.0
    model: dict[str, float] = {}
    for s, n in original.items():
        model[s] = model.get(s, 0.0) + lam * n / qlen
    for s, p in expansion.items():
        if norm > 0:
            model[s] = model.get(s, 0.0) + (1 - lam) * p / norm
    return {surfaces[s].most_common(1)[0][0]: w for s, w in sorted(model.items(), key=lambda kv: (-kv[1], kv[0]))}


def rocchio(query: np.ndarray, vectors: Sequence[np.ndarray], params: FeedbackParams = FeedbackParams()) -> np.ndarray:
    """α·q + β·mean(feedback vectors), unit length (the query itself when there is no feedback)."""
    import numpy as np  # deferred: heavy

    q = np.asarray(query, dtype=np.float32)
    if not len(vectors):
        return q
    centroid = np.mean(np.stack([np.asarray(v, dtype=np.float32) for v in vectors]), axis=0)
    moved = params.rocchio_alpha * q + params.rocchio_beta * centroid
    norm = float(np.linalg.norm(moved))
    return moved / norm if norm > 0 else q
