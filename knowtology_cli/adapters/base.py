"""Seed-compatible ABCs: ``TreeStore`` and ``VectorStore`` are the package's own; ``TextStore`` is new.

A ``TextStore`` answers keyword searches. Our vector stores already keep a full-text index over the
chunk text, so a text store is only needed when keywords live somewhere else (e.g. PostgreSQL
full-text next to a Qdrant vector store); ``KnowledgeMapTools`` routes keyword searches to it.
"""

from __future__ import annotations

import asyncio
from abc import ABC, abstractmethod
from collections.abc import Sequence
from typing import Any

from knowtology_cli.stores.base import ScoredId, TreeStore, VectorStore

__all__ = ["ScoredId", "TextStore", "TreeStore", "VectorStore"]


class TextStore(ABC):
    """Keyword (BM25-style) search over a collection's chunk text."""

    @abstractmethod
    def keyword_search(
        self, collection: str, query: str, k: int, *, within: Sequence[str] | None = None
    ) -> list[ScoredId]:
        """Best-first chunk ids for ``query``, optionally restricted to ``within`` ids."""

    async def search_by_keywords(self, collection_id: str, keywords: str, top_k: int = 5) -> list[dict[str, Any]]:
        """The seed's async form: ``[{"chunk_id", "score"}]`` best first."""
        from knowtology_cli.textutil import keyword_query

        query = keyword_query(keywords)
        hits = await asyncio.to_thread(self.keyword_search, collection_id, query, top_k)
        return [{"chunk_id": h.chunk_id, "score": h.score} for h in hits]

    def close(self) -> None:  # noqa: B027 (optional hook, nothing to release by default)
        """Release resources."""
