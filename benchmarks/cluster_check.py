"""Quality check of the offline tree builder against CACM's ACM taxonomy and the sample corpus.

    python -m benchmarks.cluster_check [--embedder local] [--seeds 0,1,2]
        [--text-weight 0.2] [--doc-weight 0.5] [--sweep] [--ward] [--sample DIR] [--no-cacm]

CACM: every document is clustered; for the 1,425 labelled ones the level-1, level-2 and leaf
paths are compared with the gold ``l1`` / ``l2`` / ``l3`` codes by NMI (and ARI at level 1). A
size-matched baseline (the same paths shuffled over documents) shows how much NMI the number of
clusters alone buys. ``--ward`` adds scikit-learn's Ward clustering at level 1 with the same ``k``.
Sample corpus: the tree with counts, and NMI of level 1 against the top folder (department).
Embeddings are cached under ``$KNOWTOLOGY_BENCH_CACHE/cluster-check``. Needs the ``bench`` extra.
"""

from __future__ import annotations

import argparse
import hashlib
import statistics
import time
from collections import Counter
from collections.abc import Sequence
from pathlib import Path

import numpy as np

from knowtology_cli.bench.data import cache_root, chunk_lines, load_dataset
from knowtology_cli.builders.cluster import ClusterItem, build_cluster_tree
from knowtology_cli.models import TreeReply

SAMPLE = Path(__file__).resolve().parents[1] / "sample_corpus"


def embed_cached(embedder_name: str, texts: Sequence[str], label: str) -> np.ndarray:
    """Document vectors for ``texts``, cached on disk by content digest and embedder."""
    from knowtology_cli.embedders import get_embedder

    digest = hashlib.sha256("\x1e".join(texts).encode()).hexdigest()[:16]
    safe = embedder_name.replace("/", "_").replace(":", "_")
    path = cache_root() / "cluster-check" / f"{label}-{safe}-{digest}.npy"
    if path.is_file():
        return np.load(path)
    started = time.time()
    vectors = get_embedder(embedder_name).embed_documents(list(texts))
    path.parent.mkdir(parents=True, exist_ok=True)
    np.save(path, vectors)
    print(f"  embedded {len(texts)} texts with {embedder_name} in {time.time() - started:.0f}s")
    return vectors


def _prefix(path: str, level: int) -> str:
    return "/".join(path.split("/")[:level])


def load_cacm() -> tuple[list[ClusterItem], list[str], dict[str, tuple[str, str, str]]]:
    ds = load_dataset("cacm")
    lines = chunk_lines(ds)
    items = [ClusterItem(chunk_id=o["_id"], text=o["text"], title=o["title"], doc_id=o["_id"]) for o in lines]
    texts = [f"{o['title']}\n{o['text']}" if o["title"] else o["text"] for o in lines]
    gold: dict[str, tuple[str, str, str]] = {}
    with open(ds.root / "labels.tsv", encoding="utf-8") as fh:
        next(fh)
        for line in fh:
            doc_id, _codes, l1, l2, l3 = line.rstrip("\n").split("\t")
            gold[doc_id] = (l1, l2, l3)
    return items, texts, gold


def score_cacm(reply: TreeReply, gold: dict[str, tuple[str, str, str]], seed: int = 0) -> dict[str, float]:
    """NMI per level (and ARI at level 1) on the labelled documents, plus shuffled baselines."""
    from sklearn.metrics import adjusted_mutual_info_score, adjusted_rand_score, normalized_mutual_info_score

    paths = {a.chunk_id: a.path for a in reply.assignments}
    ids = [d for d in gold if d in paths]
    depth = max(p.count("/") + 1 for p in paths.values())
    out: dict[str, float] = {}
    rng = np.random.default_rng(seed)
    for level in range(1, depth + 1):
        truth = [gold[d][min(level, 3) - 1] for d in ids]
        pred = [_prefix(paths[d], level) for d in ids]
        out[f"nmi{level}"] = normalized_mutual_info_score(truth, pred)
        out[f"ami{level}"] = adjusted_mutual_info_score(truth, pred)
        out[f"base{level}"] = normalized_mutual_info_score(truth, list(rng.permutation(pred)))
        out[f"k{level}"] = len({_prefix(p, level) for p in paths.values()})
    out["ari1"] = adjusted_rand_score([gold[d][0] for d in ids], [_prefix(paths[d], 1) for d in ids])
    return out


def ward_level1(
    vectors: np.ndarray, k: int, gold: dict[str, tuple[str, str, str]], ids: list[str]
) -> tuple[float, float]:
    """NMI and AMI of scikit-learn's Ward clustering (same k) against the gold level 1."""
    from sklearn.cluster import AgglomerativeClustering
    from sklearn.metrics import adjusted_mutual_info_score, normalized_mutual_info_score

    labels = AgglomerativeClustering(n_clusters=k, linkage="ward").fit_predict(vectors)
    pos = {d: i for i, d in enumerate(ids)}
    keep = [d for d in gold if d in pos]
    truth, pred = [gold[d][0] for d in keep], [labels[pos[d]] for d in keep]
    return normalized_mutual_info_score(truth, pred), adjusted_mutual_info_score(truth, pred)


def _summary(rows: list[dict[str, float]], key: str) -> str:
    values = [r[key] for r in rows if key in r]
    if not values:
        return "   -   "
    if len(values) == 1:
        return f"{values[0]:.3f}"
    return f"{statistics.mean(values):.3f}±{statistics.pstdev(values):.3f}"


def check_cacm(embedder: str, seeds: list[int], configs: list[dict[str, float]], ward: bool) -> None:
    items, texts, gold = load_cacm()
    vectors = embed_cached(embedder, texts, "cacm")
    labelled = sum(1 for it in items if it.chunk_id in gold)
    print(f"CACM: {len(items)} docs ({labelled} labelled), embedder {embedder}")
    print(f"{'config':<28} {'NMI l1':>12} {'NMI l2':>12} {'NMI leaf':>12} {'AMI l1':>12} {'AMI l2':>12} "
          f"{'AMI leaf':>12} {'ARI l1':>12} {'NMI shuffled':>15} {'k1/k2/leaves':>13} {'time':>6}")
    first_k: int | None = None
    for config in configs:
        rows = []
        seconds = []
        for seed in seeds:
            started = time.time()
            reply = build_cluster_tree(items, vectors, seed=seed, **config)  # type: ignore[arg-type]
            seconds.append(time.time() - started)
            rows.append(score_cacm(reply, gold, seed))
        name = " ".join(f"{k}={v}" for k, v in config.items()) or "defaults"
        base = "/".join(f"{statistics.mean(r[f'base{i}'] for r in rows):.2f}" for i in (1, 2, 3) if f"base{i}" in rows[0])
        ks = "/".join(str(rows[0][f"k{i}"]) for i in (1, 2, 3) if f"k{i}" in rows[0])
        cells = " ".join(f"{_summary(rows, key):>12}" for key in ("nmi1", "nmi2", "nmi3", "ami1", "ami2", "ami3", "ari1"))
        print(f"{name:<28} {cells} {base:>15} {ks:>13} {statistics.mean(seconds):5.1f}s")
        first_k = first_k or int(rows[0]["k1"])
    if ward and first_k:
        k = first_k
        ids = [it.chunk_id for it in items]
        nmi, ami = ward_level1(vectors, k, gold, ids)
        print(f"{'Ward level 1, k=' + str(k):<28} {nmi:>12.3f} {'':>12} {'':>12} {ami:>12.3f}")


def print_tree(reply: TreeReply, docs_of: dict[str, str] | None = None) -> None:
    """Paths with chunk counts, indented by level (and the documents in each leaf, if given)."""
    counts: Counter[str] = Counter()
    leaf_docs: dict[str, Counter[str]] = {}
    for a in reply.assignments:
        parts = a.path.split("/")
        for level in range(1, len(parts) + 1):
            counts["/".join(parts[:level])] += 1
        if docs_of is not None:
            leaf_docs.setdefault(a.path, Counter())[docs_of[a.chunk_id]] += 1
    for category in reply.categories:
        depth = category.path.count("/")
        line = "  " * depth + f"{category.path.rsplit('/', 1)[-1]} ({counts[category.path]})"
        if category.path in leaf_docs:
            line += "  ← " + ", ".join(f"{d}" + (f"×{n}" if n > 1 else "") for d, n in leaf_docs[category.path].most_common(4))
        print(line)


def check_sample(embedder: str, root: Path, seeds: list[int], configs: list[dict[str, float]], show_docs: bool) -> None:
    """Level-1 agreement with the department folders and split documents, then the tree itself."""
    from sklearn.metrics import normalized_mutual_info_score

    from knowtology_cli.ingest import read_inputs

    batch = read_inputs([str(root)])
    chunks = batch.chunks
    items = [ClusterItem(c.chunk_id, c.text, c.title, c.doc_id, c.file_name) for c in chunks]
    vectors = embed_cached(embedder, [f"{c.title}\n{c.text}" if c.title else c.text for c in chunks], "sample")
    department = [c.file_name.split("/")[0] for c in chunks]
    sizes = Counter(c.doc_id for c in chunks)
    # A file of independent records (the ticket dump) is not a document that should stay together.
    multi = [d for d, n in sizes.items() if n > 1 and not d.endswith(".jsonl")]
    print(f"\nSample corpus: {len(chunks)} chunks from {len(batch.files)} files, embedder {embedder}")
    print(f"{'config':<34} {'NMI l1 vs folder':>17} {'docs split at l1':>17} {'at l2':>8} {'time':>6}")
    reply = None
    for config in configs:
        rows = []
        for seed in seeds:
            started = time.time()
            built = build_cluster_tree(items, vectors, seed=seed, **config)  # type: ignore[arg-type]
            took = time.time() - started
            reply = reply or built
            paths = {a.chunk_id: a.path for a in built.assignments}
            level1 = [_prefix(paths[c.chunk_id], 1) for c in chunks]
            split = {}
            for level in (1, 2):
                seen: dict[str, set[str]] = {}
                for c in chunks:
                    seen.setdefault(c.doc_id, set()).add(_prefix(paths[c.chunk_id], level))
                split[level] = sum(1 for d in multi if len(seen[d]) > 1)
            rows.append({"nmi": normalized_mutual_info_score(department, level1), "s1": split[1], "s2": split[2], "t": took})
        name = " ".join(f"{k}={v}" for k, v in config.items()) or "defaults"
        print(f"{name:<34} {_summary(rows, 'nmi'):>17} {statistics.mean(r['s1'] for r in rows):>11.1f}/{len(multi)}"
              f" {statistics.mean(r['s2'] for r in rows):>8.1f} {statistics.mean(r['t'] for r in rows):5.1f}s")
    assert reply is not None
    print(f"\nTree (first config, seed {seeds[0]}):")
    names = {c.chunk_id: Path(c.file_name).stem for c in chunks}
    print_tree(reply, names if show_docs else None)


def main(argv: Sequence[str] | None = None) -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    parser.add_argument("--embedder", default="local")
    parser.add_argument("--seeds", default="0,1,2")
    parser.add_argument("--text-weight", type=float, default=None)
    parser.add_argument("--doc-weight", type=float, default=None)
    parser.add_argument("--sweep", action="store_true", help="compare text weights 0 / 0.2 / 0.4 on CACM")
    parser.add_argument("--doc-sweep", action="store_true", help="compare doc weights 0 / 0.5 / 1 / 1.5 / 2 on the sample")
    parser.add_argument("--ward", action="store_true", help="add a Ward level-1 baseline (scikit-learn)")
    parser.add_argument("--sample", default=str(SAMPLE), help="sample corpus folder ('' to skip)")
    parser.add_argument("--no-cacm", action="store_true")
    parser.add_argument("--docs", action="store_true", help="list the documents of each leaf")
    args = parser.parse_args(argv)
    config: dict[str, float] = {}
    if args.text_weight is not None:
        config["text_weight"] = args.text_weight
    if args.doc_weight is not None:
        config["doc_weight"] = args.doc_weight
    seeds = [int(s) for s in args.seeds.split(",") if s.strip()]
    if not args.no_cacm:
        configs = [config, *({**config, "text_weight": w} for w in (0.0, 0.4))] if args.sweep else [config]
        check_cacm(args.embedder, seeds, configs, args.ward)
    if args.sample and Path(args.sample).is_dir():
        configs = [{**config, "doc_weight": w} for w in (0.0, 0.5, 1.0, 1.5, 2.0)] if args.doc_sweep else [config]
        check_sample(args.embedder, Path(args.sample), seeds, configs, args.docs)


if __name__ == "__main__":
    main()
