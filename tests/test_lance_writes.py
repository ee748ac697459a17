"""LanceVectorStore writes through the ``lance`` dataset API: no lancedb import, lancedb-compatible tables."""

from __future__ import annotations

import subprocess
import sys
import textwrap
from pathlib import Path

import numpy as np
import pytest

from knowtology_cli.models import Chunk
from knowtology_cli.stores import ann
from knowtology_cli.stores.lance import FTS_COLUMNS, FTS_OPTIONS, LanceVectorStore, _schema

DIM = 16
COLLECTION = "docs"
EXPECTED_FTS_NAMES = {"title_idx", "text_idx"}
WORDS = ["refund", "delivery", "failover", "pager", "invoice", "warehouse", "courier", "replica"]


def _chunks(start: int, n: int, *, word: str | None = None) -> list[Chunk]:
    """``n`` chunks ``c<start>..``; each text names two vocabulary words (or ``word`` when given)."""
    out = []
    for i in range(start, start + n):
        text = word or f"{WORDS[i % len(WORDS)]} and {WORDS[(i * 3 + 1) % len(WORDS)]} number {i}"
        out.append(Chunk(chunk_id=f"c{i}", text=text, doc_id=f"d{i % 7}", file_name=f"f{i % 7}.md",
                         chunk_index=i, title=f"Title {WORDS[i % len(WORDS)]}", content_hash=f"h{i}",
                         metadata={"n": i} if i % 2 else {}))
    return out


def _vectors(n: int, seed: int = 0) -> np.ndarray:
    vecs = np.random.default_rng(seed).standard_normal((n, DIM)).astype(np.float32)
    return vecs / np.linalg.norm(vecs, axis=1, keepdims=True)


def _inverted(ds) -> list[dict]:
    import warnings

    with warnings.catch_warnings():
        warnings.simplefilter("ignore")
        return [ix for ix in ds.list_indices() if str(ix["type"]).lower().startswith("inverted")]


def _run_python(code: str, cwd: Path) -> str:
    out = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, cwd=cwd)
    assert out.returncode == 0, out.stderr
    return out.stdout


def _kt_run(args: list[str], cwd: Path) -> tuple[int, list[str]]:
    """Exit code and the lancedb modules loaded by one ``kt`` process (the console-script entry point)."""
    code = textwrap.dedent(f"""
        import sys
        sys.argv = {["kt", *args]!r}
        from knowtology_cli.cli.app import main
        status = 0
        try:
            main()
        except SystemExit as exc:
            status = exc.code or 0
        print("STATUS:" + str(status))
        print("LANCEDB:" + " ".join(sorted(m for m in sys.modules if m.startswith("lancedb"))))
    """)
    lines = _run_python(code, cwd).splitlines()
    status = int(next(x for x in lines if x.startswith("STATUS:")).removeprefix("STATUS:"))
    loaded = next(x for x in lines if x.startswith("LANCEDB:")).removeprefix("LANCEDB:").split()
    return status, loaded


def test_ingest_build_and_prune_never_import_lancedb(docs_dir: Path, tmp_path: Path) -> None:
    store = tmp_path / "store"
    assert _kt_run(["ingest", str(docs_dir), "--embedder", "hash", "--store", str(store)], tmp_path) == (0, [])
    assert _kt_run(["build", "--builder", "cluster", "--store", str(store)], tmp_path) == (0, [])
    (docs_dir / "engineering" / "oncall.md").unlink()  # prune deletes its chunks
    failover = docs_dir / "engineering" / "failover.md"  # an update: merge-insert, then compaction + index upkeep
    failover.write_text(failover.read_text().replace("30 seconds", "45 seconds"), encoding="utf-8")
    assert _kt_run(["ingest", str(docs_dir), "--prune", "--store", str(store)], tmp_path) == (0, [])

    import lance

    ds = lance.dataset(str(next(store.rglob("*.lance"))))
    files = set(ds.to_table(columns=["file_name"]).column("file_name").to_pylist())
    assert files and not any("oncall" in f for f in files)
    assert {ix["name"] for ix in _inverted(ds)} == EXPECTED_FTS_NAMES


def test_every_store_write_path_runs_without_lancedb(tmp_path: Path) -> None:
    """Upsert, index refresh with the ANN index (threshold lowered), compaction, delete and drop."""
    code = textwrap.dedent(f"""
        import sys
        import numpy as np
        from knowtology_cli.models import Chunk
        from knowtology_cli.stores import ann
        from knowtology_cli.stores.lance import LanceVectorStore

        ann.VECTOR_INDEX_THRESHOLD = 300
        rng = np.random.default_rng(0)
        store = LanceVectorStore({str(tmp_path / "lance")!r})
        chunks = [Chunk(chunk_id=f"c{{i}}", text=f"word{{i}} refund", title="t") for i in range(400)]
        store.upsert("c", chunks[:200], rng.standard_normal((200, 8)).astype(np.float32))
        store.refresh_indexes("c")
        store.upsert("c", chunks, rng.standard_normal((400, 8)).astype(np.float32))
        store.refresh_indexes("c")
        store.delete("c", ["c1", "c2"])
        store.refresh_indexes("c")
        info = ann.vector_index_info(store._dataset("c"))
        hits = store.keyword_search("c", "word3", 5)
        print("ROWS", store.count("c"), info["name"], hits[0].chunk_id)
        store.drop("c")
        print("AFTER_DROP", store.count("c"))
        print("LANCEDB:" + " ".join(sorted(m for m in sys.modules if m.startswith("lancedb"))))
    """)
    out = _run_python(code, tmp_path)
    assert "ROWS 398 vector_idx c3" in out
    assert "AFTER_DROP 0" in out
    assert "LANCEDB:\n" in out + "\n" and "LANCEDB: " not in out
    assert not (tmp_path / "lance" / "c.lance").exists()


def test_each_upsert_and_delete_batch_is_one_commit(tmp_path: Path) -> None:
    store = LanceVectorStore(tmp_path)
    store.upsert(COLLECTION, _chunks(0, 10), _vectors(10))
    assert store._dataset(COLLECTION).version == 1  # created with its first rows, in one commit
    store.upsert(COLLECTION, _chunks(5, 10), _vectors(10, seed=1))
    assert store._dataset(COLLECTION).version == 2 and store.count(COLLECTION) == 15
    store.delete(COLLECTION, ["c0", "c1"])
    assert store._dataset(COLLECTION).version == 3 and store.count(COLLECTION) == 13


def test_tables_written_by_the_store_open_in_lancedb(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    lancedb = pytest.importorskip("lancedb")
    monkeypatch.setattr(ann, "VECTOR_INDEX_THRESHOLD", 250)
    store = LanceVectorStore(tmp_path / "lance")
    store.upsert(COLLECTION, _chunks(0, 150), _vectors(150))
    store.refresh_indexes(COLLECTION)
    store.upsert(COLLECTION, _chunks(100, 200), _vectors(200, seed=1))
    store.upsert(COLLECTION, _chunks(400, 1, word="zeppelin overhaul"), _vectors(1, seed=2))
    store.delete(COLLECTION, ["c0", "c1", "c2"])
    store.refresh_indexes(COLLECTION)  # past the lowered threshold: the ANN index too

    table = lancedb.connect(tmp_path / "lance").open_table(COLLECTION)
    assert table.count_rows() == store.count(COLLECTION) == 298
    assert table.schema == _schema(DIM)
    indices = {ix.name: ix.index_type for ix in table.list_indices()}
    assert indices == {"title_idx": "FTS", "text_idx": "FTS", "vector_idx": "IvfSq"}
    hits = table.search("zeppelin", query_type="fts", fts_columns="text").limit(5).to_list()
    assert [h["chunk_id"] for h in hits] == ["c400"]
    refunds = table.search("refunds", query_type="fts", fts_columns="text").limit(500).to_list()
    assert len(refunds) == sum("refund" in c.text for c in _chunks(3, 297))  # stemmed: the same tokenizer
    nearest = table.search(_vectors(200, seed=1)[50]).distance_type("cosine").limit(1).to_list()
    assert nearest[0]["chunk_id"] == "c150"


@pytest.mark.parametrize("index_name", [None, "title_fts"])
def test_a_store_indexed_by_lancedb_keeps_one_index_per_column(tmp_path: Path, index_name: str | None) -> None:
    """Tables made by the previous (lancedb) write path: their FTS indexes are recognised, never duplicated."""
    lancedb = pytest.importorskip("lancedb")
    from lancedb.index import FTS

    old = LanceVectorStore(tmp_path / "x")  # only to build the same Arrow rows the old code wrote
    db = lancedb.connect(tmp_path / "lance")
    table = db.create_table(COLLECTION, schema=_schema(DIM))
    rows = _chunks(0, 20)
    table.add(_arrow(old, rows, _vectors(20)))
    for column in FTS_COLUMNS:
        name = index_name if column == "title" else None
        table.create_index(column, config=FTS(**FTS_OPTIONS), **({"name": name} if name else {}))
    before = {ix["name"] for ix in _inverted(table.to_lance())}

    store = LanceVectorStore(tmp_path / "lance")
    assert not store.indexes_stale(COLLECTION)
    store.upsert(COLLECTION, _chunks(20, 5, word="zeppelin overhaul"), _vectors(5, seed=3))
    assert store.indexes_stale(COLLECTION)
    store.refresh_indexes(COLLECTION)
    store.refresh_indexes(COLLECTION)

    indexed = _inverted(store._dataset(COLLECTION))
    assert sorted(ix["fields"][0] for ix in indexed) == sorted(FTS_COLUMNS)
    assert {ix["name"] for ix in indexed} == before
    assert not store.indexes_stale(COLLECTION)
    assert {h.chunk_id for h in store.keyword_search(COLLECTION, "zeppelin", 10)} == {f"c{i}" for i in range(20, 25)}
    reopened = lancedb.connect(tmp_path / "lance").open_table(COLLECTION)
    assert reopened.count_rows() == 25


def _arrow(store: LanceVectorStore, chunks: list[Chunk], vectors: np.ndarray):
    """The Arrow table ``store.upsert`` would write, captured instead of written."""
    captured = []
    store._write = lambda _collection, data: captured.append(data)  # type: ignore[method-assign]
    store.upsert(COLLECTION, chunks, vectors)
    return captured[0]


def test_refresh_optimizes_like_lancedb(tmp_path: Path) -> None:
    """After small upserts a refresh compacts and re-indexes exactly as lancedb's ``table.optimize()`` did."""
    lancedb = pytest.importorskip("lancedb")
    from lancedb.index import FTS

    batches = [(_chunks(start, 10), _vectors(10, seed=start)) for start in range(0, 50, 10)]
    store = LanceVectorStore(tmp_path / "ours")
    store.upsert(COLLECTION, *batches[0])
    store.refresh_indexes(COLLECTION)
    for chunks, vectors in batches[1:]:
        store.upsert(COLLECTION, chunks, vectors)
    assert len(store._dataset(COLLECTION).get_fragments()) == 5
    store.refresh_indexes(COLLECTION)

    table = lancedb.connect(tmp_path / "theirs").create_table(COLLECTION, schema=_schema(DIM))
    table.add(_arrow(LanceVectorStore(tmp_path / "x"), *batches[0]))
    for column in FTS_COLUMNS:
        table.create_index(column, config=FTS(**FTS_OPTIONS), replace=True)
    for chunks, vectors in batches[1:]:
        data = _arrow(LanceVectorStore(tmp_path / "x"), chunks, vectors)
        table.merge_insert("chunk_id").when_matched_update_all().when_not_matched_insert_all().execute(data)
    table.optimize()

    ours, theirs = store._dataset(COLLECTION), table.to_lance()
    fragments = [f.fragment_id for f in ours.get_fragments()]
    assert len(fragments) < 5 and fragments == [f.fragment_id for f in theirs.get_fragments()]
    assert {ix["name"]: set(ix["fragment_ids"]) for ix in _inverted(ours)} == {
        ix["name"]: set(ix["fragment_ids"]) for ix in _inverted(theirs)} == {n: set(fragments) for n in EXPECTED_FTS_NAMES}
    assert store.count(COLLECTION) == theirs.count_rows() == 50


def test_a_writer_that_loses_the_create_race_merges_into_the_table(tmp_path: Path,
                                                                   monkeypatch: pytest.MonkeyPatch) -> None:
    first, second = LanceVectorStore(tmp_path), LanceVectorStore(tmp_path)
    first.upsert(COLLECTION, _chunks(0, 10), _vectors(10))
    opened = second._dataset
    calls = []

    def stale_then_real(collection: str):
        calls.append(collection)
        return None if len(calls) <= 2 else opened(collection)  # saw no table (dimension check, then write)

    monkeypatch.setattr(second, "_dataset", stale_then_real)
    second.upsert(COLLECTION, _chunks(5, 10), _vectors(10, seed=1))
    monkeypatch.undo()
    assert len(calls) == 3 and first.count(COLLECTION) == 15
    assert first._dataset(COLLECTION).version == 2


def test_ctrl_c_during_a_write_lets_the_commit_finish_then_interrupts(tmp_path: Path,
                                                                       monkeypatch: pytest.MonkeyPatch) -> None:
    import os
    import signal

    store = LanceVectorStore(tmp_path)
    write = store._write

    def interrupted_write(collection: str, data) -> None:
        os.kill(os.getpid(), signal.SIGINT)  # lands while the Lance call runs
        write(collection, data)

    monkeypatch.setattr(store, "_write", interrupted_write)
    with pytest.raises(KeyboardInterrupt):
        store.upsert(COLLECTION, _chunks(0, 10), _vectors(10))
    assert store.count(COLLECTION) == 10 and store._dataset(COLLECTION).version == 1
    assert signal.getsignal(signal.SIGINT) is signal.default_int_handler


def test_a_second_ctrl_c_interrupts_at_once() -> None:
    import os
    import signal

    from knowtology_cli.stores.lance import deferred_interrupt

    reached = []
    with pytest.raises(KeyboardInterrupt), deferred_interrupt():
        os.kill(os.getpid(), signal.SIGINT)
        reached.append("after first")
        os.kill(os.getpid(), signal.SIGINT)
        reached.append("after second")
    assert reached == ["after first"]


def test_a_held_ctrl_c_says_what_it_waits_for(capsys: pytest.CaptureFixture[str]) -> None:
    import os
    import signal

    from knowtology_cli.stores.lance import deferred_interrupt

    with deferred_interrupt():
        pass
    assert capsys.readouterr().err == ""  # silent when no Ctrl-C came
    with pytest.raises(KeyboardInterrupt), deferred_interrupt():
        os.kill(os.getpid(), signal.SIGINT)
    assert "Ctrl-C again to stop now" in capsys.readouterr().err


def _ranked(store: LanceVectorStore, query: np.ndarray, k: int, within: list[str] | None = None) -> list[tuple[str, float]]:
    return [(h.chunk_id, h.score) for h in store.vector_search(COLLECTION, query, k, within=within)]


def _same_ranking(a: list[tuple[str, float]], b: list[tuple[str, float]]) -> bool:
    """Same ids in the same order, scores equal up to float32 rounding."""
    return [i for i, _ in a] == [i for i, _ in b] and np.allclose([s for _, s in a], [s for _, s in b], atol=1e-5)


def test_vectors_held_in_memory_rank_as_lance_does(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    """A process that answers many queries searches a copy of the vectors in memory; its rankings,
    scores, filters and row-id reads are those of Lance's exact search, and it follows every write."""
    from knowtology_cli.stores import heavy_imports

    store = LanceVectorStore(tmp_path / "lance")
    store.upsert(COLLECTION, _chunks(0, 200), _vectors(200))
    queries = _vectors(5, seed=9) * 3.0  # not unit length: cosine, not dot product
    within = [f"c{i}" for i in range(0, 200, 7)] + ["missing"]

    def both(k: int, sub: list[str] | None = None) -> tuple[list, list]:
        monkeypatch.setattr(heavy_imports, "ONE_SHOT", True)
        lance_side = [_ranked(store, q, k, sub) for q in queries]
        monkeypatch.setattr(heavy_imports, "ONE_SHOT", False)
        return lance_side, [_ranked(store, q, k, sub) for q in queries]

    for k, sub in ((10, None), (300, None), (5, within)):
        lance_side, memory_side = both(k, sub)
        assert all(_same_ranking(m, x) for m, x in zip(memory_side, lance_side))
    assert store._flats[COLLECTION][1] is not None  # the memory path did answer
    top = store.vector_search(COLLECTION, queries[0], 3)
    assert [c.chunk_id for c in store.get(COLLECTION, [h.chunk_id for h in top])] == [h.chunk_id for h in top]

    # a write is seen by the next search: new rows found, deleted rows gone, changed vectors moved
    store.upsert(COLLECTION, _chunks(200, 1), queries[:1] / 3.0)
    assert store.vector_search(COLLECTION, queries[0], 1)[0].chunk_id == "c200"
    store.delete(COLLECTION, ["c200"])
    assert "c200" not in [h.chunk_id for h in store.vector_search(COLLECTION, queries[0], 300)]
    lance_side, memory_side = both(10)
    assert all(_same_ranking(m, x) for m, x in zip(memory_side, lance_side))

    # a table past the memory budget is searched through Lance
    monkeypatch.setattr(ann, "MEMORY_SEARCH_BUDGET", 100 * DIM * 4)
    store.forget(COLLECTION)
    assert _same_ranking(_ranked(store, queries[1], 10), lance_side[1])
    assert store._flats[COLLECTION][1] is None

    # one budget for all collections: a second table that fits alone but not beside the first is not held
    monkeypatch.setattr(ann, "MEMORY_SEARCH_BUDGET", 300 * DIM * 4)
    store.forget(COLLECTION)
    store.upsert("other", _chunks(0, 150), _vectors(150, seed=4))
    store.vector_search(COLLECTION, queries[0], 3)
    store.vector_search("other", queries[0], 3)
    assert store.holds_vectors(COLLECTION) and not store.holds_vectors("other")


def test_one_shot_commands_never_read_all_vectors(docs_dir: Path, tmp_path: Path) -> None:
    """`kt search` answers one query: it searches through Lance; `kt repl` keeps the vectors."""
    code = textwrap.dedent("""
        import sys
        from knowtology_cli.stores import ann
        loads = []
        real = ann.FlatVectors.__init__
        def counted(self, *args, **kwargs):
            loads.append(1)
            real(self, *args, **kwargs)
        ann.FlatVectors.__init__ = counted
        sys.argv = ["kt", *sys.argv[1:]]
        from knowtology_cli.cli.app import main
        try:
            main()
        except SystemExit:
            pass
        print("LOADS:" + str(len(loads)))
    """)
    store = ["--store", str(tmp_path / "store")]
    assert _kt_run(["ingest", str(docs_dir), "--embedder", "hash", *store], tmp_path)[0] == 0

    def loads(args: list[str], stdin: str = "") -> int:
        out = subprocess.run([sys.executable, "-c", code, *args, *store], input=stdin, capture_output=True,
                             text=True, cwd=tmp_path)
        assert out.returncode == 0, out.stderr
        return int(out.stdout.rsplit("LOADS:", 1)[1])

    assert loads(["search", "refund policy"]) == 0
    assert loads(["repl"], stdin="search refund policy\nsearch delivery\n") == 1


def _blas_threads() -> list[int]:
    from threadpoolctl import threadpool_info

    return [i["num_threads"] for i in threadpool_info() if i["user_api"] == "blas"]


def test_memory_search_runs_blas_on_one_thread_and_gives_the_rest_back(monkeypatch: pytest.MonkeyPatch) -> None:
    """OpenBLAS's idle workers spin after each call and take the core a hybrid search's keyword half
    needs: the matrix product runs on one BLAS thread, and the process's own setting comes back
    after, also when searches overlap (the last one out restores it)."""
    from threadpoolctl import threadpool_limits

    # The guard lists the BLAS libraries loaded at its first use (numpy's is, by then); other tests
    # may since have loaded more (scipy's own OpenBLAS), which this test checks too: list them afresh.
    monkeypatch.setattr(ann.one_blas_thread, "_controller", None)
    if not _blas_threads():
        pytest.skip("numpy here uses no BLAS library that threadpoolctl can see")
    seen: list[list[int]] = []

    class Watched(np.ndarray):
        def __matmul__(self, other: object) -> np.ndarray:
            seen.append(_blas_threads())
            return np.asarray(self) @ other

    with threadpool_limits(limits=2, user_api="blas"):  # as on a 2-core machine, whatever this one has
        flat = ann.FlatVectors([f"c{i}" for i in range(50)], np.arange(50), _vectors(50))
        flat.matrix = flat.matrix.view(Watched)
        hits = flat.search(_vectors(1, seed=5)[0], 3)
        assert seen == [[1] * len(seen[0])] and len(hits) == 3
        assert set(_blas_threads()) == {2}
        flat.search(_vectors(1, seed=5)[0], 3, within=["c1", "c2"])
        assert len(seen) == 2 and set(seen[1]) == {1}

        # overlapping searches: the first to finish must not give the threads back under the second
        with ann.one_blas_thread():
            with ann.one_blas_thread():
                assert set(_blas_threads()) == {1}
            assert set(_blas_threads()) == {1}
        assert set(_blas_threads()) == {2}


def test_a_blas_limit_that_fails_never_fails_the_search(monkeypatch: pytest.MonkeyPatch) -> None:
    """The thread limit is a speed setting: when threadpoolctl cannot set it, the search still answers."""
    import threadpoolctl

    class Broken:
        def __init__(self) -> None:
            raise OSError("no BLAS here")

    monkeypatch.setattr(threadpoolctl, "ThreadpoolController", Broken)
    monkeypatch.setattr(ann.one_blas_thread, "_controller", None)
    flat = ann.FlatVectors([f"c{i}" for i in range(20)], np.arange(20), _vectors(20))
    assert len(flat.search(_vectors(1, seed=5)[0], 3)) == 3
    assert len(flat.search(_vectors(1, seed=6)[0], 3)) == 3  # and the guard's count is back to zero
    assert ann.one_blas_thread._users == 0


def test_the_int8_first_pass_keeps_the_exact_ranking_and_scores() -> None:
    """From PREFILTER_MIN_ROWS rows the search scores int8 codes first, then the best 4k exactly: the
    hits and their scores are those of the float32 product over every row (random unit vectors: the
    closest score gaps, the hardest case for the codes)."""
    rng = np.random.default_rng(11)
    dim = 384  # the default embedder's: many dimensions, close scores
    n = ann.PREFILTER_MIN_ROWS + 5000
    matrix = rng.standard_normal((n, dim)).astype(np.float32)
    flat = ann.FlatVectors([f"c{i}" for i in range(n)], np.arange(n), matrix)
    assert flat.codes is not None and flat.nbytes == n * dim * 5
    unit = matrix / np.linalg.norm(matrix, axis=1, keepdims=True)
    for seed in range(5):
        query = rng.standard_normal(dim).astype(np.float32) + 0.5 * unit[seed]
        exact = unit @ (query / np.linalg.norm(query))
        for k in (10, 300):
            hits = flat.search(query, k)
            best = np.argsort(-exact, kind="stable")[:k]
            assert [h[0] for h in hits] == [f"c{i}" for i in best]
            assert np.allclose([h[2] for h in hits], exact[best], atol=1e-5)
    assert not ann.FlatVectors.fits(ann.MEMORY_SEARCH_BUDGET // (dim * 5) + 1, dim)
    assert ann.FlatVectors.fits(ann.MEMORY_SEARCH_BUDGET // (dim * 5), dim)
