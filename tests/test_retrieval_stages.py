"""Fusion rules, RM3 / Rocchio feedback and keyword windows (knowtology_cli.retrieval), on fixed inputs."""

from __future__ import annotations

import numpy as np
import pytest

from knowtology_cli.retrieval.fusion import fuse_lists, normalise
from knowtology_cli.retrieval.highlight import best_window, keyword_matcher, regex_matcher
from knowtology_cli.retrieval.pipeline import smooth_scores
from knowtology_cli.retrieval.presets import PRESETS, get_preset
from knowtology_cli.retrieval.prf import FeedbackParams, rm3_query, rocchio, stem
from knowtology_cli.stores.base import ScoredId


def ids(items):
    return [s.chunk_id for s in items]


def test_minmax_fusion_gives_a_missing_chunk_the_lists_floor() -> None:
    dense = [ScoredId("a", 0.9), ScoredId("b", 0.5), ScoredId("c", 0.1)]
    sparse = [ScoredId("c", 12.0), ScoredId("d", 2.0)]
    fused = {s.chunk_id: s.score for s in fuse_lists({"dense": dense, "keyword": sparse})}
    assert fused == pytest.approx({"a": 0.5, "b": 0.25, "c": 0.5, "d": 0.0})
    assert ids(fuse_lists({"dense": dense, "keyword": sparse})) == ["a", "c", "b", "d"]  # ties by id


def test_zscore_and_rrf_rules() -> None:
    items = [ScoredId("a", 3.0), ScoredId("b", 1.0)]
    assert normalise(items, "zscore") == pytest.approx({"a": 1.0, "b": -1.0})
    assert normalise(items, "rrf") == pytest.approx({"a": 1 / 61, "b": 1 / 62})
    with pytest.raises(ValueError):
        normalise(items, "borda")


def test_rm3_keeps_the_query_and_adds_feedback_terms_by_stem() -> None:
    feedback = [("Turbulent boundary layers in supersonic flows over flat plates", 2.0),
                ("Laminar boundary layer flow and heat transfer", 1.0)]
    query = rm3_query("boundary layer flow", feedback, FeedbackParams(terms=4))
    assert sum(query.values()) == pytest.approx(1.0)
    assert set(list(query)[:3]) == {"boundary", "layer", "flow"}
    exact = rm3_query("alpha", [("alpha beta beta", 1.0)], FeedbackParams(terms=2))
    assert exact == pytest.approx({"alpha": 0.5 + 0.5 / 3, "beta": 0.5 * 2 / 3})
    assert stem("layers") == stem("layer") and len({stem(t) for t in query}) == len(query)
    assert "turbulent" in query and "in" not in query


def test_rocchio_moves_the_query_towards_the_feedback_and_stays_unit() -> None:
    q = np.array([1.0, 0.0], dtype=np.float32)
    moved = rocchio(q, [np.array([0.0, 1.0]), np.array([0.0, 1.0])])
    assert np.linalg.norm(moved) == pytest.approx(1.0)
    assert moved[1] / moved[0] == pytest.approx(0.75)
    assert rocchio(q, []) is not None and np.allclose(rocchio(q, []), q)


def test_smoothing_lifts_a_candidate_whose_neighbours_score_well() -> None:
    """Score regularization: "c" scores below "b" alone, but its nearest candidates ("a", "d") score
    high while "b" sits apart, so smoothed "c" passes "b"; the tail and vector-less hits stay behind."""
    ranking = [ScoredId("a", 1.0), ScoredId("b", 0.8), ScoredId("c", 0.7), ScoredId("d", 0.65),
               ScoredId("e", 0.0), ScoredId("x", 0.5), ScoredId("tail", 0.1)]
    v = {"a": [1.0, 0.1, 0.0], "c": [0.9, 0.2, 0.0], "d": [1.0, 0.0, 0.1], "b": [0.0, 0.0, 1.0],
         "e": [0.0, 1.0, 0.0], "tail": [1.0, 0.0, 0.0]}
    vectors = {k: np.asarray(x) for k, x in v.items()}
    out = smooth_scores(ranking, vectors, alpha=0.5, neighbours=2, top=6)
    assert ids(out)[:5] == ["a", "c", "d", "b", "e"] and ids(out)[5:] == ["x", "tail"]
    own = {"a": 1.0, "b": 0.8, "c": 0.7, "d": 0.65, "e": 0.0}
    sim_ca, sim_cd = (np.dot(vectors["c"], vectors[o]) / np.linalg.norm(vectors["c"]) / np.linalg.norm(vectors[o])
                      for o in ("a", "d"))
    expected_c = 0.5 * own["c"] + 0.5 * (sim_ca * own["a"] + sim_cd * own["d"]) / (sim_ca + sim_cd)
    assert dict((s.chunk_id, s.score) for s in out)["c"] == pytest.approx(expected_c)
    assert smooth_scores(ranking, vectors, alpha=0.0, neighbours=2) == ranking
    assert smooth_scores(ranking[:2], vectors, alpha=0.5, neighbours=2) == ranking[:2]  # too few to smooth


def test_best_window_picks_the_line_with_most_distinct_matches() -> None:
    text = "Refund rules\nA refund is possible.\nA refund within 7 days of delivery is possible for unopened goods."
    window = best_window(text, keyword_matcher("refunds, 7 days"))
    assert window.text.startswith("A refund within 7 days")
    assert [window.text[a:b] for a, b in window.marks] == ["refund", "7", "days"]
    assert best_window(text, keyword_matcher("password")) is None
    long = "word " * 60 + "the needle sits here " + "word " * 60
    cut = best_window(long, regex_matcher("needle"), width=60)
    assert cut.text.startswith("…") and cut.text.endswith("…") and len(cut.text) <= 62
    assert [cut.text[a:b] for a, b in cut.marks] == ["needle"]
    # a match deep inside one long word (a JSON string of an API reply): the window still holds it
    json_line = 'x "PolicyArn": "' + "a" * 300 + 'my-functionRole' + "b" * 300 + '"'
    cut = best_window(json_line, regex_matcher("my-functionRole"), width=60)
    assert [cut.text[a:b] for a, b in cut.marks] == ["my-functionRole"] and len(cut.text) <= 62


def test_best_window_prefers_a_match_the_reader_sees_to_one_inside_a_tag() -> None:
    # API references put an anchor above each heading; the anchor's id repeats the heading's name
    text = '<a id="ERR_HTTP_REQUEST_TIMEOUT"></a>\n\n### `ERR_HTTP_REQUEST_TIMEOUT`\n\nThe client took too long.'
    for find in (regex_matcher(r"ERR_[A-Z_]+TIMEOUT"), keyword_matcher("request timeout")):
        assert best_window(text, find).text == "`ERR_HTTP_REQUEST_TIMEOUT`"
    # a match only inside a tag is still shown when nothing else matches
    assert best_window('<a id="ERR_X"></a>\nOther words.', regex_matcher("ERR_X")).text == '<a id="ERR_X"></a>'


def test_presets_are_data() -> None:
    assert set(PRESETS) == {"fast", "default", "thorough"}
    assert get_preset(None).name == "default" and get_preset("fast").mode == "keyword"
    assert PRESETS["thorough"].feedback and not PRESETS["default"].feedback


@pytest.mark.parametrize("backend", ["memory", "lance"])
def test_neighbours_stay_inside_the_document_in_order(backend, tmp_path) -> None:
    from knowtology_cli.models import Chunk
    from knowtology_cli.stores.lance import LanceVectorStore
    from knowtology_cli.stores.memory import InMemoryVectorStore

    store = InMemoryVectorStore() if backend == "memory" else LanceVectorStore(tmp_path / "lance")
    rows = [Chunk(chunk_id=f"a#{i}", text=f"a{i}", doc_id="a", chunk_index=i) for i in range(5)]
    rows += [Chunk(chunk_id="b#1", text="b1", doc_id="b", chunk_index=1),
             Chunk(chunk_id="f#1", text="f1", file_name="notes.md", chunk_index=1),
             Chunk(chunk_id="f#2", text="f2", file_name="notes.md", chunk_index=2)]
    store.upsert("c", rows, np.eye(len(rows), 4, dtype=np.float32) + 0.1)
    assert [c.chunk_id for c in store.neighbours("c", rows[2], 1, 1)] == ["a#1", "a#3"]
    assert [c.chunk_id for c in store.neighbours("c", rows[0], 2, 2)] == ["a#1", "a#2"]
    assert [c.chunk_id for c in store.neighbours("c", rows[6], 1, 1)] == ["f#2"]  # same file, no doc id
    assert store.neighbours("c", rows[5], 3, 3) == []
    # the weighted keyword query falls back to (or implements) a plain BM25 query over the same terms
    assert [s.chunk_id for s in store.weighted_keyword_search("c", {"zzz": 1.0}, 5)] == []
