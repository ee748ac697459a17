"""Concurrency (issue #6.3): writers serialise on the store lock with a clear message and a timeout;
readers run during builds; nothing is ever corrupted."""

from __future__ import annotations

import json
import os
import signal
import subprocess
import sys
import time
from concurrent.futures import ThreadPoolExecutor
from pathlib import Path

import pytest

from benchmarks import stress
from knowtology_cli.kb import KnowledgeBase
from knowtology_cli.locking import StoreLock

pytestmark = pytest.mark.slow


def _popen(*args: str, env: dict[str, str] | None = None) -> subprocess.Popen:
    return subprocess.Popen([*stress.KT, *args], stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True,
                            env=env or stress.kt_env())


@pytest.fixture(scope="module")
def corpus(tmp_path_factory: pytest.TempPathFactory) -> tuple[Path, Path, dict[str, str]]:
    root = tmp_path_factory.mktemp("conc")
    a, b = root / "a" / "docs", root / "b" / "more"
    stress.write_corpus(a, rows=300, docs=3, seed=1)
    stress.write_corpus(b, rows=300, docs=3, seed=2)
    for path in b.rglob("*.jsonl"):  # disjoint ids
        path.write_text(path.read_text().replace('"id": "r-', '"id": "b-'), encoding="utf-8")
    return a, b, {**stress.expected_rows(a), **stress.expected_rows(b)}


def test_two_ingests_into_one_collection_at_once(corpus, tmp_path: Path) -> None:
    a, b, expected = corpus
    store = tmp_path / "store"
    procs = [_popen("ingest", str(p), "--embedder", "hash", "--store", str(store), "--json") for p in (a, b)]
    outs = [p.communicate(timeout=300) for p in procs]
    assert [p.returncode for p in procs] == [0, 0], [err for _, err in outs]
    audit = stress.audit_store(store, expected=expected, keyword="refund", cli_status=False)
    assert audit.problems == [] and audit.duplicate_ids == 0 and audit.rows == len(expected)


def test_a_waiting_writer_says_who_holds_the_lock_then_proceeds(corpus, tmp_path: Path) -> None:
    a, _, _ = corpus
    store = tmp_path / "store"
    lock = StoreLock(store)
    lock.acquire()
    try:
        proc = _popen("ingest", str(a), "--embedder", "hash", "--store", str(store))
        time.sleep(4)
        assert proc.poll() is None  # still waiting
    finally:
        lock.release()
    _, err = proc.communicate(timeout=300)
    assert proc.returncode == 0, err
    assert f"store is busy (locked by pid {os.getpid()}), waiting up to" in err


def test_lock_timeout_is_a_clear_error(corpus, tmp_path: Path) -> None:
    a, _, _ = corpus
    store = tmp_path / "store"
    with StoreLock(store):
        done = subprocess.run([*stress.KT, "ingest", str(a), "--embedder", "hash", "--store", str(store)],
                              capture_output=True, text=True, env=stress.kt_env({"KNOWTOLOGY_LOCK_TIMEOUT": "1"}),
                              timeout=120)
    assert done.returncode == 1
    assert f"Error: store {store} is locked by pid {os.getpid()}" in done.stderr
    assert "KNOWTOLOGY_LOCK_TIMEOUT" in done.stderr
    assert not (store / "lance").exists() or stress.audit_store(store, cli_status=False).rows == 0


def test_a_killed_lock_holder_never_blocks_the_next_writer(corpus, tmp_path: Path) -> None:
    a = corpus[0]
    expected_a = stress.expected_rows(a)
    store = tmp_path / "store"
    holder = subprocess.Popen([sys.executable, "-c", "import sys, time\nfrom knowtology_cli.locking import StoreLock\n"
                               "StoreLock(sys.argv[1]).acquire(); print('held', flush=True); time.sleep(60)",
                               str(store)], stdout=subprocess.PIPE, text=True)
    assert holder.stdout is not None and holder.stdout.readline().strip() == "held"
    os.kill(holder.pid, signal.SIGKILL)
    holder.wait()
    started = time.monotonic()
    done = subprocess.run([*stress.KT, "ingest", str(a), "--embedder", "hash", "--store", str(store)],
                          capture_output=True, text=True, env=stress.kt_env({"KNOWTOLOGY_LOCK_TIMEOUT": "5"}), timeout=120)
    assert done.returncode == 0, done.stderr
    assert "busy" not in done.stderr and time.monotonic() - started < 60
    assert stress.audit_store(store, expected=expected_a, cli_status=False).problems == []


def test_build_while_search_and_read_run(corpus, tmp_path: Path) -> None:
    a, _, _ = corpus
    store = tmp_path / "store"
    expected = stress.expected_rows(a)
    kb = KnowledgeBase.open(store)
    kb.ingest([str(a)], embedder="hash")
    kb.build(builder="cluster")
    kb.close()
    readers = [subprocess.Popen([sys.executable, "-c", stress.READER, str(store), "15", json.dumps(stress.WORDS)],
                                stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True, env=stress.kt_env())
               for _ in range(2)]
    time.sleep(2)
    builds = []
    deadline = time.monotonic() + 10
    while time.monotonic() < deadline:
        kb = KnowledgeBase.open(store)
        builds.append(kb.build(builder="cluster", rebuild=len(builds) % 2 == 0))
        kb.close()
    for reader in readers:
        out, err = reader.communicate(timeout=120)
        stats = json.loads(out.strip().splitlines()[-1])
        assert stats["errors"] == 0 and stats["ops"] > 0, (stats, err[-2000:])
    assert builds and all(b.unmapped == 0 for b in builds)
    audit = stress.audit_store(store, expected=expected, complete_tree=True, cli_status=False)
    assert audit.problems == []


def test_ingest_and_build_at_once_serialise(corpus, tmp_path: Path) -> None:
    a, b, expected = corpus
    store = tmp_path / "store"
    kb = KnowledgeBase.open(store)
    kb.ingest([str(a)], embedder="hash")
    kb.close()
    procs = [_popen("ingest", str(b), "--store", str(store)), _popen("build", "--builder", "cluster", "--store", str(store))]
    outs = [p.communicate(timeout=300) for p in procs]
    assert [p.returncode for p in procs] == [0, 0], [err for _, err in outs]
    audit = stress.audit_store(store, expected=expected, cli_status=False)
    assert audit.problems == []
    kb = KnowledgeBase.open(store)
    kb.build(builder="cluster")
    assert stress.audit_store(store, expected=expected, complete_tree=True, cli_status=False).problems == []


def test_concurrent_session_writes_lose_nothing(built_store: Path) -> None:
    kb = KnowledgeBase.open(built_store)
    ids = [m.chunk_id for m in kb.tree.mappings("default")]
    assert len(ids) >= 4

    def reader(n: int) -> None:
        mine = KnowledgeBase.open(built_store)
        for chunk_id in ids[n::4]:
            mine.read([chunk_id], session="shared")

    with ThreadPoolExecutor(4) as pool:
        list(pool.map(reader, range(4)))
    procs = [subprocess.Popen([*stress.KT, "read", *ids, "--session", "shared2", "--store", str(built_store)],
                              stdout=subprocess.DEVNULL, stderr=subprocess.PIPE, text=True, env=stress.kt_env())
             for _ in range(3)]
    assert all(p.wait(timeout=120) == 0 for p in procs)
    assert sorted(kb.read_history(session="shared")) == sorted(ids)
    assert sorted(kb.read_history(session="shared2")) == sorted(ids)
    for path in (built_store / "sessions").glob("*.json"):
        json.loads(path.read_text())  # every file whole
    assert not list((built_store / "sessions").glob("*.tmp"))
