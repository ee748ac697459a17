"""`kt build --llm` end to end: real SDKs against the loopback fake server, dry run, faults, kill and resume."""

from __future__ import annotations

import hashlib
import json
import os
import shutil
import signal
import subprocess
import time
from pathlib import Path

import pytest
from conftest import KT, point_llm_at

from knowtology_cli.testing.fake_llm import FakeLLMServer

SENTINEL = "sk-test-SENTINEL-cli-0001"
#: replies of ~20 chunks, so the sample corpus needs about a dozen calls
SMALL_REPLIES = '[profiles."gpt-4o-mini"]\nmax_output_tokens = 2500\n'


@pytest.fixture
def store(sample_store: Path, tmp_path: Path) -> Path:
    target = tmp_path / "store"
    shutil.copytree(sample_store, target)
    return target


def status(cli, store: Path) -> dict:
    result = cli("status", "--store", store, "--json")
    assert result.exit_code == 0, result.output
    return json.loads(result.stdout)["collections"][0]


def point_at(monkeypatch: pytest.MonkeyPatch, srv: FakeLLMServer) -> None:
    point_llm_at(monkeypatch, srv, SENTINEL)


@pytest.mark.parametrize("spec", ["openai:gpt-4o-mini", "anthropic:claude-haiku-4-5"])
def test_build_maps_every_sample_chunk(cli, store, monkeypatch, spec):
    with FakeLLMServer() as srv:
        point_at(monkeypatch, srv)
        result = cli("build", "--builder", "llm", "--llm", spec, "--store", store, "--json")
        calls = srv.tree_calls()
    assert result.exit_code == 0, result.output
    report = json.loads(result.stdout)
    assert report["builder"] == "llm" and report["unmapped"] == 0 and report["mapped"] > 100
    assert report["llm_calls"] == len(calls) >= 2
    assert {c.endpoint for c in calls} == {spec.split(":")[0]}
    assert report["input_tokens"] > 0 and report["output_tokens"] > 0 and report["cost_usd"] > 0
    assert SENTINEL not in result.output
    st = status(cli, store)
    assert st["mapped"] == st["chunks"] == report["mapped"] and st["unmapped"] == 0
    top = json.loads(cli("browse", "--store", store, "--json").stdout)
    assert sum(c["chunk_count"] for c in top["children"]) == report["mapped"]


def test_human_output_ends_with_calls_tokens_and_cost(cli, store, monkeypatch):
    with FakeLLMServer() as srv:
        point_at(monkeypatch, srv)
        result = cli("build", "--builder", "llm", "--llm", "openai:gpt-4o-mini", "--store", store)
    assert result.exit_code == 0, result.output
    assert "0 unmapped" in result.stdout
    assert "calls (0 cached)" in result.stdout and "tokens in" in result.stdout and "$" in result.stdout


def test_dry_run_prints_the_plan_and_calls_nothing(cli, store, monkeypatch):
    with FakeLLMServer() as srv:
        point_at(monkeypatch, srv)
        human = cli("build", "--builder", "llm", "--llm", "openai:gpt-4o-mini", "--store", store, "--dry-run")
        result = cli("build", "--builder", "llm", "--llm", "anthropic:claude-haiku-4-5", "--store", store, "--dry-run", "--json")
        assert srv.calls == []
    assert human.exit_code == 0 and "plan with llm" in human.stdout and "seed" in human.stdout
    report = json.loads(result.stdout)
    assert report["dry_run"] and report["llm_calls"] == report["batches"] >= 1
    assert report["input_tokens"] > 0 and report["cost_usd"] > 0
    assert status(cli, store)["mapped"] == 0


def test_thirty_percent_faults_still_complete(cli, store, monkeypatch):
    (store / "config.toml").write_text(SMALL_REPLIES, encoding="utf-8")
    # three in ten requests fail, by arrival order (rate-drawn faults hang on a hash of each request
    # body, so a change to the prompt or schema would change which ones fail)
    faults = ["rate_limit", None, None, "malformed", None, None, "server_error", None, None, "drop_ids"]
    with FakeLLMServer(faults=faults * 3, retry_after=0.05) as srv:
        point_at(monkeypatch, srv)
        result = cli("build", "--builder", "llm", "--llm", "openai:gpt-4o-mini", "--store", store, "--json", "--concurrency", "1")
        calls = srv.tree_calls(status=None)
    assert result.exit_code == 0, result.output
    report = json.loads(result.stdout)
    assert report["unmapped"] == 0
    happened = [c.fault for c in calls if c.fault]
    assert len(happened) >= 3 and len(set(happened)) >= 2  # faults really happened
    assert status(cli, store)["unmapped"] == 0


def test_unreachable_provider_ends_with_build_error_and_exit_1(cli, store, monkeypatch):
    (store / "config.toml").write_text(SMALL_REPLIES, encoding="utf-8")
    with FakeLLMServer(fail_rate=1.0, fail_kinds=["server_error"], retry_after=0.01) as srv:
        point_at(monkeypatch, srv)
        monkeypatch.setattr("knowtology_cli.llm.base.LLMClient._backoff", lambda self, attempt, retry_after: 0.0)
        result = cli("build", "--builder", "llm", "--llm", "openai:gpt-4o-mini", "--store", store)
    assert result.exit_code == 1
    assert "unmapped" in result.output and "again to resume" in result.output


def _body_key(call) -> str:
    return hashlib.sha256(json.dumps(call.body["messages"], sort_keys=True).encode()).hexdigest()


def test_killed_build_resumes_without_repeating_finished_batches(cli, store, monkeypatch):
    from knowtology_cli.stores.sqlite import SQLiteTreeStore

    (store / "config.toml").write_text(SMALL_REPLIES, encoding="utf-8")
    with FakeLLMServer(latency=0.5) as srv:
        env = {k: v for k, v in os.environ.items() if not k.startswith("KNOWTOLOGY_")}
        env.update(OPENAI_BASE_URL=srv.openai_base_url, OPENAI_API_KEY=SENTINEL, LANCEDB_LOG="error",
                   LANCE_LOG="error")
        proc = subprocess.Popen([KT, "build", "--builder", "llm", "--llm", "openai:gpt-4o-mini", "--store", str(store),
                                 "--concurrency", "1"], env=env, stdout=subprocess.DEVNULL,
                                stderr=subprocess.DEVNULL)
        deadline = time.monotonic() + 60
        while len(srv.tree_calls()) < 3 and time.monotonic() < deadline and proc.poll() is None:
            time.sleep(0.05)
        time.sleep(0.25)  # mid-way through the next call
        proc.send_signal(signal.SIGKILL)
        proc.wait(timeout=10)
        assert proc.returncode == -signal.SIGKILL
        first_run = srv.calls
        tree = SQLiteTreeStore(store / "tree.db")
        mapped_at_kill = {m.chunk_id for m in tree.mappings("default")}
        ok_at_kill = [r for r in tree.calls("default") if r["status"] == "ok"]
        tree.close()
        assert len(ok_at_kill) >= 3 and mapped_at_kill

        point_at(monkeypatch, srv)
        result = cli("build", "--builder", "llm", "--llm", "openai:gpt-4o-mini", "--store", store, "--json")
        second_run = srv.calls[len(first_run):]
    assert result.exit_code == 0, result.output
    report = json.loads(result.stdout)
    assert report["unmapped"] == 0 and status(cli, store)["unmapped"] == 0
    resent = {c for call in second_run for c in call.chunk_ids}
    assert second_run and not resent & mapped_at_kill  # finished batches are never paid for again
    keys = [_body_key(c) for c in first_run + second_run]
    assert len(keys) - len(set(keys)) <= 1  # at most the one call in flight at the kill is sent again
