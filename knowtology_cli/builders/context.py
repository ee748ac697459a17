"""What a tree builder is given: the collection's stores and embedder, never the façade."""

from __future__ import annotations

from collections.abc import Callable
from typing import TYPE_CHECKING, Protocol

if TYPE_CHECKING:
    from ..embedders.base import Embedder
    from ..stores.base import TreeStore, VectorStore


class BuildStores(Protocol):
    """The vector store (chunks, vectors), the tree store (tree, mappings, call log) and the
    embedder each collection was indexed with: all a builder reads or writes."""

    @property
    def vectors(self) -> VectorStore: ...

    @property
    def tree(self) -> TreeStore: ...

    def embedder_for(self, collection: str) -> Embedder: ...


class StoreSet:
    """A :class:`BuildStores` made of the parts themselves (what ``KnowledgeBase.build`` hands over)."""

    def __init__(self, vectors: VectorStore, tree: TreeStore, embedder_for: Callable[[str], Embedder]) -> None:
        self._vectors, self._tree, self._embedder_for = vectors, tree, embedder_for

    @property
    def vectors(self) -> VectorStore:
        return self._vectors

    @property
    def tree(self) -> TreeStore:
        return self._tree

    def embedder_for(self, collection: str) -> Embedder:
        return self._embedder_for(collection)
