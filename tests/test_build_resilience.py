"""`kt build --llm` when things go wrong: real SDKs over real HTTP to the loopback fake server.

A rebuild that fails keeps the previous tree, Ctrl-C exits 130 at once and a re-run resumes, naming
failures of the hybrid builder are reported and retried, and an unreachable server fails fast.
"""

from __future__ import annotations

import json
import os
import shutil
import subprocess
from pathlib import Path

import pytest
from conftest import KT, point_llm_at

from knowtology_cli.stores.sqlite import SQLiteTreeStore
from knowtology_cli.testing.fake_llm import FakeLLMServer

SENTINEL = "sk-SENTINEL-3f9a61c2d8e04b57-resilience"
#: replies of ~20 chunks, so the sample corpus needs about a dozen calls
SMALL_REPLIES = '[profiles."gpt-4o-mini"]\nmax_output_tokens = 2500\n[profiles."claude-haiku-4-5"]\nmax_output_tokens = 2500\n'
SPECS = {"openai": "openai:gpt-4o-mini", "anthropic": "anthropic:claude-haiku-4-5"}


@pytest.fixture
def store(sample_store: Path, tmp_path: Path) -> Path:
    target = tmp_path / "store"
    shutil.copytree(sample_store, target)
    (target / "config.toml").write_text(SMALL_REPLIES, encoding="utf-8")
    return target



def point_at(monkeypatch: pytest.MonkeyPatch, srv: FakeLLMServer) -> None:
    point_llm_at(monkeypatch, srv, SENTINEL)


def kt_env(srv: FakeLLMServer | None = None, **extra: str) -> dict[str, str]:
    env = {k: v for k, v in os.environ.items() if not k.startswith("KNOWTOLOGY_")
           and k not in ("OPENAI_BASE_URL", "ANTHROPIC_BASE_URL", "OPENAI_API_KEY", "ANTHROPIC_API_KEY")}
    env.update(LANCEDB_LOG="error", LANCE_LOG="error", PYTHONUNBUFFERED="1")
    if srv is not None:
        env.update(OPENAI_BASE_URL=srv.openai_base_url, OPENAI_API_KEY=SENTINEL,
                   ANTHROPIC_BASE_URL=srv.anthropic_base_url, ANTHROPIC_API_KEY=SENTINEL)
    env.update(extra)
    return env


def run_kt(*args: str, env: dict[str, str]) -> subprocess.CompletedProcess:
    done = subprocess.run([KT, *args], capture_output=True, text=True, env=env, timeout=600)
    assert SENTINEL not in done.stdout + done.stderr
    return done


def snapshot(cli, store: Path) -> tuple[dict, dict]:
    """What `kt status` and `kt browse --depth 3` show (the tree every reader sees); status advice
    aside, which says when a stopped rebuild waits to be resumed."""
    status = cli("status", "--store", store, "--json")
    browse = cli("browse", "--store", store, "--depth", "3", "--json")
    assert status.exit_code == 0 and browse.exit_code == 0, status.output + browse.output
    report = json.loads(status.stdout)
    for row in report["collections"]:
        row.pop("advice")
    return report, json.loads(browse.stdout)


def error_lines(stderr: str) -> list[str]:
    return [line for line in stderr.splitlines() if line.startswith("Error:")]


def staged_chunks(store: Path) -> set[str]:
    """Chunk ids a rebuild has placed in its new tree so far (not yet what readers see)."""
    tree = SQLiteTreeStore(store / "tree.db")
    try:
        return set(tree.mapping_hashes("default#rebuild"))
    finally:
        tree.close()


def build_llm(cli, store: Path, spec: str = SPECS["openai"], *args: str):
    result = cli("build", "--builder", "llm", "--llm", spec, "--store", store, "--concurrency", "1", *args)
    assert SENTINEL not in result.output
    return result


# ------------------------------------------------------------------ 1. an atomic --rebuild
@pytest.mark.parametrize(("provider", "fault"), [("openai", "server_error"), ("anthropic", "malformed")])
def test_a_rebuild_failing_part_way_keeps_the_previous_tree_and_a_rerun_resumes(cli, store, monkeypatch, no_backoff,
                                                                                provider, fault):
    spec = SPECS[provider]
    with FakeLLMServer() as srv:
        point_at(monkeypatch, srv)
        assert build_llm(cli, store, spec).exit_code == 0
        before = snapshot(cli, store)
        srv.reset()
        srv.set_faults({i: fault for i in range(3, 400)})  # three replies land in the new tree, then none
        failed = build_llm(cli, store, spec, "--rebuild", "--no-cache")
        staged = staged_chunks(store)
        assert failed.exit_code == 1, failed.output
        [line] = error_lines(failed.stderr)
        assert "rebuild incomplete, so the previous tree is kept" in line
        assert staged and snapshot(cli, store) == before  # status and browse: the old tree, whole

        srv.reset()
        srv.set_faults({})
        resumed = build_llm(cli, store, spec, "--rebuild", "--json")
        sent_again = {c for call in srv.tree_calls(status=None) for c in call.chunk_ids}
    assert resumed.exit_code == 0, resumed.output
    assert "resuming the rebuild stopped earlier" in resumed.stderr
    assert sent_again and not sent_again & staged  # what the failed run placed is not paid for again
    report = json.loads(resumed.stdout)
    status, browse = snapshot(cli, store)
    assert report["unmapped"] == 0 and status["collections"][0]["state"] == "current"
    assert browse["chunk_count"] == report["mapped"] == before[0]["collections"][0]["mapped"]
    assert staged_chunks(store) == set()


def test_an_interrupted_rebuild_keeps_the_previous_tree(cli, store, monkeypatch):
    import knowtology_cli.builders.llm_builder as llm_builder

    with FakeLLMServer() as srv:
        point_at(monkeypatch, srv)
        assert build_llm(cli, store).exit_code == 0
        before = snapshot(cli, store)
        applied = []
        real_apply = llm_builder.apply_reply

        def ctrl_c_on_the_third(*args, **kwargs):
            if len(applied) == 2:
                raise KeyboardInterrupt
            applied.append(1)
            return real_apply(*args, **kwargs)

        monkeypatch.setattr(llm_builder, "apply_reply", ctrl_c_on_the_third)
        result = build_llm(cli, store, SPECS["openai"], "--rebuild", "--no-cache")
    assert result.exit_code == 130, result.output
    assert result.stderr.strip().splitlines()[-1].startswith("Interrupted")
    assert snapshot(cli, store) == before


def test_a_hybrid_rebuild_whose_namings_all_fail_keeps_the_previous_tree(cli, store, monkeypatch, no_backoff):
    # the hybrid builder writes its tree in one transaction after naming: this already held, now it is pinned
    assert cli("build", "--builder", "cluster", "--store", store).exit_code == 0
    before = snapshot(cli, store)
    with FakeLLMServer(fail_rate=1.0, fail_kinds=["server_error"]) as srv:
        point_at(monkeypatch, srv)
        result = cli("build", "--builder", "hybrid", "--llm", SPECS["openai"], "--store", store, "--rebuild")
    assert result.exit_code == 1, result.output
    [line] = error_lines(result.stderr)
    assert "no naming call succeeded" in line and "the tree was kept as it was" in line
    assert snapshot(cli, store) == before


def test_a_failed_rebuild_through_kt_keeps_what_browse_shows(store):
    with FakeLLMServer(retry_after=0.01) as srv:  # 429s ask for a 10 ms wait: the real retries stay quick
        env = kt_env(srv)
        assert run_kt("build", "--builder", "llm", "--llm", SPECS["openai"], "--store", str(store), env=env).returncode == 0
        browse_before = run_kt("browse", "--store", str(store), "--depth", "3", env=env).stdout
        srv.reset()
        srv.set_faults({i: "rate_limit" for i in range(2, 400)})
        failed = run_kt("build", "--builder", "llm", "--llm", SPECS["openai"], "--rebuild", "--no-cache",
                        "--store", str(store), env=env)
        browse_after = run_kt("browse", "--store", str(store), "--depth", "3", env=env).stdout
        status = json.loads(run_kt("status", "--store", str(store), "--json", env=env).stdout)["collections"]
    assert failed.returncode == 1, failed.stdout + failed.stderr
    assert [c["name"] for c in status] == ["default"]  # the staged tree is no collection of its own
    assert "a stopped --rebuild placed" in status[0]["advice"] and "kt build --rebuild resumes it" in status[0]["advice"]
    assert "Traceback" not in failed.stderr
    [line] = error_lines(failed.stderr)
    assert "the previous tree is kept" in line
    assert browse_after == browse_before and "unmapped" not in browse_after


# ------------------------------------------------------------------ 2. Ctrl-C, then a re-run
def interrupt_kt(args: list[str], env: dict[str, str], when) -> subprocess.CompletedProcess:
    """Run ``kt args`` and press Ctrl-C (SIGINT) as soon as ``when()`` holds."""
    import signal
    import time

    proc = subprocess.Popen([KT, *args], env=env, stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True)
    try:
        while proc.poll() is None and not when():
            time.sleep(0.02)
        assert proc.poll() is None, "kt finished before it could be interrupted"
        proc.send_signal(signal.SIGINT)
        out, err = proc.communicate(timeout=120)  # a guard against a hang, not a measurement
    finally:
        if proc.poll() is None:
            proc.kill()
    assert SENTINEL not in out + err
    return subprocess.CompletedProcess(proc.args, proc.returncode, out, err)


def assert_interrupted(done: subprocess.CompletedProcess) -> None:
    assert done.returncode == 130, done.stdout + done.stderr
    assert "Traceback" not in done.stderr
    assert done.stderr.strip().splitlines()[-1] == (
        "Interrupted — nothing half-written was kept; re-run the command to resume.")


@pytest.mark.parametrize("rebuild", [False, True])
def test_ctrl_c_during_an_llm_call_exits_130_at_once_and_a_rerun_resumes(cli, store, monkeypatch, rebuild):
    args = ["build", "--builder", "llm", "--llm", SPECS["openai"], "--store", str(store), "--concurrency", "1"]
    with FakeLLMServer(hang_seconds=600) as srv:
        point_at(monkeypatch, srv)
        if rebuild:  # an offline tree to rebuild: no call of this model is in the log yet
            assert cli("build", "--builder", "cluster", "--store", store).exit_code == 0
        before = snapshot(cli, store)
        srv.set_faults({3: "hang"})  # three replies land, the fourth call never answers
        done = interrupt_kt([*args, *(["--rebuild"] if rebuild else [])], kt_env(srv),
                            lambda: len(srv.calls) >= 4)
        hung = srv.calls[3]
        assert_interrupted(done)
        assert hung.status == 0  # kt exited without waiting for the call in flight
        status, _ = snapshot(cli, store)
        row = status["collections"][0]
        assert row["mapped"] + row["unmapped"] == row["chunks"]
        if rebuild:
            assert snapshot(cli, store) == before  # the previous tree, whole
            placed = staged_chunks(store)
        else:
            tree = SQLiteTreeStore(store / "tree.db")
            placed = set(tree.mapping_hashes("default"))
            tree.close()
            assert row["mapped"] == len(placed)
        assert placed  # the three answered batches were kept

        srv.set_faults({})
        first_run = len(srv.calls)
        resumed = build_llm(cli, store, SPECS["openai"], *(["--rebuild"] if rebuild else []), "--json")
        sent_again = {c for call in srv.calls[first_run:] for c in call.chunk_ids}
    assert resumed.exit_code == 0, resumed.output
    assert json.loads(resumed.stdout)["unmapped"] == 0
    assert sent_again and not sent_again & placed  # batches already placed are not paid for again


def test_ctrl_c_during_hybrid_naming_keeps_the_tree_and_the_rerun_pays_no_answered_call(cli, store, monkeypatch):
    assert cli("build", "--builder", "cluster", "--store", store).exit_code == 0
    before = snapshot(cli, store)
    args = ["build", "--builder", "hybrid", "--llm", SPECS["openai"], "--store", str(store), "--rebuild",
            "--concurrency", "1"]
    with FakeLLMServer(faults={1: "hang"}, hang_seconds=600) as srv:
        point_at(monkeypatch, srv)
        done = interrupt_kt(args, kt_env(srv), lambda: len(srv.calls) >= 2)
        answered, hung = srv.calls[0], srv.calls[1]
        assert_interrupted(done)
        assert answered.status == 200 and hung.status == 0
        assert snapshot(cli, store) == before  # the offline tree as it was

        srv.set_faults({})
        first_run = len(srv.calls)
        resumed = cli(*args[:-2], "--json")
        again = srv.calls[first_run:]
    assert resumed.exit_code == 0, resumed.output
    report = json.loads(resumed.stdout)
    assert report["builder"] == "hybrid" and report["cached_calls"] >= 1
    assert again and all(c.body != answered.body for c in again)  # the answered naming call is not sent again


# ------------------------------------------------------------------ 3. hybrid naming failures
def naming_drafts(calls) -> list[set[str]]:
    """The draft names each naming request asked about."""
    from knowtology_cli.testing.fake_llm import parse_categories

    out = []
    for call in calls:
        user = next(m["content"] for m in reversed(call.body["messages"]) if m["role"] == "user")
        out.append({draft for _, draft in parse_categories(user if isinstance(user, str) else user[0]["text"])})
    return out


@pytest.mark.parametrize(("fault", "attempts"), [("junk", 1), ("server_error", 5)])
def test_failed_hybrid_namings_are_reported_then_retried_alone(cli, store, monkeypatch, no_backoff, fault, attempts):
    # the first naming call (the top level) and its re-ask fail: junk names twice, or every attempt a 500
    with FakeLLMServer(faults={i: fault for i in range(2 * attempts)}) as srv:
        point_at(monkeypatch, srv)
        first = cli("build", "--builder", "hybrid", "--llm", SPECS["openai"], "--store", store, "--json")
        assert first.exit_code == 0, first.output
        report = json.loads(first.stdout)
        top = {c["name"] for c in json.loads(cli("browse", "--store", store, "--json").stdout)["children"]}
        assert report["naming_failed"] == len(report["fallback_names"]) == len(top) >= 2
        assert set(report["fallback_names"]) == top  # paths of the top-level categories, offline names
        why = "the call failed" if fault == "server_error" else "has no letters"
        assert any(why in reason for reason in report["fallback_names"].values())
        assert report["name_origins"]["offline"] == len(top)

        srv.reset()
        srv.set_faults({})
        again = cli("build", "--store", store, "--llm", SPECS["openai"], "--json")  # auto: hybrid
        retried = naming_drafts(srv.naming_calls())
        third = cli("build", "--store", store, "--llm", SPECS["openai"], "--json")
        assert srv.naming_calls()[len(retried):] == []
    assert again.exit_code == 0, again.output
    report = json.loads(again.stdout)
    assert retried and set().union(*retried) == top  # just those namings were asked again
    assert report["naming_failed"] == 0 and report["fallback_names"] == {}
    assert report["name_origins"] == {"llm": len(top)}
    assert json.loads(third.stdout)["notes"] == ["tree is up to date; no calls"]


def test_naming_failures_through_kt_say_how_many_and_the_rerun_retries_them(store):
    with FakeLLMServer(faults={0: "junk", 1: "junk"}) as srv:
        env = kt_env(srv)
        args = ["build", "--builder", "hybrid", "--llm", SPECS["openai"], "--store", str(store)]
        human = run_kt(*args, env=env)
        assert human.returncode == 0, human.stderr
        [note] = [line for line in human.stdout.splitlines() if "keep the offline builder's name" in line]
        assert "the next `kt build` asks the model for them again" in note
        status = json.loads(run_kt("status", "--store", str(store), "--json", env=env).stdout)["collections"][0]
        assert f"{note.split()[0]} category name(s) are offline stand-ins" in status["advice"]
        srv.reset()
        srv.set_faults({})
        done = run_kt(*args, "--json", env=env)
    assert done.returncode == 0, done.stderr
    report = json.loads(done.stdout)
    assert report["naming_failed"] == 0 and report["name_origins"].get("offline", 0) == 0
    [retried] = naming_drafts(srv.naming_calls())
    assert int(note.split()[0]) == report["name_origins"]["llm"] == len(retried)


# ------------------------------------------------------------------ 4. an unreachable server
def closed_port() -> int:
    """A loopback port nothing listens on (bound, then released)."""
    import socket

    with socket.socket() as sock:
        sock.bind(("127.0.0.1", 0))
        return sock.getsockname()[1]


@pytest.mark.parametrize(("provider", "builder"), [("openai", "llm"), ("openai", "hybrid"), ("anthropic", "auto")])
def test_a_refused_connection_is_one_line_naming_the_base_url_and_exit_1(store, provider, builder):
    base = f"http://127.0.0.1:{closed_port()}" + ("/v1" if provider == "openai" else "")
    env = kt_env(**{f"{provider.upper()}_BASE_URL": base, f"{provider.upper()}_API_KEY": SENTINEL})
    args = ["build", "--builder", builder, "--llm", SPECS[provider], "--store", str(store), "--rebuild"]
    done = run_kt(*args, env=env)
    as_json = run_kt(*args, "--json", env=env)
    assert done.returncode == as_json.returncode == 1, done.stderr
    assert done.stdout == "" and "Traceback" not in done.stderr
    [line] = done.stderr.splitlines()  # one line, no plan, no retries
    assert line == (f"Error: {SPECS[provider]}: cannot connect to {base} (connection refused): is the server "
                    f"running? Start it, or set {provider.upper()}_BASE_URL (or providers.{provider}.base_url in "
                    "config.toml) to its address")
    assert json.loads(as_json.stdout)["error"]["message"] == line.removeprefix("Error: ")


def test_a_server_that_goes_away_mid_rebuild_stops_it_at_once_and_keeps_the_tree(cli, store, monkeypatch):
    from knowtology_cli.testing.fake_llm import keyword_brain

    with FakeLLMServer() as srv:
        point_at(monkeypatch, srv)
        assert build_llm(cli, store).exit_code == 0
        before = snapshot(cli, store)
        answered = []

        def dies_after_the_third(chunks, tree):
            answered.append(1)
            if len(answered) == 3:
                srv.stop()  # the listening socket closes; this reply still goes out
            return keyword_brain(chunks, tree)

        srv.brain = dies_after_the_third
        result = build_llm(cli, store, SPECS["openai"], "--rebuild", "--no-cache")
    assert result.exit_code == 1, result.output
    [line] = error_lines(result.stderr)
    assert f"cannot connect to {srv.openai_base_url} (connection refused)" in line
    assert snapshot(cli, store) == before
    tree = SQLiteTreeStore(store / "tree.db")
    try:
        [last] = [r for r in tree.calls("default") if r["status"] != "ok"]
    finally:
        tree.close()
    assert last["attempts"] == 1  # not retried


@pytest.mark.parametrize("builder", ["hybrid", "llm"])
def test_a_stopped_server_does_not_stop_a_rebuild_the_call_log_answers(store, builder):
    """A rebuild of an unchanged corpus asks the same prompts the call log has answered: with the
    server stopped it goes on with a note and rebuilds the same tree; without the log (--no-cache)
    the stopped server ends it with the one-line error, tree kept (a prompt the log has not answered
    fails the same way: see the server that goes away mid-rebuild)."""
    with FakeLLMServer() as srv:
        env = kt_env(srv)
        args = ["build", "--builder", builder, "--llm", SPECS["openai"], "--store", str(store), "--concurrency", "1"]
        assert run_kt(*args, "--rebuild", env=env).returncode == 0
    before = run_kt("browse", "--store", str(store), "--depth", "3", "--json", env=env).stdout
    again = run_kt(*args, "--rebuild", env=env)  # the server's port is closed now
    assert again.returncode == 0, again.stderr
    assert f"note: openai:gpt-4o-mini: cannot connect to {srv.openai_base_url} (connection refused)" in again.stderr
    assert "replies the call log holds" in again.stderr
    assert run_kt("browse", "--store", str(store), "--depth", "3", "--json", env=env).stdout == before
    uncached = run_kt(*args, "--rebuild", "--no-cache", env=env)
    assert uncached.returncode == 1 and len(error_lines(uncached.stderr)) == 1
    assert "cannot connect to" in uncached.stderr and "note:" not in uncached.stderr
    assert run_kt("browse", "--store", str(store), "--depth", "3", "--json", env=env).stdout == before


def test_a_rebuild_by_another_builder_forgets_a_stopped_llm_rebuild(cli, store, monkeypatch, no_backoff):
    """An LLM rebuild stopped part way stages its tree for a resume; rebuilding with the offline
    builder instead makes that moot: the staged tree goes, and status stops offering to resume it."""
    with FakeLLMServer() as srv:
        point_at(monkeypatch, srv)
        assert build_llm(cli, store).exit_code == 0
        srv.reset()
        srv.set_faults({i: "server_error" for i in range(3, 400)})  # three replies staged, then none
        assert build_llm(cli, store, SPECS["openai"], "--rebuild", "--no-cache").exit_code == 1
    assert staged_chunks(store)
    assert "a stopped --rebuild placed" in json.loads(cli("status", "--store", store, "--json").stdout)[
        "collections"][0]["advice"]
    assert cli("build", "--builder", "cluster", "--rebuild", "--store", store).exit_code == 0
    assert staged_chunks(store) == set()
    status = json.loads(cli("status", "--store", store, "--json").stdout)
    assert [c["name"] for c in status["collections"]] == ["default"]
    assert "stopped --rebuild" not in status["collections"][0]["advice"]
