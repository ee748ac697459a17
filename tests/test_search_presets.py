"""Search presets, --explain, hybrid by default, connected context and keyword snippets (issue 15, 16.7)."""

from __future__ import annotations

# ruff: noqa: F811
import json
import os
from dataclasses import replace

import pytest
from _agent_fixtures import CHUNKS, agent_store, agent_store_copy, env, kt  # noqa: F401

from knowtology_cli import KnowledgeMapTools
from knowtology_cli.errors import ConfigError
from knowtology_cli.kb import KnowledgeBase
from knowtology_cli.retrieval import presets
from knowtology_cli.retrieval.rerank import Candidate, Reranker
from knowtology_cli.stores.base import ScoredId

TEXT = {cid: text for cid, _, _, text in CHUNKS}


@pytest.fixture()
def kb(agent_store_copy):
    k = KnowledgeBase.open(agent_store_copy)
    yield k
    k.close()


def test_hybrid_is_the_default_for_the_library_tools_and_cli(kb, agent_store_copy) -> None:
    assert kb.search("refund within 7 days").mode == "hybrid"
    tools = KnowledgeMapTools(kb=kb)
    result = tools.run("km_search_chunks", {"query": "refund within 7 days"}).result
    assert result.mode == "hybrid" and result.preset == "default"
    data = json.loads(kt("search", "refund within 7 days", "--json", "--store", str(agent_store_copy)).stdout)
    assert data["mode"] == "hybrid" and data["preset"] == "default"
    # an explicit mode still wins over the preset's
    assert kb.search("refund", mode="semantic").mode == "semantic"
    assert kb.search("refund", preset="fast").mode == "keyword"


def test_each_preset_runs_its_stages(kb) -> None:
    fast = kb.search("refund within 7 days", preset="fast", explain=True)
    assert all(set(h.explain) == {"keyword", "keyword_rank", "final_rank"} for h in fast.hits)
    default = kb.search("refund within 7 days", preset="default", explain=True)
    assert {"fused", "final_rank"} <= set(default.hits[0].explain)
    assert {"dense", "keyword"} & set(default.hits[0].explain)
    thorough = kb.search("refund within 7 days", preset="thorough", explain=True, k=3)
    top = thorough.hits[0].explain
    assert {"smoothed", "prf_dense", "prf_keyword", "prf_fused"} <= set(top), top
    assert "tree" not in top  # the tree lift measured no gain; no shipped preset runs it
    assert thorough.expansion and abs(sum(thorough.expansion.values()) - 1.0) < 1e-6
    assert "refund" in thorough.expansion  # the original query keeps its weight
    assert [h.explain["final_rank"] for h in thorough.hits] == [1, 2, 3]
    assert kb.search("refund", preset="thorough").hits[0].explain is None  # only on request


def test_a_preset_with_a_tree_lift_scores_hits_by_their_leaf(kb, monkeypatch) -> None:
    monkeypatch.setitem(presets.PRESETS, "default", replace(presets.PRESETS["default"], tree_lift=0.25))
    hits = kb.search("refund within 7 days", explain=True, k=5).hits
    leaf = {m.chunk_id: m.path for m in kb.tree.mappings(kb._collection(None))}
    assert leaf, "the agent store has a tree"
    by_leaf: dict[str, set[float]] = {}
    for h in hits:  # a hit's score is its fused score lifted by λ × its leaf's mean score
        assert h.score == pytest.approx(h.explain["fused"] + 0.25 * h.explain["tree"], abs=1e-4)
        if h.chunk_id in leaf:
            by_leaf.setdefault(leaf[h.chunk_id], set()).add(h.explain["tree"])
    assert all(len(scores) == 1 for scores in by_leaf.values()), by_leaf  # one score per leaf


def test_bad_preset_mode_and_reranker_are_clear_errors(kb, agent_store_copy) -> None:
    with pytest.raises(ConfigError, match="unknown search preset 'quick'"):
        kb.search("refund", preset="quick")
    with pytest.raises(ConfigError, match="unknown reranker"):
        kb.search("refund", rerank="magic")
    with pytest.raises(ConfigError, match="needs a model"):
        kb.search("refund", rerank="llm")
    proc = kt("search", "refund", "--preset", "quick", "--store", str(agent_store_copy), check=False)
    assert proc.returncode == 2 and "quick" in proc.stderr


class Reverse(Reranker):
    """Scores the head in reverse order (a deterministic double for the interface)."""

    name = "reverse"

    def score(self, query: str, candidates: list[Candidate]) -> list[float]:
        return [float(i) for i in range(len(candidates))]


def test_a_reranker_reorders_the_top_n_and_never_drops_a_hit() -> None:
    ranking = [ScoredId(f"c{i}", 1.0 - i / 10) for i in range(8)]
    outcome = Reverse(top_n=3).rerank("q", ranking, {})
    assert [s.chunk_id for s in outcome.ranking] == ["c2", "c1", "c0", "c3", "c4", "c5", "c6", "c7"]
    assert outcome.applied and set(outcome.scores) == {"c0", "c1", "c2"}


def test_explain_cli_prints_the_stage_scores(agent_store_copy) -> None:
    out = kt("search", "refund within 7 days", "--preset", "thorough", "--explain", "-k", "3",
             "--store", str(agent_store_copy)).stdout
    stage_lines = [line for line in out.splitlines() if line.startswith("   ")]
    assert len(stage_lines) == 3
    assert all("fused" in line and "rm3" in line and "rocchio" in line and "→ #" in line for line in stage_lines)
    assert "feedback query:" in out
    data = json.loads(kt("search", "refund within 7 days", "--explain", "--json", "--store",
                         str(agent_store_copy)).stdout)
    assert all(h["explain"]["final_rank"] == i for i, h in enumerate(data["hits"], start=1))


def test_read_context_returns_marked_neighbours_and_counts_them_as_read(kb) -> None:
    result = kb.read(["ret-2"], context=1, session="ctx")
    assert [(c.chunk_id, c.context_of) for c in result.chunks] == [
        ("ret-1", "ret-2"), ("ret-2", None), ("ret-3", "ret-2")]
    assert all(c.text == TEXT[c.chunk_id] for c in result.chunks)
    assert set(kb.read_history(session="ctx")) == {"ret-1", "ret-2", "ret-3"}
    again = kb.read(["ret-3"], context=1, session="ctx")
    assert [(c.chunk_id, c.already_read) for c in again.chunks] == [("ret-2", True), ("ret-3", True), ("ret-4", False)]
    # the edge of a document, and another document's chunks never mix in
    edge = kb.read(["shp-1"], context=2, session="edge")
    assert [c.chunk_id for c in edge.chunks] == ["shp-1", "shp-2", "shp-3"]
    # two requested neighbours: each listed once, as itself
    both = kb.read(["hr-1", "hr-2"], context=1, session="both")
    assert [(c.chunk_id, c.context_of) for c in both.chunks] == [("hr-1", None), ("hr-2", None), ("hr-3", "hr-2")]
    with pytest.raises(ConfigError):
        kb.read(["hr-1"], context=-1)


def test_read_context_through_the_cli_and_the_tool(agent_store_copy) -> None:
    store = str(agent_store_copy)
    data = json.loads(kt("read", "inc-2", "--context", "1", "--session", "cli", "--json", "--store", store).stdout)
    assert [(c["chunk_id"], c["context_of"]) for c in data["chunks"]] == [
        ("inc-1", "inc-2"), ("inc-2", None), ("inc-3", "inc-2")]
    human = kt("read", "sec-3", "-C", "1", "--session", "cli2", "--store", store).stdout
    assert "(context of sec-3)" in human and TEXT["sec-2"] in human and TEXT["sec-4"] in human
    tools = KnowledgeMapTools.open(store, session="agent")
    try:
        text = tools.call("km_read_chunks", {"chunk_ids": ["hr-3"], "context": 1})
        assert text.count("(context of hr-3)") == 2 and TEXT["hr-4"] in text
    finally:
        tools.close()


def test_grep_snippet_is_the_matching_line_with_the_match_marked(kb, agent_store_copy, tmp_path) -> None:
    import subprocess

    from knowtology_cli.textutil import keyword_query

    doc = ("Introduction to the handbook.\nThis first line says nothing useful at all.\n"
           "Badge access to the server room is logged by the facilities desk.\nClosing remarks.")
    path = tmp_path / "extra.jsonl"
    path.write_text(json.dumps({"chunk_id": "fac-1", "text": doc}) + "\n")
    kt("ingest", str(path), "--store", str(agent_store_copy))
    data = json.loads(kt("grep", "server room", "--json", "--store", str(agent_store_copy)).stdout)
    hit = next(h for h in data["hits"] if h["chunk_id"] == "fac-1")
    assert hit["snippet"] == "Badge access to the server room is logged by the facilities desk."
    assert [hit["snippet"][a:b] for a, b in hit["marks"]] == ["server", "room"]
    regex = json.loads(kt("grep", "--regex", r"facilit\w+", "--json", "--store", str(agent_store_copy)).stdout)
    (rhit,) = [h for h in regex["hits"] if h["chunk_id"] == "fac-1"]
    assert [rhit["snippet"][a:b] for a, b in rhit["marks"]] == ["facilities"]
    # human output marks the words (bold) when colour is on, and prints plain text under NO_COLOR
    colour = {k: v for k, v in env().items() if k != "NO_COLOR"} | {"FORCE_COLOR": "1", "COLUMNS": "200"}
    out = subprocess.run([os.path.join(os.path.dirname(__import__("sys").executable), "kt"), "grep", "server room",
                          "--store", str(agent_store_copy)], capture_output=True, text=True, env=colour,
                         check=True).stdout
    assert "\x1b[1;33mserver\x1b[0m" in out and "\x1b[1;33mroom\x1b[0m" in out
    plain = kt("grep", "server room", "--store", str(agent_store_copy)).stdout
    assert "\x1b[" not in plain and "Badge access to the server room" in plain
    assert keyword_query("server room") == "server room"
    # a match past the line's cut is brought into view: the line starts a few words before it
    desk = [line for line in kt("grep", "desk", "--store", str(agent_store_copy)).stdout.splitlines()
            if "[fac-1]" in line]
    assert desk and "…" in desk[0] and "facilities desk" in desk[0], desk
    out = subprocess.run([os.path.join(os.path.dirname(__import__("sys").executable), "kt"), "grep", "desk",
                          "--store", str(agent_store_copy)], capture_output=True, text=True, env=colour,
                         check=True).stdout
    assert "\x1b[1;33mdesk\x1b[0m" in out


@pytest.mark.parametrize(("text", "marks"), [
    ("Badge access to the server room is logged by the facilities desk.", [(55, 59)]),
    ("Badge  access to the\nserver room is logged by the facilities desk today, and again at night.", [(56, 60)]),
    ("- Wildcard iterator should exclude filepaths from rsync -x (#1602)", [(50, 55), (3, 11)]),
    ("Short line with rsync.", [(16, 21)]),
    ("word " * 30 + "needle", [(150, 156)]),
])
def test_a_trimmed_hit_line_keeps_its_first_match_in_view(text: str, marks: list[tuple[int, int]]) -> None:
    from knowtology_cli.render import SNIPPET_CHARS, trim_marked

    line, spans = trim_marked(text, SNIPPET_CHARS, marks)
    assert len(line) <= SNIPPET_CHARS
    wanted = {text[a:b] for a, b in marks}
    assert spans and all(line[a:b] in wanted for a, b in spans)
    assert line[slice(*spans[0])] == text[slice(*min(marks))]  # the first match, whole and marked
    if len(" ".join(text.split())) <= SNIPPET_CHARS:
        assert line == " ".join(text.split())


def test_hit_lines_are_grouped_by_path_and_keep_every_id(kb) -> None:
    from knowtology_cli.render import search_text

    result = kb.search("refund delivery password leave incident", k=10)
    text = search_text(result)
    lines = text.splitlines()
    for h in result.hits:
        assert f" [{h.chunk_id}] " in text
        heading = max(i for i, line in enumerate(lines) if not line.startswith(" ")
                      and i < next(j for j, x in enumerate(lines) if x.startswith(f" [{h.chunk_id}]")))
        assert lines[heading] == (h.path or h.file_name)
    headings = [line for line in lines if not line.startswith(" ")]
    assert len(headings) == len(set(headings))  # one heading per group


def test_a_path_stands_where_its_best_hit_ranks() -> None:
    """Hits of one path are listed together (a site's results, as search engines group them): the
    path stands at its best hit's rank and its hits follow in rank order."""
    from knowtology_cli.models import Hit, SearchResult
    from knowtology_cli.render import search_text

    hits = [Hit(chunk_id=f"c{i}", path=path, snippet=f"s{i}", score=1 - i / 10)
            for i, path in enumerate(["A › x", "B › y", "A › x", "C › z"])]
    assert search_text(SearchResult(query="q", mode="keyword", hits=hits)).splitlines() == [
        "A › x", " [c0] s0 1.00", " [c2] s2 .80", "B › y", " [c1] s1 .90", "C › z", " [c3] s3 .70"]
