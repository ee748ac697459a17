"""`kt bench build --compare`: the three builders side by side against the fake server's cost model."""

from __future__ import annotations

import json
import subprocess

from conftest import KT


def test_compare_builders_reports_calls_tokens_names_and_routing(docs_dir, tmp_path):
    done = subprocess.run([KT, "bench", "build", "--compare", str(docs_dir), "--builders", "cluster,hybrid,llm",
                           "--embedder", "hash", "--llm", "openai:gpt-4o-mini", "--out", str(tmp_path / "out"),
                           "--json"], capture_output=True, text=True, timeout=900, cwd=tmp_path)
    assert done.returncode == 0, done.stderr
    rows = {r["builder"]: r for r in json.loads(done.stdout)["builders"]}
    assert set(rows) == {"cluster", "hybrid", "llm"} and all(r["unmapped"] == 0 for r in rows.values())
    assert rows["cluster"]["calls"] == 0 and rows["hybrid"]["calls"] >= 1 and rows["llm"]["calls"] >= 1
    assert rows["hybrid"]["names_llm"] + rows["hybrid"]["names_offline"] == rows["hybrid"]["nodes"]
    assert rows["hybrid"]["output_tokens"] < rows["llm"]["output_tokens"]  # names only vs every assignment
    for r in rows.values():
        assert r["routing_l1"] is None or 0 <= r["routing_l1"] <= 1
    assert (tmp_path / "out" / "builders.json").is_file()
