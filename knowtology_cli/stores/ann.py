"""ANN index upkeep for Lance chunk tables: when to build a vector index, with what, how to query it."""

from __future__ import annotations

import math
import threading
import warnings
from collections.abc import Iterator, Sequence
from contextlib import contextmanager
from typing import Any

VECTOR_COLUMN = "vector"
VECTOR_INDEX_NAME = "vector_idx"
#: Below this many rows flat search is fast enough (and exact); above it an index is built.
VECTOR_INDEX_THRESHOLD = 50_000
#: Retrain the index when the table has grown this many times past its training size.
RETRAIN_GROWTH = 4.0
#: lancedb's HNSW defaults (``lancedb.index.HnswSq``), passed explicitly since Lance's differ.
HNSW_DEFAULTS: dict[str, int] = {"m": 20, "ef_construction": 300}
#: Query-time knobs (measured at 100k and 1M rows, see docs/scaling.md).
DEFAULT_INDEX_TYPE = "IVF_SQ"
DEFAULT_NPROBES = 20
DEFAULT_REFINE_FACTOR = 10
#: At most this many candidates are re-ranked with the full vectors (``k * refine_factor``): a deep
#: candidate list for fusion (k = 300) keeps the cost of refining a top 100, and the top 100 of it
#: stays refined tenfold. Refining costs a random read per candidate.
REFINE_BUDGET = 1000


def index_params(rows: int, dimension: int, index_type: str = DEFAULT_INDEX_TYPE) -> dict[str, Any]:
    """Build parameters for ``rows`` vectors of ``dimension``: ~sqrt(rows) partitions, 8-d PQ groups."""
    partitions = max(1, min(4096, int(round(math.sqrt(max(rows, 1))))))
    params: dict[str, Any] = {"distance_type": "cosine"}
    if index_type.startswith("IVF_HNSW"):
        partitions = max(1, rows // 250_000)  # HNSW graphs per partition; few, large partitions
    params["num_partitions"] = partitions
    if index_type in ("IVF_PQ", "IVF_HNSW_PQ"):
        sub = next((s for s in (dimension // 8, dimension // 16, dimension // 4) if s and dimension % s == 0), 1)
        params["num_sub_vectors"] = sub
    return params


SUPPORTED_INDEX_TYPES = ("IVF_SQ", "IVF_PQ", "IVF_HNSW_SQ", "IVF_FLAT")


def _check_index_type(index_type: str) -> None:
    if index_type not in SUPPORTED_INDEX_TYPES:
        raise ValueError(f"unsupported index type {index_type!r} (use {', '.join(SUPPORTED_INDEX_TYPES)})")


def index_config(rows: int, dimension: int, index_type: str = DEFAULT_INDEX_TYPE) -> Any:
    """A ``lancedb.index`` config object for ``index_type`` (IVF_SQ, IVF_PQ, IVF_HNSW_SQ, IVF_FLAT).

    Only for callers that build indexes through lancedb (benchmarks); the store uses `lance_index_args`.
    """
    from lancedb import index  # deferred: heavy

    _check_index_type(index_type)
    classes = {"IVF_SQ": index.IvfSq, "IVF_PQ": index.IvfPq, "IVF_HNSW_SQ": index.HnswSq,
               "IVF_FLAT": index.IvfFlat}
    return classes[index_type](**index_params(rows, dimension, index_type))


def lance_index_args(rows: int, dimension: int, index_type: str = DEFAULT_INDEX_TYPE) -> dict[str, Any]:
    """Keyword arguments of ``LanceDataset.create_index`` equal to `index_config`'s lancedb config."""
    _check_index_type(index_type)
    params = index_params(rows, dimension, index_type)
    args: dict[str, Any] = {"index_type": index_type, "metric": params.pop("distance_type"), **params}
    if index_type.startswith("IVF_HNSW"):
        args.update(HNSW_DEFAULTS)
    return args


def list_indices(ds: Any) -> list[dict[str, Any]]:
    """``ds.list_indices()`` of a Lance dataset (vector and scalar indexes) without its deprecation warning."""
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")
        return list(ds.list_indices())


def _vector_indices(ds: Any, column: str = VECTOR_COLUMN) -> list[dict[str, Any]]:
    try:
        indices = list_indices(ds)
    except (AttributeError, ValueError, OSError):
        return []
    return [ix for ix in indices if column in (ix.get("fields") or [])
            and not str(ix.get("type", "")).lower().startswith(("inverted", "btree", "bitmap"))]


def vector_index_info(ds: Any) -> dict[str, Any] | None:
    """The vector index of a Lance dataset (name, type, indexed rows), or None."""
    found = _vector_indices(ds)
    if not found:
        return None
    ix = found[0]
    try:
        stats = ds.stats.index_stats(ix["name"])
    except (AttributeError, ValueError, OSError, KeyError):
        stats = {}
    return {"name": ix["name"], "type": str(ix.get("type", "")),
            "indexed_rows": int(stats.get("num_indexed_rows", 0) or 0),
            "unindexed_rows": int(stats.get("num_unindexed_rows", 0) or 0)}


def has_vector_index(ds: Any, column: str = VECTOR_COLUMN) -> bool:
    """True when the dataset has an ANN index on ``column``."""
    return bool(_vector_indices(ds, column))


def maybe_create_vector_index(
    ds: Any,
    rows: int | None = None,
    *,
    threshold: int | None = None,
    index_type: str = DEFAULT_INDEX_TYPE,
) -> str | None:
    """Create (or retrain) the vector index of a ``lance.LanceDataset`` once it has ``threshold``
    rows (default ``VECTOR_INDEX_THRESHOLD``).

    Flat (exact) search scans every vector: fine for a few ten thousand rows, ~240 ms per query at
    100k 384-d rows. Past ``VECTOR_INDEX_THRESHOLD`` rows an IVF_PQ index answers in milliseconds;
    ``refine_factor`` re-ranks ``k * refine_factor`` PQ candidates with the full vectors so recall@10
    stays close to exact. The figures behind the defaults are in ``docs/scaling.md``
    (``python -m knowtology_cli.bench.ann``).

    Rows added after the index was built are not lost: Lance searches them flat and merges them in,
    and the store's index refresh (``optimize_indices``) folds them into the index; the index is
    retrained when the table has grown ``RETRAIN_GROWTH`` times past the size it was trained on.

    The index is built with the ``lance`` dataset API (``LanceDataset.create_index``) from the same
    parameters lancedb's index configs carry (`index_config` keeps those for benchmarks that use lancedb).

    Args:
        ds: The dataset (for a lancedb table, pass ``table.to_lance()``).
        rows: The table's row count, when the caller already knows it.
        threshold: Build only from this many rows.
        index_type: One of `SUPPORTED_INDEX_TYPES`.

    Returns:
        ``"created"``, ``"retrained"`` or None (nothing to do: small table, or an index that the
        store's ``optimize_indices`` keeps current).
    """
    rows = ds.count_rows() if rows is None else rows
    if rows < (VECTOR_INDEX_THRESHOLD if threshold is None else threshold):
        return None
    info = vector_index_info(ds)
    if info is not None and info["indexed_rows"] * RETRAIN_GROWTH > rows:
        return None
    dimension = ds.schema.field(VECTOR_COLUMN).type.list_size
    ds.create_index(VECTOR_COLUMN, name=VECTOR_INDEX_NAME, replace=True,
                    **lance_index_args(rows, dimension, index_type))
    return "created" if info is None else "retrained"


def nearest_params(ds: Any, *, column: str = VECTOR_COLUMN, nprobes: int = DEFAULT_NPROBES,
                   refine_factor: int = DEFAULT_REFINE_FACTOR, k: int | None = None) -> dict[str, Any]:
    """Extra keys for Lance's ``nearest={...}`` when ``ds`` has a vector index (else empty: exact);
    with ``k``, the refine factor shrinks so at most `REFINE_BUDGET` candidates are re-ranked."""
    if not has_vector_index(ds, column):
        return {}
    if k:
        refine_factor = max(1, min(refine_factor, REFINE_BUDGET // k))
    return {"nprobes": nprobes, "refine_factor": refine_factor}


#: Processes that answer many queries (the library, ``kt serve``, ``kt mcp``, ``kt repl``, ``kt ask``)
#: hold a collection's vectors in memory, up to this many bytes (float32), and search them exactly:
#: one matrix-vector product over 100k 384-d rows takes ~13 ms on one core, where the IVF_SQ index
#: with its refine step takes ~25-40 ms and exact search through Lance ~240 ms (docs/benchmarks.md §3).
#: 512 MiB holds ~280k rows of 384 dimensions (float32 plus the int8 codes of the first pass); a
#: larger table is searched through its index.
MEMORY_SEARCH_BUDGET = 512 * 2**20
#: From this many rows the in-memory search first scores every row with int8 codes of the vectors
#: (a quarter of the memory to stream, so about half the time of the float32 product on one core:
#: 9 against 15 ms at 100k rows), then scores the best ``PREFILTER_FACTOR * k`` (at least
#: ``PREFILTER_MIN_CANDIDATES``) exactly. A code's error in a score is ~1e-3 (half a step of
#: 1/127 of each dimension's largest value, summed over 384 dimensions as noise), far below the
#: gap between the k-th and the 4k-th best score, so the k kept and their exact scores are those of
#: the full float32 search. Below it the float32 product is already a few milliseconds.
PREFILTER_MIN_ROWS = 20_000
PREFILTER_FACTOR = 4
PREFILTER_MIN_CANDIDATES = 1000
#: Rows converted from int8 per step of the first pass: a 1.5 MB float32 block stays in cache.
PREFILTER_BLOCK = 1024


class _OneBlasThread:
    """BLAS held to one thread while any in-memory search runs, restored when the last one ends.

    A product of the query with the whole matrix streams the matrix through memory once. With
    OpenBLAS's default of one thread per core, its idle workers spin after every call and take the
    core that a hybrid search's keyword half runs on: at 100k rows on 2 cores, hybrid p50 33 ms and
    64 ms of CPU per query with the default, 26 ms and 40 ms with one thread (`kt bench speed`,
    docs/benchmarks.md §3). Counted, so concurrent searches never restore a limit another still
    needs; the limit is process-wide while a search runs (threadpoolctl, as scikit-learn uses).
    """

    def __init__(self) -> None:
        self._lock = threading.Lock()
        self._users = 0
        self._limiter: Any = None
        self._controller: Any = None

    @contextmanager
    def __call__(self) -> Iterator[None]:
        self._enter()
        try:
            yield
        finally:
            self._exit()

    def _enter(self) -> None:
        with self._lock:
            self._users += 1
            if self._users == 1:
                from threadpoolctl import ThreadpoolController  # deferred: only vector searches need it

                try:
                    if self._controller is None:  # lists the loaded BLAS libraries once (numpy's is loaded by now)
                        self._controller = ThreadpoolController()
                    self._limiter = self._controller.limit(limits=1, user_api="blas")
                except Exception:  # noqa: BLE001 - a speed setting: the search runs with BLAS as it is
                    self._limiter = None

    def _exit(self) -> None:
        with self._lock:
            self._users -= 1
            if self._users == 0 and self._limiter is not None:
                self._limiter.restore_original_limits()
                self._limiter = None


one_blas_thread = _OneBlasThread()


class FlatVectors:
    """A collection's vectors, L2-normalised, in one float32 matrix: exact cosine search in memory.

    Built from one read of a dataset version's ``chunk_id``, ``vector`` and row id columns; the
    store drops it when the collection changes (another version), so it never answers from rows
    that are gone.
    """

    def __init__(self, chunk_ids: list[str], row_ids: Any, matrix: Any) -> None:
        import numpy as np  # deferred: heavy

        matrix = np.array(matrix, dtype=np.float32)  # a copy: Arrow's buffers are read-only
        norms = np.linalg.norm(matrix, axis=1, keepdims=True)
        matrix /= np.where(norms > 0, norms, 1.0)
        self.chunk_ids = chunk_ids
        self.row_ids = np.asarray(row_ids, dtype=np.uint64)
        self.matrix = matrix
        self._positions: dict[str, int] | None = None
        # int8 codes for the first pass (see PREFILTER_MIN_ROWS): code = round(127 · x / largest |x|
        # of that dimension)
        self.codes: Any = None
        self.steps: Any = None
        if len(matrix) >= PREFILTER_MIN_ROWS:
            largest = np.abs(matrix).max(axis=0)
            self.steps = (np.where(largest > 0, largest, 1.0) / 127).astype(np.float32)
            self.codes = np.rint(matrix / self.steps).astype(np.int8)

    @property
    def nbytes(self) -> int:
        """Memory held: the float32 matrix and the int8 codes."""
        return int(self.matrix.nbytes + (self.codes.nbytes if self.codes is not None else 0))

    @staticmethod
    def fits(rows: int, dimension: int, held: int = 0) -> bool:
        """True when ``rows`` vectors of ``dimension`` float32 values (and their int8 codes, from
        `PREFILTER_MIN_ROWS` rows), beside ``held`` bytes already in memory, stay within
        `MEMORY_SEARCH_BUDGET` (one budget for every collection of a store)."""
        per_value = 5 if rows >= PREFILTER_MIN_ROWS else 4
        return held + rows * dimension * per_value <= MEMORY_SEARCH_BUDGET

    def positions(self) -> dict[str, int]:
        """Chunk id → row of the matrix (built on first use: filters and vector lookups need it)."""
        if self._positions is None:
            self._positions = {c: i for i, c in enumerate(self.chunk_ids)}
        return self._positions

    def search(self, vector: Any, k: int, within: Sequence[str] | None = None) -> list[tuple[str, int, float]]:
        """The ``k`` rows nearest ``vector`` by cosine (``within``: only those chunk ids), best first,
        as (chunk id, Lance row id, cosine similarity)."""
        import numpy as np  # deferred: heavy

        query = np.asarray(vector, dtype=np.float32)
        norm = float(np.linalg.norm(query))
        query = query / norm if norm > 0 else query
        if within is None:
            rows = None
            candidates = max(PREFILTER_FACTOR * k, PREFILTER_MIN_CANDIDATES)
            with one_blas_thread():
                if self.codes is not None and candidates < len(self.matrix):
                    rows = self._first_pass(query, candidates)
                    scores = self.matrix[rows] @ query
                else:
                    scores = self.matrix @ query
        else:
            pos = self.positions()
            rows = np.fromiter(dict.fromkeys(pos[c] for c in within if c in pos), dtype=np.int64)
            with one_blas_thread():
                scores = self.matrix[rows] @ query if len(rows) else np.empty(0, dtype=np.float32)
        k = min(k, len(scores))
        if k <= 0:
            return []
        top = np.argpartition(-scores, k - 1)[:k] if k < len(scores) else np.arange(len(scores))
        # best first; equal scores in table order
        top = top[np.lexsort((top if rows is None else rows[top], -scores[top]))]
        picked = top if rows is None else rows[top]
        return [(self.chunk_ids[i], int(self.row_ids[i]), float(s)) for i, s in zip(picked, scores[top])]

    def _first_pass(self, query: Any, candidates: int) -> Any:
        """Rows of the ``candidates`` best int8-code scores (unordered), read block by block."""
        import numpy as np  # deferred: heavy

        scaled = (query * self.steps).astype(np.float32)
        approx = np.empty(len(self.codes), dtype=np.float32)
        block = np.empty((min(PREFILTER_BLOCK, len(self.codes)), self.codes.shape[1]), dtype=np.float32)
        for start in range(0, len(self.codes), PREFILTER_BLOCK):
            codes = self.codes[start:start + PREFILTER_BLOCK]
            np.copyto(block[: len(codes)], codes, casting="unsafe")
            np.dot(block[: len(codes)], scaled, out=approx[start:start + len(codes)])
        return np.argpartition(-approx, candidates - 1)[:candidates]
