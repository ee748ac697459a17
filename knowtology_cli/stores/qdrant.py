"""QdrantVectorStore: chunk rows as Qdrant points, writable, or read-only over existing collections."""

from __future__ import annotations

import uuid
import warnings
from collections.abc import Iterator, Mapping, Sequence
from typing import Any

import numpy as np

from knowtology_cli.errors import EmbeddingError, StoreError
from knowtology_cli.models import Chunk

from .base import ScoredId, TextIndex, VectorStore

CHUNK_FIELDS = ("chunk_id", "text", "title", "doc_id", "file_name", "chunk_index", "content_hash", "metadata")
TEXT_FIELDS = ("title", "text")
_NAMESPACE = uuid.UUID("5b0f1f8e-6a43-4bb5-9d55-4b6e6f77746c")


def point_id(chunk_id: str) -> str:
    """The Qdrant point id Knowtology gives a chunk (a stable UUID)."""
    return str(uuid.uuid5(_NAMESPACE, chunk_id))


class QdrantVectorStore(VectorStore):
    """Chunks in Qdrant.

    Each Knowtology collection is one Qdrant collection (``prefix + name``, or any existing collection
    through ``collections={name: qdrant_name}``). A point's payload carries the chunk fields (payload
    keys renamed through ``fields`` for collections someone else wrote); points Knowtology writes get
    the id ``uuid5(chunk_id)``, so upserts replace by chunk id.

    Keyword search, in this order:
    1. a ``text_store`` (e.g. ``PostgresTextStore``) when one is given — ingest writes text there too;
    2. Qdrant's own BM25 (``TextQuery``, Qdrant >= 1.20) over the text fields that carry a text
       index with ``scoring`` — collections created here get one on ``text`` and ``title``, and the two
       BM25 scores are summed;
    3. otherwise a ``StoreError`` that says how to add such an index.

    Runs against a server (``url=``, ``api_key=``) or in qdrant-client's local mode (``path=`` or
    ``path=":memory:"``), which the tests use.

    Args:
        url: server URL (``http://localhost:6333``); or
        path: local-mode directory (``":memory:"`` for a throwaway one).
        api_key: server API key.
        prefix: prepended to collection names Knowtology creates.
        collections: Knowtology collection name -> existing Qdrant collection name.
        fields: chunk field -> payload key for existing collections (``chunk_id: None`` means the
            point id is the chunk id).
        vector_name: the named vector to use (None: the collection's single unnamed vector).
        read_only: refuse every write (for collections owned by someone else).
        text_store: a ``TextIndex`` (e.g. ``PostgresTextStore``) that keyword search goes to
            instead of Qdrant's BM25; writes go to it too.
        client: an existing ``QdrantClient`` (the other connection arguments are then ignored).
    """

    def __init__(
        self,
        url: str | None = None,
        path: str | None = None,
        api_key: str | None = None,
        *,
        prefix: str = "",
        collections: Mapping[str, str] | None = None,
        fields: Mapping[str, str | None] | None = None,
        vector_name: str | None = None,
        read_only: bool = False,
        text_store: TextIndex | None = None,
        client: Any = None,
    ) -> None:
        if client is None and url is None and path is None:
            raise StoreError("QdrantVectorStore needs url= or path=", hint="e.g. url='http://localhost:6333'")
        if text_store is not None and not isinstance(text_store, TextIndex):
            raise StoreError(f"text_store must be a TextIndex (keyword search you can write to), got "
                             f"{type(text_store).__name__}", hint="e.g. text_store=PostgresTextStore(dsn)")
        self.url, self.path, self._api_key = url, path, api_key
        self.prefix = prefix
        self.collection_map = dict(collections or {})
        self.fields: dict[str, str | None] = {f: f for f in CHUNK_FIELDS}
        self.fields.update(fields or {})
        self.vector_name = vector_name
        self.read_only = read_only
        self.text_store = text_store
        self._client = client
        self._dims: dict[str, int] = {}

    # plumbing ----------------------------------------------------------------------------
    @property
    def client(self) -> Any:
        if self._client is None:
            try:
                from qdrant_client import QdrantClient  # deferred: optional extra
            except ImportError as exc:  # pragma: no cover - extra not installed
                raise StoreError("Qdrant support needs qdrant-client",
                                 hint="pip install 'knowtology-cli[qdrant]'") from exc
            if self.url:
                self._client = QdrantClient(url=self.url, api_key=self._api_key)
            else:
                self._client = QdrantClient(path=self.path)
        return self._client

    def qdrant_name(self, collection: str) -> str:
        return self.collection_map.get(collection, f"{self.prefix}{collection}")

    def _exists(self, collection: str) -> bool:
        try:
            return bool(self.client.collection_exists(self.qdrant_name(collection)))
        except Exception as exc:  # noqa: BLE001 - transport errors vary by client mode
            raise StoreError(f"cannot reach Qdrant: {exc}", hint="check the Qdrant URL and API key") from exc

    def _dimension(self, collection: str) -> int | None:
        if collection in self._dims:
            return self._dims[collection]
        if not self._exists(collection):
            return None
        vectors = self.client.get_collection(self.qdrant_name(collection)).config.params.vectors
        if isinstance(vectors, Mapping):
            if self.vector_name is None and len(vectors) == 1:
                self.vector_name = next(iter(vectors))
            params = vectors.get(self.vector_name or "")
            if params is None:
                raise StoreError(f"Qdrant collection {self.qdrant_name(collection)!r} has no vector "
                                 f"{self.vector_name!r} (has: {', '.join(vectors)})", hint="pass vector_name=")
        else:
            params = vectors
        self._dims[collection] = int(params.size)
        return self._dims[collection]

    def _writable(self, collection: str) -> None:
        if self.read_only:
            raise StoreError(f"collection {collection!r} is attached read-only from Qdrant "
                             f"{self.qdrant_name(collection)!r}; Knowtology never writes to it",
                             hint="ingest into another collection")

    def _key(self, field: str) -> str | None:
        return self.fields.get(field)

    def _chunk(self, point: Any, with_text: bool = True) -> Chunk:
        payload = point.payload or {}

        def get(field: str, default: Any = "") -> Any:
            key = self._key(field)
            value = payload.get(key) if key else None
            return default if value is None else value

        chunk_id = str(get("chunk_id")) if self._key("chunk_id") else str(point.id)
        meta = get("metadata", {})
        return Chunk(chunk_id=chunk_id, text=str(get("text")) if with_text else "", doc_id=str(get("doc_id")),
                     file_name=str(get("file_name")), chunk_index=int(get("chunk_index", 0) or 0),
                     title=str(get("title")), content_hash=str(get("content_hash")),
                     metadata=meta if isinstance(meta, dict) else {"value": meta})

    def _id_filter(self, chunk_ids: Sequence[str]) -> Any:
        from qdrant_client import models  # deferred: optional extra

        key = self._key("chunk_id")
        if key is None:
            return models.Filter(must=[models.HasIdCondition(has_id=[_as_point_id(i) for i in chunk_ids])])
        return models.Filter(must=[models.FieldCondition(key=key, match=models.MatchAny(any=list(chunk_ids)))])

    def _payload_keys(self, with_text: bool = True) -> list[str]:
        return [k for f, k in self.fields.items() if k and (with_text or f != "text")]

    # writes -------------------------------------------------------------------------------
    def upsert(self, collection: str, chunks: Sequence[Chunk], vectors: np.ndarray) -> None:
        self._writable(collection)
        if not chunks:
            return
        from qdrant_client import models  # deferred: optional extra

        dimension = int(vectors.shape[1])
        existing = self._dimension(collection)
        if existing is not None and existing != dimension:
            raise EmbeddingError(f"collection {collection!r} holds {existing}-d vectors, got {dimension}-d",
                                 hint="ingest with the collection's embedder or use another collection")
        name = self.qdrant_name(collection)
        if existing is None:
            self._create(name, dimension)
            self._dims[collection] = dimension
        points = []
        for chunk, vector in zip(chunks, np.asarray(vectors, dtype=np.float32), strict=True):
            payload: dict[str, Any] = {key: getattr(chunk, f) for f in CHUNK_FIELDS if (key := self.fields.get(f))}
            vec: Any = vector.tolist() if self.vector_name is None else {self.vector_name: vector.tolist()}
            points.append(models.PointStruct(id=point_id(chunk.chunk_id), vector=vec, payload=payload))
        try:
            for start in range(0, len(points), 256):
                self.client.upsert(name, points=points[start : start + 256], wait=True)
        except Exception as exc:  # noqa: BLE001
            raise StoreError(f"cannot write Qdrant collection {name!r}: {exc}") from exc
        if self.text_store is not None:
            self.text_store.upsert(collection, chunks)

    def _create(self, name: str, dimension: int) -> None:
        from qdrant_client import models  # deferred: optional extra

        params = models.VectorParams(size=dimension, distance=models.Distance.COSINE)
        self.client.create_collection(name, vectors_config=params if self.vector_name is None
                                      else {self.vector_name: params})
        with warnings.catch_warnings():
            warnings.simplefilter("ignore")  # local mode: keyword indexes are no-ops
            if self._key("chunk_id"):
                self.client.create_payload_index(name, self.fields["chunk_id"], models.PayloadSchemaType.KEYWORD)
            for field in TEXT_FIELDS:
                self.client.create_payload_index(
                    name, self.fields[field], models.TextIndexParams(type=models.TextIndexType.TEXT, scoring=True))

    def delete(self, collection: str, chunk_ids: Sequence[str]) -> None:
        self._writable(collection)
        if not chunk_ids or not self._exists(collection):
            return
        from qdrant_client import models  # deferred: optional extra

        ids: list[Any] = [point_id(c) for c in chunk_ids]
        self.client.delete(self.qdrant_name(collection), points_selector=models.PointIdsList(points=ids), wait=True)
        if self.text_store is not None:
            self.text_store.delete(collection, chunk_ids)

    def drop(self, collection: str) -> None:
        self._writable(collection)
        if self._exists(collection):
            self.client.delete_collection(self.qdrant_name(collection))
        self._dims.pop(collection, None)
        if self.text_store is not None:
            self.text_store.drop(collection)

    # reads --------------------------------------------------------------------------------
    def count(self, collection: str) -> int:
        if not self._exists(collection):
            return 0
        return int(self.client.count(self.qdrant_name(collection), exact=True).count)

    def _scroll(self, collection: str, *, keys: list[str] | bool, with_vectors: bool = False,
                scroll_filter: Any = None, batch_size: int = 1024) -> Iterator[list[Any]]:
        if not self._exists(collection):
            return
        offset = None
        vectors: Any = [self.vector_name] if with_vectors and self.vector_name else with_vectors
        while True:
            points, offset = self.client.scroll(self.qdrant_name(collection), scroll_filter=scroll_filter,
                                                limit=batch_size, offset=offset, with_payload=keys,
                                                with_vectors=vectors)
            if points:
                yield points
            if offset is None:
                return

    def fingerprints(self, collection: str) -> dict[str, tuple[str, str]]:
        keys = [k for k in (self._key("chunk_id"), self._key("content_hash"), self._key("file_name")) if k]
        out: dict[str, tuple[str, str]] = {}
        for points in self._scroll(collection, keys=keys or False):
            for p in points:
                c = self._chunk(p, with_text=False)
                out[c.chunk_id] = (c.content_hash, c.file_name)
        return out

    def get(self, collection: str, chunk_ids: Sequence[str], *, with_text: bool = True) -> list[Chunk]:
        ids = list(dict.fromkeys(chunk_ids))
        if not ids:
            return []
        found: dict[str, Chunk] = {}
        for start in range(0, len(ids), 1000):
            part = ids[start : start + 1000]
            for points in self._scroll(collection, keys=self._payload_keys(with_text),
                                       scroll_filter=self._id_filter(part)):
                for p in points:
                    c = self._chunk(p, with_text)
                    found[c.chunk_id] = c
        return [found[i] for i in ids if i in found]

    def _vector_of(self, point: Any) -> np.ndarray:
        v = point.vector
        if isinstance(v, dict):
            v = v[self.vector_name] if self.vector_name else next(iter(v.values()))
        return np.asarray(v, dtype=np.float32)

    def iter_rows(
        self, collection: str, *, with_vectors: bool = True, batch_size: int = 4096
    ) -> Iterator[tuple[list[Chunk], np.ndarray | None]]:
        if with_vectors:
            self._dimension(collection)
        for points in self._scroll(collection, keys=self._payload_keys(), with_vectors=with_vectors,
                                   batch_size=batch_size):
            vectors = np.stack([self._vector_of(p) for p in points]) if with_vectors else None
            yield [self._chunk(p) for p in points], vectors

    def vectors(self, collection: str, chunk_ids: Sequence[str]) -> dict[str, np.ndarray]:
        if not chunk_ids:
            return {}
        self._dimension(collection)
        key = self._key("chunk_id")
        keys: list[str] | bool = [key] if key else False
        out: dict[str, np.ndarray] = {}
        ids = list(dict.fromkeys(chunk_ids))
        for start in range(0, len(ids), 1000):
            for points in self._scroll(collection, keys=keys, with_vectors=True,
                                       scroll_filter=self._id_filter(ids[start : start + 1000])):
                for p in points:
                    out[self._chunk(p, with_text=False).chunk_id] = self._vector_of(p)
        return out

    def vector_search(
        self, collection: str, vector: np.ndarray, k: int, *, within: Sequence[str] | None = None
    ) -> list[ScoredId]:
        if k <= 0 or (within is not None and not within):
            return []
        dimension = self._dimension(collection)
        if dimension is None:
            return []
        if len(vector) != dimension:
            raise EmbeddingError(f"query vector has {len(vector)} dimensions, collection {collection!r} has {dimension}",
                                 hint="query with the embedder the collection was ingested with")
        keys = [self._key("chunk_id")] if self._key("chunk_id") else False
        response = self.client.query_points(
            self.qdrant_name(collection), query=np.asarray(vector, dtype=np.float32).tolist(), using=self.vector_name,
            query_filter=self._id_filter(within) if within is not None else None, limit=k, with_payload=keys,
        )
        return [ScoredId(self._chunk(p, with_text=False).chunk_id, float(p.score)) for p in response.points]

    def keyword_search(
        self, collection: str, query: str, k: int, *, within: Sequence[str] | None = None
    ) -> list[ScoredId]:
        if self.text_store is not None:
            return self.text_store.keyword_search(collection, query, k, within=within)
        if k <= 0 or not query.strip() or (within is not None and not within) or not self._exists(collection):
            return []
        from qdrant_client import models  # deferred: optional extra

        keys = [self._key("chunk_id")] if self._key("chunk_id") else False
        depth = max(k * 4, 50)
        totals: dict[str, float] = {}
        errors: list[str] = []
        for field in TEXT_FIELDS:
            key = self._key(field)
            if not key:
                continue
            try:
                response = self.client.query_points(
                    self.qdrant_name(collection), query=models.TextQuery(text=query), using=key,
                    query_filter=self._id_filter(within) if within is not None else None, limit=depth,
                    with_payload=keys,
                )
            except Exception as exc:  # noqa: BLE001 - "no text index with scoring" differs by mode
                errors.append(f"{key}: {exc}")
                continue
            for p in response.points:
                chunk_id = self._chunk(p, with_text=False).chunk_id
                totals[chunk_id] = totals.get(chunk_id, 0.0) + float(p.score)
        if len(errors) == len([f for f in TEXT_FIELDS if self._key(f)]):
            raise StoreError(
                f"keyword search needs a text index with scoring on Qdrant collection "
                f"{self.qdrant_name(collection)!r} ({'; '.join(errors)[:300]})",
                hint=f"create one: client.create_payload_index({self.qdrant_name(collection)!r}, "
                     f"{self._key('text')!r}, TextIndexParams(type='text', scoring=True)), "
                     "or pass text_store=PostgresTextStore(dsn)",
            )
        ranked = sorted(totals.items(), key=lambda kv: (-kv[1], kv[0]))[:k]
        return [ScoredId(i, s) for i, s in ranked]

    def close(self) -> None:
        if self._client is not None:
            self._client.close()
            self._client = None


def _as_point_id(value: str) -> int | str:
    return int(value) if value.isdigit() else value
