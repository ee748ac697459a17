"""In-memory stores of the original Knowtology library: test everything without a server or a file."""

from __future__ import annotations

from collections.abc import Sequence

import numpy as np

from knowtology_cli.models import Chunk
from knowtology_cli.stores.base import ScoredId, TextStore
from knowtology_cli.stores.memory import InMemoryTreeStore
from knowtology_cli.stores.memory import InMemoryVectorStore as _PrivateVectorStore

__all__ = ["InMemoryDatabase", "InMemoryTextStore", "InMemoryTreeStore", "InMemoryVectorStore", "default_database"]


class InMemoryDatabase:
    """Chunk rows and vectors per collection, shared by the in-memory stores that use it.

    The in-memory vector and text stores of one process share the default database (like a single
    in-memory server), keyed by collection: ``TreeBuilder.build`` puts its chunks there and a fresh
    ``InMemoryVectorStore()`` handed to ``KnowledgeMapTools`` later sees them. Pass
    ``database=InMemoryDatabase()`` for private storage. Tree stores are per instance.
    """

    def __init__(self) -> None:
        self.rows: dict[str, dict[str, Chunk]] = {}
        self.vectors: dict[str, dict[str, np.ndarray]] = {}

    def clear(self, collection: str | None = None) -> None:
        """Forget one collection, or everything."""
        if collection is None:
            self.rows.clear()
            self.vectors.clear()
        else:
            self.rows.pop(collection, None)
            self.vectors.pop(collection, None)


_DEFAULT_DATABASE = InMemoryDatabase()


def default_database() -> InMemoryDatabase:
    """The process-wide database the in-memory stores use unless given another."""
    return _DEFAULT_DATABASE


class InMemoryVectorStore(_PrivateVectorStore):
    """Chunk text + vectors in memory, exact cosine search and BM25, on an :class:`InMemoryDatabase`."""

    def __init__(self, database: InMemoryDatabase | None = None) -> None:
        self.database = database if database is not None else _DEFAULT_DATABASE
        super().__init__(self.database.rows, self.database.vectors)


class InMemoryTextStore(TextStore):
    """Keyword search over the rows of an :class:`InMemoryDatabase` (the same rows the vector store holds)."""

    def __init__(self, database: InMemoryDatabase | None = None) -> None:
        self.vector_store = InMemoryVectorStore(database)

    def keyword_search(
        self, collection: str, query: str, k: int, *, within: Sequence[str] | None = None
    ) -> list[ScoredId]:
        return self.vector_store.keyword_search(collection, query, k, within=within)

    def row_store(self) -> InMemoryVectorStore:
        """The vector store over the same database (``KnowledgeMapTools`` reads the chunks from it)."""
        return self.vector_store
