"""Smoke tests of `kt bench ...` on ADI with the hash embedder: the commands run and their JSON is sane.

No timing is asserted anywhere: benchmarks print figures, tests only check their shape.
"""

from __future__ import annotations

import json
from pathlib import Path

import pytest
from typer.testing import CliRunner

from knowtology_cli.cli.app import app

ADI_ROOT = Path(__file__).resolve().parent.parent.parent / "shared" / "bench-data"

ADI = ADI_ROOT / "adi"
pytestmark = pytest.mark.skipif(not (ADI / "corpus.jsonl").is_file(), reason="shared bench-data not present")


@pytest.fixture()
def bench_env(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> Path:
    monkeypatch.setenv("KNOWTOLOGY_BENCH_CACHE", str(tmp_path / "cache"))
    return tmp_path / "out"


def _run(args: list[str]) -> dict:
    result = CliRunner().invoke(app, args)
    assert result.exit_code == 0, result.output
    return json.loads(result.stdout)


def _in_unit(value: float) -> bool:
    return 0.0 <= value <= 1.0


def test_bench_help_lists_subcommands() -> None:
    result = CliRunner().invoke(app, ["bench", "--help"])
    assert result.exit_code == 0
    for name in ("retrieval", "tokens", "speed", "tree", "all"):
        assert name in result.output


def test_retrieval_json_has_metrics_for_modes_and_baselines(bench_env: Path) -> None:
    data = _run(["bench", "retrieval", str(ADI), "--embedder", "hash", "--queries", "8", "--json", "--out",
                 str(bench_env)])
    (coll,) = data["collections"]
    assert coll["dataset"] == "adi" and coll["queries"] == 8 and coll["chunks"] == 82
    systems = {r["system"] for r in coll["rows"]}
    assert {"kt fast (keyword)", "kt semantic", "kt default (hybrid)", "kt thorough"} <= systems
    assert any(r["kind"] == "baseline" and r["mode"] == "keyword" for r in coll["rows"])
    for row in coll["rows"]:
        for metric in ("ndcg@10", "recall@10", "recall@100", "mrr@10"):
            assert _in_unit(row[metric]), (row["system"], metric, row[metric])
    assert {c["mode"] for c in coll["comparison"]} == {"keyword", "semantic", "hybrid", "thorough"}
    presets = data["presets"]["rows"]
    assert [r["collection"] for r in presets] == ["adi", "mean"]
    assert data["presets"]["thorough_gain"] == round(presets[-1]["thorough"] - presets[-1]["hybrid"], 4)
    rules = {v["variant"] for v in coll["fusion_variants"]}
    assert {"minmax@100", "zscore@1000", "rrf@1000"} <= rules
    assert (bench_env / "retrieval.json").is_file()
    assert (bench_env / "retrieval_ndcg.png").stat().st_size > 0


def test_retrieval_reuses_the_cached_store(bench_env: Path) -> None:
    args = ["bench", "retrieval", str(ADI), "--embedder", "hash", "--queries", "3", "--json", "--out", str(bench_env)]
    first = _run(args)["collections"][0]
    second = _run(args)["collections"][0]
    assert first["ingest_seconds"] is not None
    assert second["ingest_seconds"] is None and second["store"] == first["store"]


def test_tokens_json_reports_policies_and_sessions(bench_env: Path) -> None:
    data = _run(["bench", "tokens", str(ADI), "--embedder", "hash", "--queries", "10", "--json", "--out",
                 str(bench_env)])
    (coll,) = data["collections"]
    assert coll["encoding"] == "o200k_base" and "no relevance judgements" in coll["policy"]
    rows = {r["policy"]: r for r in coll["single_turn"]["rows"]}
    assert "full-k k=1" in rows and "full-k k=10" in rows and "snippets+top-r r=3" in rows
    assert any(p.startswith("snippets+pick") for p in rows)
    for row in rows.values():
        assert _in_unit(row["recall"]) and row["tokens"] > 0
    assert rows["full-k k=10"]["tokens"] > rows["full-k k=1"]["tokens"]
    for row in coll["multi_turn"]["rows"]:
        assert row["rag_tokens"] > 0 and _in_unit(row["snippets+pick_recall"])
        assert row["rag+session_tokens"] <= row["rag_tokens"]


def test_tree_json_scores_levels_against_labels(bench_env: Path, tmp_path: Path) -> None:
    labels = tmp_path / "labels.tsv"
    ids = [json.loads(line)["_id"] for line in (ADI / "corpus.jsonl").read_text().splitlines() if line.strip()]
    labels.write_text("doc_id\tcodes\tl1\tl2\tl3\n" + "".join(
        f"{d}\t{i % 3}.{i % 5}\t{i % 3}\t{i % 3}.{i % 2}\t{i % 3}.{i % 2}{i % 5}\n" for i, d in enumerate(ids)))
    data = _run(["bench", "tree", str(ADI), "--labels", str(labels), "--embedder", "hash", "--json", "--out",
                 str(bench_env)])
    (coll,) = data["collections"]
    rows = coll["builders"]["cluster"]["rows"]
    assert rows and {r["builder"] for r in rows} >= {"offline cluster", "shuffled (chance)", "flat k-means"}
    for row in rows:
        assert _in_unit(row["nmi_l1"]) and -1.0 <= row["ari_l3"] <= 1.0 and row["ami_l1"] <= 1.0
    assert coll["builders"]["cluster"]["shape"]["depth"] >= 1


def test_tree_without_labels_judges_names_and_balance(bench_env: Path) -> None:
    data = _run(["bench", "tree", str(ADI), "--embedder", "hash", "--json", "--out", str(bench_env)])
    (coll,) = data["collections"]
    cluster = coll["builders"]["cluster"]
    assert coll["labels"] is None and cluster["rows"] == []
    names = cluster["names"]
    assert [n["level"] for n in names] == list(range(1, cluster["shape"]["depth"] + 1))
    assert names[0]["chunks"] == coll["chunks"] == 82
    for row in names:
        assert _in_unit(row["routing"]) and _in_unit(row["majority"]) and _in_unit(row["largest_share"])
        assert row["gain"] == pytest.approx(row["routing"] - row["majority"], abs=1e-3)


def test_tree_with_a_missing_labels_file_is_a_clear_error(bench_env: Path, tmp_path: Path) -> None:
    result = CliRunner().invoke(app, ["bench", "tree", str(ADI), "--labels", str(tmp_path / "nope.tsv"),
                                      "--embedder", "hash", "--out", str(bench_env)])
    assert result.exit_code == 1
    assert "labels" in result.output and "nope.tsv" in result.output


@pytest.mark.slow
def test_speed_json_has_cold_and_warm_figures(bench_env: Path) -> None:
    data = _run(["bench", "speed", "--data", str(ADI), "--embedder", "hash", "--sizes", "300", "--no-ann", "--runs",
                 "1", "--queries", "5", "--startup-data", str(ADI), "--startup-runs", "2", "--json", "--out",
                 str(bench_env)])
    startup = data["startup"]
    assert startup["collection"] == "adi" and startup["chunks"] == 82 and startup["categories"] > 1
    assert [r["command"] for r in startup["rows"]] == ["kt --help", "kt browse"]
    assert all(r["x_python"] > 0 and isinstance(r["within_target"], bool) for r in startup["rows"])
    assert {r["command"]: r["target"] for r in startup["rows"]} == {"kt --help": 4.0, "kt browse": 8.0}
    commands = {r["command"]: r for r in data["cold"]}
    assert "python -c pass" in commands and "kt browse" in commands
    assert all(r["exit"] == 0 and r["wall_ms"] > 0 for r in commands.values())
    assert data["ingest"]["ingest_chunks_per_s"] > 0
    (scale,) = data["scale"]
    assert scale["chunks"] == 300 and scale["search_hybrid"]["p50_ms"] > 0
    assert scale["search_hybrid_serial"]["cpu_p50_ms"] > 0  # the default preset without the overlap
    stages = scale["default_stages"]["stages"]
    assert list(stages) == ["query embedding", "vector search", "keyword search", "fusion", "snippets"]
    assert all(s["p50_ms"] > 0 and "cpu_p50_ms" in s for s in stages.values())
