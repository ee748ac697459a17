"""Experiment: pseudo-relevance-feedback variants over the cached bench stores (nDCG@10).

Not part of the product: it measures the choices behind ``retrieval.prf`` / the ``thorough`` preset
over all development collections at once (one setting must serve every collection; no per-collection
choice is made). Run: ``python -m benchmarks.feedback_check medline cranfield cacm adi scifact``.
"""

from __future__ import annotations

import sys
from dataclasses import replace

from knowtology_cli.bench.data import COLLECTION, load_dataset, open_store
from knowtology_cli.bench.metrics import evaluate
from knowtology_cli.retrieval.fusion import fuse_lists
from knowtology_cli.retrieval.prf import FeedbackParams, rm3_query, rocchio

DEPTH = 1000


def variants() -> dict[str, dict]:
    base = FeedbackParams()
    out: dict[str, dict] = {"first pass (default)": {"off": True}}
    for docs in (3, 5, 10):
        p = replace(base, docs=docs)
        out[f"rm3+rocchio fb={docs}"] = {"params": p}
        out[f"rm3+rocchio fb={docs} +first"] = {"params": p, "keep_first": True}
        out[f"rm3 only fb={docs}"] = {"params": p, "no_rocchio": True}
        out[f"rocchio only fb={docs}"] = {"params": p, "no_rm3": True}
    return out


def run(name: str) -> dict[str, float]:
    ds = load_dataset(name)
    kb, _, _ = open_store(ds, "local")
    emb = kb.embedder_for(COLLECTION)
    store = kb.vectors
    queries = ds.judged()
    runs: dict[str, dict] = {v: {} for v in variants()}
    for qid, text in queries.items():
        q = emb.embed_query(text)
        dense = store.vector_search(COLLECTION, q, DEPTH)
        sparse = store.keyword_search(COLLECTION, text, DEPTH)
        first = fuse_lists({"d": dense, "k": sparse})
        texts: dict[str, str] = {}
        vecs: dict = {}
        top_ids = [s.chunk_id for s in first[:10]]
        for c in store.get(COLLECTION, top_ids):
            texts[c.chunk_id] = f"{c.title}\n{c.text}" if c.title else c.text
        vecs = store.vectors(COLLECTION, top_ids)
        doc_of = {c.chunk_id: c.doc_id for c in store.get(COLLECTION, [s.chunk_id for s in first[:100]], with_text=False)}
        for vname, cfg in variants().items():
            if cfg.get("off"):
                ranking = first
            else:
                p = cfg["params"]
                fb = first[: p.docs]
                floor = first[-1].score
                lists = {}
                if not cfg.get("no_rocchio"):
                    lists["d2"] = store.vector_search(COLLECTION, rocchio(q, [vecs[s.chunk_id] for s in fb], p), DEPTH)
                else:
                    lists["d2"] = dense
                if not cfg.get("no_rm3"):
                    expanded = rm3_query(text, [(texts[s.chunk_id], s.score - floor + 1e-9) for s in fb], p)
                    lists["k2"] = store.weighted_keyword_search(COLLECTION, expanded, DEPTH)
                else:
                    lists["k2"] = sparse
                if cfg.get("keep_first"):
                    lists.update(d=dense, k=sparse)
                ranking = fuse_lists(lists)
            ids = [s.chunk_id for s in ranking[:100]]
            missing = [i for i in ids if i not in doc_of]
            if missing:
                doc_of.update({c.chunk_id: c.doc_id for c in store.get(COLLECTION, missing, with_text=False)})
            runs[vname][qid] = {doc_of[i]: float(100 - r) for r, i in enumerate(ids)}
    kb.close()
    return {v: evaluate(ds.qrels, r)["ndcg@10"] for v, r in runs.items()}


if __name__ == "__main__":
    results = {name: run(name) for name in sys.argv[1:]}
    names = list(results)
    print("| variant | " + " | ".join(names) + " | mean |")
    print("| --- |" + " ---: |" * (len(names) + 1))
    for v in variants():
        vals = [results[n][v] for n in names]
        print(f"| {v} | " + " | ".join(f"{x:.4f}" for x in vals) + f" | {sum(vals) / len(vals):.4f} |")
