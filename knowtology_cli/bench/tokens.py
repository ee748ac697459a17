"""``kt bench tokens``: tokens delivered to the model (tiktoken o200k_base) against recall, per policy."""

from __future__ import annotations

from collections.abc import Callable
from pathlib import Path
from typing import Any

import numpy as np

from knowtology_cli.bench.data import COLLECTION, Dataset, load_dataset, open_store
from knowtology_cli.bench.report import curves_plot, table
from knowtology_cli.render import browse_text, read_text, search_text
from knowtology_cli.tokens import count_tokens

K_MAX = 10
SNIPPETS = 10
DELTAS = (0.0, 0.02, 0.05, 0.1, 0.15, 0.2, 0.3, 1.0)
#: Score cut-offs for ``snippets+score≥τ``: read hits whose displayed score is at least τ × the top score.
TAUS = (0.9, 0.8, 0.7, 0.6, 0.5)
SESSION_DELTA = 0.1  # fixed before any run; not tuned
RAG_K = 5
SESSION_LENGTHS = (1, 2, 3, 4, 6, 8)
POLICY_TEXT = (
    "full-k: send the top-k hybrid hits in full. snippets+top-r: 10 snippet lines, then read the top r. "
    "snippets+pick δ: 10 snippet lines, then read every hit whose snippet's cosine to the question is within δ "
    "of the best snippet's (a stand-in for the model judging snippets; no relevance judgements used). "
    "snippets+score≥τ×top: 10 snippet lines, then read the hits whose displayed score is at least τ × the top one. "
    "tree+pick δ: also browse the top hit's leaf and pick among its snippets the same way."
)


class _Counter:
    """Token counts with a cache (the same chunk text is counted once)."""

    def __init__(self) -> None:
        self._count = count_tokens
        self._cache: dict[str, int] = {}

    def __call__(self, text: str) -> int:
        n = self._cache.get(text)
        if n is None:
            n = self._cache[text] = self._count(text, "o200k_base")
        return n


def _recall(rel: dict[str, int], delivered: list[str]) -> float:
    return len(set(rel) & set(delivered)) / len(rel) if rel else 0.0


def _interp_tokens(curve: list[tuple[float, float]], recall: float) -> float | None:
    """Tokens the full-k curve needs to reach ``recall`` (linear between k points; None if never)."""
    prev_r, prev_t = 0.0, 0.0
    for r, t in curve:
        if r >= recall - 1e-12:
            if r == prev_r:
                return t
            return prev_t + (t - prev_t) * (recall - prev_r) / (r - prev_r)
        prev_r, prev_t = r, t
    return None


def single_turn(kb: Any, ds: Dataset, queries: dict[str, str], *, mode: str = "hybrid",
                with_tree: bool = False) -> dict[str, Any]:
    """Recall vs tokens per policy, averaged over queries.

    Simulated agent policies; none looks at the relevance judgements:

    * ``full-k`` (plain RAG): search, send the top-k chunks in full (k = 1…10).
    * ``snippets+top-r``: search, see 10 one-line snippets, read the top r in rank order.
    * ``snippets+pick δ``: read every hit whose *snippet* is about as close to the question as the
      closest one (cosine with the collection's embedder ≥ best − δ), standing in for a model judging
      snippets; δ sweeps from picky to generous.
    * ``tree+pick δ`` (when the collection has a tree): as above, plus the snippets of the top hit's
      leaf (one ``browse``), picking among both lists with the same rule.

    Recall counts relevant documents whose full text reached the model; text shown to the model is
    the product's own rendering (``render.search_text`` / ``read_text`` / ``browse_text``).
    """
    count = _Counter()
    embedder = kb.embedder_for(COLLECTION)
    snippet_vecs: dict[str, np.ndarray] = {}
    chunk_tokens: dict[str, int] = {}
    acc: dict[str, list[tuple[float, float]]] = {}
    line_stats: list[tuple[float, float]] = []

    def add(name: str, recall: float, tokens: float) -> None:
        acc.setdefault(name, []).append((recall, tokens))

    for qid, text in queries.items():
        rel = ds.qrels[qid]
        result = kb.search(text, collection=COLLECTION, k=K_MAX, mode=mode)
        hits = result.hits
        ids = [h.chunk_id for h in hits]
        new = [i for i in ids if i not in chunk_tokens]
        if new:
            read = kb.read(new, collection=COLLECTION, session="bench-tokens", force=True)
            for c in read.chunks:
                chunk_tokens[c.chunk_id] = count(read_text(read.model_copy(update={"chunks": [c]})))
        docs = [h.doc_id for h in hits]
        shown = result.model_copy(update={"hits": hits[:SNIPPETS]})
        snip_tokens = count(search_text(shown))
        for k in range(1, K_MAX + 1):
            full = sum(chunk_tokens[i] for i in ids[:k])
            add(f"full-k k={k}", _recall(rel, docs[:k]), full)
            add(f"snippets+top-r r={k}", _recall(rel, docs[:k]), snip_tokens + full)
        missing = [h for h in hits if h.chunk_id not in snippet_vecs]
        if missing:
            vecs = embedder.embed_documents([h.snippet for h in missing])
            snippet_vecs.update({h.chunk_id: v for h, v in zip(missing, vecs, strict=True)})
        q = embedder.embed_query(text)
        sims = [float(snippet_vecs[h.chunk_id] @ q) for h in hits[:SNIPPETS]]
        for delta in DELTAS:
            picked = [i for i, s in enumerate(sims) if sims and s >= max(sims) - delta]
            add(f"snippets+pick δ={delta}", _recall(rel, [docs[i] for i in picked]),
                snip_tokens + sum(chunk_tokens[ids[i]] for i in picked))
        scores = [h.score for h in hits[:SNIPPETS]]
        for tau in TAUS:
            picked = [i for i, sc in enumerate(scores) if sc >= tau * scores[0]] if scores else []
            add(f"snippets+score≥{tau}×top", _recall(rel, [docs[i] for i in picked]),
                snip_tokens + sum(chunk_tokens[ids[i]] for i in picked))
        if shown.hits:
            bare = shown.model_copy(update={"hits": [h.model_copy(update={"path": ""}) for h in shown.hits]})
            line_stats.append((snip_tokens / len(shown.hits),
                               count("\n".join(f"[{h.chunk_id}] {h.snippet}" for h in bare.hits)) / len(shown.hits)))
        judged = [i for i, d in enumerate(docs[:SNIPPETS]) if d in rel]
        add("ceiling: perfect snippet judge (peeks; not a policy)", _recall(rel, [docs[i] for i in judged]),
            snip_tokens + sum(chunk_tokens[ids[i]] for i in judged))
        if with_tree and hits and hits[0].path:
            leaf = kb.browse(hits[0].path, collection=COLLECTION)
            browse_tokens = count(browse_text(leaf))
            extra = [c for c in leaf.chunks if c.chunk_id not in set(ids)]
            if extra:
                for c in extra:
                    if c.chunk_id not in snippet_vecs:
                        snippet_vecs[c.chunk_id] = embedder.embed_documents([c.snippet])[0]
            cand = [(h.chunk_id, h.doc_id, snippet_vecs[h.chunk_id] @ q) for h in hits[:SNIPPETS]]
            extra_docs = {c.chunk_id: c for c in kb.vectors.get(COLLECTION, [c.chunk_id for c in extra], with_text=False)}
            cand += [(c.chunk_id, extra_docs[c.chunk_id].doc_id, float(snippet_vecs[c.chunk_id] @ q))
                     for c in extra if c.chunk_id in extra_docs]
            best = max(s for _, _, s in cand)
            for delta in DELTAS:
                chosen = [(cid, d) for cid, d, s in cand if s >= best - delta]
                for cid, _ in chosen:
                    if cid not in chunk_tokens:
                        read = kb.read([cid], collection=COLLECTION, session="bench-tokens", force=True)
                        chunk_tokens[cid] = count(read_text(read))
                add(f"tree+pick δ={delta}", _recall(rel, [d for _, d in chosen]),
                    snip_tokens + browse_tokens + sum(chunk_tokens[c] for c, _ in chosen))
    rows: list[dict[str, Any]] = []
    for name, points in acc.items():
        arr = np.asarray(points)
        rows.append({"policy": name, "recall": round(float(arr[:, 0].mean()), 4),
                     "tokens": round(float(arr[:, 1].mean()), 1)})
    curve = [(r["recall"], r["tokens"]) for r in rows if r["policy"].startswith("full-k")]
    for r in rows:
        need = _interp_tokens(curve, r["recall"])
        r["full_k_tokens_at_equal_recall"] = None if need is None else round(need, 1)
        r["savings"] = None if not need else round(1 - r["tokens"] / need, 4)
    lines = np.asarray(line_stats) if line_stats else np.zeros((1, 2))
    return {"rows": rows, "queries": len(queries), "mode": mode, "snippets_shown": SNIPPETS,
            "snippet_line_tokens": round(float(lines[:, 0].mean()), 1),
            "snippet_line_tokens_id_and_snippet_only": round(float(lines[:, 1].mean()), 1)}


def _sessions(ds: Dataset, queries: dict[str, str], length: int) -> list[list[str]]:
    """Chains of ``length`` queries where each shares a relevant document with an earlier one.

    Connected components of the "shares a relevant document" graph, walked breadth-first; one
    session per component that is long enough.
    """
    by_doc: dict[str, list[str]] = {}
    for q in queries:
        for d in ds.qrels[q]:
            by_doc.setdefault(d, []).append(q)
    seen: set[str] = set()
    out = []
    for start in queries:
        if start in seen:
            continue
        order, frontier = [], [start]
        seen.add(start)
        while frontier:
            q = frontier.pop(0)
            order.append(q)
            for d in ds.qrels[q]:
                for other in by_doc[d]:
                    if other not in seen:
                        seen.add(other)
                        frontier.append(other)
        if len(order) >= length:
            out.append(order[:length])
    return out


SESSION_POLICIES = ("rag", "rag+session", "snippets+top5", "snippets+pick")


def multi_turn(kb: Any, ds: Dataset, queries: dict[str, str], *, mode: str = "hybrid") -> dict[str, Any]:
    """Total tokens per session for four agents over the same searches.

    ``rag``: the top-5 chunks in full every turn (re-sent when they come back). ``rag+session``: the same
    five ids through ``kt read`` in one session (repeats cost one line). ``snippets+top5``: 10 snippet
    lines, then ``kt read`` of the top 5 in the session — same recall as ``rag``. ``snippets+pick``:
    10 snippet lines, then read the picked hits (δ fixed at ``SESSION_DELTA``) in the session.
    """
    count = _Counter()
    embedder = kb.embedder_for(COLLECTION)
    cache: dict[str, Any] = {}
    qvec: dict[str, np.ndarray] = {}
    svec: dict[str, np.ndarray] = {}
    rows = []
    for length in SESSION_LENGTHS:
        sessions = _sessions(ds, queries, length)
        if not sessions:
            continue
        totals: dict[str, list[float]] = {p: [] for p in SESSION_POLICIES}
        recalls: dict[str, list[float]] = {p: [] for p in SESSION_POLICIES}
        for n, session in enumerate(sessions):
            names = {p: f"bench-{p.replace('+', '-')}-{length}-{n}" for p in SESSION_POLICIES}
            for name in names.values():
                kb.reset_session(collection=COLLECTION, session=name)
            tokens = dict.fromkeys(SESSION_POLICIES, 0)
            delivered: dict[str, set[str]] = {p: set() for p in SESSION_POLICIES}
            relevant: set[str] = set()
            for qid in session:
                text = queries[qid]
                relevant |= set(ds.qrels[qid])
                if qid not in cache:
                    cache[qid] = kb.search(text, collection=COLLECTION, k=K_MAX, mode=mode)
                    qvec[qid] = embedder.embed_query(text)
                result = cache[qid]
                shown = result.hits[:SNIPPETS]
                top5 = [h.chunk_id for h in shown[:RAG_K]]
                snippet_tokens = count(search_text(result.model_copy(update={"hits": shown})))
                todo = [h for h in shown if h.chunk_id not in svec]
                if todo:
                    svec.update(zip([h.chunk_id for h in todo], embedder.embed_documents([h.snippet for h in todo]),
                                    strict=True))
                sims = [float(svec[h.chunk_id] @ qvec[qid]) for h in shown]
                picked = [h.chunk_id for h, s in zip(shown, sims, strict=True) if s >= max(sims) - SESSION_DELTA]
                plan = {"rag": (top5, "bench-rag", True, 0), "rag+session": (top5, names["rag+session"], False, 0),
                        "snippets+top5": (top5, names["snippets+top5"], False, snippet_tokens),
                        "snippets+pick": (picked, names["snippets+pick"], False, snippet_tokens)}
                doc_of = {h.chunk_id: h.doc_id for h in shown}
                for policy, (ids, session_name, force, overhead) in plan.items():
                    tokens[policy] += overhead
                    if ids:
                        read = kb.read(ids, collection=COLLECTION, session=session_name, force=force)
                        tokens[policy] += count(read_text(read))
                        delivered[policy] |= {doc_of[i] for i in ids}
            for name in names.values():
                kb.reset_session(collection=COLLECTION, session=name)
            for policy in SESSION_POLICIES:
                totals[policy].append(tokens[policy])
                recalls[policy].append(len(relevant & delivered[policy]) / len(relevant))
        rag = float(np.mean(totals["rag"]))
        row: dict[str, Any] = {"session_length": length, "sessions": len(sessions)}
        for policy in SESSION_POLICIES:
            mean = float(np.mean(totals[policy]))
            row[f"{policy}_tokens"] = round(mean, 1)
            row[f"{policy}_recall"] = round(float(np.mean(recalls[policy])), 4)
            if policy != "rag":
                row[f"{policy}_savings"] = round(1 - mean / rag, 4) if rag else None
        rows.append(row)
    return {"rows": rows, "rag_k": RAG_K, "delta": SESSION_DELTA, "policies": list(SESSION_POLICIES)}


def run_tokens(data_dir: str, *, embedder: str = "local", limit: int | None = None, tree: bool = True,
               message: Callable[[str], None] = lambda _m: None) -> dict[str, Any]:
    """Single-turn and multi-turn token economy on one collection."""
    ds = load_dataset(data_dir)
    queries = ds.judged(limit)
    kb, _, _ = open_store(ds, embedder, message=message)
    try:
        with_tree = False
        if tree:
            with_tree = ensure_tree(kb, message)
        message(f"{ds.name}: single-turn token economy ({len(queries)} queries)…")
        single = single_turn(kb, ds, queries, with_tree=with_tree)
        message(f"{ds.name}: multi-turn sessions…")
        multi = multi_turn(kb, ds, queries)
        return {"dataset": ds.name, "embedder": kb.embedder_for(COLLECTION).name, "encoding": "o200k_base",
                "policy": POLICY_TEXT, "tree": with_tree, "single_turn": single, "multi_turn": multi,
                "headline": headline(single)}
    finally:
        kb.close()


def ensure_tree(kb: Any, message: Callable[[str], None]) -> bool:
    """Build the offline cluster tree once (cached in the scratch store); False when unavailable."""
    status = kb.status(collection=COLLECTION).collections[0]
    if status.mapped == status.chunks and status.nodes:
        return True
    try:
        message("building the offline cluster tree (cached)…")
        kb.build(collection=COLLECTION, builder="cluster")
        return True
    except Exception as exc:  # noqa: BLE001 - the builder is optional here; report and go on
        message(f"no tree ({type(exc).__name__}: {exc}); tree-guided policy skipped")
        return False


def headline(single: dict[str, Any]) -> dict[str, Any]:
    """Savings at equal recall for the pre-chosen δ (``SESSION_DELTA``) and, for reference, the best δ."""
    rows = {r["policy"]: r for r in single["rows"]}
    fixed = rows.get(f"snippets+pick δ={SESSION_DELTA}")
    picks = [r for r in single["rows"] if ("pick δ" in r["policy"] or "score≥" in r["policy"])
             and r["savings"] is not None]
    if not fixed or not picks:
        return {}
    best = max(picks, key=lambda r: r["savings"])
    full10 = rows[f"full-k k={K_MAX}"]
    return {"policy": fixed["policy"], "recall": fixed["recall"], "tokens": fixed["tokens"],
            "full_k_tokens_at_equal_recall": fixed["full_k_tokens_at_equal_recall"], "savings": fixed["savings"],
            "best_policy": best["policy"], "best_savings": best["savings"], "best_recall": best["recall"],
            "full_k10_recall": full10["recall"], "full_k10_tokens": full10["tokens"]}


def _family(policy: str) -> str:
    """The curve a policy row belongs to (its parameter stripped)."""
    if policy.startswith("ceiling"):
        return "ceiling: perfect judge (peeks)"
    if policy.startswith("snippets+score"):
        return "snippets+score≥τ×top"
    return policy.split(" ")[0]


def run_many(data_dirs: list[str], *, out_dir: Any = None, plots: bool = True, **kwargs: Any) -> dict[str, Any]:
    """``run_tokens`` over several collections, with recall-vs-tokens and session plots."""
    results = [run_tokens(d, **kwargs) for d in data_dirs]
    out: dict[str, Any] = {"collections": results, "policy": POLICY_TEXT}
    if out_dir is not None and plots:
        plots_out = []
        for r in results:
            series: dict[str, list[tuple[float, float]]] = {}
            for row in r["single_turn"]["rows"]:
                family = _family(row["policy"])
                series.setdefault(family, []).append((row["tokens"], row["recall"]))
            for k in series:
                series[k].sort()
            plots_out.append(str(curves_plot(series, Path(out_dir) / f"tokens_{r['dataset']}.png",
                                             title=f"{r['dataset']}: recall vs tokens delivered (o200k_base)",
                                             xlabel="tokens per query (mean)", ylabel="recall (mean)", logx=True)))
            sess = {p: [(x["session_length"], x[f"{p}_tokens"]) for x in r["multi_turn"]["rows"]]
                    for p in r["multi_turn"]["policies"]}
            plots_out.append(str(curves_plot(sess, Path(out_dir) / f"sessions_{r['dataset']}.png",
                                             title=f"{r['dataset']}: tokens per session", xlabel="queries in session",
                                             ylabel="tokens per session (mean)")))
        out["plots"] = plots_out
    return out


def tokens_markdown(result: dict[str, Any]) -> str:
    parts = [f"Policies: {result['policy']}"]
    for r in result["collections"]:
        rows = r["single_turn"]["rows"]
        parts.append(f"### {r['dataset']} — single turn ({r['single_turn']['queries']} queries, "
                     f"{r['single_turn']['mode']} search, tokens = o200k_base)\n\n"
                     + table(rows, ["policy", "recall", "tokens", "full_k_tokens_at_equal_recall", "savings"],
                             ["policy", "recall", "tokens", "full-k tokens at equal recall", "savings"]))
        st = r["single_turn"]
        if "snippet_line_tokens" in st:
            parts.append(f"A snippet line costs {st['snippet_line_tokens']} tokens on average; "
                         f"{st['snippet_line_tokens_id_and_snippet_only']} without the category path and score.")
        h = r.get("headline") or {}
        if h:
            parts.append(f"Pre-chosen policy {h['policy']}: recall {h['recall']:.3f} with {h['tokens']:.0f} tokens vs "
                         f"{h['full_k_tokens_at_equal_recall'] or float('nan'):.0f} for full chunks at equal recall "
                         f"(savings {h['savings'] if h['savings'] is not None else float('nan'):.0%}); best point on these "
                         f"queries: {h['best_policy']} ({h['best_savings']:.0%} at recall {h['best_recall']:.3f}).")
        parts.append(f"### {r['dataset']} — sessions (related queries in a row; top-{r['multi_turn']['rag_k']}, "
                     f"pick δ={r['multi_turn']['delta']})\n\n"
                     + table(r["multi_turn"]["rows"],
                             ["session_length", "sessions", "rag_tokens", "rag+session_tokens", "rag+session_savings",
                              "snippets+top5_tokens", "snippets+top5_savings", "snippets+pick_tokens",
                              "snippets+pick_savings", "rag_recall", "snippets+pick_recall"],
                             ["queries", "sessions", "RAG", "RAG+session", "saved", "snippets+top5 (session)", "saved",
                              "snippets+pick (session)", "saved", "recall RAG / top5", "recall pick"]))
    return "\n\n".join(parts)
