"""``kt bench tree``: name routing accuracy, balance, and agreement with a gold taxonomy where one exists."""

from __future__ import annotations

import shutil
import statistics
import tempfile
import time
from collections import Counter
from collections.abc import Callable, Sequence
from pathlib import Path
from typing import Any

import numpy as np

from knowtology_cli.bench.data import COLLECTION, load_dataset, open_documents_store, open_store
from knowtology_cli.bench.report import curves_plot, table
from knowtology_cli.builders.cluster import DEFAULT_MAX_LEAF, assign_to_leaves, leaf_centroids
from knowtology_cli.builders.runner import stale_nodes
from knowtology_cli.errors import ConfigError
from knowtology_cli.kb import KnowledgeBase
from knowtology_cli.llm import get_llm
from knowtology_cli.models import Chunk
from knowtology_cli.stores.base import CollectionInfo


def read_labels(path: Path) -> dict[str, tuple[str, str, str]]:
    """``doc_id -> (l1, l2, l3)`` from a labels TSV with a header row."""
    out = {}
    with open(path, encoding="utf-8") as fh:
        header = fh.readline().rstrip("\n").split("\t")
        col = {name: i for i, name in enumerate(header)}
        for line in fh:
            parts = line.rstrip("\n").split("\t")
            if len(parts) >= len(header):
                out[parts[col["doc_id"]]] = (parts[col["l1"]], parts[col["l2"]], parts[col["l3"]])
    return out


def shape(kb: Any) -> dict[str, Any]:
    """Depth, nodes per level, children per inner node and chunks per leaf."""
    nodes = kb.tree.nodes(COLLECTION)
    children = Counter(n.parent_id for n in nodes if n.parent_id is not None)
    leaves = [n for n in nodes if n.id not in children]
    sizes = [n.chunk_count for n in leaves]
    fan = list(children.values()) + [sum(1 for n in nodes if n.parent_id is None)]
    return {"depth": max((n.level for n in nodes), default=0),
            "nodes_per_level": {str(lv): sum(1 for n in nodes if n.level == lv) for lv in (1, 2, 3)},
            "leaves": len(leaves),
            "children_min": min(fan, default=0), "children_median": statistics.median(fan) if fan else 0,
            "children_max": max(fan, default=0),
            "leaf_size_min": min(sizes, default=0), "leaf_size_median": statistics.median(sizes) if sizes else 0,
            "leaf_size_mean": round(statistics.fmean(sizes), 1) if sizes else 0, "leaf_size_max": max(sizes, default=0)}


def agreement(tree_labels: dict[str, str], gold: dict[str, tuple[str, str, str]]) -> dict[str, float]:
    """AMI, NMI and ARI of one partition against gold levels l1, l2, l3 (labelled documents only)."""
    from sklearn.metrics import (  # deferred: optional extra
        adjusted_mutual_info_score,
        adjusted_rand_score,
        normalized_mutual_info_score,
    )

    docs = sorted(d for d in tree_labels if d in gold)
    pred = [tree_labels[d] for d in docs]
    out: dict[str, float] = {"docs": len(docs)}
    for i, name in enumerate(("l1", "l2", "l3")):
        truth = [gold[d][i] for d in docs]
        out[f"ami_{name}"] = round(float(adjusted_mutual_info_score(truth, pred)), 4)
        out[f"nmi_{name}"] = round(float(normalized_mutual_info_score(truth, pred)), 4)
        out[f"ari_{name}"] = round(float(adjusted_rand_score(truth, pred)), 4)
    return out


def judge(kb: Any, gold: dict[str, tuple[str, str, str]], builder: str, vectors: dict[str, np.ndarray]) -> list[dict[str, Any]]:
    """Rows per tree level: the tree, a shuffled tree of the same shape, flat k-means with as many groups."""
    from sklearn.cluster import KMeans  # deferred: optional extra

    paths = {m.doc_id: m.path for m in kb.tree.mappings(COLLECTION)}
    depth = max((p.count("/") + 1 for p in paths.values()), default=0)
    rng = np.random.default_rng(0)
    rows = []
    for level in range(1, depth + 1):
        labels = {d: "/".join(p.split("/")[:level]) for d, p in paths.items()}
        groups = len(set(labels.values()))
        rows.append({"builder": builder, "level": level, "groups": groups, **agreement(labels, gold)})
        docs = list(labels)
        shuffled = dict(zip(docs, rng.permutation([labels[d] for d in docs]), strict=True))
        rows.append({"builder": "shuffled (chance)", "level": level, "groups": groups, **agreement(shuffled, gold)})
        ids = [d for d in docs if d in vectors]
        km = KMeans(n_clusters=min(groups, len(ids)), n_init=3, random_state=0).fit(np.stack([vectors[d] for d in ids]))
        flat = {d: str(c) for d, c in zip(ids, km.labels_, strict=True)}
        rows.append({"builder": "flat k-means", "level": level, "groups": groups, **agreement(flat, gold)})
    return rows


def name_routing(nodes: Sequence[Any], leaf_of: dict[str, str], vectors: dict[str, np.ndarray],
                 embed_names: Callable[[list[str]], np.ndarray]) -> list[dict[str, Any]]:
    """Per level: name routing accuracy, the majority-sibling baseline and the largest node's share.

    ``nodes`` carry ``path``, ``name``, ``description``; ``leaf_of`` maps chunk ids to leaf paths;
    ``embed_names`` embeds ``name — description`` texts (unit rows). At level L every chunk whose leaf
    lies at level L or deeper goes to the sibling (a child of its real level-(L-1) ancestor) whose
    name vector is nearest to its own vector; it counts as routed when that is its real node. The
    baseline always answers the sibling holding the most chunks.
    """
    ordered = sorted(nodes, key=lambda n: n.path)
    if not ordered or not leaf_of:
        return []
    texts = [f"{n.name} — {n.description}" if n.description else n.name for n in ordered]
    name_vec = dict(zip([n.path for n in ordered], np.asarray(embed_names(texts), dtype=np.float32), strict=True))
    children: dict[str, list[str]] = {}
    for n in ordered:
        children.setdefault(n.path.rpartition("/")[0], []).append(n.path)
    size = Counter(p for leaf in leaf_of.values() for p in _prefixes(leaf))
    total = len(leaf_of)
    depth = max(leaf.count("/") + 1 for leaf in leaf_of.values())
    rows = []
    for level in range(1, depth + 1):
        groups: dict[str, list[str]] = {}
        for chunk, leaf in leaf_of.items():
            parts = leaf.split("/")
            if len(parts) >= level and chunk in vectors:
                groups.setdefault("/".join(parts[: level - 1]), []).append(chunk)
        routed = majority = counted = 0
        for parent, chunks in groups.items():
            siblings = children.get(parent, [])
            if not siblings:
                continue
            real = ["/".join(leaf_of[c].split("/")[:level]) for c in chunks]
            matrix = np.stack([vectors[c] for c in chunks]).astype(np.float32)
            best = np.argmax(matrix @ np.stack([name_vec[s] for s in siblings]).T, axis=1)
            largest = max(siblings, key=lambda s: (size[s], s))
            routed += sum(siblings[int(b)] == r for b, r in zip(best, real, strict=True))
            majority += sum(r == largest for r in real)
            counted += len(chunks)
        at_level = [size[n.path] for n in ordered if n.path.count("/") + 1 == level]
        rows.append({"level": level, "nodes": len(at_level), "chunks": counted,
                     "routing": round(routed / max(1, counted), 4), "majority": round(majority / max(1, counted), 4),
                     "gain": round((routed - majority) / max(1, counted), 4),
                     "largest_share": round(max(at_level, default=0) / max(1, total), 4)})
    return rows


def _prefixes(path: str) -> list[str]:
    parts = path.split("/")
    return ["/".join(parts[:i]) for i in range(1, len(parts) + 1)]


def judge_names(kb: Any, vectors: dict[str, np.ndarray]) -> list[dict[str, Any]]:
    """:func:`name_routing` of the collection's current tree with the collection's embedder."""
    embedder = kb.embedder_for(COLLECTION)
    leaf_of = {m.chunk_id: m.path for m in kb.tree.mappings(COLLECTION)}
    return name_routing(kb.tree.nodes(COLLECTION), leaf_of, vectors,
                        lambda texts: np.stack([embedder.embed_query(t) for t in texts]))


def _open(data_dir: str | Path, embedder: str, message: Callable[[str], None]) -> tuple[Any, Path, str, Path | None]:
    """The scratch store of a BEIR folder or of a folder of documents, its name and its root folder."""
    path = Path(data_dir).expanduser()
    if path.is_dir() and not (path / "corpus.jsonl").is_file():
        kb, store, name = open_documents_store(path, embedder, message=message)
        return kb, store, name, None
    ds = load_dataset(data_dir)
    kb, store, _ = open_store(ds, embedder, message=message)
    return kb, store, ds.name, ds.root


def run_tree(data_dir: str = "cacm", *, labels: Path | None = None, embedder: str = "local", llm: str | None = None,
             out_dir: Any = None, message: Callable[[str], None] = lambda _m: None) -> dict[str, Any]:
    """Build the offline tree (and the LLM tree when ``llm`` is given) of one collection and judge it.

    Where a gold file exists (a TSV with ``doc_id``, ``codes``, ``l1``, ``l2``, ``l3``), every tree
    level is also scored by AMI / NMI / ARI against the gold levels (labelled documents only), beside
    two references with the same number of groups: a *shuffled* tree (same sizes, documents assigned
    at random) and *flat k-means* on the same embeddings. Balance is the largest node's share of all
    chunks per level.

    ``data_dir`` is a BEIR folder or name, or a folder of documents. Names and balance are always
    judged; agreement with a gold taxonomy when ``labels`` (default ``DATA_DIR/labels.tsv``) exists.
    """
    kb, store, name, root = _open(data_dir, embedder, message)
    label_path = labels or (root / "labels.tsv" if root is not None else None)
    if labels is not None and not labels.is_file():
        kb.close()
        raise ConfigError(f"no labels file at {labels}", hint="pass --labels FILE (doc_id, codes, l1, l2, l3)")
    gold = read_labels(label_path) if label_path is not None and label_path.is_file() else None
    result: dict[str, Any] = {"dataset": name, "labels": str(label_path) if gold else None,
                              "labelled_docs": len(gold) if gold else 0, "embedder": embedder, "builders": {}}
    try:
        vectors: dict[str, np.ndarray] = {}
        doc_vectors: dict[str, np.ndarray] = {}
        for chunks, vecs in kb.vectors.iter_rows(COLLECTION, with_vectors=True):
            vectors.update({c.chunk_id: v for c, v in zip(chunks, vecs, strict=True)})
            doc_vectors.update({c.doc_id: v for c, v in zip(chunks, vecs, strict=True)})
        result["chunks"] = len(vectors)
        message(f"{name}: offline cluster build…")
        t0 = time.perf_counter()
        report = kb.build(collection=COLLECTION, builder="cluster", rebuild=True)
        seconds = round(time.perf_counter() - t0, 2)
        result["builders"]["cluster"] = {"seconds": seconds, "shape": shape(kb), "names": judge_names(kb, vectors),
                                         "rows": judge(kb, gold, "offline cluster", doc_vectors) if gold else [],
                                         "notes": list(report.notes)}
    finally:
        kb.close()
    if llm:
        result["builders"]["llm"] = _llm_tree(store, llm, gold, vectors, doc_vectors, message)
    else:
        result["llm_note"] = "LLM builder not run: pass --llm PROVIDER:MODEL (no provider configured here)"
    if out_dir is not None and gold:
        result["plot"] = str(_plot(result, Path(out_dir) / f"tree_{name}.png"))
    return result


def run_trees(data_dirs: Sequence[str], **options: Any) -> dict[str, Any]:
    """:func:`run_tree` for each collection; ``{"collections": [...]}``."""
    return {"collections": [run_tree(d, **options) for d in data_dirs]}


def _llm_tree(store: Path, spec: str, gold: dict | None, vectors: dict, doc_vectors: dict,
              message: Callable[[str], None]) -> dict[str, Any]:
    """Build the LLM tree on a copy of the scratch store (the cached cluster tree stays as it is)."""
    with tempfile.TemporaryDirectory(prefix="kt-tree-") as tmp:
        copy = Path(tmp, "store")
        shutil.copytree(store, copy, ignore=shutil.ignore_patterns("sessions"))
        kb = KnowledgeBase.open(copy)
        try:
            message(f"LLM build with {spec}…")
            t0 = time.perf_counter()
            report = kb.build(collection=COLLECTION, builder="llm", llm=get_llm(spec), rebuild=True)
            return {"seconds": round(time.perf_counter() - t0, 2), "shape": shape(kb),
                    "report": report.model_dump(mode="json"),
                    "names": judge_names(kb, vectors),
                    "rows": judge(kb, gold, f"llm {spec}", doc_vectors) if gold else []}
        finally:
            kb.close()


def _plot(result: dict[str, Any], path: Path) -> Path:
    series: dict[str, list[tuple[float, float]]] = {}
    for b in result["builders"].values():
        for r in b["rows"]:
            series.setdefault(f"{r['builder']} (NMI vs l1)", []).append((r["level"], r["nmi_l1"]))
            series.setdefault(f"{r['builder']} (NMI vs l3)", []).append((r["level"], r["nmi_l3"]))
    return curves_plot(series, path, title=f"{result['dataset']}: tree vs gold taxonomy", xlabel="tree level",
                       ylabel="NMI")


def tree_markdown(result: dict[str, Any]) -> str:
    """One collection: names and balance per level, agreement rows where labelled, and the shape."""
    labelled = f" vs `{Path(result['labels']).name}` ({result['labelled_docs']:,} labelled docs)" if result.get("labels") else ""
    parts = [f"### {result['dataset']} tree ({result.get('chunks', 0):,} chunks){labelled}"]
    for name, b in result["builders"].items():
        parts.append(f"{name}: built in {b['seconds']} s" + "".join(f"; {note}" for note in b.get("notes", [])))
        parts.append(table(b.get("names", []), ["level", "nodes", "chunks", "routing", "majority", "gain", "largest_share"],
                           ["level", "nodes", "chunks routed", "name routing", "majority sibling", "gain",
                            "largest node share"]))
        if b.get("rows"):
            parts.append(table(b["rows"], ["builder", "level", "groups", "ami_l1", "nmi_l1", "ami_l2", "nmi_l2", "ami_l3",
                                           "nmi_l3", "ari_l1"],
                               ["builder", "tree level", "groups", "AMI l1", "NMI l1", "AMI l2", "NMI l2", "AMI l3",
                                "NMI l3", "ARI l1"]))
        s = b["shape"]
        parts.append(table([{**s, "nodes_per_level": " / ".join(str(v) for v in s["nodes_per_level"].values())}],
                           ["depth", "nodes_per_level", "leaves", "children_min", "children_median", "children_max",
                            "leaf_size_min", "leaf_size_median", "leaf_size_mean", "leaf_size_max"],
                           ["depth", "nodes L1/L2/L3", "leaves", "children min", "median", "max", "leaf size min",
                            "median", "mean", "max"]))
    if result.get("llm_note"):
        parts.append(result["llm_note"])
    return "\n\n".join(parts)


def trees_markdown(result: dict[str, Any]) -> str:
    """A summary over collections (offline tree, level 1 and 2), then each collection's tables."""
    rows = []
    for r in result["collections"]:
        b = r["builders"].get("cluster")
        if not b:
            continue
        for n in b["names"][:2]:
            row = {"dataset": r["dataset"], "chunks": r.get("chunks", 0), **n}
            tree = next((x for x in b["rows"] if x["level"] == n["level"] and x["builder"] == "offline cluster"), None)
            flat = next((x for x in b["rows"] if x["level"] == n["level"] and x["builder"] == "flat k-means"), None)
            if tree and flat:
                row["ami"] = f"{tree['ami_l1']:.3f} / {flat['ami_l1']:.3f}"
                row["nmi"] = f"{tree['nmi_l1']:.3f} / {flat['nmi_l1']:.3f}"
            rows.append(row)
    summary = table(rows, ["dataset", "chunks", "level", "nodes", "routing", "majority", "gain", "largest_share", "ami",
                           "nmi"],
                    ["collection", "chunks", "level", "nodes", "name routing", "majority", "gain", "largest share",
                     "AMI l1 tree / k-means", "NMI l1 tree / k-means"])
    return "\n\n".join([summary, *(tree_markdown(r) for r in result["collections"])])


# --------------------------------------------------------------------------- incremental placement
def _majority_nodes(paths: dict[str, str], gold: dict[str, tuple[str, str, str]], level: int) -> dict[str, str]:
    """For each gold label (at ``level``), the tree node at that level holding most of its documents."""
    votes: dict[str, Counter[str]] = {}
    for doc, path in paths.items():
        if doc in gold:
            votes.setdefault(gold[doc][level - 1], Counter())["/".join(path.split("/")[:level])] += 1
    return {label: max(sorted(c), key=lambda node: c[node]) for label, c in votes.items()}


def placement_agreement(paths: dict[str, str], added: set[str], gold: dict[str, tuple[str, str, str]]) -> dict[str, Any]:
    """Share of the ``added`` documents placed in the level-1 / level-2 node where most documents of
    their gold label (l1 / l2) among the others live; ``paths`` is ``doc -> leaf path``."""
    out: dict[str, Any] = {}
    for level in (1, 2):
        majority = _majority_nodes({d: p for d, p in paths.items() if d not in added}, gold, level)
        judged = [d for d in added if d in gold and d in paths and gold[d][level - 1] in majority]
        hits = sum(1 for d in judged
                   if "/".join(paths[d].split("/")[:level]) == majority[gold[d][level - 1]])
        out[f"l{level}"] = round(hits / len(judged), 4) if judged else None
        out[f"judged_l{level}"] = len(judged)
    return out


def _leaf_sizes(kb: Any) -> dict[str, Any]:
    """Largest leaf and the share of chunks in leaves over the builder's ``max_leaf``."""
    nodes = kb.tree.nodes(COLLECTION)
    inner = {n.parent_id for n in nodes}
    sizes = [n.chunk_count for n in nodes if n.id not in inner]
    total = sum(sizes) or 1
    return {"leaves": len(sizes), "largest_leaf": max(sizes, default=0),
            "over_max_leaf": round(sum(s for s in sizes if s > DEFAULT_MAX_LEAF) / total, 4)}


def run_incremental(data_dir: str = "cacm", *, labels: Path | None = None, embedder: str = "local",
                    added: float = 0.2, seed: int = 0,
                    message: Callable[[str], None] = lambda _m: None) -> dict[str, Any]:
    """Build the offline tree on ``1 - added`` of the documents, add the rest and ``kt build`` again
    (incremental); then rebuild on everything. Reports, for the added documents, how often each way
    put them in the level-1 / level-2 node where most documents of their label live, beside the
    nearest-leaf placement in raw embedding space (the method before 0.2) on the same base tree."""
    if not 0 < added < 1:
        raise ConfigError(f"--added must be between 0 and 1, got {added}")
    ds = load_dataset(data_dir)
    label_path = labels or ds.root / "labels.tsv"
    if not label_path.is_file():
        raise ConfigError(f"no labels file at {label_path}", hint="pass --labels FILE (doc_id, codes, l1, l2, l3)")
    gold = read_labels(label_path)
    cached, _, _ = open_store(ds, embedder, message=message)
    try:
        info = cached.tree.get_collection(COLLECTION)
        rows: list[tuple[Chunk, np.ndarray]] = []
        for chunks, vecs in cached.vectors.iter_rows(COLLECTION, with_vectors=True):
            assert vecs is not None  # with_vectors=True
            rows.extend(zip(chunks, vecs, strict=True))
    finally:
        cached.close()
    if info is None:
        raise ConfigError(f"{ds.name}: the cached store has no collection {COLLECTION!r}", hint="delete the cache and run again")
    docs = sorted({c.doc_id for c, _ in rows})
    rng = np.random.default_rng(seed)
    new_docs = set(rng.choice(docs, size=max(1, round(added * len(docs))), replace=False).tolist())
    base = [(c, v) for c, v in rows if c.doc_id not in new_docs]
    extra = [(c, v) for c, v in rows if c.doc_id in new_docs]
    result: dict[str, Any] = {"dataset": ds.name, "labels": str(label_path), "embedder": embedder, "seed": seed,
                              "documents": len(docs), "added_documents": len(new_docs), "added_fraction": added,
                              "rows": []}
    with tempfile.TemporaryDirectory(prefix="kt-incremental-") as tmp:
        kb = KnowledgeBase.open(Path(tmp, "store"))
        try:
            kb.tree.ensure_collection(CollectionInfo(name=COLLECTION, embedder=info.embedder,
                                                     dimension=info.dimension))
            kb.vectors.upsert(COLLECTION, [c for c, _ in base], np.stack([v for _, v in base]))
            message(f"{ds.name}: full build on {len(docs) - len(new_docs)} documents…")
            kb.build(collection=COLLECTION, builder="cluster")
            leaves = {m.chunk_id: m.path for m in kb.tree.mappings(COLLECTION)}
            centroids = leaf_centroids([leaves[c.chunk_id] for c, _ in base], np.stack([v for _, v in base]))
            nearest = assign_to_leaves(np.stack([v for _, v in extra]), centroids)
            before = {c.doc_id: leaves[c.chunk_id] for c, _ in base}
            before.update({c.doc_id: p for (c, _), p in zip(extra, nearest, strict=True)})
            nodes_before = {n.id: n for n in kb.tree.nodes(COLLECTION)}
            kb.vectors.upsert(COLLECTION, [c for c, _ in extra], np.stack([v for _, v in extra]))
            message(f"{ds.name}: incremental build adding {len(new_docs)} documents…")
            t0 = time.perf_counter()
            report = kb.build(collection=COLLECTION, builder="cluster")
            seconds = round(time.perf_counter() - t0, 2)
            paths = {m.doc_id: m.path for m in kb.tree.mappings(COLLECTION)}
            nodes_after = {n.id: n for n in kb.tree.nodes(COLLECTION)}
            kept = [i for i in nodes_after if i in nodes_before]
            status = kb.status(collection=COLLECTION).collections[0]
            result["incremental"] = {
                "seconds": seconds, "notes": report.notes, "drift": status.drift, "state": status.state,
                "nodes": len(nodes_after), "new_nodes": len(nodes_after) - len(kept),
                "renamed": sum(1 for i in kept if nodes_after[i].name != nodes_before[i].name),
                "redescribed": sum(1 for i in kept if nodes_after[i].description != nodes_before[i].description),
                "stale_after": len(stale_nodes(kb, COLLECTION))}
            result["rows"].append({"method": "nearest leaf, raw embedding (before)",
                                   **placement_agreement(before, new_docs, gold)})
            result["rows"].append({"method": "incremental (kt build)", **placement_agreement(paths, new_docs, gold),
                                   **_leaf_sizes(kb)})
            message(f"{ds.name}: full rebuild on all {len(docs)} documents…")
            t0 = time.perf_counter()
            kb.build(collection=COLLECTION, builder="cluster", rebuild=True)
            result["rebuild_seconds"] = round(time.perf_counter() - t0, 2)
            full = {m.doc_id: m.path for m in kb.tree.mappings(COLLECTION)}
            result["rows"].append({"method": "full rebuild (kt build --rebuild)",
                                   **placement_agreement(full, new_docs, gold), **_leaf_sizes(kb)})
        finally:
            kb.close()
    inc, reb = result["rows"][1], result["rows"][2]
    result["gap_l1"] = round(reb["l1"] - inc["l1"], 4)
    result["gap_l2"] = round(reb["l2"] - inc["l2"], 4)
    return result


def incremental_markdown(result: dict[str, Any]) -> str:
    inc = result["incremental"]
    parts = [f"### {result['dataset']}: incremental placement ({result['added_documents']:,} of "
             f"{result['documents']:,} documents added, seed {result['seed']})",
             table(result["rows"], ["method", "l1", "l2", "judged_l1", "judged_l2", "leaves", "largest_leaf",
                                    "over_max_leaf"],
                   ["placement of the added documents", "in the L1 node of their l1 label",
                    "in the L2 node of their l2 label", "judged (l1)", "judged (l2)", "leaves", "largest leaf",
                    "chunks in leaves > max_leaf"]),
             f"Gap to the full rebuild: {result['gap_l1']:+.4f} at level 1, {result['gap_l2']:+.4f} at level 2. "
             f"Incremental build {inc['seconds']} s (rebuild {result['rebuild_seconds']} s); of its "
             f"{inc['nodes']} categories {inc['renamed']} were renamed and {inc['redescribed']} re-described, "
             f"{inc['stale_after']} left stale; drift {inc['drift']}; status {inc['state']!r}."]
    parts += [f"- {note}" for note in inc["notes"]]
    return "\n\n".join(parts)
