"""Passage-level (MaxP) rescoring, as measured by ``benchmarks.maxp_check`` (not shipped: it did not
meet the bar for ``thorough``; figures in docs/benchmarks.md "Reranking and the thorough stages").

A chunk's one vector summarises all of it (and the default embedder reads only its first 256 word
pieces), while a query usually matches one or two sentences. MaxP (Dai & Callan, SIGIR 2019,
"Deeper Text Understanding for IR with Contextual Neural Language Modeling") splits each candidate
into passages, scores every passage against the query and keeps the best. Here the passages are
overlapping sentence windows embedded with the collection's own embedder (as documents, the query
as a query); a chunk's MaxP score is its best window's cosine. That list is fused (min-max, equal
weights) with the incoming ranking over its top N; the tail keeps its order and nothing is dropped.
Written as a product stage would be (window cache keyed by chunk id + text hash) so the cost
measured is the cost it would have.
"""

from __future__ import annotations

import hashlib
from collections import OrderedDict
from collections.abc import Callable, Sequence
from dataclasses import dataclass

import numpy as np

from knowtology_cli.chunking import _PARAGRAPH, _SENTENCE
from knowtology_cli.retrieval.fusion import fuse_lists
from knowtology_cli.stores.base import ScoredId

#: Window vectors kept in process (a few MB at 384-d: about 1.5 KB per window).
CACHE_WINDOWS = 20_000


@dataclass(frozen=True)
class WindowRule:
    """How a chunk is cut into passages.

    Attributes:
        size: sentences per window (1 = single sentences).
        stride: sentences between window starts (< size makes windows overlap).
    """

    size: int = 1
    stride: int = 1


def split_sentences(text: str) -> list[str]:
    """Sentences by the chunker's own rule (`chunking`): paragraph breaks, then ``.!?…`` (plus
    closing quotes/brackets) followed by whitespace, and CJK full stops. Whitespace is collapsed."""
    out: list[str] = []
    for paragraph in _PARAGRAPH.split(text):
        start = 0
        for m in _SENTENCE.finditer(paragraph):
            out.append(paragraph[start : m.end()])
            start = m.end()
        out.append(paragraph[start:])
    return [" ".join(s.split()) for s in out if s.strip()]


def sentence_windows(text: str, rule: WindowRule) -> list[str]:
    """Overlapping windows of ``rule.size`` sentences every ``rule.stride`` sentences; the last
    window reaches the last sentence; a text of fewer sentences is one window."""
    sentences = split_sentences(text)
    if len(sentences) <= rule.size:
        return [" ".join(sentences)] if sentences else []
    starts = list(range(0, len(sentences) - rule.size + 1, rule.stride))
    if starts[-1] + rule.size < len(sentences):
        starts.append(len(sentences) - rule.size)
    return [" ".join(sentences[i : i + rule.size]) for i in starts]


class PassageScorer:
    """Embeds the sentence windows of chunks (LRU cache keyed by chunk id + text hash) and scores
    chunks by their best window.

    Args:
        embed_documents: the collection's document embedder (``Embedder.embed_documents``).
        rule: how chunks are cut into windows.
        cache_windows: how many window vectors the cache keeps.
    """

    def __init__(self, embed_documents: Callable[[Sequence[str]], np.ndarray], rule: WindowRule,
                 cache_windows: int = CACHE_WINDOWS) -> None:
        self.embed_documents = embed_documents
        self.rule = rule
        self.cache_windows = cache_windows
        self._cache: OrderedDict[tuple[str, str], np.ndarray] = OrderedDict()
        self._cached = 0
        self.embedded = 0

    def window_vectors(self, chunks: dict[str, tuple[str, str]]) -> dict[str, np.ndarray]:
        """Unit window vectors (one row per window) for each chunk id -> (title, text); windows are
        embedded as the chunk was at ingest, ``title\\nwindow``."""
        out: dict[str, np.ndarray] = {}
        todo: dict[tuple[str, str], list[str]] = {}
        for chunk_id, (title, text) in chunks.items():
            key = (chunk_id, hashlib.sha1(f"{title}\n{text}".encode()).hexdigest())
            if key in self._cache:
                self._cache.move_to_end(key)
                out[chunk_id] = self._cache[key]
                continue
            windows = sentence_windows(text, self.rule) or [text]
            todo[key] = [f"{title}\n{w}" if title else w for w in windows]
        if todo:
            texts = [w for ws in todo.values() for w in ws]
            order = sorted(range(len(texts)), key=lambda i: len(texts[i]))  # less padding per batch
            embedded = self.embed_documents([texts[i] for i in order])
            vectors = np.empty_like(embedded)
            vectors[order] = embedded
            self.embedded += len(texts)
            start = 0
            for key, ws in todo.items():
                block = vectors[start : start + len(ws)]
                start += len(ws)
                out[key[0]] = block
                self._remember(key, block)
        return out

    def _remember(self, key: tuple[str, str], block: np.ndarray) -> None:
        self._cache[key] = block
        self._cached += len(block)
        while self._cached > self.cache_windows and len(self._cache) > 1:
            _, old = self._cache.popitem(last=False)
            self._cached -= len(old)

    def scores(self, query_vector: np.ndarray, chunks: dict[str, tuple[str, str]]) -> dict[str, float]:
        """Each chunk's best window cosine with the (unit) query vector."""
        vectors = self.window_vectors(chunks)
        return {chunk_id: float((block @ query_vector).max()) for chunk_id, block in vectors.items() if len(block)}


def maxp_rescore(ranking: Sequence[ScoredId], maxp: dict[str, float], top: int) -> list[ScoredId]:
    """Fuse the MaxP scores with the incoming scores over the top ``top`` (min-max, equal weights).

    The head's fused scores are mapped onto the incoming head's score range, so scores stay
    decreasing into the tail, which keeps its order below; nothing is dropped. A head chunk with no
    MaxP score gets that list's floor (as in `fusion.fuse_lists`).
    """
    head = list(ranking[:top])
    if len(head) < 2 or not maxp:
        return list(ranking)
    fused = fuse_lists({"ranking": head, "maxp": [ScoredId(s.chunk_id, maxp[s.chunk_id])
                                                  for s in head if s.chunk_id in maxp]}, rule="minmax")
    high, low = head[0].score, head[-1].score
    return [ScoredId(s.chunk_id, low + s.score * (high - low)) for s in fused] + list(ranking[top:])
