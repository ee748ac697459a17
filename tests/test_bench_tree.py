"""`kt bench tree` measures: name routing accuracy, the majority baseline and balance, on hand-made trees."""

from __future__ import annotations

from types import SimpleNamespace

import numpy as np
import pytest

from knowtology_cli.bench.tree import name_routing


def _node(path: str, name: str | None = None, description: str = "") -> SimpleNamespace:
    return SimpleNamespace(path=path, name=name or path.rsplit("/", 1)[-1], description=description)


AXES = {"x": np.array([1.0, 0.0, 0.0]), "y": np.array([0.0, 1.0, 0.0]), "z": np.array([0.0, 0.0, 1.0])}


def _embed(texts: list[str]) -> np.ndarray:
    """A name's vector is the axis its first letter names (``x …`` -> x axis)."""
    return np.stack([AXES[t[0]] for t in texts])


def test_routing_counts_chunks_sent_to_their_own_sibling() -> None:
    nodes = [_node("xa"), _node("ya"), _node("xa/x1"), _node("xa/y1")]
    leaf_of = {"c1": "xa/x1", "c2": "xa/x1", "c3": "xa/y1", "c4": "ya", "c5": "ya"}
    vectors = {"c1": AXES["x"], "c2": AXES["y"], "c3": AXES["y"], "c4": AXES["y"], "c5": AXES["x"]}
    level1, level2 = name_routing(nodes, leaf_of, vectors, _embed)
    # level 1: xa holds c1-c3 (c1 routed; c2, c3 point at y and go to "ya"), ya holds c4 (routed), c5 (not)
    assert level1 == {"level": 1, "nodes": 2, "chunks": 5, "routing": 0.4, "majority": 0.6, "gain": -0.2,
                      "largest_share": 0.6}
    # level 2: only c1-c3 reach it; c1 -> x1 right, c2 -> y1 wrong, c3 -> y1 right; majority x1 (2 of 3)
    assert level2["chunks"] == 3 and level2["routing"] == pytest.approx(0.6667, abs=1e-4)
    assert level2["majority"] == pytest.approx(0.6667, abs=1e-4) and level2["largest_share"] == 0.4


def test_names_are_embedded_with_their_descriptions() -> None:
    seen: list[str] = []

    def embed(texts: list[str]) -> np.ndarray:
        seen.extend(texts)
        return _embed(texts)

    name_routing([_node("xa", "x name", "x words"), _node("ya")], {"c": "xa"}, {"c": AXES["x"]}, embed)
    assert seen == ["x name — x words", "ya"]


def test_a_perfect_naming_beats_the_majority_baseline() -> None:
    nodes = [_node("x"), _node("y"), _node("z")]
    leaf_of = {f"c{i}": "xyz"[i % 3] for i in range(30)}
    vectors = {c: AXES[p] for c, p in leaf_of.items()}
    (row,) = name_routing(nodes, leaf_of, vectors, _embed)
    assert row["routing"] == 1.0 and row["majority"] == pytest.approx(0.3333, abs=1e-4)


def test_chunks_without_vectors_are_not_counted_and_empty_trees_give_no_rows() -> None:
    (row,) = name_routing([_node("x"), _node("y")], {"a": "x", "b": "y"}, {"a": AXES["x"]}, _embed)
    assert row["chunks"] == 1 and row["routing"] == 1.0 and row["largest_share"] == 0.5
    assert name_routing([], {}, {}, _embed) == []


def test_kt_bench_tree_judges_a_folder_of_documents_end_to_end(tmp_path) -> None:
    """`kt bench tree DIR` (subprocess): a folder of documents is ingested, built and its names judged."""
    import json
    import os
    import subprocess
    import sys
    from pathlib import Path

    docs = tmp_path / "docs"
    topics = {"garden": "seeds soil compost watering seedlings pruning roses",
              "astronomy": "telescope galaxy nebula orbit comet eclipse planets",
              "cooking": "oven dough flour butter simmer sauce garlic"}
    for topic, words in topics.items():
        for n in range(4):
            folder = docs / topic
            folder.mkdir(parents=True, exist_ok=True)
            body = "\n\n".join(f"## Part {k}\n\n" + " ".join(words.split()[k:] + words.split()[:k]) + "." for k in range(3))
            (folder / f"{topic}-{n}.md").write_text(f"# {topic.title()} notes {n}\n\n{body}\n")
    kt = Path(sys.executable).with_name("kt")
    env = {**os.environ, "KNOWTOLOGY_BENCH_CACHE": str(tmp_path / "cache")}
    done = subprocess.run([str(kt), "bench", "tree", str(docs), "--embedder", "hash", "--json", "--out",
                           str(tmp_path / "out")], capture_output=True, text=True, env=env, timeout=300)
    assert done.returncode == 0, done.stderr
    (coll,) = json.loads(done.stdout)["collections"]
    assert coll["dataset"] == "docs" and coll["labels"] is None and coll["chunks"] >= 12
    names = coll["builders"]["cluster"]["names"]
    assert names and names[0]["level"] == 1 and 0.0 <= names[0]["routing"] <= 1.0
    assert names[0]["largest_share"] >= 1 / names[0]["nodes"] - 1e-9
