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


@pytest.mark.parametrize("name", sorted(golden_trees.SNAPSHOTS))
def test_no_description_lists_a_name_already_said_as_an_example_title(name: str) -> None:
    """"Includes …" names documents the node's own and its children's names do not already say."""
    import re

    lines = (golden_trees.GOLDEN / name).read_text(encoding="utf-8").splitlines()[1:]
    parsed = [(len(line) - len(line.lstrip()), re.match(r"\s*(.*?) \(\d+\) — (.*)", line)) for line in lines]
    checked = 0
    for i, (depth, match) in enumerate(parsed):
        assert match, lines[i]
        kids = []
        for d, m in parsed[i + 1:]:
            if d <= depth:
                break
            if d == depth + 2:
                kids.append(m.group(1))
        titles = re.search(r"Includes (.*?)\.(?: For example:|$)", match.group(2))
        if not titles:
            continue
        for said in [match.group(1), *kids]:
            # titles hold " and " themselves ("Travel and Expenses Policy"): an item starts the list
            # or follows a comma, and only the last one follows " and "
            item = re.escape(said)
            assert not re.search(rf"(^|, |; ){item}(, |; |$)|( and ){item}$", titles.group(1)), (said, lines[i])
        checked += 1
    assert checked
