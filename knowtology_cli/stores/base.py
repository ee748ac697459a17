"""The store interfaces every backend implements (vector, tree, text, session) and their shared helpers.

Every method a caller may use is declared here (abstract or a documented default); nothing probes a store.
"""

from __future__ import annotations

import json
import re
import time
from abc import ABC, abstractmethod
from collections.abc import Callable, Iterable, Iterator, Mapping, Sequence
from dataclasses import dataclass
from typing import TYPE_CHECKING, Any

from ..errors import NotFoundError
from ..models import Category, Chunk, ChunkMapping, TreeNode, split_path

if TYPE_CHECKING:
    import numpy as np


@dataclass(frozen=True)
class CollectionInfo:
    """What the tree store records about a collection."""

    name: str
    embedder: str
    dimension: int
    builder: str | None = None
    source: dict[str, Any] | None = None
    #: chunks in the vector table at the last ingest or build (None: not recorded by this store)
    chunks: int | None = None


@dataclass(frozen=True)
class SourceRecord:
    """A registered source of a collection: its name, resolved root and what is stored from it.

    ``kind`` is ``dir`` (the root folder was ingested whole), ``files`` (single files under it) or
    ``stdin``; ``last_ingest`` is a Unix time.
    """

    name: str
    root: str
    kind: str
    files: int = 0
    chunks: int = 0
    created_at: float = 0.0
    last_ingest: float = 0.0


@dataclass(frozen=True)
class TreeState:
    """How much of a collection's tree was placed since its last full build (the drift measure).

    ``built`` chunks were clustered (or named) by the last full build; ``placed`` chunks were
    placed incrementally since (new, changed or moved), ``removed`` mapped chunks were removed.
    """

    built: int = 0
    placed: int = 0
    removed: int = 0


#: ``pending_removals`` row meaning "the whole vector table of this collection".
WHOLE_COLLECTION = ""


def staging_name(collection: str) -> str:
    """Where a rebuild of ``collection`` assembles its new tree until :meth:`TreeStore.replace_tree`
    swaps it in: never a collection's own name (those match ``config.NAME_RE``, which has no ``#``)."""
    return f"{collection}#rebuild"


@dataclass(frozen=True)
class ScoredId:
    """A chunk id with a retrieval score (higher is better)."""

    chunk_id: str
    score: float


def subtree_counts(
    nodes: dict[int, tuple[int | None, str]], leaf_counts: dict[int, int]
) -> tuple[dict[int, int], list[int]]:
    """Chunk counts per node (mappings summed up the parent chain) and the empty nodes, deepest
    first so they can be deleted child-before-parent. ``nodes`` is ``id -> (parent_id, path)``."""
    counts = dict.fromkeys(nodes, 0)
    for node_id, n in leaf_counts.items():
        current: int | None = node_id
        while current is not None and current in nodes:
            counts[current] += n
            current = nodes[current][0]
    empty = sorted((i for i, c in counts.items() if c == 0), key=lambda i: -nodes[i][1].count("/"))
    return counts, empty


def churn_by_node(
    parents: dict[int, int | None],
    before: dict[str, tuple[int, str]],
    after: Sequence[tuple[str, int, str]],
    removed: Iterable[str],
) -> dict[int, int]:
    """Membership changes per node for one tree write, counted up the parent chain.

    ``before`` is ``chunk_id -> (leaf id, content hash)`` of the mappings the write touches,
    ``after`` the new ``(chunk_id, leaf id, content hash)`` rows, ``removed`` the ids it unmaps;
    ``parents`` is ``node id -> parent id``. A new chunk counts once for each node on its leaf's
    chain, a moved one for the nodes it left or joined (not the ancestors both leaves share), a
    changed one where it stays, a removed one where it was.
    """
    touched: dict[int, int] = {}

    def chain(node: int) -> list[int]:
        out: list[int] = []
        current: int | None = node
        while current is not None and current in parents:
            out.append(current)
            current = parents[current]
        return out

    def bump(nodes: Iterable[int]) -> None:
        for n in nodes:
            touched[n] = touched.get(n, 0) + 1

    for chunk_id, node, content_hash in after:
        old = before.get(chunk_id)
        if old is None or (old[0] == node and old[1] != content_hash):
            bump(chain(node))
        elif old[0] != node:
            left, joined = chain(old[0]), chain(node)
            bump(set(left).symmetric_difference(joined))
    for chunk_id in removed:
        if chunk_id in before:
            bump(chain(before[chunk_id][0]))
    return touched


def renamed_paths(paths: dict[int, str], parents: dict[int, int | None], names: dict[int, str]) -> dict[int, str]:
    """Every node's path after renaming the nodes in ``names`` (``node id -> new name``)."""
    out: dict[int, str] = {}

    def path_of(node: int) -> str:
        if node not in out:
            own = names.get(node, paths[node].rsplit("/", 1)[-1])
            parent = parents.get(node)
            out[node] = own if parent is None or parent not in paths else f"{path_of(parent)}/{own}"
        return out[node]

    for node in paths:
        path_of(node)
    return out


def ensure_path(
    ids: dict[str, int], path: str, insert: Callable[[int | None, str, int, str], int]
) -> int:
    """The node id of ``path``, creating missing prefixes through ``insert(parent_id, name, level,
    prefix) -> id``; ``ids`` (``path -> id`` of existing nodes) is updated in place."""
    segments = split_path(path)
    parent: int | None = None
    for depth in range(1, len(segments) + 1):
        prefix = "/".join(segments[:depth])
        if prefix not in ids:
            ids[prefix] = insert(parent, segments[depth - 1], depth, prefix)
        parent = ids[prefix]
    if parent is None:
        raise ValueError(f"empty tree path {path!r}")
    return parent


def log_row(entry: dict[str, Any], encode: Any = None) -> dict[str, Any]:
    """The LLM call-log row for ``entry``; ``encode`` turns the response dict into a column value."""
    response = entry.get("response")
    return {
        "collection": entry.get("collection"),
        "build_id": entry.get("build_id"),
        "kind": entry.get("kind"),
        "model": entry.get("model"),
        "prompt_hash": entry.get("prompt_hash"),
        "chunk_count": entry.get("chunk_count"),
        "input_tokens": int(entry.get("input_tokens") or 0),
        "output_tokens": int(entry.get("output_tokens") or 0),
        "cost_usd": float(entry.get("cost_usd") or 0.0),
        "status": entry.get("status", "ok"),
        "error": entry.get("error"),
        "response": None if response is None else (encode or json.dumps)(response),
        "seconds": entry.get("seconds"),
        "created_at": time.time(),
        "attempts": int(entry.get("attempts") or 1),
        "usage_estimated": int(bool(entry.get("usage_estimated"))),
    }


def same_document(a: Chunk, b: Chunk) -> bool:
    """True when two chunks come from one document: same doc_id, or (no doc_id) same file name."""
    if a.doc_id or b.doc_id:
        return a.doc_id == b.doc_id
    return bool(a.file_name) and a.file_name == b.file_name


class TextStore(ABC):
    """Keyword (BM25-style) search over a collection's chunk title and text."""

    @abstractmethod
    def keyword_search(
        self, collection: str, query: str, k: int, *, within: Sequence[str] | None = None
    ) -> list[ScoredId]:
        """Best-first chunk ids for ``query`` (title + text), optionally restricted to ``within`` ids."""

    def row_store(self) -> VectorStore | None:
        """The vector store holding the rows this store searches, when it has one (default: None)."""
        return None

    async def search_by_keywords(self, collection_id: str, keywords: str, top_k: int = 5) -> list[dict[str, Any]]:
        """The seed's async form: ``[{"chunk_id", "score"}]`` best first (comma-separated terms)."""
        import asyncio  # deferred: only the async API needs it

        from ..textutil import keyword_query  # deferred: keeps kt browse fast

        query = keyword_query(keywords)
        hits = await asyncio.to_thread(self.keyword_search, collection_id, query, top_k)
        return [{"chunk_id": h.chunk_id, "score": h.score} for h in hits]

    def close(self) -> None:  # noqa: B027 (optional hook: nothing to release by default)
        """Release resources."""


class TextIndex(TextStore):
    """A text store written beside a vector store that has no BM25 of its own: ingest upserts the
    chunks' title and text here too, and removals delete them."""

    @abstractmethod
    def upsert(self, collection: str, chunks: Sequence[Chunk]) -> None:
        """Insert or replace the chunks' title and text by chunk_id."""

    @abstractmethod
    def delete(self, collection: str, chunk_ids: Sequence[str]) -> None:
        """Delete rows by chunk_id."""

    @abstractmethod
    def drop(self, collection: str) -> None:
        """Delete every row of the collection."""

    @abstractmethod
    def count(self, collection: str) -> int:
        """Number of rows (0 for a missing collection)."""


class VectorStore(TextStore):
    """Chunk rows (text, metadata, vector) of each collection; the only place text lives.

    Abstract methods are what every backend answers. The others have defaults: a scan over
    :meth:`iter_rows` (``regex_search``, ``neighbours``), an unweighted keyword search, or "nothing
    to do" for stores without indexes or caches; backends override them where they can do better.
    """

    #: True for a store that refuses every write (an attached table)
    read_only: bool = False

    @abstractmethod
    def upsert(self, collection: str, chunks: Sequence[Chunk], vectors: np.ndarray) -> None:
        """Insert or replace rows by chunk_id, atomically per call."""

    @abstractmethod
    def delete(self, collection: str, chunk_ids: Sequence[str]) -> None:
        """Delete rows by chunk_id, atomically."""

    @abstractmethod
    def drop(self, collection: str) -> None:
        """Remove a collection's rows (its whole table); a missing collection is no error."""

    @abstractmethod
    def fingerprints(self, collection: str) -> dict[str, tuple[str, str]]:
        """``chunk_id -> (content_hash, file_name)`` for every row."""

    @abstractmethod
    def get(self, collection: str, chunk_ids: Sequence[str], *, with_text: bool = True) -> list[Chunk]:
        """Rows for ``chunk_ids`` (missing ids are absent from the result)."""

    @abstractmethod
    def iter_rows(
        self, collection: str, *, with_vectors: bool = True, batch_size: int = 4096
    ) -> Iterator[tuple[list[Chunk], np.ndarray | None]]:
        """Every row in batches of (chunks, vectors)."""

    @abstractmethod
    def vectors(self, collection: str, chunk_ids: Sequence[str]) -> dict[str, np.ndarray]:
        """Vectors of the given ids."""

    @abstractmethod
    def vector_search(
        self, collection: str, vector: np.ndarray, k: int, *, within: Sequence[str] | None = None
    ) -> list[ScoredId]:
        """Nearest rows by cosine similarity, optionally restricted to ``within`` ids."""

    @abstractmethod
    def keyword_search(
        self, collection: str, query: str, k: int, *, within: Sequence[str] | None = None
    ) -> list[ScoredId]:
        """BM25 ranking of rows for ``query`` over title + text."""

    @abstractmethod
    def count(self, collection: str) -> int:
        """Number of rows (0 for a missing collection)."""

    # capabilities with defaults ------------------------------------------------------------
    def is_read_only(self, collection: str) -> bool:
        """True when writes to ``collection`` are refused. Default: :attr:`read_only` (one answer for
        every collection); a store that routes collections answers per collection."""
        return self.read_only

    def weighted_keyword_search(
        self, collection: str, terms: dict[str, float], k: int, *, within: Sequence[str] | None = None
    ) -> list[ScoredId]:
        """BM25 ranking for a weighted bag of words (a feedback query); each term's BM25 score is
        multiplied by its weight. This default ignores the weights (a plain keyword search)."""
        return self.keyword_search(collection, " ".join(terms), k, within=within)

    def regex_search(
        self, collection: str, pattern: str, k: int, *, within: Sequence[str] | None = None
    ) -> list[ScoredId]:
        """Rows whose text matches a regular expression; score = number of matches. This default
        scans the table."""
        regex = re.compile(pattern)
        wanted = set(within) if within is not None else None
        hits: list[ScoredId] = []
        for chunks, _ in self.iter_rows(collection, with_vectors=False):
            for chunk in chunks:
                if wanted is not None and chunk.chunk_id not in wanted:
                    continue
                n = len(regex.findall(chunk.text)) + len(regex.findall(chunk.title))
                if n:
                    hits.append(ScoredId(chunk.chunk_id, float(n)))
        hits.sort(key=lambda h: (-h.score, h.chunk_id))
        return hits[:k]

    def concurrent_reads(self, collection: str) -> bool:
        """True when two searches of ``collection`` may run at once on two threads (a hybrid search
        then fetches its keyword list beside the vector list). This default says no: a backend that
        shares one connection or cursor keeps its searches one after the other."""
        return False

    def neighbours(self, collection: str, chunk: Chunk, before: int, after: int) -> list[Chunk]:
        """Chunks of ``chunk``'s document (same doc_id, else same file) whose chunk_index lies within
        ``before`` / ``after`` positions of it, in document order, itself excluded. This default scans
        the table; stores with filters override it."""
        lo, hi = chunk.chunk_index - before, chunk.chunk_index + after
        out = []
        for rows, _ in self.iter_rows(collection, with_vectors=False):
            for c in rows:
                if c.chunk_id != chunk.chunk_id and same_document(c, chunk) and lo <= c.chunk_index <= hi:
                    out.append(c)
        return sorted(out, key=lambda c: (c.chunk_index, c.chunk_id))

    def indexes_stale(self, collection: str) -> bool:
        """True when the collection's search indexes miss rows written since they were built, so
        :meth:`refresh_indexes` has work to do. Default: False (a store whose indexes follow every write)."""
        return False

    def refresh_indexes(self, collection: str) -> None:  # noqa: B027 (optional hook)
        """Bring the collection's full-text and vector indexes up to date after writes. Default:
        nothing to do. Called by ingest after it wrote rows or found :meth:`indexes_stale`."""

    def forget(self, collection: str) -> None:  # noqa: B027 (optional hook)
        """Drop whatever the store caches about ``collection`` (an open table, a route), so the next
        call sees what another handle changed (an attach, a detach, a drop). Default: nothing cached."""

    def backend_for(self, collection: str) -> VectorStore:
        """The store that holds ``collection``'s rows: this one, or for a store that passes calls on
        (routing, keyword routing) the one it passes them to. For tools that need the backend itself
        (``kt bench`` reading a Lance dataset)."""
        return self

    def row_store(self) -> VectorStore | None:
        """A vector store holds its own rows."""
        return self


class TreeStore(ABC):
    """Collections, tree nodes, chunk mappings and the LLM call log."""

    # collections -------------------------------------------------------------------------
    @abstractmethod
    def get_collection(self, name: str) -> CollectionInfo | None:
        """The collection record, or None."""

    @abstractmethod
    def ensure_collection(self, info: CollectionInfo) -> CollectionInfo:
        """Create the record if missing; return what is stored."""

    @abstractmethod
    def list_collections(self) -> list[CollectionInfo]:
        """Every recorded collection."""

    @abstractmethod
    def set_builder(self, name: str, builder: str | None) -> None:
        """Record which builder made the collection's tree."""

    @abstractmethod
    def drop_collection(self, name: str, *, pending: bool = False) -> None:
        """Forget a collection's record, tree (and any rebuild's :func:`staging_name` tree), mappings and
        sources; with ``pending``, record in the same transaction that its vector table still has to be
        removed (see :meth:`pending_removals`)."""

    # sources -----------------------------------------------------------------------------
    @abstractmethod
    def sources(self, collection: str) -> list[SourceRecord]:
        """The collection's registered sources with their file and chunk counts, by name."""

    @abstractmethod
    def chunk_owners(self, collection: str, chunk_ids: Iterable[str] | None = None) -> dict[str, tuple[str, str]]:
        """``chunk_id -> (source name, path inside the source)`` of the given (or all) owned chunks."""

    @abstractmethod
    def record_sources(
        self, collection: str, sources: Sequence[tuple[str, str, str]], owners: dict[str, tuple[str, str]]
    ) -> None:
        """In one transaction: register or update ``(name, root, kind)`` sources (a new root for a
        known name re-points it) and record the owner of each chunk id."""

    @abstractmethod
    def remove_chunks(self, collection: str, chunk_ids: Sequence[str], *, forget_sources: Sequence[str] = ()) -> None:
        """In one transaction: unmap the chunks (counts up the tree updated, empty nodes dropped),
        forget their owners and the named sources, and record them as pending removal from the
        vector table (see :meth:`pending_removals`)."""

    @abstractmethod
    def record_successors(self, collection: str, successors: Mapping[str, str]) -> None:
        """Record ``old id -> new id`` for chunks whose text moved to another id and whose old id is
        gone (a renamed or moved file, pruned); earlier records that led to an old id now lead on."""

    @abstractmethod
    def successors(self, collection: str, chunk_ids: Iterable[str]) -> dict[str, str]:
        """``old id -> the id its text moved to`` for those of ``chunk_ids`` recorded."""

    @abstractmethod
    def pending_removals(self) -> dict[str, list[str]]:
        """``collection -> chunk ids`` the tree has let go of but the vector table may still hold
        (``WHOLE_COLLECTION`` for a dropped collection's table)."""

    @abstractmethod
    def clear_pending(self, collection: str, chunk_ids: Sequence[str] | None = None) -> None:
        """Forget pending removals once the vector table no longer holds them (all when None)."""

    # tree freshness ----------------------------------------------------------------------
    @abstractmethod
    def tree_state(self, collection: str) -> TreeState:
        """Chunks built, placed and removed since the last full build."""

    @abstractmethod
    def mark_named(self, collection: str, paths: Sequence[str] | None = None) -> None:
        """Record that the nodes at ``paths`` (every node, and a full build, when None) were named
        for their current members."""

    @abstractmethod
    def mark_stale(self, collection: str, paths: Sequence[str]) -> None:
        """Record that the nodes at ``paths`` need new names whatever their churn (a part their names
        say is gone): their churn becomes at least the count they were named for."""

    @abstractmethod
    def rename_nodes(self, collection: str, changes: dict[str, tuple[str | None, str | None]], *,
                     named: Sequence[str] = ()) -> None:
        """In one transaction: set a new name and/or description (None keeps it) of nodes by path
        (descendants' paths follow a new name), and record the nodes at ``named`` (paths before the
        renaming) as named for their current members."""

    def set_chunk_count(self, name: str, chunks: int) -> None:  # noqa: B027 (optional hook)
        """Record how many chunks the collection's vector table holds (read by ``browse`` to say what
        is not mapped yet without opening the vector store). Default: not recorded (``CollectionInfo.chunks``
        stays None)."""

    # tree --------------------------------------------------------------------------------
    @abstractmethod
    def get_node(self, collection: str, path: str) -> TreeNode | None:
        """Node at ``path``, or None."""

    @abstractmethod
    def children(self, collection: str, path: str | None) -> list[TreeNode]:
        """Children of ``path`` (top level when None), ordered by name."""

    @abstractmethod
    def nodes(self, collection: str) -> list[TreeNode]:
        """All nodes, ordered by path."""

    @abstractmethod
    def mappings(
        self, collection: str, *, chunk_ids: Iterable[str] | None = None, under: str | None = None
    ) -> list[ChunkMapping]:
        """Mappings filtered by ids and/or subtree path, ordered by (file, index, id)."""

    @abstractmethod
    def mapping_hashes(self, collection: str) -> dict[str, str]:
        """``chunk_id -> content_hash`` recorded when each chunk was mapped."""

    @abstractmethod
    def apply(
        self,
        collection: str,
        categories: Sequence[Category],
        mappings: Sequence[tuple[ChunkMapping, str]],
        *,
        remove: Sequence[str] = (),
        replace: bool = False,
        track: bool = True,
        fallbacks: Mapping[str, str] | None = None,
    ) -> None:
        """In one transaction: (optionally wipe the tree), add ``categories`` (all prefixes are
        created), upsert mappings given as ``(mapping with path set, content_hash)``, remove
        mappings of ``remove`` ids, drop empty categories and recount. With ``track`` (the default)
        the write counts as membership change (churn per node, chunks placed or removed since the
        last full build); a rewrite that only refreshes metadata passes ``track=False``.
        ``fallbacks`` (path → why) become the collection's only nodes marked as carrying an offline
        name in place of a failed LLM name (``TreeNode.name_fallback``; ``{}`` clears every mark);
        None leaves the marks as they are."""

    @abstractmethod
    def replace_tree(self, collection: str, staged: str, *, builder: str | None = None) -> None:
        """In one transaction: drop ``collection``'s tree and mappings and give it the tree and mappings
        written under ``staged`` instead (``staged`` is left empty), as a full build (every node named
        for its members, drift counters reset), recording ``builder`` when given."""

    # llm log -----------------------------------------------------------------------------
    @abstractmethod
    def log_call(self, entry: dict[str, Any]) -> None:
        """Append one LLM call record (model, prompt_hash, tokens, cost, status, response)."""

    @abstractmethod
    def cached_response(self, prompt_hash: str) -> dict[str, Any] | None:
        """The last successful logged call with this prompt hash, or None."""

    @abstractmethod
    def call_stats(self, collection: str | None = None) -> dict[str, Any]:
        """Totals over the log."""

    @abstractmethod
    def calls(self, collection: str | None = None, build_id: str | None = None) -> list[dict[str, Any]]:
        """Logged calls (without responses), oldest first, optionally of one collection / build."""

    # housekeeping ------------------------------------------------------------------------
    @abstractmethod
    def schema_version(self) -> int:
        """The store's schema version (its applied migrations); opening a store migrates it."""

    def close(self) -> None:  # noqa: B027 (optional hook)
        """Release resources."""


class SessionStore(ABC):
    """Read histories: per session and collection, the chunk ids read, oldest first, each once."""

    @abstractmethod
    def load(self, name: str) -> dict[str, Any]:
        """``{"name": ..., "collections": {collection: {"read": [ids]}}}`` (empty when the session is new)."""

    @abstractmethod
    def read_ids(self, name: str, collection: str) -> list[str]:
        """Chunk ids read in this session and collection, oldest first."""

    @abstractmethod
    def mark_read(self, name: str, collection: str, chunk_ids: Iterable[str]) -> None:
        """Append ids not read yet to the history, atomically."""

    @abstractmethod
    def reset(self, name: str, collection: str | None = None) -> bool:
        """Forget a session's history (one collection, or all); False when the session had none."""

    @abstractmethod
    def forget_chunks(self, collection: str, chunk_ids: Iterable[str] | None = None) -> None:
        """Take removed chunks (every chunk of ``collection`` when None) out of every session's history."""

    @abstractmethod
    def names(self) -> list[str]:
        """Every session with a history, by name."""

    def require(self, name: str) -> dict[str, Any]:
        """Load a session that must exist (``NotFoundError`` otherwise)."""
        if name not in self.names():
            raise NotFoundError(f"no session named {name!r}", hint="`kt session list` shows the sessions")
        return self.load(name)

    def close(self) -> None:  # noqa: B027 (optional hook)
        """Release resources."""
