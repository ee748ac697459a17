"""A rebuild's new tree, assembled beside the old one and swapped in whole only once it is finished."""

from __future__ import annotations

from collections.abc import Iterable, Mapping, Sequence
from typing import TYPE_CHECKING, Any

from ..stores.base import CollectionInfo, SourceRecord, TreeState, TreeStore, staging_name

if TYPE_CHECKING:
    from ..models import Category, ChunkMapping, TreeNode


class StagedTree(TreeStore):
    """The tree store as a rebuild of ``collection`` sees it.

    That collection's tree, mappings and naming state are read and written under
    :func:`~knowtology_cli.stores.base.staging_name` (invisible to ``browse``, ``search --under`` and
    every other reader) until :meth:`promote` swaps them in with one transaction; the builder name it
    records waits for that swap too. Everything else — collection records, sources, the LLM call log —
    is the store's own, so paid calls are logged (and served again) as in any build. A rebuild that
    fails or is interrupted leaves the previous tree as it was, and its staged progress for the next
    ``kt build --rebuild`` to resume.
    """

    def __init__(self, store: TreeStore, collection: str) -> None:
        self.store = store
        self.collection = collection
        self.staged = staging_name(collection)
        self.builder: str | None = None

    def _tree(self, collection: str) -> str:
        return self.staged if collection == self.collection else collection

    # the staged tree ------------------------------------------------------------------------
    def promote(self) -> None:
        """Make the staged tree the collection's, replacing the previous one (one transaction)."""
        self.store.replace_tree(self.collection, self.staged, builder=self.builder)

    def discard(self) -> None:
        """Forget what an earlier rebuild staged (``--no-cache`` starts a rebuild over)."""
        self.store.apply(self.staged, [], [], replace=True)

    def set_builder(self, name: str, builder: str | None) -> None:
        if name == self.collection:
            self.builder = builder  # recorded by promote, with the tree it names
        else:
            self.store.set_builder(name, builder)

    def tree_state(self, collection: str) -> TreeState:
        return self.store.tree_state(self._tree(collection))

    def mark_named(self, collection: str, paths: Sequence[str] | None = None) -> None:
        self.store.mark_named(self._tree(collection), paths)

    def mark_stale(self, collection: str, paths: Sequence[str]) -> None:
        self.store.mark_stale(self._tree(collection), paths)

    def rename_nodes(self, collection: str, changes: dict[str, tuple[str | None, str | None]], *,
                     named: Sequence[str] = ()) -> None:
        self.store.rename_nodes(self._tree(collection), changes, named=named)

    def get_node(self, collection: str, path: str) -> TreeNode | None:
        return self.store.get_node(self._tree(collection), path)

    def children(self, collection: str, path: str | None) -> list[TreeNode]:
        return self.store.children(self._tree(collection), path)

    def nodes(self, collection: str) -> list[TreeNode]:
        return self.store.nodes(self._tree(collection))

    def mappings(self, collection: str, *, chunk_ids: Iterable[str] | None = None,
                 under: str | None = None) -> list[ChunkMapping]:
        return self.store.mappings(self._tree(collection), chunk_ids=chunk_ids, under=under)

    def mapping_hashes(self, collection: str) -> dict[str, str]:
        return self.store.mapping_hashes(self._tree(collection))

    def apply(self, collection: str, categories: Sequence[Category], mappings: Sequence[tuple[ChunkMapping, str]],
              *, remove: Sequence[str] = (), replace: bool = False, track: bool = True,
              fallbacks: Mapping[str, str] | None = None) -> None:
        self.store.apply(self._tree(collection), categories, mappings, remove=remove, replace=replace, track=track,
                         fallbacks=fallbacks)

    def replace_tree(self, collection: str, staged: str, *, builder: str | None = None) -> None:
        self.store.replace_tree(collection, staged, builder=builder)

    # the store's own ------------------------------------------------------------------------
    def get_collection(self, name: str) -> CollectionInfo | None:
        return self.store.get_collection(name)

    def ensure_collection(self, info: CollectionInfo) -> CollectionInfo:
        return self.store.ensure_collection(info)

    def list_collections(self) -> list[CollectionInfo]:
        return self.store.list_collections()

    def drop_collection(self, name: str, *, pending: bool = False) -> None:
        self.store.drop_collection(name, pending=pending)

    def set_chunk_count(self, name: str, chunks: int) -> None:
        self.store.set_chunk_count(name, chunks)

    def sources(self, collection: str) -> list[SourceRecord]:
        return self.store.sources(collection)

    def chunk_owners(self, collection: str, chunk_ids: Iterable[str] | None = None) -> dict[str, tuple[str, str]]:
        return self.store.chunk_owners(collection, chunk_ids)

    def record_sources(self, collection: str, sources: Sequence[tuple[str, str, str]],
                       owners: dict[str, tuple[str, str]]) -> None:
        self.store.record_sources(collection, sources, owners)

    def record_successors(self, collection: str, successors: Mapping[str, str]) -> None:
        self.store.record_successors(collection, successors)

    def successors(self, collection: str, chunk_ids: Iterable[str]) -> dict[str, str]:
        return self.store.successors(collection, chunk_ids)

    def remove_chunks(self, collection: str, chunk_ids: Sequence[str], *, forget_sources: Sequence[str] = ()) -> None:
        self.store.remove_chunks(collection, chunk_ids, forget_sources=forget_sources)

    def pending_removals(self) -> dict[str, list[str]]:
        return self.store.pending_removals()

    def clear_pending(self, collection: str, chunk_ids: Sequence[str] | None = None) -> None:
        self.store.clear_pending(collection, chunk_ids)

    def log_call(self, entry: dict[str, Any]) -> None:
        self.store.log_call(entry)

    def cached_response(self, prompt_hash: str) -> dict[str, Any] | None:
        return self.store.cached_response(prompt_hash)

    def call_stats(self, collection: str | None = None) -> dict[str, Any]:
        return self.store.call_stats(collection)

    def calls(self, collection: str | None = None, build_id: str | None = None) -> list[dict[str, Any]]:
        return self.store.calls(collection, build_id)

    def schema_version(self) -> int:
        return self.store.schema_version()
