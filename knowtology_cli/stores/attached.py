"""AttachedLanceStore: a read-only VectorStore over someone else's Lance table (zero chunk duplication)."""

from __future__ import annotations

import hashlib
import re
from collections.abc import Iterator, Sequence
from dataclasses import asdict, dataclass
from typing import Any

import numpy as np

from knowtology_cli.errors import EmbeddingError, StoreError
from knowtology_cli.models import Chunk

from .ann import nearest_params
from .base import ScoredId, VectorStore
from .heavy_imports import import_lance
from .lance import fts_columns

_PLAIN = re.compile(r"^[A-Za-z_][A-Za-z0-9_]*$")


@dataclass(frozen=True)
class ColumnMap:
    """Which columns of an attached table hold the chunk fields (None: not present)."""

    id: str
    text: str
    vector: str
    doc: str | None = None
    file: str | None = None
    index: str | None = None
    title: str | None = None

    def to_dict(self) -> dict[str, str | None]:
        return asdict(self)

    @classmethod
    def from_dict(cls, data: dict[str, Any]) -> ColumnMap:
        return cls(id=data["id"], text=data["text"], vector=data["vector"],
                   **{k: data.get(k) for k in ("doc", "file", "index", "title")})


def quote_column(name: str) -> str:
    """A column reference for Lance SQL filters (backticks unless a plain identifier)."""
    return name if _PLAIN.match(name) else "`" + name.replace("`", "``") + "`"


class AttachedLanceStore(VectorStore):
    """Read-only rows of one existing Lance dataset, whatever collection name it is asked for.

    The table keeps its own schema; a ``ColumnMap`` says which columns hold the chunk id, text and
    vector (and optionally doc id, file name, chunk index, title). Reads go through the ``lance``
    dataset API; nothing here ever opens the table for writing, and every write method raises
    ``StoreError`` — the table's version is the same after Knowtology has built a tree over it.

    Keyword search uses the table's own full-text (inverted) index on the text or title column when
    there is one; without one it raises a ``StoreError`` saying so (``kt grep --regex`` still works,
    it scans).

    Args:
        table_uri: the dataset (``/path/to/table.lance`` or ``s3://bucket/table.lance``).
        columns: the column mapping.
        storage_options: object-store options for remote URIs.
        version: pin a dataset version (None: follow the latest).
    """

    read_only = True

    def __init__(self, table_uri: str, columns: ColumnMap, *, storage_options: dict[str, str] | None = None,
                 version: int | None = None) -> None:
        self.table_uri = str(table_uri)
        self.columns = columns
        self.storage_options = storage_options or None
        self.version = version
        self._ds: Any = None

    # plumbing ----------------------------------------------------------------------------
    def dataset(self) -> Any:
        """The attached dataset (latest version unless pinned); raises if it cannot be opened."""
        lance = import_lance()

        try:
            if self._ds is None:
                self._ds = lance.dataset(self.table_uri, version=self.version, storage_options=self.storage_options)
                self._check(self._ds)
            elif self.version is None and self._ds.latest_version != self._ds.version:
                self._ds = self._ds.checkout_version(self._ds.latest_version)
        except (ValueError, OSError) as exc:
            raise StoreError(f"cannot open attached table {self.table_uri}: {exc}",
                             hint="check the --table path/URI (a .lance dataset)") from exc
        return self._ds

    def _check(self, ds: Any) -> None:
        names = set(ds.schema.names)
        missing = [c for c in self.columns.to_dict().values() if c and c not in names]
        if missing:
            raise StoreError(f"attached table {self.table_uri} has no column(s) {', '.join(missing)} "
                             f"(columns: {', '.join(ds.schema.names)})", hint="fix the column mapping")
        import pyarrow as pa  # deferred: heavy, loaded with lance

        vtype = ds.schema.field(self.columns.vector).type
        if not pa.types.is_fixed_size_list(vtype):
            raise StoreError(f"column {self.columns.vector!r} is not a fixed-size vector column ({vtype})")

    def _refuse(self, what: str) -> None:
        raise StoreError(f"cannot {what}: the collection is attached read-only to {self.table_uri}; "
                         "Knowtology never writes to an attached table",
                         hint="ingest into another collection, or write to the table with your own tools")

    def _id_is_int(self) -> bool:
        import pyarrow as pa  # deferred: heavy

        return pa.types.is_integer(self.dataset().schema.field(self.columns.id).type)

    def _id_filter(self, chunk_ids: Sequence[str]) -> str | None:
        column = quote_column(self.columns.id)
        if self._id_is_int():
            values = [str(int(i)) for i in chunk_ids if i.lstrip("-").isdigit()]
        else:
            values = ["'" + str(i).replace("'", "''") + "'" for i in chunk_ids]
        if not values:
            return None
        return f"{column} IN ({', '.join(values)})"

    def _meta_columns(self, with_text: bool) -> list[str]:
        c = self.columns
        cols = [c.id, c.doc, c.file, c.index, c.title] + ([c.text] if with_text else [])
        return list(dict.fromkeys(x for x in cols if x))

    def _chunk(self, row: dict[str, Any], with_text: bool = True) -> Chunk:
        c = self.columns
        text = str(row.get(c.text) or "") if with_text else ""
        return Chunk(
            chunk_id=str(row[c.id]),
            text=text,
            doc_id=str(row.get(c.doc) or "") if c.doc else "",
            file_name=str(row.get(c.file) or "") if c.file else "",
            chunk_index=int(row.get(c.index) or 0) if c.index else 0,
            title=str(row.get(c.title) or "") if c.title else "",
            content_hash=_hash(text) if with_text else "",
        )

    # writes: refused ---------------------------------------------------------------------
    def upsert(self, collection: str, chunks: Sequence[Chunk], vectors: np.ndarray) -> None:
        self._refuse("ingest")

    def delete(self, collection: str, chunk_ids: Sequence[str]) -> None:
        self._refuse("delete chunks")

    def drop(self, collection: str) -> None:
        self._refuse("drop the table")

    def refresh_indexes(self, collection: str) -> None:
        """Nothing to do: the owner maintains the table's indexes."""

    def forget(self, collection: str) -> None:
        """Drop the open dataset; the next call opens the table again (the pinned version, or the latest)."""
        self._ds = None

    # reads --------------------------------------------------------------------------------
    def count(self, collection: str) -> int:
        return self.dataset().count_rows()

    def fingerprints(self, collection: str) -> dict[str, tuple[str, str]]:
        c = self.columns
        out: dict[str, tuple[str, str]] = {}
        for batch in self.dataset().to_batches(columns=[x for x in (c.id, c.text, c.file) if x]):
            ids = batch.column(c.id).to_pylist()
            texts = batch.column(c.text).to_pylist()
            files = batch.column(c.file).to_pylist() if c.file else [""] * len(ids)
            for i, t, f in zip(ids, texts, files, strict=True):
                out[str(i)] = (_hash(t or ""), f or "")
        return out

    def get(self, collection: str, chunk_ids: Sequence[str], *, with_text: bool = True) -> list[Chunk]:
        ids = list(dict.fromkeys(chunk_ids))
        found: dict[str, Chunk] = {}
        for start in range(0, len(ids), 1000):
            flt = self._id_filter(ids[start : start + 1000])
            if flt is None:
                continue
            for row in self.dataset().to_table(columns=self._meta_columns(True), filter=flt).to_pylist():
                chunk = self._chunk(row, True)
                found[chunk.chunk_id] = chunk if with_text else chunk.model_copy(update={"text": ""})
        return [found[i] for i in ids if i in found]

    def iter_rows(
        self, collection: str, *, with_vectors: bool = True, batch_size: int = 4096
    ) -> Iterator[tuple[list[Chunk], np.ndarray | None]]:
        c = self.columns
        columns = self._meta_columns(True) + ([c.vector] if with_vectors else [])
        for batch in self.dataset().to_batches(columns=columns, batch_size=batch_size):
            vectors = _matrix(batch.column(c.vector)) if with_vectors else None
            yield [self._chunk(r) for r in batch.select(self._meta_columns(True)).to_pylist()], vectors

    def vectors(self, collection: str, chunk_ids: Sequence[str]) -> dict[str, np.ndarray]:
        c = self.columns
        out: dict[str, np.ndarray] = {}
        ids = list(dict.fromkeys(chunk_ids))
        for start in range(0, len(ids), 1000):
            flt = self._id_filter(ids[start : start + 1000])
            if flt is None:
                continue
            table = self.dataset().to_table(columns=[c.id, c.vector], filter=flt)
            for chunk_id, row in zip(table.column(c.id).to_pylist(), _matrix(table.column(c.vector)), strict=True):
                out[str(chunk_id)] = row
        return out

    def dimension(self) -> int:
        return int(self.dataset().schema.field(self.columns.vector).type.list_size)

    def vector_search(
        self, collection: str, vector: np.ndarray, k: int, *, within: Sequence[str] | None = None
    ) -> list[ScoredId]:
        if k <= 0 or (within is not None and not within):
            return []

        ds = self.dataset()
        if len(vector) != self.dimension():
            raise EmbeddingError(
                f"query vector has {len(vector)} dimensions, attached column {self.columns.vector!r} has "
                f"{self.dimension()}", hint="attach with the embedder that made the table's vectors")
        kwargs: dict[str, Any] = {}
        if within is not None:
            flt = self._id_filter(within)
            if flt is None:
                return []
            kwargs.update(filter=flt, prefilter=True)
        table = ds.to_table(columns=[self.columns.id],
                            nearest={"column": self.columns.vector, "q": np.asarray(vector, dtype=np.float32),
                                     "k": k, "metric": "cosine", **nearest_params(ds, column=self.columns.vector)},
                            **kwargs)
        return [ScoredId(str(i), 1.0 - float(d))
                for i, d in zip(table.column(self.columns.id).to_pylist(), table.column("_distance").to_pylist(), strict=True)]

    def keyword_search(
        self, collection: str, query: str, k: int, *, within: Sequence[str] | None = None
    ) -> list[ScoredId]:
        if k <= 0 or not query.strip() or (within is not None and not within):
            return []
        from lance.query import MultiMatchQuery  # deferred: heavy

        ds = self.dataset()
        indexed = fts_columns(ds)
        columns = [x for x in (self.columns.title, self.columns.text) if x and x in indexed]
        if not columns:
            raise StoreError(
                f"the attached table {self.table_uri} has no full-text index on {self.columns.text!r}, "
                "and Knowtology does not write to attached tables",
                hint=f"ask its owner to create one (lancedb: table.create_fts_index({self.columns.text!r})), "
                     "or use semantic search / `kt grep --regex`",
            )
        kwargs: dict[str, Any] = {}
        if within is not None:
            flt = self._id_filter(within)
            if flt is None:
                return []
            kwargs.update(filter=flt, prefilter=True)
        try:
            table = ds.to_table(columns=[self.columns.id, "_score"], full_text_query=MultiMatchQuery(query, columns),
                                limit=k, **kwargs)
        except (ValueError, OSError, RuntimeError) as exc:
            raise StoreError(f"keyword search failed for {query!r}: {exc}", hint="simplify the query") from exc
        return [ScoredId(str(i), float(s)) for i, s in zip(table.column(self.columns.id).to_pylist(),
                                                            table.column("_score").to_pylist(), strict=True)]

    def describe(self) -> dict[str, Any]:
        """What ``kt attach`` records in the collection's ``source``."""
        return {"kind": "lance", "table": self.table_uri, "columns": self.columns.to_dict(),
                "version": self.version}


def _hash(text: str) -> str:
    return hashlib.sha1(text.encode("utf-8")).hexdigest()[:16]


def _matrix(column: Any) -> np.ndarray:
    import pyarrow as pa  # deferred: heavy

    if isinstance(column, pa.ChunkedArray):
        column = column.combine_chunks()
    dim = column.type.list_size
    return column.values.to_numpy(zero_copy_only=False).astype(np.float32, copy=False).reshape(-1, dim)

