"""Seed-compatible names of the store interfaces: ``TreeStore``, ``VectorStore`` and ``TextStore``.

A ``TextStore`` answers keyword searches. Our vector stores already keep a full-text index over the
chunk text (every ``VectorStore`` is a ``TextStore``), so a separate text store is only needed when
keywords live somewhere else (e.g. PostgreSQL full-text next to a Qdrant vector store);
``KnowledgeMapTools`` routes keyword searches to it.
"""

from __future__ import annotations

from knowtology_cli.stores.base import ScoredId, TextStore, TreeStore, VectorStore

__all__ = ["ScoredId", "TextStore", "TreeStore", "VectorStore"]
