"""`kt attach`: someone else's Lance table becomes a read-only collection — built, browsed, searched,
grepped and read through the CLI, while the table's version and files stay exactly as they were."""

from __future__ import annotations

import json
from pathlib import Path

import numpy as np
import pytest

ROWS = [
    ("p-1", "Refund policy", "refunds.md", "Refunds are paid to the original card within 7 days of the return."),
    ("p-2", "Perishables", "refunds.md", "Opened perishable food cannot be returned unless it arrived spoiled."),
    ("p-3", "Delivery windows", "shipping.md", "Orders placed before 11:00 arrive the same evening."),
    ("p-4", "Missed deliveries", "shipping.md", "Insulated boxes keep chilled food safe for six hours at the door."),
    ("p-5", "Failover", "failover.md", "Fail over the PostgreSQL primary when replication lag exceeds 30 seconds."),
    ("p-6", "Paging", "oncall.md", "The on-call engineer acknowledges SEV1 pages within 5 minutes."),
]


def _files(root: Path) -> dict[str, int]:
    return {str(p.relative_to(root)): p.stat().st_mtime_ns for p in root.rglob("*") if p.is_file()}


@pytest.fixture
def their_table(tmp_path: Path) -> str:
    """A LanceDB table made by another tool: its own column names, hash-embedder vectors, an FTS index."""
    import lancedb
    import pyarrow as pa
    from lancedb.index import FTS

    from knowtology_cli.embedders.hash import HashEmbedder

    vectors = HashEmbedder().embed_documents([f"{title}\n{text}" for _, title, _, text in ROWS])
    db = lancedb.connect(tmp_path / "theirs")
    table = db.create_table("docs", data=pa.table({
        "uid": [r[0] for r in ROWS],
        "heading": [r[1] for r in ROWS],
        "origin": [r[2] for r in ROWS],
        "content": [r[3] for r in ROWS],
        "embedding": pa.FixedSizeListArray.from_arrays(pa.array(np.asarray(vectors, np.float32).ravel()),
                                                       vectors.shape[1]),
    }))
    table.create_index("content", config=FTS())
    return str(tmp_path / "theirs" / "docs.lance")


def _json(result) -> dict:
    assert result.exit_code == 0, result.output
    return json.loads(result.stdout)


def test_attached_table_is_explored_but_never_written(cli, their_table: str, tmp_path: Path) -> None:
    import lance

    store = tmp_path / "store"
    before_version = lance.dataset(their_table).version
    before_files = _files(Path(their_table))

    report = _json(cli("attach", "kb", "--table", their_table, "--id-column", "uid", "--text-column", "content",
                       "--vector-column", "embedding", "--file-column", "origin", "--title-column", "heading",
                       "--embedder", "hash", "--store", store, "--json"))
    assert (report["rows"], report["dimension"], report["embedder"], report["keyword_index"]) == (
        6, 64, "hash", ["content"])

    assert cli("build", "-c", "kb", "--builder", "cluster", "--store", store).exit_code == 0
    status = _json(cli("status", "-c", "kb", "--store", store, "--json"))
    assert status["collections"][0]["chunks"] == 6 and status["collections"][0]["mapped"] == 6

    top = _json(cli("browse", "-c", "kb", "--store", store, "--json"))
    assert sum(c["chunk_count"] for c in top["children"] if c["level"] == 1) == 6

    found = _json(cli("search", "refund to the card", "-c", "kb", "--store", store, "--json"))
    assert found["hits"] and all(h["path"] for h in found["hits"])
    grep = _json(cli("grep", "replication", "-c", "kb", "--store", store, "--json"))
    assert [h["chunk_id"] for h in grep["hits"]] == ["p-5"]
    assert grep["hits"][0]["file_name"] == "failover.md"
    regex = _json(cli("grep", "--regex", r"\d+ minutes", "-c", "kb", "--store", store, "--json"))
    assert [h["chunk_id"] for h in regex["hits"]] == ["p-6"]
    read = _json(cli("read", "p-2", "-c", "kb", "--store", store, "--json"))
    assert read["chunks"][0]["text"] == ROWS[1][3] and read["chunks"][0]["title"] == "Perishables"

    docs = tmp_path / "more.md"
    docs.write_text("# New\nSomething new.\n", encoding="utf-8")
    refused = cli("ingest", str(docs), "-c", "kb", "--store", store)
    assert refused.exit_code == 1 and "read-only" in refused.stderr

    assert cli("detach", "kb", "--store", store).exit_code == 0
    assert lance.dataset(their_table).version == before_version
    assert lance.dataset(their_table).latest_version == before_version
    assert _files(Path(their_table)) == before_files


def test_attach_checks_columns_and_embedder(cli, their_table: str, tmp_path: Path) -> None:
    store = tmp_path / "store"
    base = ["attach", "kb", "--table", their_table, "--id-column", "uid", "--text-column", "content",
            "--store", store]
    missing = cli(*base, "--vector-column", "vec", "--embedder", "hash")
    assert missing.exit_code == 1 and "vec" in missing.stderr
    wrong = cli(*base, "--vector-column", "embedding", "--embedder", "hash:32")
    assert wrong.exit_code == 1 and "64-d" in wrong.stderr
    assert cli(*base, "--vector-column", "embedding", "--embedder", "hash").exit_code == 0
    again = _json(cli(*base, "--vector-column", "embedding", "--embedder", "hash", "--json"))
    assert again["already_attached"] is True


def test_collections_of_one_store_mix_attached_and_ingested(cli, their_table: str, docs_dir: Path,
                                                            tmp_path: Path) -> None:
    store = tmp_path / "store"
    assert cli("ingest", str(docs_dir), "--embedder", "hash", "--store", store).exit_code == 0
    assert cli("attach", "kb", "--table", their_table, "--id-column", "uid", "--text-column", "content",
               "--vector-column", "embedding", "--embedder", "hash", "--store", store).exit_code == 0
    status = _json(cli("status", "--store", store, "--json"))
    counts = {c["name"]: c["chunks"] for c in status["collections"]}
    assert counts["kb"] == 6 and counts["default"] == 4
