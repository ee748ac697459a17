"""Benchmark data: BEIR-layout collections and cached scratch stores keyed by corpus + embedder."""

from __future__ import annotations

import hashlib
import io
import json
import os
import re
from collections.abc import Callable
from dataclasses import dataclass, field
from pathlib import Path

from knowtology_cli.errors import NotFoundError
from knowtology_cli.kb import KnowledgeBase
from knowtology_cli.stores.lance import FTS_COLUMNS, FTS_OPTIONS, fts_index_name, lance_dataset

COLLECTION = "bench"
#: Where bare collection names are looked up when KNOWTOLOGY_BENCH_DATA is unset (relative to the cwd).
DEFAULT_DATA_ROOT = Path("..") / "shared" / "bench-data"


@dataclass
class Dataset:
    """One BEIR-layout test collection loaded into memory.

    A collection folder holds ``corpus.jsonl`` (``_id``, ``title``, ``text``), ``queries.jsonl``
    and ``qrels.tsv``.
    """

    name: str
    root: Path
    docs: dict[str, tuple[str, str]]  # doc id -> (title, text)
    queries: dict[str, str]
    qrels: dict[str, dict[str, int]] = field(default_factory=dict)

    @property
    def corpus_path(self) -> Path:
        return self.root / "corpus.jsonl"

    def doc_text(self, doc_id: str) -> str:
        """Title and text as the store holds them (what a model would be sent)."""
        title, text = self.docs[doc_id]
        return f"{title}\n{text}" if title and text else (title or text)

    def judged(self, limit: int | None = None) -> dict[str, str]:
        """Queries with at least one relevant document, in file order, optionally the first ``limit``."""
        items = [(q, t) for q, t in self.queries.items() if self.qrels.get(q)]
        return dict(items[:limit] if limit else items)


def resolve_data_dir(value: str | Path) -> Path:
    """A dataset folder from a path or a bare name under the shared bench-data root."""
    path = Path(value).expanduser()
    if (path / "corpus.jsonl").is_file():
        return path
    root = Path(os.environ.get("KNOWTOLOGY_BENCH_DATA", DEFAULT_DATA_ROOT))
    if (root / str(value) / "corpus.jsonl").is_file():
        return root / str(value)

    raise NotFoundError(f"no BEIR collection at {value!s} (corpus.jsonl missing)",
                        hint=f"pass a folder with corpus.jsonl, queries.jsonl and qrels.tsv, or a name under {root}")


def load_dataset(data_dir: str | Path) -> Dataset:
    """Read corpus, judged queries and qrels of a BEIR-layout folder."""
    root = resolve_data_dir(data_dir)
    docs: dict[str, tuple[str, str]] = {}
    with open(root / "corpus.jsonl", encoding="utf-8") as fh:
        for line in fh:
            if line.strip():
                obj = json.loads(line)
                docs[str(obj["_id"])] = (obj.get("title") or "", obj.get("text") or "")
    queries: dict[str, str] = {}
    with open(root / "queries.jsonl", encoding="utf-8") as fh:
        for line in fh:
            if line.strip():
                obj = json.loads(line)
                queries[str(obj["_id"])] = obj["text"]
    qrels: dict[str, dict[str, int]] = {}
    with open(root / "qrels.tsv", encoding="utf-8") as fh:
        for n, line in enumerate(fh):
            parts = line.rstrip("\n").split("\t")
            if n == 0 and not parts[-1].lstrip("-").isdigit():
                continue
            if len(parts) >= 3 and int(parts[2]) >= 1:
                qrels.setdefault(parts[0], {})[parts[1]] = int(parts[2])
    return Dataset(name=root.name, root=root, docs=docs, queries=queries, qrels=qrels)


def chunk_lines(ds: Dataset) -> list[dict[str, str]]:
    """The collection as ingestable chunk objects, one document per chunk.

    Title-only documents (half of CACM) carry their title as the text, since a chunk needs text;
    documents with neither (two in Cranfield) are left out — no text search can find them anyway.
    """
    out = []
    for doc_id, (title, text) in ds.docs.items():
        if not text.strip():
            title, text = "", title
        if text.strip():
            out.append({"_id": doc_id, "title": title, "text": text})
    return out


def cache_root() -> Path:
    return Path(os.environ.get("KNOWTOLOGY_BENCH_CACHE", Path.home() / ".cache" / "knowtology" / "bench")).expanduser()


def file_digest(path: Path) -> str:
    h = hashlib.sha256()
    with open(path, "rb") as fh:
        for block in iter(lambda: fh.read(1 << 20), b""):
            h.update(block)
    return h.hexdigest()


def store_dir_for(ds: Dataset, embedder: str) -> Path:
    """``<cache>/<dataset>-<embedder>-<hash>``: the hash covers the corpus bytes and the embedder name.

    Stores live under ``$KNOWTOLOGY_BENCH_CACHE`` (default ``~/.cache/knowtology/bench``) in
    ``<dataset>-<embedder>-<hash>/``, so reruns skip the embedding; nothing is written next to the data.
    """
    from knowtology_cli.embedders import canonical_name  # deferred: loads numpy

    name = canonical_name(embedder)
    key = hashlib.sha256(f"{file_digest(ds.corpus_path)}\0{name}".encode()).hexdigest()[:12]
    slug = re.sub(r"[^A-Za-z0-9.-]+", "_", name.split("/")[-1])
    return cache_root() / f"{ds.name}-{slug}-{key}"


def open_store(
    ds: Dataset,
    embedder: str,
    *,
    message: Callable[[str], None] = lambda _m: None,
) -> tuple[KnowledgeBase, Path, float | None]:
    """Open the cached scratch store for ``ds`` + ``embedder``, ingesting it first when missing.

    Returns the knowledge base, its directory, and the ingest seconds when it was (re)built now.
    The full-text indexes are rebuilt when the store's ``FTS_OPTIONS`` differ from the current ones.
    """
    from knowtology_cli.embedders import canonical_name, get_embedder  # deferred: loads numpy

    directory = store_dir_for(ds, embedder)
    marker = directory / "bench.json"
    model = get_embedder(embedder)
    kb = KnowledgeBase.open(directory, embedder=model)
    seconds = None
    meta = json.loads(marker.read_text()) if marker.is_file() else None
    if meta is None:
        message(f"ingesting {ds.name} with {canonical_name(embedder)} into {directory} (cached for reruns)…")
        lines = chunk_lines(ds)
        stream = io.StringIO("\n".join(json.dumps(o, ensure_ascii=False) for o in lines) + "\n")
        report = kb.ingest(["-"], collection=COLLECTION, stdin=stream, embedder=embedder)
        seconds = report.seconds
        meta = {"dataset": ds.name, "embedder": canonical_name(embedder), "corpus_sha256": file_digest(ds.corpus_path),
                "chunks": report.total, "ingest_seconds": report.seconds, "fts_options": FTS_OPTIONS}
        marker.write_text(json.dumps(meta, indent=1))
    elif meta.get("fts_options") != FTS_OPTIONS:
        message(f"re-indexing {ds.name} full text for the current FTS_OPTIONS…")
        reindex_fts(kb)
        meta["fts_options"] = FTS_OPTIONS
        marker.write_text(json.dumps(meta, indent=1))
    return kb, directory, seconds


def reindex_fts(kb: KnowledgeBase, collection: str = COLLECTION) -> None:
    """Recreate the collection's full-text indexes with the current ``FTS_OPTIONS``, the way the
    store builds them (pylance, so index and query tokenizers share one stop-word list)."""
    ds = lance_dataset(kb.vectors, collection)
    for column in FTS_COLUMNS:
        ds.create_scalar_index(column, "INVERTED", name=fts_index_name(column), replace=True, **FTS_OPTIONS)
    kb.vectors.forget(collection)


def documents_digest(root: Path) -> str:
    """A digest of every file under ``root`` (relative path + bytes), in path order."""
    h = hashlib.sha256()
    for path in sorted(p for p in root.rglob("*") if p.is_file()):
        h.update(str(path.relative_to(root)).encode() + b"\0" + file_digest(path).encode() + b"\0")
    return h.hexdigest()


def open_documents_store(
    root: str | Path,
    embedder: str,
    *,
    message: Callable[[str], None] = lambda _m: None,
) -> tuple[KnowledgeBase, Path, str]:
    """Open the cached scratch store of a folder of documents (``sample_corpus/``), ingesting it when missing.

    The store key covers every file's path and bytes and the embedder, as for BEIR collections.
    Returns the knowledge base, its directory and the folder's name.
    """
    from knowtology_cli.embedders import canonical_name, get_embedder  # deferred: loads numpy

    folder = Path(root).expanduser().resolve()
    name = canonical_name(embedder)
    key = hashlib.sha256(f"{documents_digest(folder)}\0{name}".encode()).hexdigest()[:12]
    slug = re.sub(r"[^A-Za-z0-9.-]+", "_", name.split("/")[-1])
    directory = cache_root() / f"{folder.name}-{slug}-{key}"
    marker = directory / "bench.json"
    kb = KnowledgeBase.open(directory, embedder=get_embedder(embedder))
    if not marker.is_file():
        message(f"ingesting {folder} with {name} into {directory} (cached for reruns)…")
        report = kb.ingest([str(folder)], collection=COLLECTION, embedder=embedder)
        marker.write_text(json.dumps({"documents": str(folder), "embedder": name, "chunks": report.total,
                                      "ingest_seconds": report.seconds}, indent=1))
    return kb, directory, folder.name
