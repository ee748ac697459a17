"""Benchmark output: Markdown tables (printed and pasted into docs), JSON files and PNG plots."""

from __future__ import annotations

import json
from collections.abc import Sequence
from pathlib import Path
from typing import Any


def table(rows: Sequence[dict[str, Any]], columns: Sequence[str], headers: Sequence[str] | None = None) -> str:
    """A Markdown table; floats get 3–4 significant decimals, missing cells a dash."""

    def cell(v: Any) -> str:
        if v is None:
            return "–"
        if isinstance(v, bool):
            return "yes" if v else "**no**"
        if isinstance(v, float):
            return f"{v:.4f}" if abs(v) < 1 else f"{v:,.1f}"
        if isinstance(v, int):
            return f"{v:,}"
        return str(v)

    heads = list(headers or columns)
    lines = ["| " + " | ".join(heads) + " |",
             "| " + " | ".join("---" if i == 0 else "---:" for i in range(len(heads))) + " |"]
    for r in rows:
        lines.append("| " + " | ".join(cell(r.get(c)) for c in columns) + " |")
    return "\n".join(lines)


def write_json(out_dir: Path, name: str, data: Any) -> Path:
    out_dir.mkdir(parents=True, exist_ok=True)
    path = out_dir / f"{name}.json"
    path.write_text(json.dumps(data, indent=1, ensure_ascii=False, default=str))
    return path


def _plt() -> Any:
    import matplotlib  # deferred: optional extra

    matplotlib.use("Agg")
    import matplotlib.pyplot as plt  # deferred: optional extra

    return plt


def retrieval_markdown(result: dict[str, Any]) -> str:
    head = (f"### {result['dataset']} — {result['queries']} judged queries, {result['chunks']:,} chunks, "
            f"embedder `{result['embedder']}`\n\n")
    body = table(result["rows"], ["system", "ndcg@10", "recall@10", "recall@100", "mrr@10", "p50_ms", "p95_ms"],
                 ["system", "nDCG@10", "R@10", "R@100", "MRR@10", "p50 ms", "p95 ms"])
    comp = table(result["comparison"], ["mode", "ndcg@10", "baseline_ndcg@10", "delta_vs_baseline", "reference_ndcg@10",
                                        "target", "met"],
                 ["mode", "ours", "baseline here", "Δ", "issue reference", "target", "met"])
    parts = [head + body, comp]
    if result.get("fusion_variants"):
        parts.append("Fusion variants over our own dense + keyword lists (no tuning):\n\n"
                     + table(result["fusion_variants"], ["variant", "ndcg@10", "recall@10", "recall@100", "mrr@10"]))
    if result.get("fts_variants"):
        parts.append("Lance FTS tokenizer variants (keyword mode):\n\n"
                     + table(result["fts_variants"], ["variant", "ndcg@10", "recall@10", "recall@100", "mrr@10"]))
    return "\n\n".join(parts)


def presets_markdown(summary: dict[str, Any]) -> str:
    """nDCG@10 per preset and collection beside the untuned fusion reference, with the means."""
    rows = summary.get("rows") or []
    if not rows:
        return ""
    body = table(rows, ["collection", "keyword", "semantic", "hybrid", "thorough", "fusion_ref"],
                 ["collection", "fast (BM25)", "semantic", "default (hybrid)", "thorough", "fusion reference"])
    gain = summary.get("thorough_gain")
    tail = f"\n\nthorough − default, mean nDCG@10: {gain:+.4f}" if gain is not None else ""
    return "### Presets (nDCG@10)\n\n" + body + tail


def retrieval_plot(results: Sequence[dict[str, Any]], path: Path) -> Path:
    """Grouped bars: nDCG@10 per collection for each mode and its baseline."""
    plt = _plt()
    systems = ["kt keyword", "bm25s", "kt semantic", "exact dense", "kt hybrid", "fusion ref"]
    colors = ["#1f77b4", "#aec7e8", "#2ca02c", "#98df8a", "#d62728", "#ff9896"]
    fig, ax = plt.subplots(figsize=(max(6, 2.2 * len(results)), 4))
    width = 0.13
    for i, name in enumerate(systems):
        vals = []
        for r in results:
            ours_rows = {x["mode"]: x for x in r["rows"] if x["kind"] == "ours"}
            base_rows = {x["mode"]: x for x in r["rows"] if x["kind"] == "baseline"}
            mode = ["keyword", "keyword", "semantic", "semantic", "hybrid", "hybrid"][i]
            row = (ours_rows if i % 2 == 0 else base_rows).get(mode, {})
            vals.append(row.get("ndcg@10", 0.0))
        ax.bar([j + (i - 2.5) * width for j in range(len(results))], vals, width, label=name, color=colors[i])
    ax.set_xticks(range(len(results)), [r["dataset"] for r in results])
    ax.set_ylabel("nDCG@10")
    ax.set_title("Retrieval quality: ours (dark) vs baseline (light)")
    ax.legend(ncol=3, fontsize=8)
    fig.tight_layout()
    path.parent.mkdir(parents=True, exist_ok=True)
    fig.savefig(path, dpi=120)
    plt.close(fig)
    return path


def curves_plot(series: dict[str, list[tuple[float, float]]], path: Path, *, title: str, xlabel: str,
                ylabel: str, logx: bool = False) -> Path:
    """Line plot of named (x, y) series."""
    plt = _plt()
    fig, ax = plt.subplots(figsize=(6.5, 4.2))
    for name, points in series.items():
        if points:
            xs, ys = zip(*points, strict=False)
            ax.plot(xs, ys, marker="o", markersize=3, label=name)
    if logx:
        ax.set_xscale("log")
    ax.set_xlabel(xlabel)
    ax.set_ylabel(ylabel)
    ax.set_title(title)
    ax.grid(alpha=0.3)
    ax.legend(fontsize=8)
    fig.tight_layout()
    path.parent.mkdir(parents=True, exist_ok=True)
    fig.savefig(path, dpi=120)
    plt.close(fig)
    return path
