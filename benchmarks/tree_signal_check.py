"""Experiment: the tree as a ranking signal (cluster-based score smoothing), nDCG@10.

A hit's leaf scores the mean fused score of the leaf's members among the top 100 candidates
(Liu & Croft 2004; Kurland & Lee 2004: documents in clusters that match the query are lifted);
final = fused + λ · leaf score. Needs stores with a built tree (``kt build``).
``python -m benchmarks.tree_signal_check adi medline cranfield cacm``.
"""

from __future__ import annotations

import sys
from collections import defaultdict

from knowtology_cli.bench.data import COLLECTION, load_dataset, open_store
from knowtology_cli.bench.metrics import evaluate

LAMBDAS = (0.0, 0.1, 0.25, 0.5)


def run(name: str) -> dict[str, float]:
    ds = load_dataset(name)
    kb, _, _ = open_store(ds, "local")
    leaf = {m.chunk_id: m.path for m in kb.tree.mappings(COLLECTION)}
    doc_of = {c.chunk_id: c.doc_id for chunks, _ in kb.vectors.iter_rows(COLLECTION, with_vectors=False) for c in chunks}
    runs: dict[float, dict] = {lam: {} for lam in LAMBDAS}
    for qid, text in ds.judged().items():
        hits = kb.search(text, collection=COLLECTION, k=100).hits
        by_leaf: dict[str, list[float]] = defaultdict(list)
        for h in hits:
            by_leaf[leaf.get(h.chunk_id, h.chunk_id)].append(h.score)
        for lam in LAMBDAS:
            scored = {h.chunk_id: h.score + lam * (sum(by_leaf[leaf.get(h.chunk_id, h.chunk_id)])
                                                   / len(by_leaf[leaf.get(h.chunk_id, h.chunk_id)])) for h in hits}
            order = sorted(scored, key=lambda i: -scored[i])
            runs[lam][qid] = {doc_of[i]: 100.0 - r for r, i in enumerate(order)}
    kb.close()
    return {f"λ={lam}": evaluate(ds.qrels, r)["ndcg@10"] for lam, r in runs.items()}


if __name__ == "__main__":
    results = {name: run(name) for name in sys.argv[1:]}
    names = list(results)
    print("| leaf lift | " + " | ".join(names) + " | mean |")
    print("| --- |" + " ---: |" * (len(names) + 1))
    for v in results[names[0]]:
        vals = [results[n][v] for n in names]
        print(f"| {v} | " + " | ".join(f"{x:.4f}" for x in vals) + f" | {sum(vals) / len(vals):.4f} |")
