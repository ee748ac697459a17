"""In-memory stores for unit tests and small embedded uses: no files, same behaviour."""

from __future__ import annotations

import math
from collections import Counter
from collections.abc import Iterator, Sequence

import numpy as np

from ..errors import EmbeddingError
from ..models import Chunk
from ..textutil import tokenize
from .base import ScoredId, VectorStore
from .sqlite import SQLiteTreeStore


class InMemoryTreeStore(SQLiteTreeStore):
    """The SQLite tree store on a private in-memory database."""

    def __init__(self) -> None:
        super().__init__(":memory:")


class InMemoryVectorStore(VectorStore):
    """Rows in dicts, exact cosine search, a plain BM25 (k1=0.9, b=0.4) for keywords.

    ``rows`` / ``vectors`` (``collection -> chunk_id -> row / vector``) let several stores share one
    storage (the seed adapters' in-memory database); by default the store has its own.
    """

    def __init__(self, rows: dict[str, dict[str, Chunk]] | None = None,
                 vectors: dict[str, dict[str, np.ndarray]] | None = None) -> None:
        self._rows: dict[str, dict[str, Chunk]] = rows if rows is not None else {}
        self._vectors: dict[str, dict[str, np.ndarray]] = vectors if vectors is not None else {}

    def upsert(self, collection: str, chunks: Sequence[Chunk], vectors: np.ndarray) -> None:
        existing = self._vectors.get(collection)
        if existing:
            dim = len(next(iter(existing.values())))
            if vectors.shape[1] != dim:
                raise EmbeddingError(f"collection {collection!r} holds {dim}-d vectors, got {vectors.shape[1]}-d")
        rows = self._rows.setdefault(collection, {})
        vecs = self._vectors.setdefault(collection, {})
        for chunk, vector in zip(chunks, vectors):
            rows[chunk.chunk_id] = chunk
            vecs[chunk.chunk_id] = np.asarray(vector, dtype=np.float32)

    def delete(self, collection: str, chunk_ids: Sequence[str]) -> None:
        for chunk_id in chunk_ids:
            self._rows.get(collection, {}).pop(chunk_id, None)
            self._vectors.get(collection, {}).pop(chunk_id, None)

    def drop(self, collection: str) -> None:
        self._rows.pop(collection, None)
        self._vectors.pop(collection, None)

    def fingerprints(self, collection: str) -> dict[str, tuple[str, str]]:
        return {i: (c.content_hash, c.file_name) for i, c in self._rows.get(collection, {}).items()}

    def get(self, collection: str, chunk_ids: Sequence[str], *, with_text: bool = True) -> list[Chunk]:
        rows = self._rows.get(collection, {})
        return [rows[i] for i in dict.fromkeys(chunk_ids) if i in rows]

    def iter_rows(
        self, collection: str, *, with_vectors: bool = True, batch_size: int = 4096
    ) -> Iterator[tuple[list[Chunk], np.ndarray | None]]:
        ids = list(self._rows.get(collection, {}))
        for start in range(0, len(ids), batch_size):
            part = ids[start : start + batch_size]
            chunks = [self._rows[collection][i] for i in part]
            vectors = np.stack([self._vectors[collection][i] for i in part]) if with_vectors else None
            yield chunks, vectors

    def vectors(self, collection: str, chunk_ids: Sequence[str]) -> dict[str, np.ndarray]:
        vecs = self._vectors.get(collection, {})
        return {i: vecs[i] for i in chunk_ids if i in vecs}

    def count(self, collection: str) -> int:
        return len(self._rows.get(collection, {}))

    def vector_search(
        self, collection: str, vector: np.ndarray, k: int, *, within: Sequence[str] | None = None
    ) -> list[ScoredId]:
        vecs = self._vectors.get(collection, {})
        ids = [i for i in (within if within is not None else vecs) if i in vecs]
        if not ids or k <= 0:
            return []
        matrix = np.stack([vecs[i] for i in ids])
        if matrix.shape[1] != len(vector):
            raise EmbeddingError(f"query vector has {len(vector)} dimensions, collection has {matrix.shape[1]}")
        scores = matrix @ np.asarray(vector, dtype=np.float32)
        order = np.argsort(-scores, kind="stable")[:k]
        return [ScoredId(ids[j], float(scores[j])) for j in order]

    def keyword_search(
        self, collection: str, query: str, k: int, *, within: Sequence[str] | None = None
    ) -> list[ScoredId]:
        rows = self._rows.get(collection, {})
        terms = tokenize(query)
        if not rows or not terms or k <= 0:
            return []
        docs = {i: Counter(tokenize(f"{c.title} {c.text}")) for i, c in rows.items()}
        avg = sum(sum(d.values()) for d in docs.values()) / len(docs) or 1.0
        n = len(docs)
        df = {t: sum(1 for d in docs.values() if t in d) for t in set(terms)}
        wanted = set(within) if within is not None else None
        scored = []
        for chunk_id, tf in docs.items():
            if wanted is not None and chunk_id not in wanted:
                continue
            length = sum(tf.values())
            score = 0.0
            for term in terms:
                if tf.get(term):
                    idf = math.log(1 + (n - df[term] + 0.5) / (df[term] + 0.5))
                    score += idf * tf[term] * 1.9 / (tf[term] + 0.9 * (0.6 + 0.4 * length / avg))
            if score > 0:
                scored.append(ScoredId(chunk_id, score))
        scored.sort(key=lambda h: (-h.score, h.chunk_id))
        return scored[:k]
