"""Experiment: score regularization (Diaz 2005) in the thorough preset, nDCG@10 on every collection.

Not part of the product: it measures the choice behind ``SearchPreset.smoothing`` (see
``retrieval.pipeline.smooth_scores``) over all development collections at once; one setting must serve
every collection. Each variant is the product path, ``KnowledgeBase.search(k=100)``, with the preset's
fields replaced; "default, smoothed" smooths the default ranking's top 100 after the search (no
feedback). The stores get their offline cluster tree first, as a user's store has one after
``kt build`` (the tree lift reads it).

``python -m benchmarks.smoothing_check adi medline cranfield cacm scifact``
"""

from __future__ import annotations

import sys
from dataclasses import replace
from statistics import mean

from knowtology_cli.bench.data import COLLECTION, load_dataset, open_store
from knowtology_cli.bench.metrics import evaluate
from knowtology_cli.bench.tokens import ensure_tree
from knowtology_cli.retrieval import presets
from knowtology_cli.retrieval.pipeline import smooth_scores
from knowtology_cli.stores.base import ScoredId

#: name -> (preset, fields replaced, neighbours of the after-search smoothing or None)
VARIANTS: dict[str, tuple[str, dict, int | None]] = {
    "default": ("default", {}, None),
    "default + tree lift": ("default", {"tree_lift": 0.25}, None),
    "default, smoothed (5 nn)": ("default", {}, 5),
    "default, smoothed (10 nn)": ("default", {}, 10),
    "feedback, no smoothing, no tree": ("thorough", {"smoothing": 0.0, "tree_lift": 0.0}, None),
    "feedback, no smoothing + tree (before)": ("thorough", {"smoothing": 0.0}, None),
    "feedback from smoothed (5 nn), no tree": ("thorough", {"smoothing_neighbours": 5, "tree_lift": 0.0}, None),
    "feedback from smoothed (5 nn) + tree": ("thorough", {"smoothing_neighbours": 5}, None),
    "feedback from smoothed (10 nn), no tree": ("thorough", {"tree_lift": 0.0}, None),
    "feedback from smoothed (10 nn) + tree (thorough)": ("thorough", {}, None),
}


def run(name: str) -> dict[str, float]:
    ds = load_dataset(name)
    kb, _, _ = open_store(ds, "local")
    ensure_tree(kb, print)
    shipped = dict(presets.PRESETS)
    out: dict[str, float] = {}
    try:
        for variant, (preset, fields, after) in VARIANTS.items():
            presets.PRESETS[preset] = replace(shipped[preset], **fields)
            runs: dict[str, dict[str, float]] = {}
            for qid, text in ds.judged().items():
                hits = kb.search(text, collection=COLLECTION, k=100, preset=preset).hits
                doc_of = {h.chunk_id: h.doc_id for h in hits}
                order = [h.chunk_id for h in hits]
                if after is not None and hits:
                    ranking = [ScoredId(h.chunk_id, h.score) for h in hits]
                    vectors = kb.vectors.vectors(COLLECTION, order)
                    order = [s.chunk_id for s in smooth_scores(ranking, vectors, 0.5, after)]
                run = runs.setdefault(qid, {})
                for rank, chunk_id in enumerate(order):
                    run.setdefault(doc_of[chunk_id], 100.0 - rank)
            presets.PRESETS[preset] = shipped[preset]
            out[variant] = evaluate(ds.qrels, runs)["ndcg@10"]
    finally:
        presets.PRESETS.update(shipped)
        kb.close()
    return out


if __name__ == "__main__":
    names = sys.argv[1:] or ["adi", "medline", "cranfield", "cacm", "scifact"]
    results = {n: run(n) for n in names}
    print("| variant | " + " | ".join(names) + " | mean |")
    print("| --- | " + " | ".join("---:" for _ in names) + " | ---: |")
    for variant in VARIANTS:
        row = [results[n][variant] for n in names]
        print(f"| {variant} | " + " | ".join(f"{v:.4f}" for v in row) + f" | {mean(row):.4f} |")
