"""The whole CLI on the scale-out backends, chosen by configuration only: PostgreSQL tree store
(``KNOWTOLOGY_TREE_DSN``), Lance on S3 and Qdrant (``KNOWTOLOGY_VECTOR_URI``); plus ANN index upkeep."""

from __future__ import annotations

import json
from pathlib import Path

import numpy as np
import pytest

pytest_plugins = ("scale_fixtures",)


def _json(result) -> dict:
    assert result.exit_code == 0, result.output
    return json.loads(result.stdout)


def _tour(cli, docs_dir: Path, store: Path) -> None:
    ingest = _json(cli("ingest", str(docs_dir), "--embedder", "hash", "--store", store, "--json"))
    assert ingest["added"] == ingest["total"] > 0
    assert cli("build", "--builder", "cluster", "--store", store).exit_code == 0
    status = _json(cli("status", "--store", store, "--json"))["collections"][0]
    assert status["chunks"] == status["mapped"] == ingest["total"] and not status["stale"]
    top = _json(cli("browse", "--store", store, "--json"))
    assert sum(c["chunk_count"] for c in top["children"] if c["level"] == 1) == ingest["total"]
    grep = _json(cli("grep", "replication", "--store", store, "--json"))
    assert grep["hits"] and grep["hits"][0]["file_name"].endswith("failover.md")
    search = _json(cli("search", "database failover", "--mode", "hybrid", "--store", store, "--json"))
    assert search["hits"]
    chunk_id = grep["hits"][0]["chunk_id"]
    first = _json(cli("read", chunk_id, "--store", store, "--json"))["chunks"][0]
    assert "replication" in first["text"]
    assert _json(cli("read", chunk_id, "--store", store, "--json"))["chunks"][0]["already_read"] is True
    again = _json(cli("ingest", str(docs_dir), "--embedder", "hash", "--store", store, "--json"))
    assert again["unchanged"] == ingest["total"] and again["embedded"] == 0


def test_cli_on_postgres_tree_store_and_s3_vectors(cli, docs_dir: Path, tmp_path: Path, pg_dsn: str, s3_uri: str,
                                                   monkeypatch: pytest.MonkeyPatch) -> None:
    import psycopg

    monkeypatch.setenv("KNOWTOLOGY_TREE_DSN", pg_dsn)
    monkeypatch.setenv("KNOWTOLOGY_VECTOR_URI", s3_uri)
    store = tmp_path / "store"
    _tour(cli, docs_dir, store)
    assert not (store / "tree.db").exists() and not (store / "lance").exists()
    assert not (store / "sessions").exists()
    with psycopg.connect(pg_dsn) as conn:
        nodes = conn.execute("SELECT COUNT(*) FROM kt_tree_nodes").fetchone()[0]
        reads = conn.execute("SELECT COUNT(*) FROM kt_session_reads").fetchone()[0]
    assert nodes > 0 and reads == 1


def test_cli_on_qdrant_local_mode(cli, docs_dir: Path, tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv("KNOWTOLOGY_VECTOR_URI", f"qdrant://{tmp_path / 'qdrant'}")
    store = tmp_path / "store"
    _tour(cli, docs_dir, store)
    assert (tmp_path / "qdrant").is_dir() and not (store / "lance").exists()


def test_vector_index_is_built_past_the_threshold_and_searched(tmp_path: Path) -> None:
    import lance
    import lancedb
    import pyarrow as pa

    from knowtology_cli.stores.ann import maybe_create_vector_index, nearest_params, vector_index_info

    rng = np.random.default_rng(3)
    centers = rng.standard_normal((8, 32)).astype(np.float32)
    vecs = centers[rng.integers(0, 8, 2000)] + 0.2 * rng.standard_normal((2000, 32)).astype(np.float32)
    vecs /= np.linalg.norm(vecs, axis=1, keepdims=True)
    db = lancedb.connect(tmp_path)
    table = db.create_table("t", data=pa.table({
        "chunk_id": [f"c{i}" for i in range(2000)],
        "vector": pa.FixedSizeListArray.from_arrays(pa.array(vecs.ravel()), 32)}))
    assert maybe_create_vector_index(table.to_lance(), threshold=5000) is None
    assert nearest_params(lance.dataset(str(tmp_path / "t.lance"))) == {}
    assert maybe_create_vector_index(table.to_lance(), threshold=1000) == "created"
    ds = lance.dataset(str(tmp_path / "t.lance"))
    assert vector_index_info(ds)["indexed_rows"] == 2000
    assert maybe_create_vector_index(lance.dataset(str(tmp_path / "t.lance")), threshold=1000) is None  # current
    params = nearest_params(ds)
    assert params["refine_factor"] >= 1 and params["nprobes"] >= 1
    exact = ds.to_table(columns=["chunk_id"], nearest={"column": "vector", "q": vecs[7], "k": 10, "metric": "cosine",
                                                       "use_index": False})
    approx = ds.to_table(columns=["chunk_id"], nearest={"column": "vector", "q": vecs[7], "k": 10, "metric": "cosine",
                                                        **params})
    overlap = set(exact.column("chunk_id").to_pylist()) & set(approx.column("chunk_id").to_pylist())
    assert len(overlap) >= 8


def test_lance_store_builds_its_index_through_refresh(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    from knowtology_cli.models import Chunk
    from knowtology_cli.stores import ann
    from knowtology_cli.stores.lance import LanceVectorStore

    monkeypatch.setattr(ann, "VECTOR_INDEX_THRESHOLD", 500)
    rng = np.random.default_rng(1)
    vecs = rng.standard_normal((600, 16)).astype(np.float32)
    vecs /= np.linalg.norm(vecs, axis=1, keepdims=True)
    chunks = [Chunk(chunk_id=f"c{i}", text=f"row {i}", content_hash=str(i)) for i in range(600)]
    store = LanceVectorStore(tmp_path / "lance")
    store.upsert("c", chunks, vecs)
    store.refresh_indexes("c")
    assert ann.has_vector_index(store._dataset("c"))
    hits = store.vector_search("c", vecs[42], 3)
    assert hits[0].chunk_id == "c42"
