"""End-to-end CLI tests of the core contract (DESIGN §4) on real LanceDB + SQLite in tmp dirs."""

from __future__ import annotations

import json
import subprocess
import sys
from pathlib import Path

import pytest
from conftest import DOCS

COMMANDS = ["ingest", "build", "browse", "search", "grep", "read", "status", "session"]


def _json(result) -> dict:
    assert result.exit_code == 0, result.output
    return json.loads(result.stdout)


@pytest.mark.parametrize("command", COMMANDS)
def test_every_command_has_help(cli, command: str) -> None:
    result = cli(command, "--help")
    assert result.exit_code == 0
    assert "Usage" in result.stdout and len(result.stdout.splitlines()) > 4


def test_ingest_json_summary_and_idempotent_reingest(cli, docs_dir: Path, store_dir: Path) -> None:
    first = _json(cli("ingest", docs_dir, "--store", store_dir, "--embedder", "hash", "--json"))
    assert {"collection", "added", "updated", "unchanged", "deleted", "total"} <= first.keys()
    assert first["added"] == first["total"] == first["embedded"] > len(DOCS) - 1
    again = _json(cli("ingest", docs_dir, "--store", store_dir, "--json"))
    assert again["embedded"] == 0 and again["added"] == 0 and again["unchanged"] == first["total"]


def test_changing_one_document_reembeds_only_its_chunks(cli, docs_dir: Path, store_dir: Path) -> None:
    _json(cli("ingest", docs_dir, "--store", store_dir, "--embedder", "hash", "--json"))
    target = docs_dir / "engineering" / "oncall.md"
    target.write_text(target.read_text().replace("5 minutes", "10 minutes"))
    report = _json(cli("ingest", docs_dir, "--store", store_dir, "--json"))
    assert report["updated"] == 1 and report["added"] == 0 and report["embedded"] == 1


def test_prune_deletes_chunks_of_vanished_sections(cli, docs_dir: Path, store_dir: Path) -> None:
    _json(cli("ingest", docs_dir, "--store", store_dir, "--embedder", "hash", "--json"))
    (docs_dir / "policies" / "refunds.md").unlink()
    kept = _json(cli("ingest", docs_dir, "--store", store_dir, "--json"))
    pruned = _json(cli("ingest", docs_dir, "--store", store_dir, "--json", "--prune"))
    assert kept["deleted"] == 0
    assert pruned["deleted"] >= 1 and pruned["total"] == kept["total"] - pruned["deleted"]


def test_build_maps_every_chunk_and_browse_walks_to_leaf(cli, docs_dir: Path, store_dir: Path) -> None:
    ingest = _json(cli("ingest", docs_dir, "--store", store_dir, "--embedder", "hash", "--json"))
    report = _json(cli("build", "--builder", "cluster", "--store", store_dir, "--json"))
    for key in ("builder", "nodes", "mapped", "unmapped", "llm_calls", "input_tokens", "output_tokens", "cost_usd"):
        assert key in report
    assert report["mapped"] == ingest["total"] and report["unmapped"] == 0 and report["llm_calls"] == 0
    root = _json(cli("browse", "--store", store_dir, "--json"))
    assert root["path"] == "root" and root["children"]
    assert sum(c["chunk_count"] for c in root["children"]) == ingest["total"]
    path = root["children"][0]["path"]
    while True:
        node = _json(cli("browse", path, "--store", store_dir, "--json"))
        if not node["children"]:
            break
        path = node["children"][0]["path"]
    assert node["chunks"] and all({"chunk_id", "snippet"} <= set(c) for c in node["chunks"])


def test_search_and_grep_return_snippets_not_text(cli, built_store: Path) -> None:
    for args in (("search", "refund for spoiled food"), ("grep", "48 hours, refund"),
                 ("search", "promote replica", "--mode", "hybrid")):
        payload = _json(cli(*args, "--store", built_store, "--json", "-k", "3"))
        assert payload["query"] and payload["hits"]
        for hit in payload["hits"]:
            assert {"chunk_id", "path", "snippet", "score", "doc_id", "file_name", "chunk_index"} <= hit.keys()
            assert "text" not in hit
            full = next(t for t in DOCS.values() if hit["snippet"].rstrip("…").split(" ")[-1] in t)
            assert len(hit["snippet"]) < len(full)


def test_grep_finds_exact_keyword_first(cli, built_store: Path) -> None:
    payload = _json(cli("grep", "PagerDuty", "--store", built_store, "--json"))
    assert payload["hits"][0]["file_name"] == "docs/engineering/oncall.md"
    regex = _json(cli("grep", r"pgctl\s+promote", "--regex", "--store", built_store, "--json"))
    assert [h["file_name"] for h in regex["hits"]] == ["docs/engineering/failover.md"]


def test_under_scopes_search_to_a_subtree(cli, built_store: Path) -> None:
    root = _json(cli("browse", "--store", built_store, "--json"))
    branch = root["children"][0]["path"]
    payload = _json(cli("search", "anything at all", "--under", branch, "-k", "50", "--store", built_store, "--json"))
    assert payload["hits"] and all(h["path"] == branch or h["path"].startswith(branch + "/") for h in payload["hits"])
    missing = cli("search", "x", "--under", "No/Such/Path", "--store", built_store)
    assert missing.exit_code == 1 and "no category" in missing.stderr


def test_read_twice_reports_already_read(cli, built_store: Path) -> None:
    hit = _json(cli("grep", "PagerDuty", "--store", built_store, "--json"))["hits"][0]
    first = _json(cli("read", hit["chunk_id"], "--store", built_store, "--json"))["chunks"][0]
    assert first["already_read"] is False and "PagerDuty" in first["text"]
    second = _json(cli("read", hit["chunk_id"], "--store", built_store, "--json"))["chunks"][0]
    assert second["already_read"] is True and second["text"] is None
    human = cli("read", hit["chunk_id"], "--store", built_store)
    assert "(already read — skip)" in human.stdout
    forced = _json(cli("read", hit["chunk_id"], "--force", "--store", built_store, "--json"))["chunks"][0]
    assert forced["text"] == first["text"]
    other = _json(cli("read", hit["chunk_id"], "--session", "other", "--store", built_store, "--json"))
    assert other["chunks"][0]["already_read"] is False
    listed = _json(cli("session", "list", "--store", built_store, "--json"))
    assert {s["name"] for s in listed["sessions"]} == {"default", "other"}
    shown = _json(cli("session", "show", "--store", built_store, "--json"))
    assert shown["read"] == [hit["chunk_id"]]
    cli("session", "reset", "--store", built_store)
    again = _json(cli("read", hit["chunk_id"], "--store", built_store, "--json"))["chunks"][0]
    assert again["already_read"] is False


def test_read_unknown_chunk_is_a_clear_error(cli, built_store: Path) -> None:
    result = cli("read", "nope#1", "--store", built_store)
    assert result.exit_code == 1 and "no chunk 'nope#1'" in result.stderr and "Hint" in result.stderr
    assert "renamed, or removed by an ingest or rm" in result.stderr


def test_read_returns_the_ids_it_has_and_names_the_others(cli, built_store: Path) -> None:
    """One stale id (a file renamed since the search) does not hide the others' text: they come
    back, and the unknown ids are named with what to do (``missing`` in --json)."""
    some = _json(cli("grep", "refund", "--store", built_store, "--json"))["hits"][0]["chunk_id"]
    result = _json(cli("read", "gone.md#3", some, "--store", built_store, "--json", "--force"))
    assert [c["chunk_id"] for c in result["chunks"]] == [some] and result["missing"] == ["gone.md#3"]
    human = cli("read", some, "gone.md#3", "--store", built_store, "--force")
    assert human.exit_code == 0 and f"[{some}]" in human.stdout
    assert "(not found: gone.md#3 — its file was renamed, or removed by an ingest or rm" in human.stdout


def test_partial_read_names_what_a_missing_id_likely_meant(cli, built_store: Path) -> None:
    """Among ids that were found, an unknown one a step from a real one gets its own hint (the
    document's range of chunks), as it does when read alone; a hopeless one keeps the generic hint."""
    some = _json(cli("grep", "refund", "--store", built_store, "--json"))["hits"][0]["chunk_id"]
    doc = some.rsplit("#", 1)[0]
    result = _json(cli("read", some, f"{doc}#999", "nope#1", "--store", built_store, "--json", "--force"))
    assert result["missing"] == [f"{doc}#999", "nope#1"]
    assert result["missing_hints"][f"{doc}#999"].startswith(f"{doc!r} has chunks #0 to #")
    assert "nope#1" not in result["missing_hints"]
    human = cli("read", some, f"{doc}#999", "nope#1", "--store", built_store, "--force").stdout
    assert f"(not found: {doc}#999 — {doc!r} has chunks #0 to #" in human
    assert "(not found: nope#1 — its file was renamed, or removed by an ingest or rm" in human


def test_malformed_jsonl_changes_nothing(cli, built_store: Path, tmp_path: Path) -> None:
    before = cli("status", "--store", built_store, "--json").stdout
    bad = tmp_path / "bad.jsonl"
    bad.write_text('{"text": "fine", "chunk_id": "a"}\n{"text": broken}\n')
    result = cli("ingest", bad, "--store", built_store)
    assert result.exit_code == 1
    assert f"{bad.name}:2: invalid JSON" in result.stderr
    assert cli("status", "--store", built_store, "--json").stdout == before
    skipped = _json(cli("ingest", bad, "--skip-invalid", "--store", built_store, "--json"))
    assert skipped["added"] == 1 and skipped["skipped"] == 1 and "bad.jsonl:2" in skipped["problems"][0]


def test_status_counts_and_staleness(cli, built_store: Path, docs_dir: Path) -> None:
    status = _json(cli("status", "--store", built_store, "--json"))
    (col,) = status["collections"]
    assert {"name", "chunks", "mapped", "unmapped", "nodes", "embedder"} <= col.keys()
    assert col["unmapped"] == 0 and col["mapped"] == col["chunks"] and col["embedder"] == "hash"
    extra = docs_dir / "new.md"
    extra.write_text("# Gift cards\n\nGift cards never expire and can be topped up in the app.\n")
    cli("ingest", extra, "--store", built_store)
    col = _json(cli("status", "--store", built_store, "--json"))["collections"][0]
    assert col["unmapped"] == 1 and col["stale"] is True
    report = _json(cli("build", "--store", built_store, "--json"))
    assert report["builder"] == "cluster" and report["unmapped"] == 0


def test_bad_names_are_refused(cli, store_dir: Path, docs_dir: Path) -> None:
    for bad in ("../escape", "a/b", "", "x" * 65):
        result = cli("ingest", docs_dir, "-c", bad, "--store", store_dir, "--embedder", "hash")
        assert result.exit_code == 1 and "invalid collection name" in result.stderr
    assert not store_dir.exists() or not any(store_dir.parent.glob("escape*"))


def test_embedder_mismatch_is_a_clear_error(cli, built_store: Path, docs_dir: Path) -> None:
    result = cli("ingest", docs_dir, "--embedder", "hash:32", "--store", built_store)
    assert result.exit_code == 1 and "was embedded with hash" in result.stderr


def _modules_after(args: list[str], store: Path) -> set[str]:
    """Heavy top-level modules loaded by one ``kt`` process (the console-script entry point)."""
    argv = ["kt", *args] + ([] if args == ["--help"] else ["--store", str(store)])
    code = (
        "import sys\n"
        f"sys.argv = {argv!r}\n"
        "from knowtology_cli.cli.app import main\n"
        "try:\n"
        "    main()\n"
        "except SystemExit:\n"
        "    pass\n"
        "print('MODULES:' + ' '.join(sorted(m for m in sys.modules if m.split('.')[0] in "
        "('lancedb', 'openai', 'anthropic', 'onnxruntime', 'torch', 'pandas'))))\n"
    )
    out = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, check=True)
    line = next(x for x in out.stdout.splitlines() if x.startswith("MODULES:"))
    return set(line.removeprefix("MODULES:").split())


@pytest.mark.parametrize("args", [["--help"], ["browse"], ["grep", "refund"], ["read", "docs/policies/refunds.md#0"],
                                  ["status"]])
def test_fast_commands_do_not_import_heavy_modules(built_store: Path, args: list[str]) -> None:
    assert _modules_after(args, built_store) == set()


def test_skipped_pandas_probe_keeps_explicit_pandas_conversions_working(built_store: Path) -> None:
    """The one-shot import path hides pandas from pyarrow's probe only; to_pandas() still works after."""
    pytest.importorskip("pandas")
    table_dir = next(built_store.rglob("*.lance"))
    code = (
        "import sys\n"
        "from knowtology_cli.stores import heavy_imports\n"
        "heavy_imports.SKIP_PANDAS_PROBE = True\n"
        "lance = heavy_imports.import_lance()\n"
        "assert 'pandas' not in sys.modules, 'probe not skipped'\n"
        f"frame = lance.dataset({str(table_dir)!r}).to_table(columns=['chunk_id']).to_pandas()\n"
        "print(type(frame).__name__, len(frame))\n"
    )
    out = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True)
    assert out.returncode == 0, out.stderr
    kind, rows = out.stdout.split()
    assert kind == "DataFrame" and int(rows) > 0


def test_first_ingest_with_the_hash_embedder_loads_neither_lancedb_nor_pandas(tmp_path: Path, docs_dir: Path) -> None:
    """A new store (tree migrations through sqlite-utils, Lance table creation, full-text indexes)."""
    loaded = _modules_after(["ingest", str(docs_dir), "--embedder", "hash"], tmp_path / "fresh-store")
    assert (tmp_path / "fresh-store" / "tree.db").is_file()
    assert loaded == set()


def test_an_unexpected_error_still_gives_json_one_error_document(capsys: pytest.CaptureFixture[str]) -> None:
    """A bug must not leave a --json caller with an empty stdout: it gets the error document (code
    ``internal``) and exit 1, and the traceback goes to stderr; without --json the traceback is raised."""
    import typer

    from knowtology_cli.cli.common import handled

    with pytest.raises(typer.Exit) as stopped, handled(as_json=True):
        raise ValueError("max() arg is an empty sequence")
    assert stopped.value.exit_code == 1
    out, err = capsys.readouterr()
    error = json.loads(out)["error"]
    assert error["code"] == "internal" and error["message"] == "ValueError: max() arg is an empty sequence"
    assert "Traceback" in err
    with pytest.raises(ValueError), handled(as_json=False):
        raise ValueError("plain")
    with pytest.raises(typer.Exit) as kept, handled(as_json=True):  # the CLI's own exits pass through
        raise typer.Exit(3)
    assert kept.value.exit_code == 3 and capsys.readouterr().out == ""


def _kt(*args: object, **env: str) -> subprocess.CompletedProcess:
    """The real ``kt`` console script with no inherited KNOWTOLOGY_* settings (plus ``env``)."""
    import os

    environment = {k: v for k, v in os.environ.items() if not k.startswith("KNOWTOLOGY_")}
    environment.update(LANCEDB_LOG="error", NO_COLOR="1", **env)
    return subprocess.run([str(Path(sys.executable).parent / "kt"), *map(str, args)], capture_output=True,
                          text=True, env=environment, timeout=180)


def test_root_collection_and_env_mean_the_commands_collection(cli, built_store: Path, docs_dir: Path) -> None:
    """`kt -c NAME status`, `KNOWTOLOGY_COLLECTION=NAME kt status` and `kt status -c NAME` agree."""
    _json(cli("ingest", docs_dir / "policies", "--store", built_store, "-c", "second", "--embedder", "hash", "--json"))

    def names(proc: subprocess.CompletedProcess) -> list[str]:
        assert proc.returncode == 0, proc.stderr
        return [c["name"] for c in json.loads(proc.stdout)["collections"]]

    assert sorted(names(_kt("status", "--store", built_store, "--json"))) == ["default", "second"]
    for named in (_kt("status", "--store", built_store, "-c", "second", "--json"),
                  _kt("--store", built_store, "-c", "second", "status", "--json"),
                  _kt("--store", built_store, "status", "--json", KNOWTOLOGY_COLLECTION="second")):
        assert names(named) == ["second"]
    for missing in (_kt("status", "--store", built_store, "-c", "nosuch", "--json"),
                    _kt("--store", built_store, "-c", "nosuch", "status", "--json"),
                    _kt("--store", built_store, "status", "--json", KNOWTOLOGY_COLLECTION="nosuch")):
        assert missing.returncode == 1 and json.loads(missing.stdout)["error"]["code"] == "not_found"


def test_every_collection_command_reads_the_env_collection(cli, built_store: Path, docs_dir: Path,
                                                           monkeypatch: pytest.MonkeyPatch) -> None:
    """The root -c sets KNOWTOLOGY_COLLECTION for the command; each command then means that collection."""
    _json(cli("ingest", docs_dir / "policies", "--store", built_store, "-c", "second", "--embedder", "hash", "--json"))
    first = _json(cli("grep", "refund", "--store", built_store, "--json"))["hits"][0]["chunk_id"]
    other = _json(cli("grep", "refund", "--store", built_store, "-c", "second", "--json"))["hits"][0]["chunk_id"]
    _json(cli("read", other, "--session", "s1", "--store", built_store, "-c", "second", "--json"))
    _json(cli("read", first, "--session", "s1", "--store", built_store, "--json"))
    monkeypatch.setenv("KNOWTOLOGY_COLLECTION", "nosuch")
    for args in (["browse"], ["search", "refund"], ["grep", "refund"], ["read", first], ["build", "--dry-run"],
                 ["export"], ["sources"], ["status"]):
        out = cli(*args, "--store", built_store, "--json")
        assert out.exit_code == 1 and json.loads(out.stdout)["error"]["code"] == "not_found", args
    monkeypatch.setenv("KNOWTOLOGY_COLLECTION", "second")
    assert _json(cli("session", "reset", "s1", "--store", built_store, "--json"))["reset"] is True
    monkeypatch.delenv("KNOWTOLOGY_COLLECTION")
    assert _json(cli("session", "show", "s1", "--store", built_store, "-c", "second", "--json"))["read"] == []
    assert _json(cli("session", "show", "s1", "--store", built_store, "--json"))["read"] == [first]


def test_json_before_the_command_is_the_commands_json(cli, built_store: Path) -> None:
    """`kt --json status` (as `--store` and `-c`, --json may come before the command)."""
    assert _json(cli("--json", "status", "--store", built_store)) == _json(cli("status", "--store", built_store, "--json"))
    assert _json(cli("--json", "session", "list", "--store", built_store)) == {"sessions": []}
    grep = _json(cli("--json", "grep", "--store", built_store, "--", "--force"))  # still text after --
    assert grep["query"] == _json(cli("grep", "--store", built_store, "--json", "--", "--force"))["query"]
    not_found = cli("--json", "browse", "Zzzz", "--store", built_store)
    assert not_found.exit_code == 1 and json.loads(not_found.stdout)["error"]["code"] == "not_found"
    no_json = _kt("--json", "serve", "--store", built_store)  # a command without --json: a usage error, in JSON
    assert no_json.returncode == 2 and json.loads(no_json.stdout)["error"]["code"] == "usage"
