"""Vector stores that pass calls on: attached collections to their own store, keywords to a text store."""

from __future__ import annotations

from collections.abc import Iterator, Sequence
from pathlib import Path
from typing import TYPE_CHECKING, Any

from knowtology_cli.errors import ConfigError
from knowtology_cli.stores.base import ScoredId, TextStore, TreeStore, VectorStore
from knowtology_cli.stores.lance import LanceVectorStore

if TYPE_CHECKING:
    import numpy as np

    from knowtology_cli.models import Chunk

ATTACHED_KINDS = ("lance", "qdrant")


def open_vector_store(uri: str | None, default_dir: str | Path) -> VectorStore:
    """The vector store a ``vector_uri`` names.

    ``None`` or a path or ``s3://``/``gs://``/``az://`` URI: Lance (credentials from the usual
    ``AWS_*`` / ``GOOGLE_*`` / ``AZURE_*`` environment variables). ``qdrant+http(s)://host:port``: a
    Qdrant server; ``qdrant:///abs/dir``: Qdrant local mode in that directory.
    """
    if uri and uri.startswith(("qdrant+http://", "qdrant+https://")):
        from knowtology_cli.stores.qdrant import QdrantVectorStore  # deferred: loads numpy

        return QdrantVectorStore(url=uri.removeprefix("qdrant+"))
    if uri and uri.startswith("qdrant://"):
        from knowtology_cli.stores.qdrant import QdrantVectorStore  # deferred: loads numpy

        return QdrantVectorStore(path=uri.removeprefix("qdrant://") or str(Path(default_dir).parent / "qdrant"))

    return LanceVectorStore(uri or default_dir)


def store_for_source(collection: str, source: dict[str, Any]) -> VectorStore:
    """The read-only store an attachment record describes."""
    kind = source.get("kind")
    if kind == "lance":
        from knowtology_cli.stores.attached import AttachedLanceStore, ColumnMap  # deferred: loads numpy

        return AttachedLanceStore(source["table"], ColumnMap.from_dict(source["columns"]),
                                  version=source.get("pin_version"))
    if kind == "qdrant":
        from knowtology_cli.stores.qdrant import QdrantVectorStore  # deferred: loads numpy

        return QdrantVectorStore(url=source.get("url"), path=source.get("path"),
                                 collections={collection: source["collection"]}, fields=source.get("fields"),
                                 vector_name=source.get("vector_name"), read_only=True)
    raise ConfigError(f"collection {collection!r} has an unknown source kind {kind!r}",
                      hint="re-attach it with `kt attach`")


class ForwardingVectorStore(VectorStore):
    """A vector store that passes every call on to the store :meth:`target` names for the collection.

    Each method of :class:`VectorStore` is written out here, so a subclass changes where calls go
    (``target``) or overrides the few it answers itself; nothing is forwarded implicitly.
    """

    def __init__(self, inner: VectorStore) -> None:
        self.inner = inner

    def target(self, collection: str) -> VectorStore:
        """The store that answers calls about ``collection`` (default: :attr:`inner`)."""
        return self.inner

    @property
    def read_only(self) -> bool:  # type: ignore[override]
        return self.inner.read_only

    def is_read_only(self, collection: str) -> bool:
        return self.target(collection).is_read_only(collection)

    def upsert(self, collection: str, chunks: Sequence[Chunk], vectors: np.ndarray) -> None:
        self.target(collection).upsert(collection, chunks, vectors)

    def delete(self, collection: str, chunk_ids: Sequence[str]) -> None:
        self.target(collection).delete(collection, chunk_ids)

    def drop(self, collection: str) -> None:
        self.target(collection).drop(collection)

    def fingerprints(self, collection: str) -> dict[str, tuple[str, str]]:
        return self.target(collection).fingerprints(collection)

    def get(self, collection: str, chunk_ids: Sequence[str], *, with_text: bool = True) -> list[Chunk]:
        return self.target(collection).get(collection, chunk_ids, with_text=with_text)

    def iter_rows(
        self, collection: str, *, with_vectors: bool = True, batch_size: int = 4096
    ) -> Iterator[tuple[list[Chunk], np.ndarray | None]]:
        return self.target(collection).iter_rows(collection, with_vectors=with_vectors, batch_size=batch_size)

    def vectors(self, collection: str, chunk_ids: Sequence[str]) -> dict[str, np.ndarray]:
        return self.target(collection).vectors(collection, chunk_ids)

    def vector_search(
        self, collection: str, vector: np.ndarray, k: int, *, within: Sequence[str] | None = None
    ) -> list[ScoredId]:
        return self.target(collection).vector_search(collection, vector, k, within=within)

    def keyword_search(
        self, collection: str, query: str, k: int, *, within: Sequence[str] | None = None
    ) -> list[ScoredId]:
        return self.target(collection).keyword_search(collection, query, k, within=within)

    def weighted_keyword_search(
        self, collection: str, terms: dict[str, float], k: int, *, within: Sequence[str] | None = None
    ) -> list[ScoredId]:
        return self.target(collection).weighted_keyword_search(collection, terms, k, within=within)

    def regex_search(
        self, collection: str, pattern: str, k: int, *, within: Sequence[str] | None = None
    ) -> list[ScoredId]:
        return self.target(collection).regex_search(collection, pattern, k, within=within)

    def neighbours(self, collection: str, chunk: Chunk, before: int, after: int) -> list[Chunk]:
        return self.target(collection).neighbours(collection, chunk, before, after)

    def concurrent_reads(self, collection: str) -> bool:
        return self.target(collection).concurrent_reads(collection)

    def count(self, collection: str) -> int:
        return self.target(collection).count(collection)

    def indexes_stale(self, collection: str) -> bool:
        return self.target(collection).indexes_stale(collection)

    def refresh_indexes(self, collection: str) -> None:
        self.target(collection).refresh_indexes(collection)

    def forget(self, collection: str) -> None:
        self.inner.forget(collection)

    def backend_for(self, collection: str) -> VectorStore:
        return self.target(collection).backend_for(collection)

    def close(self) -> None:
        self.inner.close()


class RoutingVectorStore(ForwardingVectorStore):
    """Dispatches each call by collection: attached ones to their own store, the rest to ``default``.

    A collection made by ``kt attach`` records where its rows live in ``CollectionInfo.source``
    (``{"kind": "lance", "table": ..., "columns": {...}}`` or ``{"kind": "qdrant", ...}``); the
    router opens that store the first time the collection is touched. ``open_vector_store`` turns a
    ``vector_uri`` setting into the default store (Lance directory / object-store URI, or Qdrant).
    """

    def __init__(self, default: VectorStore, tree: TreeStore) -> None:
        super().__init__(default)
        self.tree = tree
        self._routes: dict[str, VectorStore | None] = {}

    @property
    def default(self) -> VectorStore:
        """The store of every collection that is not attached."""
        return self.inner

    def route(self, collection: str) -> VectorStore:
        """The store holding ``collection``'s rows."""
        if collection not in self._routes:
            info = self.tree.get_collection(collection)
            source = info.source if info is not None else None
            attached = source is not None and source.get("kind") in ATTACHED_KINDS and source.get("attached", True)
            self._routes[collection] = store_for_source(collection, source) if source is not None and attached else None
        return self._routes[collection] or self.default

    def target(self, collection: str) -> VectorStore:
        return self.route(collection)

    def forget(self, collection: str) -> None:
        """Drop the cached route (after attaching or detaching ``collection``) and what the default
        store caches about it."""
        store = self._routes.pop(collection, None)
        if store is not None:
            store.close()
        self.default.forget(collection)

    def close(self) -> None:
        for store in self._routes.values():
            if store is not None:
                store.close()
        self._routes.clear()
        self.default.close()


class KeywordRoutedStore(ForwardingVectorStore):
    """A vector store whose keyword searches are answered by a separate text store (e.g. PostgreSQL
    full-text beside a vector store without BM25); every other call goes to ``vectors``."""

    def __init__(self, vectors: VectorStore, text_store: TextStore) -> None:
        super().__init__(vectors)
        self.text_store = text_store

    def keyword_search(
        self, collection: str, query: str, k: int, *, within: Sequence[str] | None = None
    ) -> list[ScoredId]:
        return self.text_store.keyword_search(collection, query, k, within=within)

    def weighted_keyword_search(
        self, collection: str, terms: dict[str, float], k: int, *, within: Sequence[str] | None = None
    ) -> list[ScoredId]:
        """A text store takes no weights: the terms as one plain keyword search."""
        return self.keyword_search(collection, " ".join(terms), k, within=within)

    def concurrent_reads(self, collection: str) -> bool:
        """Keyword searches go to another store (e.g. a PostgreSQL connection): kept serial."""
        return False
