"""`kt build` (offline) end to end: descriptions are chosen by how well they route chunks, at every
level, in sibling groups with enough chunks per child."""

from __future__ import annotations

import json
import shutil
import subprocess
from pathlib import Path
from types import SimpleNamespace

import numpy as np
from conftest import KT


def test_kt_build_picks_descriptions_that_route_at_least_as_well_as_the_full_ones(
        sample_store: Path, tmp_path: Path) -> None:
    from knowtology_cli.bench.build import routing_accuracy
    from knowtology_cli.bench.tree import name_routing
    from knowtology_cli.builders.cluster import name_tree
    from knowtology_cli.builders.params import DEFAULT_PARAMS
    from knowtology_cli.builders.runner import _load_items
    from knowtology_cli.kb import KnowledgeBase

    store = tmp_path / "store"
    shutil.copytree(sample_store, store)
    done = subprocess.run([KT, "build", "--builder", "cluster", "--rebuild", "--store", str(store), "--json"],
                          capture_output=True, text=True, timeout=600)
    assert done.returncode == 0, done.stderr
    assert json.loads(done.stdout)["unmapped"] == 0

    kb = KnowledgeBase.open(store)
    try:
        collection = "default"
        built = {r["level"]: r["routing_accuracy"] for r in routing_accuracy(kb, collection)}
        nodes = kb.tree.nodes(collection)
        leaf_of = {m.chunk_id: m.path for m in kb.tree.mappings(collection)}
        items, matrix = _load_items(kb, collection)
        # The same shape with the full descriptions (no embedder: what the namer wrote before).
        full = name_tree(items, matrix, [leaf_of[it.chunk_id] for it in items])
        embedder = kb.embedder_for(collection)
        plain = [SimpleNamespace(path=n.path, name=n.name, description=full[n.path][1]) for n in nodes]
        vectors = {it.chunk_id: matrix[i] / max(float(np.linalg.norm(matrix[i])), 1e-12) for i, it in enumerate(items)}
        base = {r["level"]: r["routing"] for r in name_routing(
            plain, leaf_of, vectors, lambda texts: np.stack([embedder.embed_query(t) for t in texts]))}
    finally:
        kb.close()
    for level, accuracy in base.items():
        assert built[level] >= accuracy, level
    changed = [n for n in nodes if n.description != full[n.path][1]]
    assert changed
    # only in sibling groups with at least `routed_min_chunks` chunks per child
    def parent(path: str) -> str:
        return path.rsplit("/", 1)[0] if "/" in path else ""

    groups: dict[str, list[int]] = {}
    for n in nodes:
        groups.setdefault(parent(n.path), []).append(n.chunk_count)
    for n in changed:
        sizes = groups[parent(n.path)]
        assert sum(sizes) >= DEFAULT_PARAMS.routed_min_chunks * len(sizes), n.path
