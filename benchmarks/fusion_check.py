"""Experiment: fusion rules x depths over our own lists, beside the untuned fusion reference (nDCG@10).

``python -m benchmarks.fusion_check adi medline cranfield cacm scifact`` — the figures behind
``presets.PRESETS['default']`` (docs/benchmarks.md, "Hybrid: fusion rule and depth").
"""

from __future__ import annotations

import sys

from knowtology_cli.bench.data import load_dataset, open_store
from knowtology_cli.bench.metrics import evaluate
from knowtology_cli.bench.retrieval import (
    DEPTH,
    bm25_reference,
    exact_dense,
    fusion_runs,
    product_fusion_runs,
    raw_lists,
)


def run(name: str) -> dict[str, float]:
    ds = load_dataset(name)
    queries = ds.judged()
    kb, _, _ = open_store(ds, "local")
    doc_of = {c.chunk_id: c.doc_id for chunks, _ in kb.vectors.iter_rows("bench", with_vectors=False) for c in chunks}
    dense, sparse = raw_lists(kb, queries, DEPTH)
    out = {}
    for vname, run_ in product_fusion_runs(dense, sparse, (100, 300, DEPTH)).items():
        out[vname] = evaluate(ds.qrels, {q: {doc_of[i]: s for i, s in r.items()} for q, r in run_.items()})["ndcg@10"]
    bm25, _ = bm25_reference(ds, queries)
    exact, _ = exact_dense(kb, queries)
    refs = {n: evaluate(ds.qrels, r)["ndcg@10"] for n, r in fusion_runs(exact, bm25, (DEPTH,)).items()}
    out["fusion reference"] = max(refs.values())
    kb.close()
    return out


if __name__ == "__main__":
    results = {name: run(name) for name in sys.argv[1:]}
    names = list(results)
    print("| variant | " + " | ".join(names) + " | mean |")
    print("| --- |" + " ---: |" * (len(names) + 1))
    for v in results[names[0]]:
        vals = [results[n][v] for n in names]
        print(f"| {v} | " + " | ".join(f"{x:.4f}" for x in vals) + f" | {sum(vals) / len(vals):.4f} |")
