"""Crash safety (issue #6.2, #6.4): SIGKILL / SIGINT of real ``kt`` processes, and injected failures.

The full harness is ``python -m benchmarks.stress`` (``make stress``); here a few kill
trials per command keep the invariants guarded in the normal suite, and in-process fault injection
hits the narrow windows (between batches, before the index refresh, inside a prune) every time.
"""

from __future__ import annotations

import random
import signal
from pathlib import Path

import numpy as np
import pytest

from benchmarks import stress
from knowtology_cli.embedders.hash import HashEmbedder
from knowtology_cli.errors import EmbeddingError
from knowtology_cli.kb import KnowledgeBase

pytestmark = pytest.mark.slow


@pytest.fixture(scope="module")
def workspace(tmp_path_factory: pytest.TempPathFactory) -> stress.Workspace:
    return stress.prepare(tmp_path_factory.mktemp("crash"), rows=240, docs=4, say=lambda _: None)


@pytest.mark.parametrize("scenario", ["ingest", "build", "rm"])
def test_sigkill_trials_leave_a_consistent_store_and_rerun_completes(workspace, scenario: str) -> None:
    trials = stress.run_crash_trials(workspace, scenario, 2, random.Random(7), say=lambda _: None)
    assert [t.problems for t in trials] == [[], []]
    assert stress.summarize(trials)["rows_lost"] == stress.summarize(trials)["duplicate_ids"] == 0


def test_sigint_exits_130_with_a_message(workspace) -> None:
    store = workspace.fresh_store("sigint")
    # Ctrl-C as soon as the store exists: the command is then past start-up, in the middle of its work
    outcome = stress.run_and_kill(["ingest", str(workspace.v1), "--embedder", "hash", "--store", str(store)], 60,
                                  sig=signal.SIGINT, when=lambda: (store / "tree.db").exists())
    assert outcome.killed
    assert outcome.returncode in (130, -signal.SIGINT), outcome.stderr
    assert "Interrupted" in outcome.stderr and "Traceback" not in outcome.stderr
    audit = stress.audit_store(store, versions=[workspace.expected_v1])
    assert audit.problems == [] and audit.duplicate_ids == 0


# in-process fault injection -----------------------------------------------------------------------
class FlakyEmbedder(HashEmbedder):
    """A hash embedder whose provider dies on the ``fail_on``-th batch call."""

    def __init__(self, fail_on: int) -> None:
        super().__init__(64)
        self.calls, self.fail_on = 0, fail_on

    def embed_batch(self, texts: list[str], kind: str = "document") -> np.ndarray:
        self.calls += 1
        if self.calls == self.fail_on:
            raise EmbeddingError("provider returned 500 (injected)")
        return super().embed_batch(texts, kind)


def _kb(store: Path, **parts) -> KnowledgeBase:
    return KnowledgeBase.open(store, **parts)


def test_embedding_provider_failing_mid_ingest_leaves_no_half_batch(workspace, tmp_path: Path,
                                                                   monkeypatch: pytest.MonkeyPatch) -> None:
    import knowtology_cli.kb as kb_module

    monkeypatch.setattr(kb_module, "UPSERT_BATCH", 50)
    monkeypatch.setattr(kb_module, "FIRST_BATCH", 50)
    store = tmp_path / "store"
    flaky = FlakyEmbedder(fail_on=3)
    with pytest.raises(EmbeddingError):
        _kb(store, embedder=flaky).ingest([str(workspace.v1)], embedder="hash")
    audit = stress.audit_store(store, versions=[workspace.expected_v1], cli_status=False)
    assert audit.problems == []
    assert audit.rows % 50 == 0 and 0 < audit.rows < len(workspace.expected_v1)  # whole batches only
    # what the stopped run stored is found by keyword too, and status says the run did not finish
    kb = _kb(store)
    stored = {c.chunk_id for c in kb.vectors.get("default", list(kb.vectors.fingerprints("default")))}
    hits = kb.grep("refund", k=500).hits
    assert hits and {h.chunk_id for h in hits} <= stored
    assert len(hits) == sum(1 for c in kb.vectors.get("default", sorted(stored)) if "refund" in c.text.lower())
    row = kb.status().collections[0]
    assert row.state == "interrupted" and f"run kt ingest {workspace.v1} again" in row.advice
    assert kb.sources().interrupted
    report = _kb(store).ingest([str(workspace.v1)])
    assert report.unchanged == audit.rows and report.embedded == len(workspace.expected_v1) - audit.rows
    final = stress.audit_store(store, expected=workspace.expected_v1, keyword="refund", cli_status=False)
    assert final.problems == [] and final.rows_lost == 0
    assert _kb(store).status().collections[0].state != "interrupted" and not _kb(store).sources().interrupted


def test_batches_start_small_so_an_early_stop_keeps_what_was_embedded(workspace, tmp_path: Path) -> None:
    from knowtology_cli.kb import FIRST_BATCH

    store = tmp_path / "store"
    with pytest.raises(EmbeddingError):  # the provider dies on the second batch
        _kb(store, embedder=FlakyEmbedder(fail_on=2)).ingest([str(workspace.v1)], embedder="hash")
    assert _kb(store).status().collections[0].chunks == FIRST_BATCH < len(workspace.expected_v1)


def test_a_first_ingest_stopped_before_its_first_batch_says_nothing_was_stored(workspace, tmp_path: Path) -> None:
    store = tmp_path / "store"
    with pytest.raises(EmbeddingError):
        _kb(store, embedder=FlakyEmbedder(fail_on=1)).ingest([str(workspace.v1)], embedder="hash")
    row = _kb(store).status().collections[0]
    assert row.chunks == 0 and row.state == "interrupted"
    assert row.advice == f"an ingest was stopped before it finished (nothing was stored yet): run kt ingest {workspace.v1} again"


def test_killed_before_the_index_refresh_rerun_restores_keyword_search(workspace, tmp_path: Path,
                                                                       monkeypatch: pytest.MonkeyPatch) -> None:
    from knowtology_cli.stores.lance import LanceVectorStore

    store = tmp_path / "store"

    def killed(self, collection: str) -> None:
        raise KeyboardInterrupt

    with monkeypatch.context() as m:
        m.setattr(LanceVectorStore, "refresh_indexes", killed)
        with pytest.raises(KeyboardInterrupt):
            _kb(store).ingest([str(workspace.v1)], embedder="hash")
    report = _kb(store).ingest([str(workspace.v1)])
    assert report.unchanged > 0 and report.embedded + report.unchanged == len(workspace.expected_v1)
    final = stress.audit_store(store, expected=workspace.expected_v1, keyword="refund", cli_status=False)
    assert final.problems == []


def test_killed_inside_a_prune_is_finished_by_the_rerun(workspace, tmp_path: Path,
                                                        monkeypatch: pytest.MonkeyPatch) -> None:
    from knowtology_cli.stores.lance import LanceVectorStore

    store = workspace.fresh_store("prune-window", "v1-built")

    def killed(self, collection, chunk_ids) -> None:
        raise KeyboardInterrupt

    with monkeypatch.context() as m:
        m.setattr(LanceVectorStore, "delete", killed)
        with pytest.raises(KeyboardInterrupt):
            _kb(store).ingest([str(workspace.v2)], prune=True, replace=True)
    mid = stress.audit_store(store, versions=[workspace.expected_v1, workspace.expected_v2], cli_status=False)
    assert mid.problems == []  # mappings went first: no mapping points at a missing chunk
    kb = _kb(store)
    kb.ingest([str(workspace.v2)], prune=True, replace=True)
    kb.build(builder="cluster")
    final = stress.audit_store(store, expected=workspace.expected_v2, complete_tree=True, cli_status=False)
    assert final.problems == []


def test_failed_tree_write_rolls_back_whole(workspace, monkeypatch: pytest.MonkeyPatch) -> None:
    import sqlite3

    store = workspace.fresh_store("tree-rollback", "v1-built")
    before = stress.audit_store(store, cli_status=False)
    mappings_before = len(_kb(store).tree.mappings("default"))
    real_recount = __import__("knowtology_cli.stores.sqlite", fromlist=["_recount"])._recount

    def dying_recount(conn: sqlite3.Connection, collection: str) -> None:
        real_recount(conn, collection)
        raise KeyboardInterrupt  # killed after every row was written, before COMMIT

    monkeypatch.setattr("knowtology_cli.stores.sqlite._recount", dying_recount)
    with pytest.raises(KeyboardInterrupt):
        _kb(store).build(builder="cluster", rebuild=True)
    monkeypatch.undo()
    after = stress.audit_store(store, cli_status=False)
    assert after.problems == [] and after.unmapped == before.unmapped == 0
    assert len(_kb(store).tree.mappings("default")) == mappings_before


# flaky LLM providers (issue #6.4) ------------------------------------------------------------------
ALL_FAULTS = ["rate_limit", "server_error", "malformed", "truncated", "drop_ids", "unknown_ids", "deep_paths"]


@pytest.mark.parametrize("provider", ["openai:gpt-4o-mini", "anthropic:claude-3-5-haiku-latest"])
def test_llm_failing_30_percent_still_yields_a_complete_tree(workspace, provider: str) -> None:
    from knowtology_cli.testing.fake_llm import FakeLLMServer

    store = workspace.fresh_store(f"flaky-{provider.split(':')[0]}", "v1")
    with FakeLLMServer(fail_rate=0.3, fail_kinds=ALL_FAULTS, seed=5, retry_after=0.01) as fake:
        env = stress.kt_env({"OPENAI_BASE_URL": fake.openai_base_url, "ANTHROPIC_BASE_URL": fake.anthropic_base_url,
                             "OPENAI_API_KEY": "sk-test", "ANTHROPIC_API_KEY": "sk-ant-test"})
        done = stress.run_kt(["build", "--builder", "llm", "--llm", provider, "--store", str(store), "--json"], env=env)
        faults = sum(1 for c in fake.calls if c.fault)
    assert done.returncode == 0, done.stderr[-2000:]
    assert faults > 0
    audit = stress.audit_store(store, expected=workspace.expected_v1, complete_tree=True, cli_status=False)
    assert audit.problems == [] and stress.llm_repeats(store) == 0


def test_llm_timeouts_are_retried_to_a_complete_tree(workspace) -> None:
    from knowtology_cli.llm import get_llm
    from knowtology_cli.testing.fake_llm import FakeLLMServer

    store = workspace.fresh_store("flaky-hang", "v1")
    with FakeLLMServer(faults=["hang", "rate_limit", "hang", "malformed"], hang_seconds=5, retry_after=0.01) as fake:
        client = get_llm("openai:gpt-4o-mini", api_key="sk-test", base_url=fake.openai_base_url, timeout=1.0,
                         max_retries=8)
        report = _kb(store).build(builder="llm", llm=client)
        hangs = sum(1 for c in fake.calls if c.fault == "hang")
    assert report.unmapped == 0 and hangs > 0
    assert stress.audit_store(store, expected=workspace.expected_v1, complete_tree=True, cli_status=False).problems == []


def test_rebuild_whose_calls_all_fail_exits_1(workspace) -> None:
    from knowtology_cli.testing.fake_llm import FakeLLMServer

    store = workspace.fresh_store("all-fail", "v1-built")
    with FakeLLMServer(fail_rate=1.0, fail_kinds=["server_error"], retry_after=0.01) as fake:
        env = stress.kt_env({"OPENAI_BASE_URL": fake.openai_base_url, "OPENAI_API_KEY": "sk-test"})
        done = stress.run_kt(["build", "--builder", "llm", "--llm", "openai:gpt-4o-mini", "--rebuild",
                              "--store", str(store)], env=env)
    assert done.returncode == 1, done.stdout + done.stderr
    assert stress.audit_store(store, cli_status=False).problems == []  # the old tree is intact


def test_rebuild_with_a_rejected_key_exits_1(workspace) -> None:
    from knowtology_cli.testing.fake_llm import FakeLLMServer

    store = workspace.fresh_store("all-401", "v1-built")
    with FakeLLMServer(api_key="sk-right") as fake:
        env = stress.kt_env({"OPENAI_BASE_URL": fake.openai_base_url, "OPENAI_API_KEY": "sk-wrong"})
        done = stress.run_kt(["build", "--builder", "llm", "--llm", "openai:gpt-4o-mini", "--rebuild",
                              "--store", str(store)], env=env)
    assert done.returncode == 1, done.stdout + done.stderr
