"""KnowledgeBase: the one façade over injected stores, embedder and LLM client.

Every surface (CLI, REPL, MCP, LangChain, FastAPI) calls its methods; nothing here knows terminals or HTTP.
"""

from __future__ import annotations

import functools
import json
import os
import re
import shlex
import time
from collections import Counter
from collections.abc import Callable, Iterable, Iterator, Mapping, Sequence
from contextlib import contextmanager, nullcontext
from pathlib import Path
from typing import IO, TYPE_CHECKING, Any

from . import __version__
from .config import DEFAULT_COLLECTION, DEFAULT_SESSION, Settings, load_settings, validate_name
from .errors import (
    ArgumentError,
    ConfigError,
    ConflictError,
    EmbeddingError,
    InputError,
    LockedError,
    NotFoundError,
)
from .locking import StoreLock
from .models import (
    MISSING_HINT,
    NO_IDS_HINT,
    NO_KEYWORDS_HINT,
    ROOT,
    Assignment,
    BrowseResult,
    Category,
    Chunk,
    ChunkLead,
    CollectionStatus,
    DropReport,
    Hit,
    IngestReport,
    NodeSummary,
    ReadChunk,
    ReadResult,
    RemoveReport,
    SearchResult,
    SourcesReport,
    SourceSummary,
    StatusReport,
    TreeExport,
    TreeImportReport,
    TreeNode,
    TreeReply,
    split_path,
)
from .paths import id_forms, resolve_path, suggest_ids
from .provenance import provenance
from .sessions import FileSessionStore, InMemorySessionStore
from .stores.base import (
    WHOLE_COLLECTION,
    CollectionInfo,
    ScoredId,
    SessionStore,
    TreeStore,
    VectorStore,
    staging_name,
)
from .stores.routing import RoutingVectorStore, open_vector_store
from .stores.sqlite import SQLiteTreeStore
from .textutil import copy_key, identifier_terms, keyword_query, more_suffix

if TYPE_CHECKING:
    from .embedders.base import Embedder
    from .export import TreeDocument
    from .ingest import InputBatch
    from .llm.base import LLMClient

ProgressFn = Callable[[str, int, int], None]
MessageFn = Callable[[str], None]
BUILDERS = ("auto", "hybrid", "llm", "cluster")
UPSERT_BATCH = 512
#: The first batch an ingest embeds and writes; each next one is twice as large up to UPSERT_BATCH, so
#: a run stopped in its first minute (Ctrl-C, kill) has stored what it embedded and a re-run resumes.
FIRST_BATCH = 64


def _noop_progress(stage: str, done: int, total: int) -> None:
    return None


def _offset_progress(progress: ProgressFn, stage: str, base: int, total: int, done: int) -> None:
    progress(stage, base + done, total)


def _embed_input(chunk: Chunk) -> str:
    """What the embedder reads for a chunk: its title, a newline and its text."""
    return f"{chunk.title}\n{chunk.text}" if chunk.title else chunk.text


class _EmbedOnce:
    """Embeds the new rows of one ingest run, every distinct input once: the same title and text in
    several rows (a page shipped as .md and .html, a section a site repeats) gets one embedding call,
    and its vector is kept only until its last row in the run has been written."""

    def __init__(self, model: Embedder, chunks: Sequence[Chunk]) -> None:
        self.model = model
        self.uses = Counter(_embed_input(c) for c in chunks)  # rows still to write, per input
        self.kept: dict[str, Any] = {}  # vectors of inputs with rows still to come
        self.embedded = 0  # distinct inputs embedded so far

    def vectors(self, part: Sequence[Chunk], progress: Callable[[int], None]) -> Any:
        """One vector per row of ``part`` (a numpy array)."""
        import numpy as np  # deferred: heavy

        inputs = [_embed_input(c) for c in part]
        fresh = [t for t in dict.fromkeys(inputs) if t not in self.kept]
        embedded: Any = self.model.embed_documents(fresh, progress=progress) if fresh else []
        self.embedded += len(fresh)
        found = dict(zip(fresh, embedded, strict=True))
        rows = []
        for text in inputs:
            vector = self.kept[text] if text in self.kept else found[text]
            rows.append(vector)
            self.uses[text] -= 1
            if self.uses[text] > 0:
                self.kept[text] = vector
            else:
                self.kept.pop(text, None)
        return np.stack(rows)


def _noop_message(text: str) -> None:
    return None


#: Unknown ids in one read that get a hint of their own (the document's chunk range, a close id).
MAX_MISSING_HINTS = 5

#: The most candidates a search reads to find ``k`` different texts among copies.
FOLD_LIMIT = 1000


#: Keyword candidates looked at when a grep term is an identifier, to put those holding it whole first.
EXACT_POOL = 100


class KnowledgeBase:
    """A store's collections and the four tools over them.

    Args:
        tree_store: where the tree, mappings and LLM log live.
        vector_store: where chunk text and vectors live.
        sessions: read-history store (None keeps histories in this process's memory only).
        embedder: used for ingest and search; when None it is resolved from the collection's
            recorded embedder name on first use.
        embedder_factory: builds an embedder from a registry name (default: the registry).
        llm: client for LLM tree builds (None means offline clustering under ``auto``).
        lock: optional write lock (``StoreLock``) held around writes.
    """

    def __init__(
        self,
        *,
        tree_store: TreeStore,
        vector_store: VectorStore,
        sessions: SessionStore | None = None,
        embedder: Embedder | None = None,
        embedder_factory: Callable[[str], Embedder] | None = None,
        llm: LLMClient | None = None,
        lock: StoreLock | None = None,
        settings: Settings | None = None,
    ) -> None:
        self.tree = tree_store
        self.vectors = vector_store
        self.sessions: SessionStore = sessions if sessions is not None else InMemorySessionStore()
        self._embedder = embedder
        self._embedder_factory = embedder_factory
        self.llm = llm
        self.lock = lock
        self.settings = settings

    # construction -------------------------------------------------------------------------
    @classmethod
    def open(cls, store_dir: str | Path | None = None, **overrides: Any) -> KnowledgeBase:
        """Open (or lazily create) the store at ``store_dir`` with the embedded default backends."""
        settings = overrides.pop("settings", None) or load_settings(store=store_dir)
        return cls.from_settings(settings, **overrides)

    @classmethod
    def from_settings(cls, settings: Settings, **overrides: Any) -> KnowledgeBase:
        """Build the default parts for ``settings`` (SQLite tree store, Lance vector store)."""
        tree: TreeStore
        sessions: SessionStore = FileSessionStore(settings.store_dir / "sessions")
        if settings.tree_dsn and settings.tree_dsn.startswith(("postgresql://", "postgres://")):
            from .stores.pg import PostgresSessionStore, PostgresTreeStore  # deferred: keeps kt browse fast

            tree = PostgresTreeStore(settings.tree_dsn)
            sessions = PostgresSessionStore(settings.tree_dsn)
        else:
            tree = SQLiteTreeStore(settings.store_dir / "tree.db")
        vectors: VectorStore
        if overrides.get("vector_store") is None:
            # attached collections (`kt attach`) are served from their own read-only store
            vectors = RoutingVectorStore(open_vector_store(settings.vector_uri, settings.store_dir / "lance"),
                                         overrides.get("tree_store") or tree)
        else:
            vectors = overrides.pop("vector_store")
        parts: dict[str, Any] = {
            "tree_store": tree,
            "vector_store": vectors,
            "sessions": sessions,
            "lock": StoreLock(settings.store_dir, timeout=settings.lock_timeout),
            "settings": settings,
        }
        parts.update(overrides)
        return cls(**parts)

    def close(self) -> None:
        """Release store handles."""
        self.tree.close()
        self.vectors.close()

    def collection_name(self, collection: str | None = None) -> str:
        """``collection`` checked as a name, or the configured (else the default) collection when None."""
        return self._collection(collection)

    def session_name(self, session: str | None = None) -> str:
        """``session`` checked as a name, or the configured (else the default) session when None."""
        return self._session(session)

    def make_embedder(self, name: str) -> Embedder:
        """A new embedder for a registry name (``local``, ``openai:...``), made by this knowledge
        base's embedder factory (the registry unless one was given)."""
        from .embedders import get_embedder  # deferred: loads numpy

        return (self._embedder_factory or get_embedder)(name)

    # helpers ------------------------------------------------------------------------------
    def _collection(self, collection: str | None) -> str:
        return validate_name("collection", collection or (self.settings.collection if self.settings else
                                                          DEFAULT_COLLECTION))

    def _session(self, session: str | None) -> str:
        return validate_name("session", session or (self.settings.session if self.settings else DEFAULT_SESSION))

    def _require_collection(self, name: str) -> CollectionInfo:
        info = self.tree.get_collection(name)
        if info is None:
            known = ", ".join(c.name for c in self.tree.list_collections()) or "none yet"
            raise NotFoundError(
                f"no collection named {name!r} (collections: {known})",
                hint="ingest documents first: `kt ingest PATH`",
            )
        return info

    def embedder_for(self, collection: str) -> Embedder:
        """The embedder matching the collection's recorded one."""
        info = self._require_collection(collection)
        from .embedders import canonical_name, get_embedder  # deferred: loads numpy

        if self._embedder is not None:
            if canonical_name(self._embedder.name) != info.embedder:
                raise EmbeddingError(
                    f"collection {collection!r} was embedded with {info.embedder}, not {self._embedder.name}",
                    hint=f"use --embedder {info.embedder} or another collection",
                )
            return self._embedder
        factory = self._embedder_factory or get_embedder
        self._embedder = factory(info.embedder)
        return self._embedder

    def _with_lock(self) -> Any:
        return self.lock if self.lock is not None else nullcontext()

    def _resolve_under(self, collection: str, under: str | None) -> list[str] | None:
        if not under or not split_path(under):
            return None
        node = self.find_node(under, collection=collection)
        return [m.chunk_id for m in self.tree.mappings(collection, under=node.path)]

    def find_node(self, path: str, *, collection: str | None = None) -> TreeNode:
        """The category at ``path``; letter case and spacing around ``/`` need not match when only
        one category fits.

        Raises:
            NotFoundError: no category fits, or several differ only in case; the hint names the
                closest real paths (``did you mean …``).
        """
        name = self._collection(collection)
        wanted = "/".join(split_path(path))
        node = self.tree.get_node(name, wanted)
        if node is not None:
            return node
        nodes = {n.path: n for n in self.tree.nodes(name)}
        match = resolve_path(wanted, list(nodes), collection=name, original=path)
        return nodes[match]

    # ingest -------------------------------------------------------------------------------
    def ingest(
        self,
        paths: Sequence[str],
        *,
        collection: str | None = None,
        embedder: str | None = None,
        skip_invalid: bool = False,
        prune: bool = False,
        stdin: IO[str] | None = None,
        source: str | None = None,
        replace: bool = False,
        progress: ProgressFn = _noop_progress,
        message: MessageFn = _noop_message,
    ) -> IngestReport:
        """Add or update chunks from files, directories or stdin (``-``).

        Each input belongs to a source (see :mod:`knowtology_cli.ingest`): ``source`` names the one
        path's source, or with no paths re-scans that registered source. A source name or chunk id
        another source owns is refused (``ConflictError``) unless ``replace``. Input is fully
        validated before anything is written; each upsert batch commits atomically, so a killed
        ingest resumes on re-run without re-embedding what already landed. A document parsed whole
        replaces its chunks (the surplus of a page that shrank is deleted); ``prune`` also deletes
        the chunks of files gone from the folders read.
        """
        from .ingest import read_inputs  # deferred: keeps kt browse fast

        started = time.perf_counter()
        name = self._collection(collection)
        info = self.tree.get_collection(name)
        registry = self._registry(name) if info is not None else {}
        paths = list(paths)
        rescan: str | None = None
        if not paths:
            if source is None:
                raise ConfigError("nothing to ingest", hint="give files or folders, - for JSONL on stdin, or"
                                                            " --source NAME to re-scan a registered source")
            paths, rescan = self._rescan_paths(name, registry, source), source
        batch = read_inputs(paths, stdin=stdin, sources=registry, source_name=None if rescan else source,
                            replace=replace)
        if rescan is not None:
            batch.scopes.add((rescan, ""))
            batch.sources.setdefault(rescan, registry[rescan])
        return self._store_batch(name, info, batch, embedder=embedder, skip_invalid=skip_invalid, prune=prune,
                                 replace=replace, progress=progress, message=message, started=started)

    def add_chunks(
        self,
        chunks: Iterable[Mapping[str, Any] | Chunk],
        *,
        collection: str | None = None,
        embedder: str | None = None,
        skip_invalid: bool = False,
        prune: bool = False,
        source: str | None = None,
        replace: bool = False,
        progress: ProgressFn = _noop_progress,
        message: MessageFn = _noop_message,
    ) -> IngestReport:
        """Add or update chunks given as Python objects: ``Chunk``s or dicts with a JSONL line's fields
        (``text`` and optional ``chunk_id``, ``doc_id``, ``file_name``, ``chunk_index``, ``title``,
        ``metadata``). They are checked, embedded and stored exactly as ``ingest(["-"])`` would store
        the same objects as JSONL lines, under the source ``source`` (default ``stdin``); with
        ``prune``, that source's stored chunks missing from ``chunks`` are deleted.
        """
        from .ingest import read_records  # deferred: keeps kt browse fast

        started = time.perf_counter()
        name = self._collection(collection)
        info = self.tree.get_collection(name)
        registry = self._registry(name) if info is not None else {}
        batch = read_records(chunks, sources=registry, source_name=source, replace=replace)
        return self._store_batch(name, info, batch, embedder=embedder, skip_invalid=skip_invalid, prune=prune,
                                 replace=replace, progress=progress, message=message, started=started)

    def _store_batch(
        self,
        name: str,
        info: CollectionInfo | None,
        batch: InputBatch,
        *,
        embedder: str | None,
        skip_invalid: bool,
        prune: bool,
        replace: bool,
        progress: ProgressFn,
        message: MessageFn,
        started: float,
    ) -> IngestReport:
        """Validate a read batch, embed what is new or changed and write it (the second half of ingest)."""
        from .embedders import DEFAULT_EMBEDDER, canonical_name, get_embedder  # deferred: loads numpy
        from .ingest import require_valid  # deferred: keeps kt browse fast

        require_valid(batch, skip_invalid)
        configured = self.settings.embedder if self.settings is not None else None
        if embedder is None and configured:  # KNOWTOLOGY_EMBEDDER / config.toml: a new collection's embedder
            if info is None:
                embedder = configured
            elif canonical_name(configured) != info.embedder:
                message(f"note: collection {name!r} was embedded with {info.embedder} and keeps it; the configured "
                        f"embedder {canonical_name(configured)} applies to new collections")
        wanted = canonical_name(embedder) if embedder else None
        if info is not None and wanted and wanted != info.embedder:
            raise EmbeddingError(
                f"collection {name!r} was embedded with {info.embedder}, not {wanted}",
                hint="drop --embedder, or ingest into another collection with -c NAME",
            )
        if info is not None and self.vectors.is_read_only(name):
            raise ConfigError(f"collection {name!r} is attached read-only; nothing is ingested into it",
                              hint="ingest into another collection with -c NAME")
        if self._embedder is not None and (wanted is None or canonical_name(self._embedder.name) == wanted):
            model = self._embedder
        else:
            model = (self._embedder_factory or get_embedder)(wanted or (info.embedder if info else DEFAULT_EMBEDDER))
            self._embedder = model
        with self._with_lock():
            self._finish_removals()
            owners = self.tree.chunk_owners(name)
            self._check_owners(batch, owners, replace)
            if info is None:
                info = self.tree.ensure_collection(
                    CollectionInfo(name=name, embedder=canonical_name(model.name), dimension=model.dimension)
                )
            stored = self.vectors.fingerprints(name)
            todo = [c for c in batch.chunks if stored.get(c.chunk_id, ("", ""))[0] != c.content_hash]
            added = sum(1 for c in todo if c.chunk_id not in stored)
            updated = len(todo) - added
            unchanged = len(batch.chunks) - len(todo)
            unseen = self._pruned(batch, stored, owners)  # stored chunks of files this run did not read
            removed = sorted({*self._superseded(batch, stored), *(unseen if prune else [])})
            gone = [] if prune else self._gone_in_scope(name, unseen, owners)
            # indexed files a .ktignore now leaves out: found until --prune removes them
            left_out = set(batch.excluded)
            excluded_indexed = [] if prune or not left_out else sorted(
                {label for i in unseen if i in owners and (label := "/".join(p for p in owners[i] if p)) in left_out})
            todo, moved = self._moved_only(name, todo, stored)
            rewritten = {c.chunk_id for c in todo if c.chunk_id in stored}  # ids whose text changes
            leaving = set(removed) | rewritten  # stored texts that leave their ids in this run
            # the leaving rows as stored, read once: shifted and retitled texts are found among them
            old_rows = {c.chunk_id: c for c in self.vectors.get(name, sorted(leaving))} if leaving and todo else {}
            todo, shifted = self._shifted(name, todo, old_rows)
            todo, copied = self._copied(name, todo, stored)
            copied = shifted + copied
            sources = {source for _, source, _ in copied}
            retitled, old_titles = self._retitled(todo, stored, [r for i, r in old_rows.items() if i not in sources])
            order = sorted(range(len(todo)), key=lambda i: len(todo[i].text))
            todo = [todo[i] for i in order]
            done = 0
            marker = self._ingest_marker(name)
            if marker is not None and (todo or removed):  # gone again only when this run finishes
                marker.write_text(json.dumps({"started": time.time(), "sources": [
                    [s.name, s.root] for s in batch.sources.values()]}))
            progress("embedding", 0, len(todo))
            once = _EmbedOnce(model, todo)
            start, size = 0, min(FIRST_BATCH, UPSERT_BATCH)
            while start < len(todo):  # batches grow to UPSERT_BATCH: a run stopped early keeps its start
                part = todo[start : start + size]
                vectors = once.vectors(part, functools.partial(_offset_progress, progress, "embedding", done,
                                                                len(todo)))
                self.vectors.upsert(name, part, vectors)
                if start == 0 and not stored and len(todo) > len(part):
                    # a new table gets its full-text index now: rows written after it are still found
                    # by keyword search (unindexed rows are scanned), so a run stopped here leaves grep whole
                    self.vectors.refresh_indexes(name)
                done += len(part)
                start, size = start + len(part), min(2 * size, UPSERT_BATCH)
                progress("embedding", done, len(todo))
            if moved:  # provenance changed, text did not: rewrite the rows with their stored vectors
                self._rewrite_moved(name, moved)
            if copied:  # a renamed, moved or shifted text: new ids, stored text, stored vectors
                self._write_copies(name, copied, leaving)
            if retitled:  # a renamed file whose name was its title: new vectors, the same place
                self._hand_over(name, retitled, old_titles)
            moved_sources = self._moved_sources(name, batch, copied, owners, set(removed))
            self.tree.record_sources(name, [(s.name, s.root, s.kind) for s in batch.sources.values()],
                                     batch.owners)
            heirs = self._stored_heirs(name, removed, stored) if removed else {}
            if heirs:
                self._hand_over(name, heirs)
            texts = {c.chunk_id: c.text for c in batch.chunks if c.chunk_id in rewritten}
            went = {**{source: chunk.chunk_id for chunk, source, _ in copied if source in leaving},
                    **{old: chunk.chunk_id for old, chunk in (*retitled.items(), *heirs.items())}}
            self._carry_reads(name, {i for i in rewritten if i not in old_rows or old_rows[i].text != texts[i]}, went)
            if removed:
                gone_ids = set(removed)  # an id that is gone says where its text went (`kt read`'s hint)
                self.tree.record_successors(name, {old: new for old, new in went.items() if old in gone_ids})
                self._remove(name, removed)
            if todo or removed or self.vectors.indexes_stale(name):
                message("updating full-text index…")
                self.vectors.refresh_indexes(name)
            total = self.vectors.count(name)
            self.tree.set_chunk_count(name, total)
            if marker is not None:
                marker.unlink(missing_ok=True)
        return IngestReport(
            collection=name,
            added=added,
            updated=updated,
            unchanged=unchanged,
            deleted=len(removed),
            total=total,
            embedded=once.embedded,
            skipped=len(batch.problems),
            junk_merged=batch.junk_merged,
            junk_dropped=batch.junk_dropped,
            problems=batch.problems,
            embedder=info.embedder,
            seconds=round(time.perf_counter() - started, 3),
            sources=sorted(batch.sources),
            no_text=batch.no_text,
            not_documents=dict(sorted(batch.other_files.items(), key=lambda kv: (-kv[1], kv[0]))),
            broken_links=batch.broken_links,
            hidden_folders=batch.hidden_folders,
            excluded=batch.excluded,
            excluded_indexed=excluded_indexed,
            redirects=batch.redirects,
            included=batch.fragments,
            unread_includes=batch.unread_includes,
            unread_docstrings=batch.unread_docstrings,
            linked=batch.linked,
            reused=len(copied) + len(todo) - once.embedded,
            moved_sources=moved_sources,
            gone=gone,
        )

    def _ingest_marker(self, collection: str) -> Path | None:
        """The file an ingest into ``collection`` keeps while it writes (None without a store folder)."""
        return self.settings.store_dir / f".ingest-{collection}.pending" if self.settings is not None else None

    def _interrupted(self, collection: str, stored: int | None = None) -> str:
        """Advice when an ingest into ``collection`` stopped before it finished ("" otherwise, and
        while another process still holds the write lock: that ingest is running); ``stored``: the
        collection's chunks, when known."""
        marker = self._ingest_marker(collection)
        if marker is None or not marker.is_file():
            return ""
        with self._unless_writing() as free:
            if not free:
                return ""  # that ingest is running
        try:
            roots = [root for _, root in json.loads(marker.read_text()).get("sources", [])]
        except (OSError, ValueError, AttributeError):
            roots = []
        again = f"kt ingest {' '.join(shlex.quote(r) for r in roots)}" if roots else "the same kt ingest"
        kept = "nothing was stored yet" if stored == 0 else "some documents are partly stored"
        return f"an ingest was stopped before it finished ({kept}): run {again} again"

    def _gone_in_scope(self, name: str, left: list[str], owners: dict[str, tuple[str, str]]) -> list[str]:
        """Files (``source/path``) of the folders this run read whose stored chunks it did not read again
        because the file is gone from disk (without ``--prune`` they stay, and are found)."""
        roots = {r.name: Path(r.root) for r in self.tree.sources(name) if r.kind in ("dir", "files")}
        files = {owners[i] for i in left if i in owners and owners[i][0] in roots and owners[i][1]}
        return sorted(f"{s}/{o}" for s, o in files if roots[s].is_dir() and not (roots[s] / o).exists())

    def _moved_only(
        self, name: str, todo: list[Chunk], stored: dict[str, tuple[str, str]]
    ) -> tuple[list[Chunk], list[tuple[Chunk, Any]]]:
        """Split changed rows into those to embed and those whose title and text are unchanged.

        A document edit shifts the line ranges of the chunks after it; those rows get their new
        metadata but keep their stored vector (``(chunk, vector)`` pairs), so nothing is re-embedded.
        """
        same = self._same_text(name, [(c, c.chunk_id) for c in todo if c.chunk_id in stored])
        keep = {c.chunk_id for c, _, _ in same}
        return [c for c in todo if c.chunk_id not in keep], [(c, v) for c, _, v in same]

    def _copied(
        self, name: str, todo: list[Chunk], stored: dict[str, tuple[str, str]]
    ) -> tuple[list[Chunk], list[tuple[Chunk, str, Any]]]:
        """Split new rows into those to embed and those whose title and text a stored chunk already
        has (a renamed or moved file, a copied page): ``(chunk, stored id, stored vector)``, so
        unchanged text is never embedded twice. Candidates are found by content hash, then checked."""
        by_hash = {digest: chunk_id for chunk_id, (digest, _) in stored.items()}
        copied = self._same_text(name, [(c, by_hash[c.content_hash]) for c in todo
                                        if c.chunk_id not in stored and c.content_hash in by_hash])
        keep = {c.chunk_id for c, _, _ in copied}
        return [c for c in todo if c.chunk_id not in keep], copied

    def _shifted(self, name: str, todo: list[Chunk], leaving: Mapping[str, Chunk]
                 ) -> tuple[list[Chunk], list[tuple[Chunk, str, Any]]]:
        """Split rows to embed into those to embed and those holding the title and text one of the
        ``leaving`` rows (stored rows leaving their ids in this run, by id) had: ids are positions in a
        document, so a section added or taken out high up shifts every chunk after it (``(chunk, old
        id, stored vector)``; line ranges may differ, the embedded input does not)."""
        by_text: dict[tuple[str, str], str] = {}
        for old in leaving.values():
            by_text.setdefault((old.title, old.text), old.chunk_id)
        pairs = [(c, by_text[(c.title, c.text)]) for c in todo if (c.title, c.text) in by_text]
        if not pairs:
            return todo, []
        vectors = self.vectors.vectors(name, sorted({i for _, i in pairs}))
        shifted = [(c, i, vectors[i]) for c, i in pairs if i in vectors]
        keep = {c.chunk_id for c, _, _ in shifted}
        return [c for c in todo if c.chunk_id not in keep], shifted

    def _carry_reads(self, name: str, rewritten: set[str], heirs: Mapping[str, str]) -> None:
        """Read history follows the text, not the id: an id whose text changed is unread again, and a
        text read under an old id counts as read under the id that holds it now (old id -> new id)."""
        carried: dict[str, list[str]] = {}
        for session in self.sessions.names() if heirs else []:
            read = set(self.sessions.read_ids(session, name))
            gained = [new for old, new in heirs.items() if old in read]
            if gained:
                carried[session] = gained
        if rewritten:
            self.sessions.forget_chunks(name, sorted(rewritten))
        for session, ids in carried.items():
            self.sessions.mark_read(session, name, ids)

    def _same_text(self, name: str, pairs: list[tuple[Chunk, str]]) -> list[tuple[Chunk, str, Any]]:
        """Of ``(chunk, stored id)`` pairs, those whose stored row has the chunk's title and text, with
        the stored vector: the embedding input is the same, so the vector is too."""
        if not pairs:
            return []
        ids = sorted({stored_id for _, stored_id in pairs})
        old = {c.chunk_id: c for c in self.vectors.get(name, ids)}
        same = [(c, i) for c, i in pairs if i in old and (old[i].title, old[i].text) == (c.title, c.text)]
        vectors = self.vectors.vectors(name, sorted({i for _, i in same})) if same else {}
        return [(c, i, vectors[i]) for c, i in same if i in vectors]

    def _upsert_with_vectors(self, name: str, rows: Sequence[tuple[Chunk, Any]]) -> None:
        """Write rows with vectors already at hand (stored ones reused), in upsert batches."""
        import numpy as np  # deferred: heavy

        for start in range(0, len(rows), UPSERT_BATCH):
            part = rows[start : start + UPSERT_BATCH]
            self.vectors.upsert(name, [c for c, _ in part], np.stack([v for _, v in part]))

    def _moved_sources(self, name: str, batch: Any, copied: list[tuple[Chunk, str, Any]],
                       owners: dict[str, tuple[str, str]], removed: set[str]) -> dict[str, int]:
        """Sources not read in this run, whose folder is gone from disk, whose text this run added
        again under other ids: the signature of a folder moved and ingested under a new name."""
        counts: dict[str, int] = {}
        for _, source_id, _ in copied:
            owner = owners.get(source_id)
            if owner is not None and source_id not in removed and owner[0] not in batch.sources:
                counts[owner[0]] = counts.get(owner[0], 0) + 1
        roots = {r.name: r.root for r in self.tree.sources(name) if r.kind in ("dir", "files")}
        return {s: n for s, n in sorted(counts.items()) if s in roots and roots[s] and not Path(roots[s]).exists()}

    def _write_copies(self, name: str, copied: list[tuple[Chunk, str, Any]], leaving: set[str]) -> None:
        """Store copies with their source's vectors; a copy whose source leaves its id in this run (a
        move, a shift) takes its place in the tree, as the same text would be placed there."""
        self._upsert_with_vectors(name, [(c, v) for c, _, v in copied])
        self._hand_over(name, {source: chunk for chunk, source, _ in copied if source in leaving})

    @staticmethod
    def _retitled(todo: list[Chunk], stored: dict[str, tuple[str, str]],
                  leaving: Sequence[Chunk]) -> tuple[dict[str, Chunk], dict[str, str]]:
        """New rows whose text one of the ``leaving`` rows (stored rows leaving in this run) had under
        another title: a file without a heading is titled by its name, so renaming it changes every
        chunk's title and nothing else. They are embedded anew (the title is embedded) and take the
        old rows' places: old id -> row, with each old row's title (old id -> title)."""
        fresh = [c for c in todo if c.chunk_id not in stored]
        if not fresh or not leaving:
            return {}, {}
        by_text: dict[str, str] = {}
        titles: dict[str, str] = {}
        for old in leaving:
            by_text.setdefault(old.text, old.chunk_id)
            titles[old.chunk_id] = old.title
        heirs: dict[str, Chunk] = {}
        for chunk in fresh:
            source = by_text.get(chunk.text)
            if source is not None and source not in heirs:
                heirs[source] = chunk
        return heirs, {i: titles[i] for i in heirs}

    def _stored_heirs(self, name: str, removed: list[str], stored: dict[str, tuple[str, str]]) -> dict[str, Chunk]:
        """Unmapped stored rows that hold a leaving mapped row's text (same content hash): a file
        renamed or moved, ingested before the old one is pruned. Old id -> heir."""
        placed = self.tree.mapping_hashes(name)
        leaving = set(removed)
        mapped = [i for i in removed if i in placed]
        if not mapped:
            return {}
        unplaced: dict[str, str] = {}
        for chunk_id, (digest, _) in stored.items():
            if chunk_id not in placed and chunk_id not in leaving:
                unplaced.setdefault(digest, chunk_id)
        pairs: dict[str, str] = {}
        for old in mapped:
            heir = unplaced.pop(stored[old][0], None) if old in stored else None
            if heir is not None:
                pairs[old] = heir
        rows = {c.chunk_id: c for c in self.vectors.get(name, sorted(pairs.values()), with_text=False)} if pairs else {}
        return {old: rows[new] for old, new in pairs.items() if new in rows}

    def _hand_over(self, name: str, heirs: dict[str, Chunk], old_titles: Mapping[str, str] | None = None) -> None:
        """Give each leaving row's place in the tree (old id -> new row) to its heir: same text, same
        place; with ``old_titles`` (the heirs' titles differ), a snippet led by the old title is led
        by the new one. No change to the map is recorded."""
        mapped = self.tree.mappings(name, chunk_ids=list(heirs)) if heirs else []
        if not mapped:
            return
        updates = []
        for m in mapped:
            heir, title = heirs[m.chunk_id], (old_titles or {}).get(m.chunk_id, "")
            snippet = m.snippet
            if title and title != heir.title and snippet.startswith(title):
                snippet = heir.title + snippet[len(title):]
            updates.append((m.model_copy(update={"chunk_id": heir.chunk_id, "doc_id": heir.doc_id, "snippet": snippet,
                                                 "file_name": heir.file_name, "chunk_index": heir.chunk_index,
                                                 **provenance(heir.metadata)}), heir.content_hash))
        self.tree.apply(name, [], updates, remove=[m.chunk_id for m in mapped], track=False)

    def _rewrite_moved(self, name: str, moved: list[tuple[Chunk, Any]]) -> None:
        """Upsert rows with their old vectors, then point their mappings at the new hash and provenance."""
        self._upsert_with_vectors(name, moved)
        rows = {c.chunk_id: c for c, _ in moved}
        mapped = self.tree.mappings(name, chunk_ids=list(rows))
        if mapped:  # the chunk's meaning is unchanged: its place and snippet stay, only the source moved
            self.tree.apply(name, [], [
                (m.model_copy(update=provenance(rows[m.chunk_id].metadata)), rows[m.chunk_id].content_hash)
                for m in mapped
            ], track=False)

    def _registry(self, collection: str) -> dict[str, Any]:
        from .ingest import Source  # deferred: keeps kt browse fast

        return {r.name: Source(r.name, r.root, r.kind) for r in self.tree.sources(collection)}

    def _rescan_paths(self, collection: str, registry: dict[str, Any], source: str) -> list[str]:
        """What a re-scan of ``source`` reads: its root folder, or the files it was given one by one."""
        from .ingest import STDIN_ROOT  # deferred: keeps kt browse fast

        known = registry.get(source)
        if known is None:
            names = ", ".join(sorted(registry)) or "none yet"
            raise NotFoundError(f"no source named {source!r} in collection {collection!r} (sources: {names})",
                                hint="`kt sources` lists them; give a path to add one: kt ingest PATH --source NAME")
        if known.root == STDIN_ROOT:
            raise ConfigError(f"source {source!r} was read from standard input and cannot be re-scanned",
                              hint=f"pipe the JSONL again: kt ingest - --source {source}")
        root = Path(known.root)
        if not root.is_dir():
            raise NotFoundError(f"source {source!r}: its folder {known.root} no longer exists",
                                hint=f"point it at the new folder: kt ingest NEW_PATH --source {source} --replace;"
                                     f" or forget it: kt rm --source {source}")
        if known.kind == "dir":
            return [str(root)]
        origins = sorted({o for s, o in self.tree.chunk_owners(collection).values() if s == source})
        return [str(root / o) for o in origins if (root / o).is_file()]

    @staticmethod
    def _check_owners(batch: Any, owners: dict[str, tuple[str, str]], replace: bool) -> None:
        """Refuse chunk ids another source stored (unless ``replace``); ids stored before sources were
        recorded are claimed by whoever ingests them."""
        clashes = [(c.chunk_id, owners[c.chunk_id]) for c in batch.chunks
                   if c.chunk_id in owners and owners[c.chunk_id][0] != batch.owners[c.chunk_id][0]]
        if clashes and not replace:
            chunk_id, (owner, origin) = clashes[0]
            more = more_suffix(len(clashes), 1)
            raise ConflictError(
                f"{batch.origins[chunk_id]}: chunk id {chunk_id!r} is already stored from source {owner!r}"
                f" ({owner}/{origin}){more} — nothing was written",
                hint="give these rows ids of their own, or pass --replace to move the ids to this source",
            )

    @staticmethod
    def _superseded(batch: Any, stored: dict[str, tuple[str, str]]) -> list[str]:
        """Stored chunks of the documents this run parsed whole that it did not produce again: a page
        that shrank (or lost its text) is its new chunks only, never new ones mixed with old."""
        incoming = {c.chunk_id for c in batch.chunks}
        return [chunk_id for chunk_id, (_, file_name) in stored.items()
                if file_name in batch.documents and chunk_id not in incoming
                and chunk_id.rpartition("#")[0] == file_name]

    @staticmethod
    def _pruned(batch: Any, stored: dict[str, tuple[str, str]], owners: dict[str, tuple[str, str]]) -> list[str]:
        """Stored chunks of the scopes this run read completely that it did not read again."""
        from .ingest import in_scope  # deferred: keeps kt browse fast

        incoming = {c.chunk_id for c in batch.chunks}
        out = []
        for chunk_id, (_, file_name) in stored.items():
            if chunk_id in incoming or file_name in batch.failed:  # a file skipped as invalid is still there
                continue
            owner = owners.get(chunk_id)
            if owner is not None:
                hit = any(owner[0] == s and in_scope(owner[1], p) for s, p in batch.scopes)
            else:  # stored before sources were recorded: its file name reads source/path
                hit = file_name in batch.files or any(in_scope(file_name, f"{s}/{p}" if p else s)
                                                      for s, p in batch.scopes)
            if hit:
                out.append(chunk_id)
        return sorted(out)

    # sources and removal ------------------------------------------------------------------
    def sources(self, *, collection: str | None = None) -> SourcesReport:
        """The collection's sources: name, root, files, chunks and last ingest."""
        name = self._collection(collection)
        self._require_collection(name)
        rows = [SourceSummary(**vars(r)) for r in self.tree.sources(name)]
        owned = sum(r.chunks for r in rows)
        total = self.vectors.count(name) - len(self.tree.pending_removals().get(name, []))
        return SourcesReport(collection=name, sources=rows, unregistered=max(0, total - owned),
                             interrupted=self._interrupted(name, stored=total))

    def rm(
        self,
        paths: Sequence[str] = (),
        *,
        source: str | None = None,
        collection: str | None = None,
        dry_run: bool = False,
    ) -> RemoveReport:
        """Remove files, folders or a whole source from the collection: their chunks leave the vector
        table, the full-text index, the tree (counts updated, empty categories dropped) and every
        read history. Paths are matched through the registered roots (the files may be gone from
        disk), or as ``source/path`` labels. The tree store commits first and records the chunks as
        pending; the vector table follows, and a killed removal is finished by the next command."""
        name = self._collection(collection)
        self._require_collection(name)
        if not paths and source is None:
            raise ConfigError("nothing to remove", hint="give files or folders, or --source NAME")
        if self.vectors.is_read_only(name):
            raise ConfigError(f"collection {name!r} is attached read-only; its table is never written",
                              hint=f"`kt detach {name}` forgets it without touching the table")
        with self._with_lock():
            if not dry_run:
                self._finish_removals()
            ids, files, forget = self._removal_plan(name, list(paths), source)
            roots = {r.name: Path(r.root) for r in self.tree.sources(name) if r.kind in ("dir", "files")}
            if not dry_run and ids:
                self._remove(name, ids, forget_sources=forget)
            elif not dry_run and forget:
                self.tree.remove_chunks(name, [], forget_sources=forget)
        total = self.vectors.count(name) - (len(ids) if dry_run else 0)
        # a file still in a folder kept as a source comes back with the folder's next ingest
        on_disk = [f for f in files if "/" in f and (src := f.split("/", 1)[0]) in roots and src not in forget
                   and (roots[src] / f.split("/", 1)[1]).is_file()]
        return RemoveReport(collection=name, dry_run=dry_run, removed=len(ids), files=files, sources=forget,
                            total=total, nodes=len(self.tree.nodes(name)), on_disk=on_disk)

    def _removal_plan(self, collection: str, paths: list[str],
                      source: str | None) -> tuple[list[str], list[str], list[str]]:
        """(chunk ids, ``source/path`` labels of their files, sources to forget) for an ``rm``."""
        from .ingest import in_scope, locate, real_path  # deferred: keeps kt browse fast

        registry = self._registry(collection)
        owners = self.tree.chunk_owners(collection)
        stored = self.vectors.fingerprints(collection)
        picked: dict[str, str] = {}
        forget: list[str] = []
        if source is not None:
            if source not in registry:
                names = ", ".join(sorted(registry)) or "none"
                raise NotFoundError(f"no source named {source!r} in collection {collection!r} (sources: {names})",
                                    hint="`kt sources` lists them")
            forget.append(source)
            picked.update({i: f"{s}/{o}" for i, (s, o) in owners.items() if s == source})
            picked.update({i: f for i, (_, f) in stored.items() if i not in owners and in_scope(f, source)})
        for raw in paths:
            scopes: list[tuple[str, str]] = []
            found = locate(real_path(raw), registry.values()) if raw not in ("", "-") else None
            if found is not None:
                scopes.append((found[0].name, found[1]))
                if not found[1] and found[0].name not in forget:
                    forget.append(found[0].name)  # the whole root: the source goes too
            label = raw.strip().strip("/")
            first, _, rest = label.partition("/")
            if first in registry and not Path(raw).exists():
                # a source/path label, as ids and hits show it (an existing path is never read as
                # one: a folder that merely shares a source's name is not that source)
                scopes.append((first, rest))
                if not rest and first not in forget:
                    forget.append(first)
            before = len(picked)
            for s, prefix in scopes:
                picked.update({i: f"{s}/{o}" for i, (src, o) in owners.items()
                               if src == s and in_scope(o, prefix) and i in stored})
                legacy = f"{s}/{prefix}" if prefix else s
                picked.update({i: f for i, (_, f) in stored.items() if i not in owners and in_scope(f, legacy)})
            on_disk = found is not None and Path(raw).exists()  # inside a source, just nothing stored (any more)
            if len(picked) == before and not on_disk and not any(not prefix for _, prefix in scopes):
                raise NotFoundError(
                    f"nothing stored from {raw!r} in collection {collection!r}",
                    hint="`kt sources` lists the sources and their folders; paths may also be given as"
                         " SOURCE/PATH, as ids show them",
                )
        ids = sorted(i for i in picked if i in stored)
        return ids, sorted({picked[i].rstrip("/") for i in ids}), forget

    def _remove(self, collection: str, chunk_ids: Sequence[str], *, forget_sources: Sequence[str] = ()) -> None:
        """Unmap, disown and mark pending in one tree transaction, then delete from the vector table."""
        from .builders.runner import (  # deferred: numpy
            collapse_single_children,
            mark_named_after_gone,
            node_names,
        )

        names = node_names(self, collection)
        self.tree.remove_chunks(collection, chunk_ids, forget_sources=forget_sources)
        self._finish_removals()
        collapse_single_children(self, collection)
        mark_named_after_gone(self, collection, names)
        self.tree.set_chunk_count(collection, self.vectors.count(collection))

    def _finish_removals(self) -> None:
        """Complete removals the tree store committed but the vector table (or a read history) may
        still hold — normally right away, after a kill by the next command. Idempotent."""
        for collection, ids in self.tree.pending_removals().items():
            whole = WHOLE_COLLECTION in ids
            if whole:
                self.vectors.drop(collection)
            else:  # deleted rows drop out of the full-text index at once; the next ingest compacts
                self.vectors.delete(collection, ids)
            self.sessions.forget_chunks(collection, None if whole else ids)
            self.tree.clear_pending(collection, None if whole else ids)

    def settle(self) -> bool:
        """Finish an interrupted removal if no other process is writing; True when nothing is pending."""
        if not self.tree.pending_removals():
            return True
        with self._unless_writing() as free:
            if not free:
                return False  # a writer is at work (maybe the removal itself); readers skip pending ids
            self._finish_removals()
        return True

    @contextmanager
    def _unless_writing(self) -> Iterator[bool]:
        """Hold the write lock for the block when no other process holds it (without waiting);
        yields False, holding nothing, when one does (a writer is at work)."""
        probe = StoreLock(self.lock.path.parent, timeout=0) if self.lock is not None and not self.lock.held else None
        try:
            if probe is not None:
                probe.acquire()
        except LockedError:
            yield False
            return
        try:
            yield True
        finally:
            if probe is not None:
                probe.release()

    def _pending_ids(self, collection: str) -> set[str]:
        return set(self.tree.pending_removals().get(collection, []))

    def drop(self, *, collection: str | None = None, dry_run: bool = False) -> DropReport:
        """Remove a whole collection: tree, mappings, sources, call-log entries stay; the vector table
        and read histories go. The tree store commits first; a killed drop is finished later."""
        name = self._collection(collection)
        info = self._require_collection(name)
        if (info.source or {}).get("attached"):
            raise ConfigError(f"collection {name!r} is attached read-only; its table is never removed",
                              hint=f"`kt detach {name}` forgets it without touching the table")
        report = DropReport(collection=name, dry_run=dry_run, chunks=self.vectors.count(name),
                            nodes=len(self.tree.nodes(name)), sources=len(self.tree.sources(name)))
        if dry_run:
            return report
        with self._with_lock():
            self.tree.drop_collection(name, pending=True)
            self.vectors.forget(name)
            self._finish_removals()
        return report

    # build --------------------------------------------------------------------------------
    def build(
        self,
        *,
        collection: str | None = None,
        builder: str = "auto",
        llm: LLMClient | str | None = None,
        rebuild: bool = False,
        dry_run: bool = False,
        concurrency: int | None = None,
        progress: ProgressFn = _noop_progress,
        message: MessageFn = _noop_message,
        use_cache: bool = True,
        timeout: float | None = None,
        context_window: int | None = None,
        max_output: int | None = None,
    ) -> Any:
        """Build or extend the collection's tree; returns a ``BuildReport``.

        Args:
            builder: ``auto``, ``hybrid`` (offline structure, LLM names), ``llm`` (the seed's
                LLM builder) or ``cluster`` (offline). ``auto`` is ``hybrid`` when a model resolves,
                else ``cluster`` (see :meth:`resolve_llm`; docs/benchmarks.md has the measurement).
            llm: a client or a ``PROVIDER:MODEL`` spec; default: the knowledge base's client, else
                the configured model (``KNOWTOLOGY_LLM`` / ``llm`` in config.toml).
            concurrency: LLM calls in flight; default ``KNOWTOLOGY_CONCURRENCY`` / config, else 1
                for a server on this machine (local servers answer one request at a time) and 4
                for remote providers.
            use_cache: False sends every LLM call to the model, even prompts the call log has
                answered (new calls are still validated and logged).
            timeout / context_window / max_output: per-attempt timeout and model limits for a
                client made from a spec (``--timeout``, ``--context-window``, ``--max-output``).
        """
        from .builders.context import StoreSet  # deferred: the builders package loads numpy
        from .builders.dispatch import run_build  # deferred: loads numpy

        name = self._collection(collection)
        self._require_collection(name)
        if builder not in BUILDERS:
            raise ConfigError(f"unknown builder {builder!r}", hint="use " + ", ".join(BUILDERS))
        client = None if builder == "cluster" else self.resolve_llm(
            llm, timeout=timeout, context_window=context_window, max_output=max_output,
            require_key=not dry_run)  # a dry run only plans: no key needed
        if builder in ("llm", "hybrid") and client is None:
            raise ConfigError(f"the {builder} builder needs a model",
                              hint="pass --llm openai:MODEL or anthropic:MODEL (or set KNOWTOLOGY_LLM)")
        chosen = "cluster" if client is None else ("hybrid" if builder == "auto" else builder)
        if concurrency is None and self.settings is not None:
            concurrency = self.settings.concurrency
        if concurrency is None:
            concurrency = 1 if client is not None and client.is_local else 4
        with self._with_lock():
            if not dry_run:
                self._finish_removals()
            report = run_build(
                StoreSet(self.vectors, self.tree, self.embedder_for),  # the stores, not the façade
                name,
                builder=chosen,
                llm=client,
                rebuild=rebuild,
                dry_run=dry_run,
                concurrency=concurrency,
                progress=progress,
                message=message,
                use_cache=use_cache,
            )
            if not dry_run:
                self.tree.set_chunk_count(name, report.mapped + report.unmapped)
        return report

    def resolve_llm(self, llm: LLMClient | str | None = None, **options: Any) -> LLMClient | None:
        """The model to use: ``llm`` (a client or a spec) > this knowledge base's client > settings.

        Settings are ``KNOWTOLOGY_LLM`` or ``llm`` in config.toml, with keys, base URLs, timeout and
        profile overrides from the same settings; ``options`` (``timeout``, ``context_window``,
        ``max_output``) apply to a client made from a spec. None when no model is configured.
        """
        if llm is not None and not isinstance(llm, str):
            return llm
        if llm is None and self.llm is not None:
            return self.llm
        spec = llm or (self.settings.llm if self.settings is not None else None)
        if not spec:
            return None
        return llm_from_settings(spec, self.settings, **{k: v for k, v in options.items() if v is not None})

    # explore: browse ----------------------------------------------------------------------
    def browse(self, path: str = ROOT, *, collection: str | None = None, depth: int = 1) -> BrowseResult:
        """Children of ``path`` with counts; at a leaf, its chunks' snippets (never text).

        ``path`` matches regardless of letter case when only one category fits (see
        :meth:`find_node`). At the root, ``unmapped`` counts the chunks no category holds yet.
        """
        name = self._collection(collection)
        info = self._require_collection(name)
        segments = split_path(path)
        unmapped = 0
        if segments:
            node = self.find_node(path, collection=name)
            segments = split_path(node.path)
            normalized, description, count = node.path, node.description, node.chunk_count
            level_nodes = self.tree.children(name, node.path)
        else:
            level_nodes = self.tree.children(name, None)
            normalized, description = ROOT, ""
            count = sum(n.chunk_count for n in level_nodes)
            unmapped = self._unmapped(info, count, has_tree=bool(level_nodes))
        # built from the tree store's records, already valid: model_construct skips re-validation
        children: list[NodeSummary] = []
        for level in range(max(1, depth)):
            children.extend(NodeSummary.model_construct(path=n.path, name=n.name, description=n.description,
                                                        level=n.level, chunk_count=n.chunk_count)
                            for n in level_nodes)
            if level + 1 < depth:
                level_nodes = [c for n in level_nodes for c in self.tree.children(name, n.path)]
        chunks: list[ChunkLead] = []
        if segments and not any(c.level == len(segments) + 1 for c in children):
            chunks = [ChunkLead.model_construct(chunk_id=m.chunk_id, snippet=m.snippet, section=m.section,
                                                lines=m.lines, pages=m.pages)
                      for m in self.tree.mappings(name, under=normalized) if m.path == normalized]
        children.sort(key=lambda c: c.path)
        return BrowseResult.model_construct(collection=name, path=normalized, description=description,
                                            chunk_count=count, children=children, chunks=chunks, unmapped=unmapped)

    def _unmapped(self, info: CollectionInfo, mapped: int, *, has_tree: bool) -> int:
        """Chunks not in the map: from the count recorded at ingest/build; without one (a store
        written before counts were recorded), the vector table is counted only while there is no
        tree at all, so ``browse`` stays a tree-store read."""
        total = info.chunks
        if total is None and not has_tree:
            total = self.vectors.count(info.name)
        return max(0, (total or 0) - mapped)

    # explore: search / grep ---------------------------------------------------------------
    def search(
        self,
        query: str,
        *,
        collection: str | None = None,
        k: int = 5,
        under: str | None = None,
        mode: str | None = None,
        preset: str | None = None,
        rerank: str | None = None,
        rerank_top: int | None = None,
        explain: bool = False,
        min_score: float | None = None,
        warn: MessageFn = _noop_message,
    ) -> SearchResult:
        """Search with the preset's stages (``default``: hybrid BM25 + vectors); snippets only.

        Args:
            query: words or a question.
            mode: ``hybrid``, ``semantic`` or ``keyword`` (default: the preset's).
            preset: ``fast``, ``default`` or ``thorough`` (see `retrieval.presets`).
            rerank: ``none`` or ``llm`` (the configured LLM grades the top ``rerank_top`` snippets
                in one call); reranking reorders, it never drops a hit.
            explain: record on each hit the score every stage gave it.
            warn: receives one-line warnings (an LLM rerank that fell back to the incoming order).
        """
        from .retrieval.pipeline import retrieve  # deferred: keeps kt browse fast
        from .retrieval.presets import SEARCH_MODES, get_preset  # deferred: keeps kt browse fast
        from .retrieval.rerank import RERANK_TOP, RERANKERS  # deferred: keeps kt browse fast

        name = self._collection(collection)
        chosen = get_preset(preset)
        mode = mode or chosen.mode
        if mode not in SEARCH_MODES:
            raise ConfigError(f"unknown search mode {mode!r}", hint="use hybrid, semantic or keyword")
        if rerank not in (None, *RERANKERS):
            raise ConfigError(f"unknown reranker {rerank!r}", hint="use " + " or ".join(RERANKERS))
        if not query.strip():
            raise ArgumentError("empty query", hint="give a question or some words to search for")
        if k < 1:
            raise ArgumentError(f"-k must be at least 1, got {k}")
        self._require_collection(name)
        within = self._resolve_under(name, under)
        if mode != "keyword":
            self.embedder_for(name)  # a mismatched embedder is an error before any search runs
        warnings: list[str] = []

        def warn_and_keep(message: str) -> None:
            warnings.append(message)
            warn(message)

        reranker = self._reranker(name, rerank, rerank_top or RERANK_TOP, warn_and_keep)
        want = 2 * k  # room for copies
        texts: dict[str, Any] = {}  # candidates read to compare copies, kept for the final fold
        while True:
            found = retrieve(self.vectors, name, query, mode=mode, preset=chosen, k=want,
                             embed_query=lambda text: self.embedder_for(name).embed_query(text), within=within)
            # a single retriever stops at `want`: when copies fill it (a section a site repeats on
            # every page), ask for more until k different texts are in or the list runs out
            if (len(found.ranking) < want or want >= FOLD_LIMIT
                    or len(self._fold_copies(name, found.ranking, k, texts)[0]) >= k):
                break
            want *= 4
        ranking = found.ranking
        if chosen.tree_lift > 0 and ranking:
            from .retrieval.pipeline import tree_lift  # deferred: keeps kt browse fast

            leaf_of = {m.chunk_id: m.path for m in self.tree.mappings(name, chunk_ids=[s.chunk_id for s in ranking[:100]])}
            if leaf_of:  # no tree yet: nothing to lift by
                ranking, leaf_scores = tree_lift(ranking, leaf_of, chosen.tree_lift)
                found.note("tree", [ScoredId(i, v) for i, v in leaf_scores.items()])
        reranked: dict[str, float] = {}
        applied: bool | None = None
        if reranker is not None and len(ranking) > 1:
            head = self._hits(name, ranking[: reranker.top_n])
            outcome = reranker.rerank(query, ranking, {h.chunk_id: h.snippet for h in head})
            ranking, reranked, applied = outcome.ranking, outcome.scores, outcome.applied
        top, copies = self._fold_copies(name, ranking, k, texts)
        hits = self._hits(name, top, min_score, copies)
        if mode == "keyword":
            hits = self._keyword_windows(name, hits, query, read=texts)
        if explain:
            stages = found.stages
            for rank, s in enumerate(top, start=1):
                entry = stages.setdefault(s.chunk_id, {})
                if s.chunk_id in reranked:
                    entry["rerank"] = reranked[s.chunk_id]
                entry["final_rank"] = rank
            hits = [h.model_copy(update={"explain": dict(stages.get(h.chunk_id, {}))}) for h in hits]
        return SearchResult(collection=name, query=query, mode=mode, under=under, hits=hits, preset=chosen.name,
                            reranker=reranker.name if reranker is not None else None, reranked=applied,
                            warnings=warnings, expansion=found.expansion or None if explain else None)

    def _reranker(self, collection: str, name: str | None, top_n: int, warn: MessageFn) -> Any:
        """The reranker called ``name`` (None for ``none``); ``llm`` needs a configured model."""
        if name in (None, "none"):
            return None
        from .retrieval.rerank import LLMReranker  # deferred: keeps kt browse fast

        client = self.llm
        if client is None and self.settings is not None and self.settings.llm:
            client = self.llm = llm_from_settings(self.settings.llm, self.settings)
        if client is None:
            raise ConfigError("the llm reranker needs a model",
                              hint="pass --llm openai:MODEL or anthropic:MODEL, or set KNOWTOLOGY_LLM")
        return LLMReranker(client, top_n=top_n, cache=self.tree, collection=collection, warn=warn)

    def grep(
        self,
        terms: str | Sequence[str],
        *,
        collection: str | None = None,
        k: int = 5,
        under: str | None = None,
        regex: bool = False,
        min_score: float | None = None,
    ) -> SearchResult:
        """Keyword search (BM25 over title + text), or a regular-expression match; snippets only."""
        name = self._collection(collection)
        self._require_collection(name)
        if k < 1:
            raise ArgumentError(f"-k must be at least 1, got {k}")
        within = self._resolve_under(name, under)
        read: dict[str, Any] = {}  # chunks read once, shared by the exact-first order, copies and windows
        if regex:
            pattern = terms if isinstance(terms, str) else " ".join(terms)
            try:
                re.compile(pattern)
            except re.error as exc:
                raise ArgumentError(f"bad regular expression {pattern!r}: {exc}", hint="escape special characters") from exc
            scored, query = self.vectors.regex_search(name, pattern, 2 * k, within=within), pattern
        else:
            query = keyword_query(list(terms) if not isinstance(terms, str) else terms)
            if not query:
                raise ArgumentError("no keywords given", hint=NO_KEYWORDS_HINT)
            exact = identifier_terms(query)
            scored = self.vectors.keyword_search(name, query, max(2 * k, EXACT_POOL) if exact else 2 * k,
                                                 within=within)
            if exact:
                scored = self._exact_first(name, scored, exact, read)
        scored, copies = self._fold_copies(name, scored, k, read)
        hits = self._keyword_windows(name, self._hits(name, scored, min_score, copies), query, regex=regex, read=read)
        return SearchResult(collection=name, query=query, mode="regex" if regex else "keyword", under=under,
                            hits=hits)

    def _exact_first(self, collection: str, scored: list[ScoredId], exact: list[str],
                     read: dict[str, Any]) -> list[ScoredId]:
        """Keyword candidates holding every identifier of the query as written (``MAX_RETRY_COUNT``, not
        just "max", "retry" and "count"), then the rest; BM25 order within each. ``read`` caches the
        chunks read (see `_fold_copies`)."""
        self._read_into(collection, read, [s.chunk_id for s in scored])
        texts = {i: f"{c.title}\n{c.text}".lower() for i, c in read.items()}
        whole = [s for s in scored if all(term in texts.get(s.chunk_id, "") for term in exact)]
        kept = {s.chunk_id for s in whole}
        return whole + [s for s in scored if s.chunk_id not in kept]

    def _read_into(self, collection: str, read: dict[str, Any], chunk_ids: Sequence[str]) -> None:
        """Read the chunks of ``chunk_ids`` not yet in ``read`` into it (one store read)."""
        unread = [i for i in chunk_ids if i not in read]
        read.update({c.chunk_id: c for c in self.vectors.get(collection, unread)} if unread else {})

    def _keyword_windows(self, collection: str, hits: list[Hit], query: str, *, regex: bool = False,
                         read: dict[str, Any] | None = None) -> list[Hit]:
        """Keyword hits whose snippet is the chunk's best-matching line (or window), matches marked;
        a hit whose text has no match (e.g. only its title matched) keeps its snippet. ``read``
        caches the chunks read."""
        if not hits:
            return hits
        from .retrieval.highlight import (  # deferred: keeps kt browse fast
            best_window,
            keyword_matcher,
            regex_matcher,
        )

        find = regex_matcher(query) if regex else keyword_matcher(query)
        read = {} if read is None else read
        self._read_into(collection, read, [h.chunk_id for h in hits])
        texts = {h.chunk_id: read[h.chunk_id].text for h in hits if h.chunk_id in read}
        out = []
        for h in hits:
            window = best_window(texts.get(h.chunk_id, ""), find)
            out.append(h if window is None else h.model_copy(update={"snippet": window.text, "marks": window.marks}))
        return out

    def _fold_copies(self, collection: str, ranking: Sequence[ScoredId], k: int,
                     read: dict[str, Any] | None = None) -> tuple[
            list[ScoredId], dict[str, list[str]]]:
        """The first ``k`` of ``ranking`` with copies folded in: a chunk whose text (whitespace aside)
        is that of a chunk ranked above it is no new lead — a site's print page, a file kept twice —
        so it leaves the list and is named on the first one's hit (``copies``). Copies score alike
        in every retriever, so only candidates whose score equals another's are read to compare.
        The first ``2k`` candidates are looked at, and twice as many again while they hold fewer
        than ``k`` different texts (a config section a site repeats on twenty pages), so ``-k 5``
        still gives five different texts when the ranking has them. ``read`` caches the chunks read
        (a search folds twice: to decide how deep to retrieve, then for its hits)."""
        size = 2 * k
        read = {} if read is None else read
        while True:
            window = list(ranking[:size])
            by_score = Counter(round(s.score, 6) for s in window)
            tied = [s.chunk_id for s in window if by_score[round(s.score, 6)] > 1]
            if not tied:
                return window[:k], {}
            self._read_into(collection, read, tied)
            groups: dict[tuple[float, str, str], list[ScoredId]] = {}
            for s in window:
                c = read.get(s.chunk_id)
                key = (round(s.score, 6), "text", copy_key(c.text)) if c else (round(s.score, 6), "id", s.chunk_id)
                groups.setdefault(key, []).append(s)
            if len(groups) >= k or size >= len(ranking):
                break
            size *= 2
        kept: list[ScoredId] = []
        copies: dict[str, list[str]] = {}
        for members in list(groups.values())[:k]:
            # the copy nearest its document's start leads: a page's own text, not the print page's
            lead = min(members, key=lambda s: read[s.chunk_id].chunk_index if s.chunk_id in read else 0)
            kept.append(lead)
            if len(members) > 1:
                copies[lead.chunk_id] = [s.chunk_id for s in members if s is not lead]
        return kept, copies

    def _hits(self, collection: str, scored: Sequence[ScoredId], min_score: float | None = None,
              copies: dict[str, list[str]] | None = None) -> list[Hit]:
        """Leads for ``scored`` (snippets, never text); ``min_score`` compares the score as reported;
        ``copies`` names, per chunk, other chunks of the same text. Chunks whose removal is still
        finishing are left out."""
        if min_score is not None:
            scored = [s for s in scored if round(s.score, 6) >= min_score]
        pending = self._pending_ids(collection) if scored else set()
        if pending:
            scored = [s for s in scored if s.chunk_id not in pending]
        if not scored:
            return []
        ids = [s.chunk_id for s in scored]
        mapped = {m.chunk_id: m for m in self.tree.mappings(collection, chunk_ids=ids)}
        missing = [i for i in ids if i not in mapped]
        loose = {c.chunk_id: c for c in self.vectors.get(collection, missing)} if missing else {}
        hits = []
        for s in scored:
            if s.chunk_id in mapped:
                m = mapped[s.chunk_id]
                hits.append(Hit(chunk_id=m.chunk_id, path=m.path, snippet=m.snippet, score=round(s.score, 6),
                                doc_id=m.doc_id, file_name=m.file_name, chunk_index=m.chunk_index,
                                section=m.section, lines=m.lines, pages=m.pages,
                                copies=(copies or {}).get(s.chunk_id, [])))
            elif s.chunk_id in loose:
                from .builders.snippets import make_snippet  # deferred: keeps kt browse fast

                c = loose[s.chunk_id]
                hits.append(Hit(chunk_id=c.chunk_id, path="", snippet=make_snippet(c.text, c.title),
                                score=round(s.score, 6), doc_id=c.doc_id, file_name=c.file_name,
                                chunk_index=c.chunk_index, copies=(copies or {}).get(s.chunk_id, []),
                                **provenance(c.metadata)))
        return hits

    # explore: read ------------------------------------------------------------------------
    def read(
        self,
        chunk_ids: Sequence[str],
        *,
        collection: str | None = None,
        session: str | None = None,
        force: bool = False,
        context: int = 0,
    ) -> ReadResult:
        """Full text of chunks; repeats within the session come back ``already_read`` without text
        (so does a copy of a text read before: the same text, whitespace aside, under another id).

        ``context=N`` also returns up to N chunks before and N after each one in its document
        (``context_of`` names the chunk they widen); they count as read in the session too.
        """
        name = self._collection(collection)
        session_name = self._session(session)
        ids = [c.strip() for c in chunk_ids if c and c.strip()]
        if not ids:
            raise ArgumentError("no chunk ids given", hint=NO_IDS_HINT)
        pending = self._pending_ids(name)
        chunks = {c.chunk_id: c for c in self.vectors.get(name, ids) if c.chunk_id not in pending}
        if forms := {i: meant for i in ids if i not in chunks and (meant := id_forms(i)) != [i]}:
            # ids copied with their brackets or quotes, or several in one string: read as meant
            wanted = [f for found in forms.values() for f in found]
            chunks |= {c.chunk_id: c for c in self.vectors.get(name, wanted) if c.chunk_id not in pending}
            ids = [f for i in ids for f in (forms[i] if i in forms and set(forms[i]) <= chunks.keys() else [i])]
        unknown = list(dict.fromkeys(i for i in ids if i not in chunks))
        hints: dict[str, str] = {}
        if unknown:
            self._require_collection(name)
            real = [i for i in self.vectors.fingerprints(name) if i not in pending]
            hints = {i: hint for i in unknown[:MAX_MISSING_HINTS] if (hint := suggest_ids(i, real))}
            present = set(real)
            hints |= {old: f"its file was renamed or moved: the text is now {new!r} (kt read {new})"
                      for old, new in self.tree.successors(name, unknown).items() if new in present}
        if unknown and not chunks:
            raise NotFoundError(
                f"no chunk {unknown[0]!r} in collection {name!r}"
                + (f" (+{len(unknown) - 1} more unknown)" if len(unknown) > 1 else ""),
                hint=hints.get(unknown[0], MISSING_HINT),
            )
        ids = [i for i in ids if i in chunks]  # the others are named in `missing`
        if context < 0:
            raise ArgumentError(f"--context must be 0 or more, got {context}")
        order: list[tuple[str, str | None]] = []  # (chunk id, the requested id it is context for)
        placed: set[str] = set()
        requested = list(dict.fromkeys(ids))
        for chunk_id in requested:
            around = self.vectors.neighbours(name, chunks[chunk_id], context, context) if context else []
            for c in around:
                chunks.setdefault(c.chunk_id, c)
            before = [c.chunk_id for c in around if c.chunk_index < chunks[chunk_id].chunk_index]
            after = [c.chunk_id for c in around if c.chunk_id not in before]
            for other in before:
                if other not in placed and other not in requested:
                    order.append((other, chunk_id))
                    placed.add(other)
            if chunk_id not in placed:
                order.append((chunk_id, None))
                placed.add(chunk_id)
            for other in after:
                if other not in placed and other not in requested:
                    order.append((other, chunk_id))
                    placed.add(other)
        mapped = {m.chunk_id: m for m in self.tree.mappings(name, chunk_ids=[i for i, _ in order])}
        seen = set(self.read_history(collection=name, session=session_name))
        # A copy of a text the session has read (a print page, a repeated paragraph) is read too.
        texts_read: dict[str, str] = {}  # text -> the chunk the session read it as
        if not force and seen and any(i not in seen for i, _ in order):
            texts_read = {copy_key(c.text): c.chunk_id for c in self.vectors.get(name, sorted(seen))}
        out: list[ReadChunk] = []
        newly: list[str] = []
        for chunk_id, context_of in order:
            c = chunks[chunk_id]
            text = copy_key(c.text)
            repeat = (chunk_id in seen or text in texts_read) and not force
            same_as = texts_read.get(text) if repeat and chunk_id not in seen else None
            if text:
                texts_read.setdefault(text, chunk_id)
            out.append(ReadChunk(chunk_id=chunk_id, path=mapped[chunk_id].path if chunk_id in mapped else "",
                                 text=None if repeat else c.text, already_read=repeat, doc_id=c.doc_id,
                                 file_name=c.file_name, chunk_index=c.chunk_index, title=c.title,
                                 context_of=context_of, same_as=same_as if same_as != chunk_id else None,
                                 **provenance(c.metadata)))
            if not repeat and chunk_id not in seen:
                newly.append(chunk_id)
        if newly:
            self.sessions.mark_read(session_name, name, newly)
        return ReadResult(collection=name, session=session_name, chunks=out, missing=unknown,
                          missing_hints=hints)

    def read_history(self, *, collection: str | None = None, session: str | None = None) -> list[str]:
        """Chunk ids read so far in the session (oldest first)."""
        name, session_name = self._collection(collection), self._session(session)
        return self.sessions.read_ids(session_name, name)

    def reset_session(self, *, collection: str | None = None, session: str | None = None) -> bool:
        """Forget what the session read (in one collection when given)."""
        return self.sessions.reset(self._session(session), collection)

    # export / import ----------------------------------------------------------------------
    def tree_document(self, path: str = ROOT, *, collection: str | None = None) -> TreeDocument:
        """The versioned tree document of the collection, or of the subtree at ``path`` (docs/export.md)."""
        from .export import build_document  # deferred: keeps kt browse fast

        name = self._collection(collection)
        info = self._require_collection(name)
        root = ROOT
        nodes = self.tree.nodes(name)
        if split_path(path):
            node = self.tree.get_node(name, path)
            if node is None:
                raise NotFoundError(f"no category {path!r} in collection {name!r}", hint="`kt browse` lists the categories")
            root = node.path
            nodes = [n for n in nodes if n.path == root or n.path.startswith(root + "/")]
        mappings = self.tree.mappings(name, under=None if root == ROOT else root)
        chunks = {c.chunk_id: c for c in self.vectors.get(name, [m.chunk_id for m in mappings], with_text=False)}
        unmapped = None
        if root == ROOT:
            mapped = {m.chunk_id for m in mappings}
            unmapped = [i for i in self.vectors.fingerprints(name) if i not in mapped]
        return build_document(collection=name, root=root, nodes=nodes, mappings=mappings, chunks=chunks,
                              builder=info.builder, embedder=info.embedder, unmapped=unmapped,
                              generator=f"knowtology-cli {__version__}")

    def export_tree(self, path: str = ROOT, fmt: str = "json", *, collection: str | None = None,
                    depth: int | None = None, link_base: str = "", link_from: str | Path | None = None) -> TreeExport:
        """The tree (or the subtree at ``path``) as json, markdown, mermaid or html.

        Args:
            depth: levels to show (markdown and mermaid only).
            link_base: prefix of each chunk's source link (markdown and html); empty keeps the
                file names as relative links.
            link_from: without a link base, the folder the export will be read from: each link is
                then the source file's path relative to it (``../docs/a.md#L3-L9``).
        """
        from .export import render  # deferred: keeps kt browse fast

        doc = self.tree_document(path, collection=collection)
        roots = None
        if link_from is not None and not link_base:
            roots = {s.name: os.path.relpath(s.root, link_from) for s in self.tree.sources(doc.collection)
                     if s.kind in ("dir", "files")}
        text, warnings = render(doc, fmt, depth=depth, link_base=link_base, roots=roots)
        return TreeExport(collection=doc.collection, path=doc.root, format=fmt, text=text, nodes=len(doc.nodes),
                          chunks=len(doc.chunks), warnings=warnings)

    def import_tree(self, document: Any, *, collection: str | None = None, replace: bool = False,
                    strict: bool = False, source: str = "<document>") -> TreeImportReport:
        """Make the collection's tree the one in ``document`` (a tree document: JSON text, dict or
        ``TreeDocument``), matching chunks by id, or by content hash under another id (a renamed
        file: ``relinked``); one transaction, nothing written on any error.

        Chunks of the document missing from the store are skipped, store chunks missing from the
        document stay unmapped (``kt build`` places them), and chunks whose text changed since the
        export keep their place but count as stale until ``kt build`` re-places them; the report
        lists all three. ``strict`` refuses any such difference; an existing tree is replaced only
        with ``replace``.
        """
        from .builders.runner import apply_reply  # deferred: loads numpy
        from .export import parse_document  # deferred: keeps kt browse fast

        doc = parse_document(document, source)
        name = self._collection(collection)
        self._require_collection(name)
        with self._with_lock():
            existing = self.tree.nodes(name)
            if existing and not replace:
                raise ConfigError(f"collection {name!r} already has a tree ({len(existing)} categories); "
                                  "importing would replace it", hint="pass --replace to replace it (`kt export "
                                  "--format json -o FILE` keeps a copy of the current one first)")
            stored = self.vectors.fingerprints(name)
            present, relinked = self._import_matches(doc.chunks, stored)
            matched = {c.chunk_id for c in present}
            missing = [c.chunk_id for c in doc.chunks if c.chunk_id not in stored and c.chunk_id not in relinked]
            not_listed = sorted(i for i in stored if i not in matched)
            changed = [c.chunk_id for c in present if c.content_hash and c.content_hash != stored[c.chunk_id][0]]
            if doc.chunks and not present:
                raise InputError(f"{source}: none of its {len(doc.chunks)} chunks is in collection {name!r}",
                                 hint="ingest the corpus the tree was built on first, or pick the collection with -c")
            if strict and (missing or not_listed or changed):
                raise InputError(f"{source}: the document and collection {name!r} differ: {len(missing)} chunks "
                                 f"missing from the store, {len(not_listed)} store chunks not in the document, "
                                 f"{len(changed)} changed since the export", hint="drop --strict to import anyway")
            # a changed chunk keeps the exported hash, so status calls it stale and build re-places it
            hashes = {c.chunk_id: c.content_hash or stored[c.chunk_id][0] for c in present}
            reply = TreeReply(categories=[Category(path=n.path, description=n.description) for n in doc.nodes],
                              assignments=[Assignment(chunk_id=c.chunk_id, path=c.path, snippet=c.snippet)
                                           for c in present])
            apply_reply(self, name, reply, hashes, replace=True)  # the one way mappings are written
            self.tree.set_builder(name, doc.builder)
            nodes = self.tree.nodes(name)
        return TreeImportReport(collection=name, source=source, builder=doc.builder, replaced=bool(existing),
                                nodes=len(nodes), mapped=len(present),
                                dropped_nodes=len({n.path for n in doc.nodes} - {n.path for n in nodes}),
                                missing_from_store=missing, unmapped_in_store=not_listed, changed=changed,
                                relinked=relinked)

    @staticmethod
    def _import_matches(chunks: Sequence[Any], stored: dict[str, tuple[str, str]]) -> tuple[list[Any], dict[str, str]]:
        """The document's chunks matched to stored ones: by id when the text is the same; else by
        content hash under another id (a file renamed or moved; the hash covers the line range too,
        so chunks an edit above them shifted do not match this way), then by id with changed text. Returns the matches (under the stored ids) and the relinked ids
        (document id -> stored id)."""
        exact = {c.chunk_id for c in chunks if c.chunk_id in stored and c.content_hash == stored[c.chunk_id][0]}
        free: dict[str, list[str]] = {}
        for chunk_id, (digest, _) in stored.items():
            if chunk_id not in exact:
                free.setdefault(digest, []).append(chunk_id)
        out: list[Any] = [c for c in chunks if c.chunk_id in exact]
        taken = set(exact)
        relinked: dict[str, str] = {}
        later = []
        for c in chunks:
            if c.chunk_id in exact:
                continue
            ids = [i for i in free.get(c.content_hash, []) if i not in taken] if c.content_hash else []
            if ids:
                target = c.chunk_id if c.chunk_id in ids else ids[0]
                taken.add(target)
                out.append(c.model_copy(update={"chunk_id": target}))
                if target != c.chunk_id:
                    relinked[c.chunk_id] = target
            else:
                later.append(c)
        for c in later:  # the same id holding other text: kept there, stale until kt build re-places it
            if c.chunk_id in stored and c.chunk_id not in taken:
                taken.add(c.chunk_id)
                out.append(c)
        return out, relinked

    # status -------------------------------------------------------------------------------
    def status(self, *, collection: str | None = None) -> StatusReport:
        """Counts, embedder, tree coverage and freshness per collection.

        ``state`` is ``current`` only when every chunk is mapped and no category's members changed
        materially since it was named; otherwise ``advice`` says what is stale and what to run.
        Finishes an interrupted removal first when no other process is writing.
        """
        from .builders.runner import tree_freshness  # deferred: loads numpy

        self.settle()
        infos = self.tree.list_collections()
        if collection:
            infos = [self._require_collection(self._collection(collection))]
        rows = []
        for info in infos:
            pending = self._pending_ids(info.name)
            stored = {i: v for i, v in self.vectors.fingerprints(info.name).items() if i not in pending}
            mapped_hashes = self.tree.mapping_hashes(info.name)
            mapped = sum(1 for i in mapped_hashes if i in stored)
            changed = sum(1 for i, h in mapped_hashes.items() if i in stored and stored[i][0] != h)
            nodes = self.tree.nodes(info.name)
            fresh = tree_freshness(self, info.name, chunks=len(stored), unmapped=len(stored) - mapped + changed,
                                   orphans=len(mapped_hashes) - mapped, nodes=nodes)
            gone, newer = self._disk_changes(info.name)
            interrupted = self._interrupted(info.name, stored=len(stored))
            notes = [interrupted] if interrupted else []
            notes += [fresh.advice] if fresh.advice and not (interrupted and not stored) else []
            if staged := len(self.tree.mapping_hashes(staging_name(info.name))):
                notes.append(f"a stopped --rebuild placed {staged} of {len(stored)} chunks in a new tree (the "
                             "current one is kept until it finishes): kt build --rebuild resumes it")
            if fallback := sum(1 for n in nodes if n.name_fallback):
                notes.append(f"{fallback} category name(s) are offline stand-ins for LLM names that failed: "
                             "kt build asks again")
            if gone:
                first = next(iter(gone.values()))[0]
                notes.append(f"{sum(map(len, gone.values()))} indexed file(s) gone from disk (e.g. {first}): "
                             f"kt ingest --source {next(iter(gone))} --prune")
            if newer:
                first = next(iter(newer.values()))[0]
                notes.append(f"{sum(map(len, newer.values()))} file(s) added or changed on disk since the last "
                             f"ingest (e.g. {first}): kt ingest --source {next(iter(newer))}")
            advice = "; ".join(notes)
            rows.append(CollectionStatus(
                name=info.name, chunks=len(stored), mapped=mapped, unmapped=len(stored) - mapped,
                nodes=len(nodes), embedder=info.embedder, dimension=info.dimension, changed=changed,
                stale=fresh.state != "current" or bool(interrupted), builder=info.builder,
                state="interrupted" if interrupted else fresh.state,
                stale_nodes=fresh.stale_nodes, drift=fresh.drift, rebuild_advised=fresh.rebuild_advised,
                advice=advice, gone=sorted(f for files in gone.values() for f in files),
                newer=sorted(f for files in newer.values() for f in files)))
        store = str(self.settings.store_dir) if self.settings else "(memory)"
        return StatusReport(store=store, collections=rows)

    def _disk_changes(self, collection: str) -> tuple[dict[str, list[str]], dict[str, list[str]]]:
        """What changed on disk since each source was last ingested, by source (``source/path``):
        indexed files gone (their chunks stay, and are found, until ``kt ingest --prune`` or ``kt rm``)
        and document files written, added or moved in after it (modified or status-changed later; a
        folder ingested whole is listed for new files). A source whose folder is gone is left out (a
        moved folder: ingest reports it)."""
        from .ingest import document_files  # deferred: keeps kt browse fast

        sources = [r for r in self.tree.sources(collection) if r.kind in ("dir", "files") and Path(r.root).is_dir()]
        indexed: dict[str, set[str]] = {}
        for source, origin in self.tree.chunk_owners(collection).values():
            if origin:
                indexed.setdefault(source, set()).add(origin)
        gone: dict[str, list[str]] = {}
        newer: dict[str, list[str]] = {}
        for record in sources:
            root = Path(record.root)
            mine = indexed.get(record.name, set())
            for origin in sorted(mine):
                if not (root / origin).exists():
                    gone.setdefault(record.name, []).append(f"{record.name}/{origin}")
            if not record.last_ingest:
                continue
            candidates = ([f.relative_to(root).as_posix() for f in document_files(root)] if record.kind == "dir"
                          else sorted(mine))
            moved_in: dict[Path, bool] = {}  # folder -> whether it was moved in (or renamed) after the ingest
            # a folder holding indexed files was there at the ingest: its other files (empty, included
            # by a page) are not new because the folder changed
            held = {Path(origin).parent for origin in mine}
            for origin in candidates:
                try:
                    info = (root / origin).stat()
                except OSError:
                    continue
                folder = Path(origin).parent
                if max(info.st_mtime, info.st_ctime) > record.last_ingest or (
                        origin not in mine and folder not in held
                        and self._moved_in(root, folder, record.last_ingest, moved_in)):
                    newer.setdefault(record.name, []).append(f"{record.name}/{origin}")
        return gone, newer

    @staticmethod
    def _moved_in(root: Path, folder: Path, since: float, seen: dict[Path, bool]) -> bool:
        """Whether ``folder`` (relative to ``root``) or a folder between it and ``root`` changed after
        ``since``: moving a folder leaves its files' own times as they were, not the folder's."""
        if folder in (Path("."), Path("")):
            return False
        if folder not in seen:
            try:
                seen[folder] = (root / folder).stat().st_ctime > since
            except OSError:
                seen[folder] = False
            seen[folder] = seen[folder] or KnowledgeBase._moved_in(root, folder.parent, since, seen)
        return seen[folder]


def llm_from_settings(spec: str, settings: Settings | None, *, context_window: int | None = None,
                      max_output: int | None = None, **options: Any) -> LLMClient:
    """The LLM client for ``PROVIDER:MODEL`` with keys, base URLs, timeout and profile overrides from settings.

    ``context_window`` / ``max_output`` (the ``--context-window`` / ``--max-output`` flags) override
    the profile and pin the limits: the server is then not asked for its own.
    """
    from .llm import get_llm, parse_spec  # deferred: keeps kt browse fast
    from .llm.profiles import matching_override  # deferred: keeps kt browse fast

    provider, model = parse_spec(spec)
    key = url = None
    if settings is not None:
        key = settings.openai_api_key if provider == "openai" else settings.anthropic_api_key
        url = settings.openai_base_url if provider == "openai" else settings.anthropic_base_url
    overrides = settings.profiles if settings is not None else None
    if settings is not None and settings.llm_timeout is not None and options.get("timeout") is None:
        options["timeout"] = settings.llm_timeout
    client = get_llm(spec, api_key=key, base_url=url, profile_overrides=overrides or None, **options)
    configured = matching_override(model, overrides or {})
    if configured is not None and {"context_window", "max_output_tokens"} & set(configured[1]):
        client.limits_source = client.output_source = f'config.toml [profiles."{configured[0]}"]'
        client.limits_pinned = True
    if context_window is not None or max_output is not None:
        client.profile = client.profile.with_overrides(context_window=context_window, max_output_tokens=max_output)
        if context_window is not None:
            client.limits_source = "--context-window"
        if max_output is not None:
            client.output_source = "--max-output"
        client.limits_pinned = True
    return client


def fuse(dense: Sequence[ScoredId], sparse: Sequence[ScoredId], weight: float = 0.5) -> list[ScoredId]:
    """Convex combination of min-max normalised score lists (a missing score counts as 0)."""

    def normalise(items: Sequence[ScoredId]) -> dict[str, float]:
        if not items:
            return {}
        scores = [s.score for s in items]
        low, high = min(scores), max(scores)
        span = high - low
        return {s.chunk_id: (s.score - low) / span if span > 0 else 1.0 for s in items}

    d, s = normalise(dense), normalise(sparse)
    combined = {i: weight * d.get(i, 0.0) + (1 - weight) * s.get(i, 0.0) for i in {*d, *s}}
    return [ScoredId(i, v) for i, v in sorted(combined.items(), key=lambda kv: (-kv[1], kv[0]))]
