"""A tree that stays true (issue 12): top-down placement, churn and stale nodes, the offline refresh,
drift, and ``kt status`` saying "current" only when it is."""

from __future__ import annotations

import json
import shutil
import subprocess
from pathlib import Path

import numpy as np
from _agent_fixtures import KT, env
from conftest import SAMPLE

from knowtology_cli.builders.runner import (
    FRESHNESS,
    is_stale,
    node_names,
    place_top_down,
    stale_nodes,
)
from knowtology_cli.kb import KnowledgeBase
from knowtology_cli.models import Category, ChunkMapping
from knowtology_cli.stores.base import CollectionInfo, TreeStore, churn_by_node

pytest_plugins = ("scale_fixtures",)


def ok(*args: str | Path) -> dict:
    done = subprocess.run([KT, *map(str, args), "--json"], capture_output=True, text=True, env=env(), timeout=300)
    assert done.returncode == 0, done.stdout + done.stderr
    return json.loads(done.stdout)


# ------------------------------------------------------------------------------------------ placement
def test_place_top_down_follows_the_splits() -> None:
    rng = np.random.default_rng(0)
    centres = {"A/a1": [1, 0, 0.3, 0], "A/a2": [1, 0, -0.3, 0], "B/b1": [0, 1, 0, 0.3], "B/b2": [0, 1, 0, -0.3]}
    rows, leaves = [], []
    for leaf, centre in centres.items():
        for _ in range(20):
            rows.append(np.asarray(centre) + rng.normal(0, 0.05, 4))
            leaves.append(leaf)
    probes = [np.asarray(c) + rng.normal(0, 0.02, 4) for c in centres.values()]
    matrix = np.stack(rows + probes).astype(np.float32)
    matrix /= np.linalg.norm(matrix, axis=1, keepdims=True)
    placed = place_top_down(matrix, range(len(rows)), leaves, range(len(rows), len(rows) + len(probes)))
    assert placed == list(centres)


def test_top_down_places_by_the_level_one_split_first() -> None:
    # One big topic (A, two leaves) and one small (B, one leaf at level 1). The probe is nearer the
    # B leaf than either A leaf, but nearer the A centroid than B's: a top-down split sends it to A.
    a1, a2, b = np.array([1.0, 0.6, 0.0]), np.array([1.0, -0.6, 0.0]), np.array([0.55, 0.0, 0.83])
    rows = [a1] * 10 + [a2] * 10 + [b] * 10
    leaves = ["A/a1"] * 10 + ["A/a2"] * 10 + ["B"] * 10
    probe = np.array([0.9, 0.0, 0.45])
    matrix = np.stack([*rows, probe])
    matrix /= np.linalg.norm(matrix, axis=1, keepdims=True)
    unit = matrix[-1]
    leaf_sims = {p: float(unit @ (v / np.linalg.norm(v))) for p, v in (("A/a1", a1), ("A/a2", a2), ("B", b))}
    assert max(leaf_sims, key=leaf_sims.get) == "B"  # nearest leaf would say B
    assert place_top_down(matrix, range(30), leaves, [30])[0].startswith("A/")


# ------------------------------------------------------------------------------------------ churn
def test_churn_counts_membership_changes_up_the_chain() -> None:
    parents = {1: None, 2: 1, 3: 1, 4: None, 5: 4}  # 1 > {2, 3}; 4 > 5
    before = {"moved-inside": (2, "h"), "moved-across": (2, "h"), "changed": (3, "h"), "same": (3, "h"),
              "removed": (5, "h")}
    after = [("new", 2, "h"), ("moved-inside", 3, "h"), ("moved-across", 5, "h"), ("changed", 3, "h2"),
             ("same", 3, "h")]
    assert churn_by_node(parents, before, after, ["removed"]) == {
        2: 3,  # new joined, moved-inside and moved-across left
        3: 2,  # moved-inside joined, changed changed
        1: 3,  # new, changed and moved-across (its move inside 1 leaves 1's membership alone)
        5: 2, 4: 2,  # moved-across joined, removed left
    }


def test_a_node_is_stale_at_a_tenth_of_its_named_members() -> None:
    from knowtology_cli.models import TreeNode

    def node(named: int, churn: int) -> TreeNode:
        return TreeNode(id=1, collection="c", parent_id=None, name="N", level=1, path="N", named_count=named,
                        churn=churn)

    share = FRESHNESS.stale_share
    assert not is_stale(node(100, 0)) and not is_stale(node(100, round(100 * share) - 1))
    assert is_stale(node(100, round(100 * share))) and is_stale(node(3, 1))


def _m(chunk_id: str, path: str, content_hash: str = "h") -> tuple[ChunkMapping, str]:
    return (ChunkMapping(collection="c", chunk_id=chunk_id, tree_node_id=0, snippet=chunk_id, path=path), content_hash)


def test_tree_store_tracks_naming_state_renames_and_pending(tree: TreeStore) -> None:
    tree.ensure_collection(CollectionInfo(name="c", embedder="hash", dimension=8))
    tree.apply("c", [Category(path="A", description="a"), Category(path="B", description="b")],
               [_m("a1", "A/X"), _m("a2", "A/Y"), _m("b1", "B")], replace=True)
    assert {n.path: (n.named_count, n.churn) for n in tree.nodes("c")} == {
        "A": (2, 0), "A/X": (1, 0), "A/Y": (1, 0), "B": (1, 0)}
    assert (tree.tree_state("c").built, tree.tree_state("c").placed) == (3, 0)
    tree.apply("c", [], [_m("a3", "A/X"), _m("a1", "A/X", "h2")])
    assert tree.get_node("c", "A/X").churn == 2 and tree.get_node("c", "A").churn == 2
    assert tree.tree_state("c").placed == 2
    # swap two sibling names (never meets the unique path index), re-describe, mark A/X named
    tree.rename_nodes("c", {"A/X": ("Y", "now y"), "A/Y": ("X", None), "B": (None, "bee")}, named=["A/X"])
    by_path = {n.path: n for n in tree.nodes("c")}
    assert set(by_path) == {"A", "A/X", "A/Y", "B"}
    assert (by_path["A/Y"].description, by_path["A/Y"].churn, by_path["A/Y"].chunk_count) == ("now y", 0, 2)
    assert by_path["B"].description == "bee" and by_path["A"].churn == 2
    assert sorted(m.chunk_id for m in tree.mappings("c", under="A/Y")) == ["a1", "a3"]
    tree.rename_nodes("c", {"A": ("Top", None)})
    assert [m.path for m in tree.mappings("c", chunk_ids=["a2"])] == ["Top/X"]
    # removal: unmapped, disowned, pending, counted
    tree.record_sources("c", [("docs", "/d", "dir")], {"a2": ("docs", "x.md"), "b1": ("docs", "b.md")})
    tree.remove_chunks("c", ["b1"], forget_sources=[])
    assert tree.get_node("c", "B") is None and tree.pending_removals() == {"c": ["b1"]}
    assert tree.chunk_owners("c") == {"a2": ("docs", "x.md")} and tree.tree_state("c").removed == 1
    tree.clear_pending("c", ["b1"])
    tree.mark_stale("c", ["Top/X"])  # churn reaches the count it was named for, whatever it was
    marked = tree.get_node("c", "Top/X")
    assert marked.churn == marked.named_count >= 1 and is_stale(marked) and tree.get_node("c", "Top").churn == 2
    tree.mark_named("c")
    assert all(n.churn == 0 and n.named_count == n.chunk_count for n in tree.nodes("c"))
    assert tree.tree_state("c") == type(tree.tree_state("c"))(built=3, placed=0, removed=0)
    tree.drop_collection("c", pending=True)
    assert tree.pending_removals() == {"c": [""]} and tree.sources("c") == []


# ------------------------------------------------------------------------------------------ refresh
def _sample_part(root: Path, parts: list[str]) -> Path:
    for part in parts:
        shutil.copytree(SAMPLE / part, root / part)
    return root


def test_incremental_build_places_every_chunk_and_renames_what_changed(tmp_path: Path) -> None:
    corpus = _sample_part(tmp_path / "corpus", ["hr", "policies", "engineering"])
    kb = KnowledgeBase.open(tmp_path / "store")
    kb.ingest([str(corpus)], embedder="hash")
    kb.build(builder="cluster")
    before = {n.id: n for n in kb.tree.nodes("default")}
    _sample_part(corpus, ["support", "sales"])
    kb.ingest([str(corpus)])
    status = kb.status().collections[0]
    assert status.state == "unmapped" and "kt build" in status.advice and status.unmapped > 0
    report = kb.build()
    assert report.unmapped == 0 and any(n.startswith("placed ") for n in report.notes)
    after = {n.id: n for n in kb.tree.nodes("default")}
    assert set(after) <= set(before)  # placement adds no categories; it fills the ones there are
    assert stale_nodes(kb, "default") == []
    changed = [i for i in after if after[i].chunk_count != before[i].chunk_count]
    assert changed and all(after[i].churn == 0 or not is_stale(after[i]) for i in changed)
    assert any(after[i].description != before[i].description for i in changed)
    status = kb.status().collections[0]
    assert status.state == "current" and status.stale_nodes == []
    assert status.drift > 0 and status.rebuild_advised == (status.drift >= FRESHNESS.rebuild_drift)
    kb.close()


def test_status_and_build_through_kt(tmp_path: Path) -> None:
    corpus = _sample_part(tmp_path / "corpus", ["hr", "policies"])
    store = tmp_path / "store"
    ok("ingest", corpus, "--embedder", "hash", "--store", store)
    assert ok("status", "--store", store)["collections"][0]["state"] == "unbuilt"
    ok("build", "--store", store)
    first = ok("status", "--store", store)["collections"][0]
    assert (first["state"], first["drift"], first["advice"]) == ("current", 0.0, "")
    # an edited page: its chunks are still mapped, but wait for build as new ones do, and say so
    page = next(p for p in sorted((corpus / "policies").glob("*.md")))
    page.write_text(page.read_text() + "\n\nAn added sentence about late fees.\n")
    ok("ingest", corpus, "--store", store)
    edited = ok("status", "--store", store)["collections"][0]
    assert edited["state"] == "unmapped" and edited["changed"] >= 1 and edited["unmapped"] == 0
    assert f"{edited['changed']} new or changed chunks not placed" in edited["advice"]
    ok("build", "--store", store)
    assert ok("status", "--store", store)["collections"][0]["changed"] == 0
    _sample_part(corpus, ["support"])  # more than a fifth of the collection: drift passes the bar
    ok("ingest", corpus, "--store", store)
    built = ok("build", "--store", store)
    assert built["unmapped"] == 0 and any("kt build --rebuild" in n for n in built["notes"])
    after = ok("status", "--store", store)["collections"][0]
    assert after["state"] == "current" and after["rebuild_advised"] and "kt build --rebuild" in after["advice"]
    human = subprocess.run([KT, "status", "--store", str(store)], capture_output=True, text=True, env=env())
    assert "current" in human.stdout and f"kt --store {store} build --rebuild would give a better map" in human.stdout
    ok("rm", corpus / "support", "--yes", "--store", store)
    removed = ok("status", "--store", store)["collections"][0]
    assert removed["state"] == "stale" and removed["stale_nodes"] and "kt build" in removed["advice"]
    ok("build", "--rebuild", "--store", store)
    rebuilt = ok("status", "--store", store)["collections"][0]
    assert (rebuilt["state"], rebuilt["drift"], rebuilt["rebuild_advised"]) == ("current", 0.0, False)


def test_a_leaf_emptied_by_changed_chunks_leaves_no_single_child(tmp_path: Path) -> None:
    """Changed chunks are placed anew; when every member of a leaf changed, the leaf is gone, and a
    parent left with one child is folded as after a removal (a full build never makes one)."""
    source = KnowledgeBase.open(tmp_path / "sample")
    source.ingest([str(SAMPLE)], embedder="hash")
    rows = [c for chunks, _ in source.vectors.iter_rows("default", with_vectors=False) for c in chunks]
    source.close()
    kb = KnowledgeBase.open(tmp_path / "store")
    kb.add_chunks([{"chunk_id": c.chunk_id, "text": c.text, "title": c.title} for c in rows], embedder="hash")
    kb.build(builder="cluster")
    nodes = kb.tree.nodes("default")
    kids: dict[int | None, list] = {}
    for n in nodes:
        kids.setdefault(n.parent_id, []).append(n)
    leaf, sibling = next((k[0], k[1]) for p, k in kids.items()
                         if p is not None and len(k) == 2 and k[0].id not in kids and k[1].id not in kids)
    members = [m.chunk_id for m in kb.tree.mappings("default", under=leaf.path)]
    donors = [m.chunk_id for m in kb.tree.mappings("default", under=sibling.path)]
    texts = {c.chunk_id: c for c in kb.vectors.get("default", donors)}
    kb.add_chunks([{"chunk_id": i, "text": texts[donors[n % len(donors)]].text + f" (copy {n})"}
                   for n, i in enumerate(members)])
    kb.build()
    after = kb.tree.nodes("default")
    counts: dict[int | None, int] = {}
    for n in after:
        counts[n.parent_id] = counts.get(n.parent_id, 0) + 1
    assert not [n.path for n in after if counts.get(n.id) == 1], "a category with a single child"
    assert kb.status().collections[0].unmapped == 0
    kb.close()


def test_a_refresh_keeps_a_name_the_new_one_only_reorders_or_adds_to(tmp_path: Path, monkeypatch) -> None:
    """A stale node is renamed when the namer says something else, not when it says the old name's
    words in another order or adds a word to them: people keep the map they learnt."""
    from knowtology_cli.builders import cluster

    corpus = _sample_part(tmp_path / "corpus", ["hr", "policies", "engineering"])
    kb = KnowledgeBase.open(tmp_path / "store")
    kb.ingest([str(corpus)], embedder="hash")
    kb.build(builder="cluster")
    old = {n.path: n.name for n in kb.tree.nodes("default")}
    path_of = {n.id: n.path for n in kb.tree.nodes("default")}
    real = cluster.name_tree
    offered: dict[str, str] = {}

    def namer(*args, **kwargs):
        names = real(*args, **kwargs)
        for i, path in enumerate(sorted(names)):
            words = old[path].split(" & ")
            offered[path] = [" & ".join(reversed(words)) if len(words) > 1 else f"{old[path]} & Quokka",
                             f"{old[path]} & Quokka", f"Quokka habitat {i}"][i % 3]
            names[path] = (offered[path], names[path][1])
        return names

    monkeypatch.setattr(cluster, "name_tree", namer)
    _sample_part(corpus, ["support", "sales"])
    kb.ingest([str(corpus)])
    report = kb.build()
    after = {n.id: n.name for n in kb.tree.nodes("default")}
    renamed = {path_of[i]: name for i, name in after.items() if i in path_of and name != old[path_of[i]]}
    kept_on_purpose = [p for p, name in offered.items() if "habitat" not in name and p in old]
    assert kept_on_purpose and all(p not in renamed for p in kept_on_purpose)
    assert renamed and all(name.startswith("Quokka habitat") for name in renamed.values()), renamed
    assert any("renamed" in note for note in report.notes)
    kb.close()


#: One paragraph per topic, for collections whose shape the tests choose.
TOPICS = {"tides": "Tide tables give the water levels at the harbour; spring tides rise higher than neap tides.",
          "bread": "Sourdough needs a starter, flour, water and salt; the dough rises overnight before baking.",
          "chess": "The bishop moves diagonally and the rook along ranks and files; castling moves the king.",
          "solar": "Solar panels turn sunlight into electricity; an inverter feeds the current into the grid.",
          "burrow": "Wombats dig burrows in dry soil with strong claws; the tunnels keep the wombat cool."}


def test_build_says_why_a_level1_category_holds_more_than_a_quarter(tmp_path: Path) -> None:
    """A collection that is mostly one topic keeps it in one level-1 category, and ``kt build`` says so
    and why; a collection of even topics gets no such line."""
    for name, burrows, others in (("lopsided", 24, 4), ("even", 0, 10)):
        docs = tmp_path / name
        docs.mkdir()
        for topic, text in TOPICS.items():
            for i in range(burrows if topic == "burrow" else others):
                (docs / f"{topic}-{i}.md").write_text(f"# {topic.title()} {i}\n\n{text}\n")
        store = tmp_path / f"{name}-store"
        ingest = subprocess.run([KT, "ingest", str(docs), "--store", str(store), "--embedder", "hash"],
                                capture_output=True, text=True, env=env(), timeout=300)
        assert ingest.returncode == 0, ingest.stderr
        built = subprocess.run([KT, "build", "--store", str(store), "--json"], capture_output=True, text=True,
                               env=env(), timeout=300)
        assert built.returncode == 0, built.stderr
        notes = [n for n in json.loads(built.stdout)["notes"] if n.startswith("the largest level-1 category")]
        if name == "lopsided":
            assert notes == ["the largest level-1 category holds 60% of the chunks: no split into 2-4 parts kept"
                             " every part under 25%"], notes
        else:
            assert notes == []


def test_a_build_clusters_anew_when_new_chunks_outnumber_the_mapped_ones(tmp_path: Path) -> None:
    """A few new documents are placed into the map people know; when the new ones outnumber what the
    tree held (a collection that grew from a start, a corpus mostly rewritten), placing them into
    the old leaves would give a map of the old corpus: the build clusters everything anew."""
    docs, store = tmp_path / "docs", tmp_path / "store"
    docs.mkdir()

    def write(topic: str, count: int) -> None:
        for i in range(count):
            (docs / f"{topic}-{i}.md").write_text(f"# {topic.title()} {i}\n\n{TOPICS[topic]}\n")

    write("tides", 6)
    write("bread", 6)
    ok("ingest", docs, "--store", store, "--embedder", "hash")
    assert ok("build", "--store", store)["notes"][0] == "clustered 12 chunks"
    write("chess", 3)
    ok("ingest", docs, "--store", store)
    assert ok("build", "--store", store)["notes"][0].startswith("placed 3 new or changed chunks top-down")
    write("solar", 16)
    ok("ingest", docs, "--store", store)
    notes = ok("build", "--store", store)["notes"]
    assert notes[0] == "clustered 31 chunks (16 new or changed chunks outnumber the 15 the tree held)", notes
    names = {n["name"].lower() for n in ok("browse", "--store", store)["children"]}
    assert any("solar" in name for name in names), names


def test_a_name_that_says_a_part_gone_is_stale_however_small_the_part(tmp_path: Path) -> None:
    """A category named after a part of it that is gone no longer says what it holds: it is stale
    (renamed by the next build) although one chunk of twenty-one is far below the churn that makes
    a node stale; a sibling whose name shares no word with the part is not."""
    corpus = tmp_path / "corpus"
    corpus.mkdir()
    counts = {"tides": 10, "bread": 10, "burrow": 1, "chess": 10, "solar": 10}
    for topic, count in counts.items():
        for n in range(count):
            (corpus / f"{topic}-{n}.md").write_text(f"# {topic.title()} {n}\n\n{TOPICS[topic]} Note {n}.\n")
    kb = KnowledgeBase.open(tmp_path / "store")
    kb.ingest([str(corpus)], embedder="hash")
    leaf = {"tides": "Tides & Burrows/Tides", "bread": "Tides & Burrows/Bakery", "burrow": "Tides & Burrows/Burrows",
            "chess": "Games/Chess", "solar": "Games/Solar"}
    hashes = {i: h for i, (h, _) in kb.vectors.fingerprints("default").items()}
    kb.tree.apply("default", [Category(path=p, description="") for p in ("Tides & Burrows", "Games", *leaf.values())],
                  [(ChunkMapping(collection="default", chunk_id=i, tree_node_id=0, snippet=t, path=leaf[t]), hashes[i])
                   for t, count in counts.items() for n in range(count) if (i := f"corpus/{t}-{n}.md#0")],
                  replace=True)
    kb.tree.mark_named("default")
    (corpus / "burrow-0.md").unlink()
    kb.ingest([str(corpus)], prune=True)
    assert "Tides & Burrows/Burrows" not in node_names(kb, "default")
    assert [n.path for n in stale_nodes(kb, "default")] == ["Tides & Burrows"]
    report = kb.build(builder="cluster")
    assert "Tides & Burrows" not in {n.name for n in kb.tree.nodes("default")}, report.notes
    assert any("renamed 1" in note for note in report.notes), report.notes
    kb.close()


def test_a_refresh_names_the_changed_nodes_as_a_full_naming_does_embedding_less(tmp_path: Path) -> None:
    """The incremental refresh keeps only the changed nodes' names and descriptions, so only their
    sibling groups' descriptions are chosen by routing: the same names and descriptions there as a
    naming of the whole tree, for a fraction of the texts embedded."""
    from knowtology_cli.builders.cluster import name_tree
    from knowtology_cli.builders.runner import _load_items, query_embedder

    kb = KnowledgeBase.open(tmp_path / "store")
    kb.ingest([str(SAMPLE)], embedder="hash")
    kb.build(builder="cluster")
    items, matrix = _load_items(kb, "default")
    leaf_of = {m.chunk_id: m.path for m in kb.tree.mappings("default")}
    leaves = [leaf_of[it.chunk_id] for it in items]
    embed, embedded = query_embedder(kb, "default"), []

    def counted(texts: list[str]) -> np.ndarray:
        embedded.append(len(texts))
        return embed(texts)

    full = name_tree(items, matrix, leaves, embed_names=counted)
    everything, embedded[:] = sum(embedded), []
    deepest = max(leaves, key=lambda p: (p.count("/"), p))
    wanted = ["/".join(deepest.split("/")[:i]) for i in range(1, deepest.count("/") + 2)]
    part = name_tree(items, matrix, leaves, embed_names=counted, wanted=wanted)
    assert {p: part[p] for p in wanted} == {p: full[p] for p in wanted}
    assert 0 < sum(embedded) < everything, (sum(embedded), everything)
    kb.close()
