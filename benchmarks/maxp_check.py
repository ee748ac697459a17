"""Experiment: passage-level (MaxP) rescoring of the ``thorough`` ranking, nDCG@10.

Not part of the product: it decided whether the MaxP stage (``benchmarks.maxp``) joins the ``thorough`` preset.
Each variant rescores the top N of the current thorough ranking (hybrid + RM3/Rocchio feedback fused
with the first pass, + the tree lift when the preset has one, exactly as ``KnowledgeBase.search`` runs
it) by each chunk's best sentence-window cosine (Dai & Callan 2019), fused min-max with equal weights;
the tail keeps its order.

The grid, written down before any run (nothing else is tried):
  N ∈ {20, 50} × window ∈ {1 sentence; 3 sentences, stride 2}; the MaxP list weighs what every other
  list weighs (equal weights, no tuned weight).
The rule, decided once over all collections together: keep the stage in ``thorough`` only if
thorough − default ≥ +0.02 mean nDCG@10, the mean beats current thorough, and no collection falls more
than 0.01 below current thorough.

Cost: "cold" = the added CPU ms per query when none of its windows are cached (windows in the top N ×
the measured CPU ms per embedded window, plus the scoring); "warm" = every window cached (repeated or
related queries). CPU time is process time (onnxruntime's threads included).

Run: ``nice -n 10 python -m benchmarks.maxp_check adi medline cranfield cacm scifact`` (``--rule NAME``
runs one window rule of the grid).
Window vectors are cached per collection and window rule under ``$TMPDIR/kt-maxp-check`` (delete it to
re-measure the embedding cost from scratch).
"""

from __future__ import annotations

import argparse
import pickle
import sys
import tempfile
import time
from pathlib import Path

from benchmarks.maxp import PassageScorer, WindowRule, maxp_rescore
from knowtology_cli.bench.data import COLLECTION, load_dataset, open_store
from knowtology_cli.bench.metrics import evaluate
from knowtology_cli.retrieval.pipeline import retrieve, tree_lift
from knowtology_cli.retrieval.presets import PRESETS

K = 100
TOPS = (20, 50)
RULES = {"1 sentence": WindowRule(1, 1), "3 sentences stride 2": WindowRule(3, 2)}
CACHE = Path(tempfile.gettempdir()) / "kt-maxp-check"


def variant_names(rules: dict[str, WindowRule]) -> list[str]:
    return ["default", "thorough (current)"] + [f"thorough + MaxP N={n}, {r}" for r in rules for n in TOPS]


def to_run(ranking, doc_of) -> dict[str, float]:
    out: dict[str, float] = {}
    for rank, s in enumerate(ranking[:K]):
        out.setdefault(doc_of[s.chunk_id], float(K - rank))  # the first chunk of a document ranks it
    return out


def run(name: str, rules: dict[str, WindowRule]) -> tuple[dict[str, float], dict[str, dict[str, float]]]:
    ds = load_dataset(name)
    kb, _, _ = open_store(ds, "local")
    emb = kb.embedder_for(COLLECTION)
    store = kb.vectors
    leaf = {m.chunk_id: m.path for m in kb.tree.mappings(COLLECTION)}
    chunks = {c.chunk_id: c for part, _ in store.iter_rows(COLLECTION, with_vectors=False) for c in part}
    doc_of = {i: c.doc_id for i, c in chunks.items()}
    queries = ds.judged()
    runs: dict[str, dict] = {v: {} for v in variant_names(rules)}
    heads: dict[str, tuple] = {}
    for qid, text in queries.items():
        qvec = emb.embed_query(text)
        default = retrieve(store, COLLECTION, text, mode="hybrid", preset=PRESETS["default"], k=K,
                           embed_query=lambda _t, v=qvec: v).ranking
        thorough = PRESETS["thorough"]
        ranking = retrieve(store, COLLECTION, text, mode="hybrid", preset=thorough, k=K,
                           embed_query=lambda _t, v=qvec: v).ranking
        if thorough.tree_lift > 0 and leaf:  # as KnowledgeBase.search: no lift, no re-sort
            ranking, _ = tree_lift(ranking, leaf, thorough.tree_lift)
        runs["default"][qid] = to_run(default, doc_of)
        runs["thorough (current)"][qid] = to_run(ranking, doc_of)
        heads[qid] = (qvec, ranking)
    costs: dict[str, dict[str, float]] = {}
    for rname, rule in rules.items():
        scorer = PassageScorer(emb.embed_documents, rule, cache_windows=10**9)
        path = CACHE / f"{name}-{rule.size}-{rule.stride}.pkl"
        cpu_embed, n_embedded = _load(scorer, path)
        windows = {n: 0 for n in TOPS}
        warm_cpu = {n: 0.0 for n in TOPS}
        for qid, (qvec, ranking) in heads.items():
            top = {s.chunk_id: (chunks[s.chunk_id].title, chunks[s.chunk_id].text) for s in ranking[: max(TOPS)]}
            before = scorer.embedded
            t0 = time.process_time()
            scores = scorer.scores(qvec, top)
            if scorer.embedded > before:
                cpu_embed += time.process_time() - t0
                n_embedded += scorer.embedded - before
            for n in TOPS:
                head = [s.chunk_id for s in ranking[:n]]
                t0 = time.process_time()
                maxp = scorer.scores(qvec, {i: top[i] for i in head})  # all cached now: the warm cost
                rescored = maxp_rescore(ranking, maxp, n)
                warm_cpu[n] += time.process_time() - t0
                windows[n] += sum(len(scorer.window_vectors({i: top[i]})[i]) for i in head)
                runs[f"thorough + MaxP N={n}, {rname}"][qid] = to_run(rescored, doc_of)
            assert set(scores) == set(top)
        _save(scorer, path, cpu_embed, n_embedded)
        per_window = 1000 * cpu_embed / max(n_embedded, 1)
        for n in TOPS:
            warm = 1000 * warm_cpu[n] / len(heads)
            costs[f"N={n}, {rname}"] = {"windows": windows[n] / len(heads),
                                        "cold_ms": windows[n] / len(heads) * per_window + warm, "warm_ms": warm}
    kb.close()
    return {v: evaluate(ds.qrels, r)["ndcg@10"] for v, r in runs.items()}, costs


def _load(scorer: PassageScorer, path: Path) -> tuple[float, int]:
    if not path.is_file():
        return 0.0, 0
    with open(path, "rb") as fh:
        saved = pickle.load(fh)  # noqa: S301 - our own scratch file
    for key, block in saved["cache"].items():
        scorer._remember(key, block)
    return saved["cpu"], saved["n"]


def _save(scorer: PassageScorer, path: Path, cpu: float, n: int) -> None:
    path.parent.mkdir(parents=True, exist_ok=True)
    with open(path, "wb") as fh:
        pickle.dump({"cache": dict(scorer._cache), "cpu": cpu, "n": n}, fh)


if __name__ == "__main__":
    results: dict[str, dict[str, float]] = {}
    costs: dict[str, dict[str, dict[str, float]]] = {}
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("collections", nargs="+")
    parser.add_argument("--rule", choices=list(RULES), action="append",
                        help="only these window rules of the grid (default: all)")
    args = parser.parse_args()
    rules = {r: RULES[r] for r in args.rule or RULES}
    for arg in args.collections:
        results[arg], costs[arg] = run(arg, rules)
        print(f"{arg}: " + ", ".join(f"{v} {x:.4f}" for v, x in results[arg].items()), file=sys.stderr, flush=True)
    names = list(results)
    print("| variant | " + " | ".join(names) + " | mean | − default | − thorough | worst vs thorough |")
    print("| --- |" + " ---: |" * (len(names) + 4))
    mean = {v: sum(results[n][v] for n in names) / len(names) for v in variant_names(rules)}
    for v in variant_names(rules):
        vals = [results[n][v] for n in names]
        worst = min(results[n][v] - results[n]["thorough (current)"] for n in names)
        print(f"| {v} | " + " | ".join(f"{x:.4f}" for x in vals)
              + f" | {mean[v]:.4f} | {mean[v] - mean['default']:+.4f} | {mean[v] - mean['thorough (current)']:+.4f}"
              + f" | {worst:+.4f} |")
    print()
    print("| MaxP variant | " + " | ".join(f"{n} windows / cold ms / warm ms" for n in names) + " |")
    print("| --- |" + " ---: |" * len(names))
    for c in costs[names[0]]:
        print(f"| {c} | " + " | ".join(f"{costs[n][c]['windows']:.0f} / {costs[n][c]['cold_ms']:.0f} / "
                                        f"{costs[n][c]['warm_ms']:.1f}" for n in names) + " |")
