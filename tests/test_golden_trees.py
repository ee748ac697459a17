"""Golden snapshots: the full offline tree of sample_corpus/ and of ADI, names, descriptions and counts.

A failure prints the diff between the snapshot and the tree built now. If the change is intended,
review the diff and regenerate the snapshots: `make golden` (python -m benchmarks.golden_trees).
"""

from __future__ import annotations

import pytest

from benchmarks import golden_trees


@pytest.mark.parametrize("name", sorted(golden_trees.SNAPSHOTS))
def test_the_offline_tree_matches_its_golden_snapshot(name: str) -> None:
    if not golden_trees.available(name):
        pytest.skip(f"{name}: the corpus is not present (../shared/bench-data)")
    path = golden_trees.GOLDEN / name
    assert path.is_file(), f"no snapshot {path}: run `make golden`"
    expected = path.read_text(encoding="utf-8")
    actual = golden_trees.SNAPSHOTS[name]()
    assert actual == expected, (
        f"the offline tree of {name} changed; review the diff, then run `make golden`:\n"
        + golden_trees.diff(name, expected, actual)
    )


def test_a_snapshot_pins_every_node_with_its_count_and_description() -> None:
    from types import SimpleNamespace as Node

    nodes = [Node(path="A", name="A", chunk_count=3, description="About a."),
             Node(path="A/x", name="x", chunk_count=1, description="About x."),
             Node(path="A/y", name="y", chunk_count=2, description="About y."),
             Node(path="B", name="B", chunk_count=5, description="About b.")]
    assert golden_trees.render(nodes, "# head") == (
        "# head\nB (5) — About b.\nA (3) — About a.\n  y (2) — About y.\n  x (1) — About x.\n")
