"""`kt build` through the `kt` executable against the fake server acting like a real one.

Faults and limits the local model showed (cut replies, context overflow, failures, junk names, a
server that answers one request at a time) — and the call log must account for every token the
server reported.
"""

from __future__ import annotations

import json
import os
import re
import shutil
import subprocess
import threading
import time
from pathlib import Path

import pytest
from conftest import KT

from knowtology_cli.testing.fake_llm import FakeLLMServer, keyword_brain

SMALL_REPLIES = '[profiles."gpt-4o-mini"]\nmax_output_tokens = 2500\n'


@pytest.fixture
def store(sample_store: Path, tmp_path: Path) -> Path:
    target = tmp_path / "store"
    shutil.copytree(sample_store, target)
    return target


def kt(store: Path, srv: FakeLLMServer, *args: str, timeout: float = 600) -> subprocess.CompletedProcess:
    env = {k: v for k, v in os.environ.items() if not k.startswith(("KNOWTOLOGY_", "OPENAI_", "ANTHROPIC_"))}
    env.update(OPENAI_BASE_URL=srv.openai_base_url, OPENAI_API_KEY="sk-test-e2e", LANCEDB_LOG="error",
               LANCE_LOG="error")
    return subprocess.run([KT, *args, "--store", str(store)], capture_output=True, text=True, env=env,
                          timeout=timeout)


def logged(store: Path) -> list[dict]:
    from knowtology_cli.stores.sqlite import SQLiteTreeStore

    tree = SQLiteTreeStore(store / "tree.db")
    try:
        return tree.calls("default")
    finally:
        tree.close()


def test_hybrid_by_default_maps_everything_and_asks_only_for_names(store):
    with FakeLLMServer() as srv:
        done = kt(store, srv, "build", "--llm", "openai:some-local-model", "--json")
        naming, tree = srv.naming_calls(status=None), srv.tree_calls(status=None)
    assert done.returncode == 0, done.stderr
    report = json.loads(done.stdout)
    assert report["builder"] == "hybrid" and report["unmapped"] == 0 and report["mapped"] > 200
    assert tree == [] and report["llm_calls"] == len(naming) >= 2
    origins = report["name_origins"]
    assert sum(origins.values()) == report["nodes"] and origins["llm"] > report["nodes"] / 2
    assert "limits: context 8,192 tokens (default profile" in done.stderr
    with FakeLLMServer() as srv:
        human = kt(store, srv, "build", "--llm", "openai:some-local-model")
    assert human.returncode == 0 and "tree is up to date" in human.stdout and srv.calls == []


@pytest.mark.parametrize("builder", ["llm", "hybrid"])
def test_the_call_log_holds_every_token_the_server_reported(store, builder):
    (store / "config.toml").write_text(SMALL_REPLIES, encoding="utf-8")
    faults = ["truncated", "overflow", "server_error", None, "malformed", "truncated", None, "server_error"]
    with FakeLLMServer(faults=faults) as srv:
        done = kt(store, srv, "build", "--builder", builder, "--llm", "openai:gpt-4o-mini", "--json")
        reported = srv.reported_usage()
        statuses = [c.status for c in srv.calls]
    assert done.returncode == 0, done.stderr
    report = json.loads(done.stdout)
    rows = logged(store)
    assert {400, 500} <= set(statuses) and report["unmapped"] == 0
    assert any(r["status"] in ("truncated", "overflow") for r in rows)
    assert sum(r["input_tokens"] for r in rows) == reported[0] == report["input_tokens"]
    assert sum(r["output_tokens"] for r in rows) == reported[1] == report["output_tokens"]
    assert report["estimated_calls"] == 0


def test_a_server_without_usage_is_estimated_with_the_tokenizer_and_marked(store):
    with FakeLLMServer(faults=["no_usage", "no_usage"]) as srv:
        done = kt(store, srv, "build", "--llm", "openai:some-local-model", "--json")
    report = json.loads(done.stdout)
    rows = logged(store)
    estimated = [r for r in rows if r["usage_estimated"]]
    assert len(estimated) == 2 == report["estimated_calls"]
    assert all(r["input_tokens"] > 100 and r["output_tokens"] > 10 for r in estimated)


def planned_calls(report: dict) -> int:
    return int(re.search(r"^plan: \d+ chunks in (\d+) calls", report["notes"][0]).group(1))


def test_published_limits_are_used_and_an_overflow_replans_the_batch(store):
    with FakeLLMServer() as srv:
        default = json.loads(kt(store, srv, "build", "--builder", "llm", "--llm", "openai:some-local-model",
                                "--dry-run", "--json").stdout)
    with FakeLLMServer(context_window=4000, publish_limits=True) as srv:
        plan = json.loads(kt(store, srv, "build", "--builder", "llm", "--llm", "openai:some-local-model",
                             "--dry-run", "--json").stdout)
        assert srv.calls == []  # a dry run asks the server for its limits, and calls the model never
    assert "limits: context 4,000 tokens (llama.cpp /props)" in " ".join(plan["notes"])
    assert planned_calls(plan) > planned_calls(default)  # smaller batches for the smaller context
    with FakeLLMServer(context_window=4000) as srv:  # the same server, not publishing: learnt from the 400
        done = kt(store, srv, "build", "--builder", "llm", "--llm", "openai:some-local-model", "--json")
        statuses = [c.status for c in srv.calls]
    assert done.returncode == 0, done.stderr
    notes = " ".join(json.loads(done.stdout)["notes"])
    assert statuses[0] == 400 and "the server says the context is 4,000 tokens" in notes
    assert statuses.count(400) < len(statuses) / 4  # re-planned once, not split call after call


def test_a_chunk_that_cannot_fit_fails_naming_the_override(store):
    with FakeLLMServer(context_window=300) as srv:  # nothing fits
        done = kt(store, srv, "build", "--builder", "llm", "--llm", "openai:some-local-model", "--context-window",
                  "8192")
    assert done.returncode == 1
    assert "Error: build incomplete" in done.stderr and "--context-window" in done.stderr
    assert "Traceback" not in done.stderr


def test_a_local_server_gets_one_request_at_a_time_and_a_stop_sends_nothing_more(store):
    active, peak, lock = [0], [0], threading.Lock()

    def slow_brain(chunks, tree):
        with lock:
            active[0] += 1
            peak[0] = max(peak[0], active[0])
        time.sleep(0.2)
        with lock:
            active[0] -= 1
        return keyword_brain(chunks, tree)

    (store / "config.toml").write_text(SMALL_REPLIES, encoding="utf-8")
    with FakeLLMServer(brain=slow_brain) as srv:  # loopback: default concurrency 1
        done = kt(store, srv, "build", "--builder", "llm", "--llm", "openai:gpt-4o-mini", "--json")
    assert done.returncode == 0, done.stderr
    assert peak[0] == 1 and len(srv.tree_calls()) >= 4
    # three failures in a row stop the build: queued batches are not sent, calls in flight stop retrying
    with FakeLLMServer(faults=[None] + ["server_error"] * 200) as srv:
        done = kt(store, srv, "build", "--builder", "llm", "--llm", "openai:gpt-4o-mini", "--rebuild", "--no-cache",
                  "--concurrency", "4")
        prompts = {json.dumps(c.body["messages"]) for c in srv.calls}
        sent = len(srv.calls)
    assert done.returncode == 1 and "stopped after 3 failed calls in a row" in done.stderr
    # the CREATE call, the 4 in flight, and one more for each of the first two failures; nothing after the stop
    assert len(prompts) <= 1 + 4 + 2 and sent <= len(prompts) * 5
    not_sent = int(re.search(r"(\d+) chunks not sent", done.stdout + done.stderr).group(1))
    assert not_sent > 0


def test_junk_replies_end_with_offline_names_and_no_junk_in_the_tree(store):
    with FakeLLMServer(fail_rate=1.0, fail_kinds=["junk"]) as srv:
        done = kt(store, srv, "build", "--llm", "openai:some-local-model", "--json")
    assert done.returncode == 0, done.stderr
    report = json.loads(done.stdout)
    assert report["unmapped"] == 0 and report["name_origins"] == {"offline": report["nodes"]}
    browse = json.loads(subprocess.run([KT, "browse", "--store", str(store), "--depth", "3", "--json"],
                                       capture_output=True, text=True, timeout=120).stdout)
    names = [c["name"] for c in browse["children"]]
    assert names and not any(n in ("12", "notes.md", "---", "#3") for n in names)
