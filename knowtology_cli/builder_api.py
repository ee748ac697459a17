"""``TreeBuilder``: the original Knowtology library's async build API over ``KnowledgeBase``."""

from __future__ import annotations

import asyncio
from collections.abc import Iterable, Mapping
from typing import TYPE_CHECKING, Any

from .errors import ConfigError
from .kb import KnowledgeBase

if TYPE_CHECKING:
    from .embedders.base import Embedder
    from .llm.base import LLMClient
    from .stores.base import TreeStore, VectorStore


class TreeBuilder:
    """Builds a collection's category tree from chunks (seed-compatible).

    ``await TreeBuilder(llm=llm, tree_store=tree_store).build(collection_id=..., chunks=[{...}])``
    upserts the chunk dicts (the fields of a JSONL chunk line) into the vector store, embedding only
    new or changed ones, then builds or extends the tree with the LLM (offline clustering when ``llm``
    is None). Without a ``vector_store`` the chunks go to the shared in-memory database of
    :mod:`knowtology_cli.adapters.memory`, where a later ``InMemoryVectorStore()`` finds them.

    Args:
        llm: the LLM client for tree building; None builds offline by clustering.
        tree_store: where the tree and mappings go (default: a new in-memory tree store).
        vector_store: where chunk text and vectors go (default: the shared in-memory database).
        embedder: embeds the chunks; default: the collection's recorded embedder, else the local
            model. Pass ``HashEmbedder()`` in tests that must not load a model.
        concurrency: parallel LLM calls where batches are independent.
    """

    def __init__(
        self,
        llm: LLMClient | None = None,
        tree_store: TreeStore | None = None,
        vector_store: VectorStore | None = None,
        embedder: Embedder | None = None,
        *,
        concurrency: int = 4,
    ) -> None:
        if tree_store is None:
            from .adapters.memory import InMemoryTreeStore  # deferred: loads numpy

            tree_store = InMemoryTreeStore()
        if vector_store is None:
            from .adapters.memory import InMemoryVectorStore  # deferred: loads numpy

            vector_store = InMemoryVectorStore()
        self.llm = llm
        self.tree_store = tree_store
        self.vector_store = vector_store
        self.embedder = embedder
        self.concurrency = concurrency
        self._kb: KnowledgeBase | None = None

    @property
    def kb(self) -> KnowledgeBase:
        """The knowledge base over this builder's stores."""
        if self._kb is None:
            self._kb = KnowledgeBase(tree_store=self.tree_store, vector_store=self.vector_store,
                                     embedder=self.embedder, llm=self.llm)
        return self._kb

    def build_sync(
        self, collection_id: str, chunks: Iterable[Mapping[str, Any]], *, rebuild: bool = False
    ) -> dict[str, Any]:
        """Upsert ``chunks`` and build or extend the tree; see :meth:`build`."""
        rows = [dict(c) for c in chunks]
        if not rows:
            raise ConfigError("no chunks given", hint='pass chunks=[{"text": ..., "chunk_id": ...}, ...]')
        for row in rows:
            row.setdefault("file_name", collection_id)
        kb = self.kb
        ingested = kb.add_chunks(rows, collection=collection_id,
                                 embedder=self.embedder.name if self.embedder else None)
        report = kb.build(collection=collection_id, builder="llm" if self.llm is not None else "cluster",
                          llm=self.llm, rebuild=rebuild, concurrency=self.concurrency)
        return {
            "collection_id": collection_id,
            "tree_count": report.nodes,
            "mapping_count": report.mapped,
            "unmapped_count": report.unmapped,
            "builder": report.builder,
            "added": ingested.added,
            "updated": ingested.updated,
            "unchanged": ingested.unchanged,
            "llm_calls": report.llm_calls,
            "input_tokens": report.input_tokens,
            "output_tokens": report.output_tokens,
            "cost_usd": report.cost_usd,
        }

    async def build(
        self, collection_id: str, chunks: Iterable[Mapping[str, Any]], *, rebuild: bool = False
    ) -> dict[str, Any]:
        """Upsert ``chunks`` into the vector store and build or extend the tree.

        Only new or changed chunks are embedded and mapped unless ``rebuild``.

        Returns:
            ``tree_count`` (categories), ``mapping_count`` (mapped chunks), ``unmapped_count``,
            ``builder``, ``added``/``updated``/``unchanged`` chunk counts and the LLM usage
            (``llm_calls``, ``input_tokens``, ``output_tokens``, ``cost_usd``).
        """
        rows = [dict(c) for c in chunks]
        return await asyncio.to_thread(self.build_sync, collection_id, rows, rebuild=rebuild)
