"""RoutingVectorStore: attached collections go to their read-only store, every other to the default.

A collection made by ``kt attach`` records where its rows live in ``CollectionInfo.source``
(``{"kind": "lance", "table": ..., "columns": {...}}`` or ``{"kind": "qdrant", ...}``); the
router opens that store the first time the collection is touched. ``open_vector_store`` turns a
``vector_uri`` setting into the default store (Lance directory / object-store URI, or Qdrant).
"""

from __future__ import annotations

from collections.abc import Iterator, Sequence
from pathlib import Path
from typing import TYPE_CHECKING, Any

from knowtology_cli.errors import ConfigError
from knowtology_cli.stores.base import ScoredId, TreeStore, VectorStore

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
        from knowtology_cli.stores.qdrant import QdrantVectorStore

        return QdrantVectorStore(url=uri.removeprefix("qdrant+"))
    if uri and uri.startswith("qdrant://"):
        from knowtology_cli.stores.qdrant import QdrantVectorStore

        return QdrantVectorStore(path=uri.removeprefix("qdrant://") or str(Path(default_dir).parent / "qdrant"))
    from knowtology_cli.stores.lance import LanceVectorStore

    return LanceVectorStore(uri or default_dir)


def store_for_source(collection: str, source: dict[str, Any]) -> VectorStore:
    """The read-only store an attachment record describes."""
    kind = source.get("kind")
    if kind == "lance":
        from knowtology_cli.stores.attached import AttachedLanceStore, ColumnMap

        return AttachedLanceStore(source["table"], ColumnMap.from_dict(source["columns"]),
                                  version=source.get("pin_version"))
    if kind == "qdrant":
        from knowtology_cli.stores.qdrant import QdrantVectorStore

        return QdrantVectorStore(url=source.get("url"), path=source.get("path"),
                                 collections={collection: source["collection"]}, fields=source.get("fields"),
                                 vector_name=source.get("vector_name"), read_only=True)
    raise ConfigError(f"collection {collection!r} has an unknown source kind {kind!r}",
                      hint="re-attach it with `kt attach`")


class RoutingVectorStore(VectorStore):
    """Dispatches each call by collection: attached ones to their own store, the rest to ``default``."""

    def __init__(self, default: VectorStore, tree: TreeStore) -> None:
        self.default = default
        self.tree = tree
        self._routes: dict[str, VectorStore | None] = {}

    def __getattr__(self, name: str) -> Any:
        """Backend-specific helpers (e.g. ``LanceVectorStore._dataset``) of the default store."""
        default = self.__dict__.get("default")
        if default is None or name.startswith("__"):
            raise AttributeError(name)
        return getattr(default, name)

    def route(self, collection: str) -> VectorStore:
        """The store holding ``collection``'s rows."""
        if collection not in self._routes:
            info = self.tree.get_collection(collection)
            source = info.source if info is not None else None
            attached = bool(source) and source.get("kind") in ATTACHED_KINDS and source.get("attached", True)
            self._routes[collection] = store_for_source(collection, source) if attached else None
        return self._routes[collection] or self.default

    def forget(self, collection: str) -> None:
        """Drop the cached route (after attaching or detaching ``collection``)."""
        store = self._routes.pop(collection, None)
        if store is not None:
            store.close()

    @property
    def read_only(self) -> bool:  # type: ignore[override]
        return self.default.read_only

    def is_read_only(self, collection: str) -> bool:
        return self.route(collection).read_only

    def upsert(self, collection: str, chunks: Sequence[Chunk], vectors: np.ndarray) -> None:
        self.route(collection).upsert(collection, chunks, vectors)

    def delete(self, collection: str, chunk_ids: Sequence[str]) -> None:
        self.route(collection).delete(collection, chunk_ids)

    def drop(self, collection: str) -> None:
        self.route(collection).drop(collection)

    def refresh_indexes(self, collection: str) -> None:
        refresh = getattr(self.route(collection), "refresh_indexes", None)
        if refresh is not None:
            refresh(collection)

    def fingerprints(self, collection: str) -> dict[str, tuple[str, str]]:
        return self.route(collection).fingerprints(collection)

    def get(self, collection: str, chunk_ids: Sequence[str], *, with_text: bool = True) -> list[Chunk]:
        return self.route(collection).get(collection, chunk_ids, with_text=with_text)

    def iter_rows(
        self, collection: str, *, with_vectors: bool = True, batch_size: int = 4096
    ) -> Iterator[tuple[list[Chunk], np.ndarray | None]]:
        return self.route(collection).iter_rows(collection, with_vectors=with_vectors, batch_size=batch_size)

    def vectors(self, collection: str, chunk_ids: Sequence[str]) -> dict[str, np.ndarray]:
        return self.route(collection).vectors(collection, chunk_ids)

    def vector_search(
        self, collection: str, vector: np.ndarray, k: int, *, within: Sequence[str] | None = None
    ) -> list[ScoredId]:
        return self.route(collection).vector_search(collection, vector, k, within=within)

    def keyword_search(
        self, collection: str, query: str, k: int, *, within: Sequence[str] | None = None
    ) -> list[ScoredId]:
        return self.route(collection).keyword_search(collection, query, k, within=within)

    def regex_search(
        self, collection: str, pattern: str, k: int, *, within: Sequence[str] | None = None
    ) -> list[ScoredId]:
        return self.route(collection).regex_search(collection, pattern, k, within=within)

    def weighted_keyword_search(
        self, collection: str, terms: dict[str, float], k: int, *, within: Sequence[str] | None = None
    ) -> list[ScoredId]:
        return self.route(collection).weighted_keyword_search(collection, terms, k, within=within)

    def neighbours(self, collection: str, chunk: Chunk, before: int, after: int) -> list[Chunk]:
        return self.route(collection).neighbours(collection, chunk, before, after)

    def count(self, collection: str) -> int:
        return self.route(collection).count(collection)

    def close(self) -> None:
        for store in self._routes.values():
            if store is not None:
                store.close()
        self._routes.clear()
        self.default.close()
