"""LanceVectorStore: one Lance table per collection (text + vector + full-text indexes)."""

from __future__ import annotations

import json
import os
import shutil
import signal
import sys
import threading
from collections.abc import Iterator, Sequence
from contextlib import contextmanager
from datetime import timedelta
from pathlib import Path
from typing import TYPE_CHECKING, Any

from ..errors import EmbeddingError, StoreError
from ..models import Chunk
from . import heavy_imports
from .ann import FlatVectors, list_indices, maybe_create_vector_index, nearest_params
from .base import ScoredId, VectorStore
from .heavy_imports import import_lance

if TYPE_CHECKING:
    import numpy as np

os.environ.setdefault("LANCEDB_LOG", "error")
os.environ.setdefault("LANCE_LOG", "error")

META_COLUMNS = ["chunk_id", "doc_id", "file_name", "chunk_index", "title", "content_hash", "metadata"]
FTS_COLUMNS = ("title", "text")
# Tokenizer of the full-text indexes; see `kt bench retrieval` for the measurement behind it.
FTS_OPTIONS: dict[str, Any] = {
    "with_position": True,
    "base_tokenizer": "simple",
    "lower_case": True,
    "stem": True,
    "remove_stop_words": True,
    "ascii_folding": True,
}
#: Versions older than this are removed by the index refresh (lancedb's ``optimize()`` default).
PRUNE_OLDER_THAN = timedelta(days=7)
#: Row ids remembered from searches per collection (see `LanceVectorStore.get`); past this the memo
#: starts over, so it stays a few hundred kB whatever the table size.
ROW_MEMO_SIZE = 4096


def sql_quote(value: str) -> str:
    """A SQL string literal for Lance filters (single quotes doubled)."""
    return "'" + str(value).replace("'", "''") + "'"


def id_filter(chunk_ids: Sequence[str]) -> str:
    """``chunk_id IN (...)`` with every id escaped."""
    return "chunk_id IN (" + ", ".join(sql_quote(c) for c in chunk_ids) + ")"


def _schema(dimension: int) -> Any:
    import pyarrow as pa  # deferred: heavy

    return pa.schema(
        [
            pa.field("chunk_id", pa.string(), nullable=False),
            pa.field("doc_id", pa.string()),
            pa.field("file_name", pa.string()),
            pa.field("chunk_index", pa.int32()),
            pa.field("title", pa.string()),
            pa.field("text", pa.string()),
            pa.field("content_hash", pa.string()),
            pa.field("metadata", pa.string()),
            pa.field("vector", pa.list_(pa.float32(), dimension)),
        ]
    )


def _is_inverted(index: dict[str, Any]) -> bool:
    return str(index.get("type", "")).lower().startswith("inverted") and bool(index.get("fields"))


def fts_columns(ds: Any) -> set[str]:
    """Columns of ``ds`` that carry a full-text (inverted) index, whatever the index is named."""
    return {ix["fields"][0] for ix in list_indices(ds) if _is_inverted(ix)}


def fts_index_name(column: str) -> str:
    """The name lancedb gives a full-text index on ``column`` (kept so older stores stay valid)."""
    return f"{column}_idx"


@contextmanager
def deferred_interrupt() -> Iterator[None]:
    """Hold a first Ctrl-C until the enclosed Lance call returns, then raise ``KeyboardInterrupt``.

    Lance runs a commit on its own worker threads; interrupted mid-call, the process can abort at exit
    ("terminate called without an active exception") when a worker is still running as Python shuts
    down. Deferring lets the call finish (the commit lands whole or not at all), so Ctrl-C still exits
    130 cleanly between commits. A second Ctrl-C interrupts at once. Only in the main thread.
    """
    if threading.current_thread() is not threading.main_thread():
        yield
        return
    pending: list[int] = []

    def hold(signum: int, frame: Any) -> None:
        if pending:
            raise KeyboardInterrupt
        pending.append(signum)
        sys.stderr.write("Interrupt: finishing the current write first (Ctrl-C again to stop now)\n")

    previous = signal.signal(signal.SIGINT, hold)
    try:
        yield
    finally:
        signal.signal(signal.SIGINT, previous)
    if pending:
        raise KeyboardInterrupt


def optimize_dataset(ds: Any) -> None:
    """What lancedb's ``table.optimize()`` does, in its order: compact small fragments, remove
    versions older than `PRUNE_OLDER_THAN`, then fold unindexed rows into every index."""
    ds.optimize.compact_files()
    ds.cleanup_old_versions(older_than=PRUNE_OLDER_THAN, delete_unverified=False)
    ds.optimize.optimize_indices()


def _chunk(row: dict[str, Any], with_text: bool = True) -> Chunk:
    meta = row.get("metadata")
    return Chunk(
        chunk_id=row["chunk_id"],
        text=row.get("text") or "" if with_text else "",
        doc_id=row.get("doc_id") or "",
        file_name=row.get("file_name") or "",
        chunk_index=int(row.get("chunk_index") or 0),
        title=row.get("title") or "",
        content_hash=row.get("content_hash") or "",
        metadata=json.loads(meta) if meta else {},
    )


class LanceVectorStore(VectorStore):
    """Chunk tables under ``uri`` (a local directory or an object-store URI).

    Reads and writes both go through the ``lance`` dataset API (merge-insert upserts, deletes, index
    upkeep, compaction), which imports in ~0.1 s where ``import lancedb`` costs ~2 s (most of it the
    generated REST-namespace client and pandas that local tables never use). No command of the local
    store imports lancedb. The on-disk layout is the one lancedb uses (``<uri>/<collection>.lance``,
    indexes ``title_idx``/``text_idx``/``vector_idx``), so ``lancedb.connect(uri).open_table(collection)``
    opens the same table, and stores written by earlier versions through lancedb keep working.

    Each upsert batch (and each delete of up to 1000 ids) is one Lance commit: an error or a kill leaves
    the table at the previous version or the next, never half a batch. Lance retries a commit that
    conflicts with a concurrent writer (``conflict_retries``), and a writer that loses the race to create
    the table merges into the winner's.

    What ``import lance`` still costs is mostly pyarrow; of that, ``pyarrow.dataset`` probes for pandas
    at module init (0.2 s when pandas is installed) although no read path converts to pandas. One-shot
    CLI commands skip that probe; see `heavy_imports`.
    """

    def __init__(self, uri: str | Path, *, storage_options: dict[str, str] | None = None) -> None:
        self.uri = str(uri)
        self.storage_options = storage_options or None
        self._datasets: dict[str, Any] = {}
        # collection -> (dataset handle, chunk id -> Lance row id) of rows that searches returned
        self._rows: dict[str, tuple[Any, dict[str, int]]] = {}
        # collection -> (dataset handle, its full-text columns, nearest-query params by k)
        self._indexes: dict[str, tuple[Any, set[str], dict[int, dict[str, Any]]]] = {}
        # collection -> (dataset handle, its vectors in memory or None when they do not fit)
        self._flats: dict[str, tuple[Any, FlatVectors | None]] = {}
        # a hybrid search reads from two threads: one handle per collection, one memo
        self._lock = threading.Lock()
        self._flat_lock = threading.Lock()  # one read of the vectors at a time, outside the memo lock

    # plumbing ----------------------------------------------------------------------------
    def _is_local(self) -> bool:
        return "://" not in self.uri

    def table_uri(self, collection: str) -> str:
        return f"{self.uri.rstrip('/')}/{collection}.lance"

    def _exists(self, collection: str) -> bool:
        if self._is_local():
            return Path(self.table_uri(collection), "_versions").is_dir()
        return self._dataset(collection) is not None

    def _dataset(self, collection: str) -> Any:
        """The latest version of the collection's dataset, or None."""
        lance = import_lance()

        try:
            with self._lock:
                return self._open(lance, collection)
        except (ValueError, OSError) as exc:
            if "not found" in str(exc).lower() or "does not exist" in str(exc).lower():
                return None
            raise StoreError(f"cannot open vector table {collection!r}: {exc}") from exc

    def _open(self, lance: Any, collection: str) -> Any:
        """The cached handle, moved to the latest version when another commit landed (under the lock)."""
        ds = self._datasets.get(collection)
        if ds is None:
            if self._is_local() and not Path(self.table_uri(collection), "_versions").is_dir():
                return None
            ds = lance.dataset(self.table_uri(collection), storage_options=self.storage_options)
            self._datasets[collection] = ds
        else:
            latest = ds.latest_version
            if latest != ds.version:
                ds = ds.checkout_version(latest)
                self._datasets[collection] = ds
        return ds

    def dataset(self, collection: str) -> Any:
        """The collection's ``lance`` dataset at its latest version, or None when there is no table
        (for measurements that read the table itself, e.g. ``kt bench``)."""
        return self._dataset(collection)

    def forget(self, collection: str) -> None:
        """Drop the cached dataset handle; the next call opens the table again."""
        self._datasets.pop(collection, None)
        self._rows.pop(collection, None)
        self._indexes.pop(collection, None)
        self._flats.pop(collection, None)

    def _remember_rows(self, collection: str, ds: Any, pairs: Iterator[tuple[str, int]]) -> None:
        """Note the row id of every chunk a search returned, valid for this dataset handle only: a
        write, or another process's commit, gives the collection a new handle."""
        with self._lock:
            memo = self._rows.get(collection)
            if memo is None or memo[0] is not ds or len(memo[1]) > ROW_MEMO_SIZE:
                memo = (ds, {})
                self._rows[collection] = memo
            memo[1].update(pairs)

    def _flat(self, collection: str, ds: Any) -> FlatVectors | None:
        """The vectors of this dataset handle in memory, read on the first vector search of a process
        that is not one-shot (`heavy_imports.ONE_SHOT`) when they fit `ann.MEMORY_SEARCH_BUDGET`
        beside the other collections' vectors already held; None otherwise (search through Lance)."""
        if heavy_imports.ONE_SHOT:
            return None
        with self._flat_lock:
            known = self._flats.get(collection)
            if known is not None and known[0] is ds:
                return known[1]
            flat = None
            held = sum(f.nbytes for c, (_, f) in self._flats.items() if f is not None and c != collection)
            if FlatVectors.fits(ds.count_rows(), ds.schema.field("vector").type.list_size, held):
                table = ds.to_table(columns=["chunk_id", "vector"], with_row_id=True)
                flat = FlatVectors(table.column("chunk_id").to_pylist(), table.column("_rowid").to_numpy(),
                                   _vector_matrix(table))
            self._flats[collection] = (ds, flat)
            return flat

    def holds_vectors(self, collection: str) -> bool:
        """True when the collection's vectors at its latest version are searched in memory."""
        known = self._flats.get(collection)
        return known is not None and known[1] is not None and known[0] is self._dataset(collection)

    def _search_indexes(self, collection: str, ds: Any) -> tuple[set[str], dict[int, dict[str, Any]]]:
        """The handle's full-text columns and ANN query params, listed once per handle. Listing goes
        through ``warnings.catch_warnings``, which is not thread-safe, hence under the lock."""
        with self._lock:
            known = self._indexes.get(collection)
            if known is None or known[0] is not ds:
                known = (ds, fts_columns(ds), {})
                self._indexes[collection] = known
            return known[1], known[2]

    def _nearest_params(self, collection: str, ds: Any, k: int) -> dict[str, Any]:
        _, by_k = self._search_indexes(collection, ds)
        with self._lock:
            if k not in by_k:
                by_k[k] = nearest_params(ds, k=k)
            return dict(by_k[k])

    def _take_remembered(self, collection: str, ds: Any, ids: list[str], columns: list[str]) -> Any:
        """A table (``columns``, ``chunk_id`` first) of the rows of ``ids`` that a search through
        this dataset handle returned, read by row id: a direct read of those rows, where a
        ``chunk_id IN (...)`` filter scans the whole id column (11 ms against 2.5 ms for ten rows of
        a 100k table). Ids it cannot vouch for are left out; None when it vouches for none."""
        memo = self._rows.get(collection)
        if memo is None or memo[0] is not ds:
            return None
        known = {i: memo[1][i] for i in ids if i in memo[1]}
        if not known:
            return None
        try:  # Lance's row-id read, the one lancedb's ``take_row_ids`` calls
            table = ds._take_rows(list(dict.fromkeys(known.values())),
                                  columns=["chunk_id", *(c for c in columns if c != "chunk_id"), "_rowid"])
        except (AttributeError, TypeError, ValueError, OSError, RuntimeError):  # another Lance: filter instead
            return None
        import pyarrow as pa  # deferred: heavy

        # keep a row only if it is still the one that id was read from
        same = [known.get(i) == r for i, r in zip(table.column("chunk_id").to_pylist(),
                                                  table.column("_rowid").to_pylist())]
        return table.filter(pa.array(same, pa.bool_())).drop_columns(["_rowid"])

    def _take_or_scan(self, collection: str, ds: Any, chunk_ids: Sequence[str], columns: list[str]) -> Iterator[Any]:
        """Tables of the rows of ``chunk_ids`` (``chunk_id`` first): remembered rows by row id, the
        rest through ``chunk_id IN (...)`` filters of up to 1000 ids."""
        ids = list(dict.fromkeys(chunk_ids))
        taken = self._take_remembered(collection, ds, ids, columns)
        if taken is not None and taken.num_rows:
            yield taken
            found = set(taken.column("chunk_id").to_pylist())
            ids = [i for i in ids if i not in found]
        for start in range(0, len(ids), 1000):
            yield ds.to_table(columns=["chunk_id", *(c for c in columns if c != "chunk_id")],
                              filter=id_filter(ids[start : start + 1000]))

    def _dimension(self, collection: str) -> int | None:
        ds = self._dataset(collection)
        if ds is None:
            return None
        return ds.schema.field("vector").type.list_size

    # writes -------------------------------------------------------------------------------
    def upsert(self, collection: str, chunks: Sequence[Chunk], vectors: np.ndarray) -> None:
        if not chunks:
            return
        import numpy as np  # deferred: heavy
        import pyarrow as pa  # deferred: heavy

        dimension = int(vectors.shape[1])
        existing = self._dimension(collection)
        if existing is not None and existing != dimension:
            raise EmbeddingError(
                f"collection {collection!r} holds {existing}-d vectors, got {dimension}-d",
                hint="ingest with the collection's embedder or use another collection",
            )
        data = pa.table(
            {
                "chunk_id": [c.chunk_id for c in chunks],
                "doc_id": [c.doc_id for c in chunks],
                "file_name": [c.file_name for c in chunks],
                "chunk_index": pa.array([c.chunk_index for c in chunks], pa.int32()),
                "title": [c.title for c in chunks],
                "text": [c.text for c in chunks],
                "content_hash": [c.content_hash for c in chunks],
                "metadata": [json.dumps(c.metadata, ensure_ascii=False) if c.metadata else None for c in chunks],
                "vector": pa.FixedSizeListArray.from_arrays(
                    pa.array(np.ascontiguousarray(vectors, dtype=np.float32).ravel()), dimension
                ),
            },
            schema=_schema(dimension),
        )
        try:
            with deferred_interrupt():
                self._write(collection, data)
        except (OSError, RuntimeError, ValueError) as exc:
            raise StoreError(f"cannot write vector table {collection!r}: {exc}") from exc
        finally:
            self.forget(collection)

    def _write(self, collection: str, data: Any) -> None:
        """One commit: create the table with ``data``, append to an empty one, or merge-insert by id."""
        lance = import_lance()

        ds = self._dataset(collection)
        if ds is None:
            if self._is_local():
                Path(self.uri).mkdir(parents=True, exist_ok=True)
            try:
                lance.write_dataset(data, self.table_uri(collection), schema=data.schema, mode="create",
                                    storage_options=self.storage_options)
                return
            except OSError:  # another writer created it first: merge into theirs
                self._datasets.pop(collection, None)
                ds = self._dataset(collection)
                if ds is None:
                    raise
        if ds.count_rows() == 0:
            lance.write_dataset(data, self.table_uri(collection), schema=data.schema, mode="append",
                                storage_options=self.storage_options)
        else:
            ds.merge_insert("chunk_id").when_matched_update_all().when_not_matched_insert_all().execute(data)

    def indexes_stale(self, collection: str) -> bool:
        """True when a full-text index is missing or rows exist that no index covers yet
        (a killed ingest can leave that; searches stay correct, only slower, until a refresh)."""
        ds = self._dataset(collection)
        if ds is None:
            return False
        fragments = {f.fragment_id for f in ds.get_fragments()}
        covered = {ix["fields"][0]: set(ix.get("fragment_ids") or ()) for ix in list_indices(ds) if _is_inverted(ix)}
        return any(column not in covered or not fragments <= covered[column] for column in FTS_COLUMNS)

    def refresh_indexes(self, collection: str) -> None:
        """Create the full-text indexes, or fold new rows into them (and into the ANN index)."""
        ds = self._dataset(collection)
        if ds is None:
            return
        had_indexes = bool(list_indices(ds))
        indexed = fts_columns(ds)
        try:
            with deferred_interrupt():
                for column in FTS_COLUMNS:
                    if column not in indexed:
                        ds.create_scalar_index(column, "INVERTED", name=fts_index_name(column), replace=True,
                                               **FTS_OPTIONS)
                maybe_create_vector_index(ds)  # an ANN index once flat search gets slow (stores/ann.py)
                if had_indexes:
                    optimize_dataset(ds)
        except (OSError, RuntimeError, ValueError) as exc:
            raise StoreError(f"cannot index vector table {collection!r}: {exc}") from exc
        finally:
            self.forget(collection)

    def delete(self, collection: str, chunk_ids: Sequence[str]) -> None:
        ds = self._dataset(collection) if chunk_ids else None
        if ds is None:
            return
        try:
            for start in range(0, len(chunk_ids), 1000):
                with deferred_interrupt():
                    ds.delete(id_filter(chunk_ids[start : start + 1000]))
        except (OSError, RuntimeError, ValueError) as exc:
            raise StoreError(f"cannot delete from vector table {collection!r}: {exc}") from exc
        finally:
            self.forget(collection)

    def drop(self, collection: str) -> None:
        try:
            if self._is_local():
                if Path(self.table_uri(collection)).exists():
                    shutil.rmtree(self.table_uri(collection))
            elif self._dataset(collection) is not None:
                import_lance().LanceDataset.drop(self.table_uri(collection), storage_options=self.storage_options,
                                                 ignore_not_found=True)
        except (OSError, ValueError) as exc:
            raise StoreError(f"cannot drop vector table {collection!r}: {exc}") from exc
        finally:
            self.forget(collection)

    # reads --------------------------------------------------------------------------------
    def count(self, collection: str) -> int:
        ds = self._dataset(collection)
        return 0 if ds is None else ds.count_rows()

    def fingerprints(self, collection: str) -> dict[str, tuple[str, str]]:
        ds = self._dataset(collection)
        if ds is None:
            return {}
        table = ds.to_table(columns=["chunk_id", "content_hash", "file_name"])
        ids, hashes, files = (table.column(n).to_pylist() for n in ("chunk_id", "content_hash", "file_name"))
        return {i: (h or "", f or "") for i, h, f in zip(ids, hashes, files)}

    def get(self, collection: str, chunk_ids: Sequence[str], *, with_text: bool = True) -> list[Chunk]:
        ds = self._dataset(collection)
        if ds is None or not chunk_ids:
            return []
        columns = META_COLUMNS + (["text"] if with_text else [])
        ids = list(dict.fromkeys(chunk_ids))
        out = [_chunk(r, with_text) for table in self._take_or_scan(collection, ds, ids, columns)
               for r in table.to_pylist()]
        order = {c: i for i, c in enumerate(ids)}
        return sorted(out, key=lambda c: order[c.chunk_id])

    def iter_rows(
        self, collection: str, *, with_vectors: bool = True, batch_size: int = 4096
    ) -> Iterator[tuple[list[Chunk], np.ndarray | None]]:
        ds = self._dataset(collection)
        if ds is None:
            return
        import pyarrow as pa  # deferred: heavy

        columns = META_COLUMNS + ["text"] + (["vector"] if with_vectors else [])
        for batch in ds.to_batches(columns=columns, batch_size=batch_size):
            rows = batch.to_pylist()
            vectors = _vector_matrix(pa.Table.from_batches([batch])) if with_vectors else None
            yield [_chunk(r) for r in rows], vectors

    def vectors(self, collection: str, chunk_ids: Sequence[str]) -> dict[str, np.ndarray]:
        ds = self._dataset(collection)
        if ds is None or not chunk_ids:
            return {}
        out: dict[str, np.ndarray] = {}
        for table in self._take_or_scan(collection, ds, chunk_ids, ["chunk_id", "vector"]):
            for chunk_id, row in zip(table.column("chunk_id").to_pylist(), _vector_matrix(table)):
                out[chunk_id] = row
        return out

    def vector_search(
        self, collection: str, vector: np.ndarray, k: int, *, within: Sequence[str] | None = None
    ) -> list[ScoredId]:
        ds = self._dataset(collection)
        if ds is None or k <= 0 or (within is not None and not within):
            return []
        import numpy as np  # deferred: heavy

        dimension = ds.schema.field("vector").type.list_size
        if len(vector) != dimension:
            raise EmbeddingError(
                f"query vector has {len(vector)} dimensions, collection {collection!r} has {dimension}",
                hint="query with the embedder the collection was ingested with",
            )
        flat = self._flat(collection, ds)
        if flat is not None:
            hits = flat.search(vector, k, within)
            self._remember_rows(collection, ds, ((i, r) for i, r, _ in hits))
            return [ScoredId(i, s) for i, _, s in hits]
        kwargs: dict[str, Any] = {}
        if within is not None:
            kwargs.update(filter=id_filter(within), prefilter=True)
        table = ds.to_table(
            columns=["chunk_id"],
            nearest={"column": "vector", "q": np.asarray(vector, dtype=np.float32), "k": k, "metric": "cosine",
                     **self._nearest_params(collection, ds, k)},
            with_row_id=True,
            **kwargs,
        )
        self._remember_rows(collection, ds, _row_pairs(table))
        ids = table.column("chunk_id").to_pylist()
        distances = table.column("_distance").to_pylist()
        return [ScoredId(i, 1.0 - float(d)) for i, d in zip(ids, distances)]

    def keyword_search(
        self, collection: str, query: str, k: int, *, within: Sequence[str] | None = None
    ) -> list[ScoredId]:
        ds = self._dataset(collection)
        if ds is None or k <= 0 or not query.strip() or (within is not None and not within):
            return []
        from lance.query import MultiMatchQuery  # deferred: heavy

        indexed, _ = self._search_indexes(collection, ds)
        columns = [c for c in FTS_COLUMNS if c in indexed]
        if not columns:
            return []
        kwargs: dict[str, Any] = {}
        if within is not None:
            kwargs.update(filter=id_filter(within), prefilter=True)
        try:
            table = ds.to_table(
                columns=["chunk_id", "_score"],
                full_text_query=MultiMatchQuery(query, columns),
                limit=k,
                with_row_id=True,
                **kwargs,
            )
        except (ValueError, OSError, RuntimeError) as exc:
            raise StoreError(f"keyword search failed for {query!r}: {exc}", hint="simplify the query") from exc
        self._remember_rows(collection, ds, _row_pairs(table))
        return [ScoredId(i, float(s)) for i, s in zip(table.column("chunk_id").to_pylist(),
                                                        table.column("_score").to_pylist())]

    def weighted_keyword_search(
        self, collection: str, terms: dict[str, float], k: int, *, within: Sequence[str] | None = None
    ) -> list[ScoredId]:
        """One boolean query of boosted single-term matches over title and text (sum of BM25 × weight)."""
        ds = self._dataset(collection)
        terms = {t: w for t, w in terms.items() if t.strip() and w > 0}
        if ds is None or k <= 0 or not terms or (within is not None and not within):
            return []
        from lance.query import BooleanQuery, FullTextQuery, MatchQuery, Occur  # deferred: heavy

        columns = [c for c in FTS_COLUMNS if c in self._search_indexes(collection, ds)[0]]
        if not columns:
            return []
        clauses: list[tuple[Occur, FullTextQuery]] = [(Occur.SHOULD, MatchQuery(term, column, boost=float(weight)))
                   for term, weight in terms.items() for column in columns]
        kwargs: dict[str, Any] = {}
        if within is not None:
            kwargs.update(filter=id_filter(within), prefilter=True)
        try:
            table = ds.to_table(columns=["chunk_id", "_score"], full_text_query=BooleanQuery(clauses), limit=k,
                                with_row_id=True, **kwargs)
        except (ValueError, OSError, RuntimeError) as exc:
            raise StoreError(f"keyword search failed for {' '.join(terms)!r}: {exc}", hint="simplify the query") from exc
        self._remember_rows(collection, ds, _row_pairs(table))
        return [ScoredId(i, float(s)) for i, s in zip(table.column("chunk_id").to_pylist(),
                                                        table.column("_score").to_pylist())]

    def concurrent_reads(self, collection: str) -> bool:
        """Lance reads run in native code without the GIL, and one dataset handle serves several threads."""
        return True

    def neighbours(self, collection: str, chunk: Chunk, before: int, after: int) -> list[Chunk]:
        ds = self._dataset(collection)
        if ds is None or (before <= 0 and after <= 0):
            return []
        same = f"doc_id = {sql_quote(chunk.doc_id)}" if chunk.doc_id else (
            f"file_name = {sql_quote(chunk.file_name)}" if chunk.file_name else None)
        if same is None:
            return []
        lo, hi = chunk.chunk_index - before, chunk.chunk_index + after
        where = f"{same} AND chunk_index >= {int(lo)} AND chunk_index <= {int(hi)} AND chunk_id != {sql_quote(chunk.chunk_id)}"
        if not chunk.doc_id:
            where += " AND (doc_id IS NULL OR doc_id = '')"
        rows = ds.to_table(columns=META_COLUMNS + ["text"], filter=where).to_pylist()
        return sorted((_chunk(r) for r in rows), key=lambda c: (c.chunk_index, c.chunk_id))


def _vector_matrix(table: Any) -> np.ndarray:
    """The ``vector`` column of an Arrow table as a rows x dimension array."""
    dim = table.schema.field("vector").type.list_size
    values = table.column("vector").combine_chunks().values
    return values.to_numpy(zero_copy_only=False).reshape(-1, dim)


def _row_pairs(table: Any) -> Iterator[tuple[str, int]]:
    """(chunk id, Lance row id) of a search result read ``with_row_id`` (nothing without the column)."""
    if "_rowid" in table.column_names:
        yield from zip(table.column("chunk_id").to_pylist(), table.column("_rowid").to_pylist())


def lance_dataset(store: VectorStore, collection: str) -> Any:
    """The Lance dataset holding ``collection`` in ``store`` (through a routing store to its backend),
    or None when there is no table yet; ``StoreError`` when the collection is not in a Lance table."""
    backend = store.backend_for(collection)
    if not isinstance(backend, LanceVectorStore):
        raise StoreError(f"collection {collection!r} is not in a Lance table ({type(backend).__name__})",
                         hint="this measurement reads the Lance dataset; use a store with the default vector_uri")
    return backend.dataset(collection)

