"""`kt build --no-cache` and `--timeout` / KNOWTOLOGY_LLM_TIMEOUT end to end: real SDKs against the loopback fake."""

from __future__ import annotations

import json
import shutil
from pathlib import Path

import pytest
from conftest import point_llm_at

from knowtology_cli.config import load_settings
from knowtology_cli.stores.sqlite import SQLiteTreeStore
from knowtology_cli.testing.fake_llm import FakeLLMServer

SENTINEL = "sk-SENTINEL-5d1e0b7c9a2f4e68-build-options"
#: replies of ~20 chunks, so the sample corpus needs about a dozen calls
SMALL_REPLIES = '[profiles."gpt-4o-mini"]\nmax_output_tokens = 2500\n'
SPEC = "openai:gpt-4o-mini"


@pytest.fixture
def store(sample_store: Path, tmp_path: Path) -> Path:
    target = tmp_path / "store"
    shutil.copytree(sample_store, target)
    return target



def point_at(monkeypatch: pytest.MonkeyPatch, srv: FakeLLMServer) -> None:
    point_llm_at(monkeypatch, srv, SENTINEL)


def status(cli, store: Path) -> dict:
    result = cli("status", "--store", store, "--json")
    assert result.exit_code == 0, result.output
    return json.loads(result.stdout)


def logged_calls(store: Path) -> list[dict]:
    tree = SQLiteTreeStore(store / "tree.db")
    try:
        return tree.calls("default")
    finally:
        tree.close()


def build(cli, store: Path, *args: str):
    result = cli("build", "--builder", "llm", "--llm", SPEC, "--store", store, "--concurrency", "1", *args)
    assert SENTINEL not in result.output and SENTINEL[3:] not in result.output
    return result


def error_lines(result) -> list[str]:
    return [line for line in result.stderr.splitlines() if line.startswith("Error:")]


# ----------------------------------------------------------------------------- --no-cache
def test_no_cache_sends_every_prompt_again(cli, store, monkeypatch):
    (store / "config.toml").write_text(SMALL_REPLIES, encoding="utf-8")
    with FakeLLMServer() as srv:
        point_at(monkeypatch, srv)
        first = build(cli, store, "--json")
        n = len(srv.tree_calls())
        assert first.exit_code == 0, first.output
        assert json.loads(first.stdout)["llm_calls"] == n > 1
        logged = len(logged_calls(store))

        cached = build(cli, store, "--rebuild", "--json")  # identical prompts: served from the call log
        assert cached.exit_code == 0, cached.output
        assert len(srv.tree_calls()) == n
        report = json.loads(cached.stdout)
        assert report["llm_calls"] == 0 and report["cached_calls"] == n and report["unmapped"] == 0
        assert len(logged_calls(store)) == logged

        fresh = build(cli, store, "--rebuild", "--no-cache", "--json")
        assert fresh.exit_code == 0, fresh.output
        assert len(srv.tree_calls()) == 2 * n  # every prompt reached the server again
    report = json.loads(fresh.stdout)
    assert report["llm_calls"] == n and report["cached_calls"] == 0 and report["input_tokens"] > 0
    assert report["unmapped"] == 0 and report["mapped"] > 100
    assert any("not consulted" in note for note in report["notes"])
    assert len(logged_calls(store)) == logged + n  # the new calls are logged too
    st = status(cli, store)["collections"][0]
    assert st["mapped"] == st["chunks"] and st["unmapped"] == 0 and st["builder"] == "llm"


def test_no_cache_dry_run_calls_nothing(cli, store, monkeypatch):
    with FakeLLMServer() as srv:
        point_at(monkeypatch, srv)
        result = build(cli, store, "--dry-run", "--no-cache", "--json")
        assert srv.calls == []
    assert result.exit_code == 0, result.output
    report = json.loads(result.stdout)
    assert report["dry_run"] and report["batches"] >= 1
    assert logged_calls(store) == []


def test_default_build_without_no_cache_still_uses_the_log(cli, store, monkeypatch):
    with FakeLLMServer() as srv:
        point_at(monkeypatch, srv)
        assert build(cli, store).exit_code == 0
        n = len(srv.tree_calls())
        again = build(cli, store, "--rebuild")
        assert len(srv.tree_calls()) == n
    assert again.exit_code == 0 and f"0 calls ({n} cached)" in again.stdout


# ----------------------------------------------------------------------------- --timeout
def _fails_on_timeout(cli, store, srv, *args: str, seconds: str = "0.3"):
    before = status(cli, store)
    result = build(cli, store, *args)
    assert result.exit_code == 1, result.output
    assert "Traceback" not in result.output
    [line] = error_lines(result)
    assert f"timed out after {seconds} s" in line and "gave up after 5 attempts" in line
    assert "--timeout" in result.stderr  # the hint says what to do
    assert status(cli, store) == before  # nothing applied, builder unchanged
    attempts = srv.tree_calls(status=None)
    assert len(attempts) >= 5 and all(c.chunk_ids for c in attempts)
    assert {r["status"] for r in logged_calls(store)} == {"error"}


def test_timeout_flag_fails_after_retries_then_a_larger_one_resumes(cli, store, monkeypatch, no_backoff):
    with FakeLLMServer(latency=1.0) as srv:
        point_at(monkeypatch, srv)
        _fails_on_timeout(cli, store, srv, "--timeout", "0.3")
        result = build(cli, store, "--timeout", "10", "--json")
    assert result.exit_code == 0, result.output
    report = json.loads(result.stdout)
    assert report["unmapped"] == 0 and report["llm_calls"] >= 1
    st = status(cli, store)["collections"][0]
    assert st["mapped"] == st["chunks"] and st["builder"] == "llm"


def test_timeout_from_env_and_the_flag_wins(cli, store, monkeypatch, no_backoff):
    with FakeLLMServer(latency=1.0) as srv:
        point_at(monkeypatch, srv)
        monkeypatch.setenv("KNOWTOLOGY_LLM_TIMEOUT", "0.3")
        _fails_on_timeout(cli, store, srv)
        result = build(cli, store, "--timeout", "10", "--json")  # flag > env
    assert result.exit_code == 0, result.output
    assert json.loads(result.stdout)["unmapped"] == 0


def test_timeout_from_env_completes_when_large_enough(cli, store, monkeypatch):
    with FakeLLMServer(latency=0.2) as srv:
        point_at(monkeypatch, srv)
        monkeypatch.setenv("KNOWTOLOGY_LLM_TIMEOUT", "10")
        result = build(cli, store, "--json")
        assert srv.tree_calls(status=None) == srv.tree_calls()  # every attempt answered
    assert result.exit_code == 0, result.output
    assert json.loads(result.stdout)["unmapped"] == 0


def test_timed_out_no_cache_rebuild_keeps_the_previous_tree(cli, store, monkeypatch, no_backoff):
    with FakeLLMServer() as srv:
        point_at(monkeypatch, srv)
        assert build(cli, store).exit_code == 0
        before = status(cli, store)
        tree_before = json.loads(cli("browse", "--store", store, "--depth", "3", "--json").stdout)
        srv.latency = 1.0
        cached = build(cli, store, "--rebuild", "--timeout", "0.3")  # served from the log: nothing to time out
        assert cached.exit_code == 0, cached.output
        calls = len(srv.calls)
        result = build(cli, store, "--rebuild", "--no-cache", "--timeout", "0.3")
        assert len(srv.calls) > calls
    assert result.exit_code == 1, result.output
    [line] = error_lines(result)
    assert "previous tree is kept" in line and "timed out after 0.3 s" in line
    assert "--timeout" in result.stderr
    assert status(cli, store) == before
    assert json.loads(cli("browse", "--store", store, "--depth", "3", "--json").stdout) == tree_before


@pytest.mark.parametrize("value", ["0", "-1", "abc", "nan", ""])
def test_bad_timeout_flag_is_a_one_line_error(cli, store, monkeypatch, value):
    with FakeLLMServer() as srv:
        point_at(monkeypatch, srv)
        before = status(cli, store)
        result = build(cli, store, f"--timeout={value}")
        assert srv.calls == []
    assert result.exit_code == 1, result.output
    [line] = error_lines(result)
    assert f"invalid LLM timeout {value!r} (--timeout)" in line
    assert "Traceback" not in result.output
    assert status(cli, store) == before


@pytest.mark.parametrize("value", ["0", "-1", "abc"])
def test_bad_timeout_env_is_a_one_line_error(cli, store, monkeypatch, value):
    with FakeLLMServer() as srv:
        point_at(monkeypatch, srv)
        monkeypatch.setenv("KNOWTOLOGY_LLM_TIMEOUT", value)
        result = build(cli, store, "--dry-run")
        assert srv.calls == []
    assert result.exit_code == 1, result.output
    [line] = error_lines(result)
    assert f"invalid LLM timeout {value!r} (KNOWTOLOGY_LLM_TIMEOUT)" in line


def test_timeout_from_config_toml_and_env_wins(tmp_path):
    store = tmp_path / "s"
    store.mkdir()
    (store / "config.toml").write_text("llm_timeout = 45\n", encoding="utf-8")
    assert load_settings(store=store, env={}).llm_timeout == 45.0
    assert load_settings(store=store, env={"KNOWTOLOGY_LLM_TIMEOUT": "7.5"}).llm_timeout == 7.5
    assert load_settings(store=tmp_path / "none", env={}).llm_timeout is None  # the client's default (600 s)
    (store / "config.toml").write_text("llm_timeout = -3\n", encoding="utf-8")
    with pytest.raises(Exception, match=r"invalid LLM timeout -3 \(llm_timeout in config.toml\)"):
        load_settings(store=store, env={})


def test_default_timeout_is_the_clients(cli, store, monkeypatch):
    from knowtology_cli.kb import llm_from_settings
    from knowtology_cli.llm.base import DEFAULT_TIMEOUT

    settings = load_settings(store=store, env={"OPENAI_API_KEY": SENTINEL})
    assert llm_from_settings(SPEC, settings).timeout == DEFAULT_TIMEOUT == 600.0
    settings = load_settings(store=store, env={"OPENAI_API_KEY": SENTINEL, "KNOWTOLOGY_LLM_TIMEOUT": "12"})
    assert llm_from_settings(SPEC, settings).timeout == 12.0
    assert llm_from_settings(SPEC, settings, timeout=3).timeout == 3.0


# ----------------------------------------------------------------------------- kt ask
def test_ask_honours_the_env_timeout(cli, store, monkeypatch, no_backoff):
    with FakeLLMServer(latency=1.0, chat_script=[{"text": "no tools needed."}]) as srv:
        point_at(monkeypatch, srv)
        monkeypatch.setenv("KNOWTOLOGY_LLM_TIMEOUT", "0.3")
        result = cli("ask", "How long is the refund window?", "--llm", SPEC, "--store", store)
        assert len(srv.calls) == 5  # the first turn, retried until the retries ran out
    assert result.exit_code == 1, result.output
    [line] = error_lines(result)
    assert "timed out after 0.3 s" in line
    assert SENTINEL not in result.output and SENTINEL[3:] not in result.output
