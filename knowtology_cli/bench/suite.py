"""``kt bench all`` / ``make bench``: the default set, ~15 minutes on 2 cores once stores are cached."""

from __future__ import annotations

import time
from collections.abc import Callable
from pathlib import Path
from typing import Any

from knowtology_cli.bench.data import load_dataset, store_dir_for
from knowtology_cli.bench.report import retrieval_markdown

DEV = ("cranfield", "medline", "cacm", "scifact")


def _cached(name: str, embedder: str) -> bool:
    try:
        return (store_dir_for(load_dataset(name), embedder) / "bench.json").is_file()
    except Exception:  # noqa: BLE001 - a missing dataset is simply not part of the set
        return False


def run_all(*, embedder: str = "local", quick: bool = False, out_dir: Any = None,
            message: Callable[[str], None] = lambda _m: None) -> dict[str, Any]:
    """Run the default benchmark set; returns every result plus per-part wall times.

    Retrieval on the dev collections (SciFact only when its embedded store is already cached), the
    token economy on Cranfield (and SciFact when cached), speed at 10k and 100k chunks, and the CACM
    tree against its gold taxonomy. ``quick`` runs ADI with the hash embedder only (a smoke run).
    """
    from knowtology_cli.bench import retrieval, speed, tokens, tree  # deferred: loads numpy

    out = Path(out_dir) if out_dir is not None else None
    started = time.perf_counter()
    timings: dict[str, float] = {}
    if quick:
        sets = {"retrieval": ["adi"], "tokens": ["adi"]}
        embedder = "hash"
    else:
        sets = {"retrieval": [d for d in DEV if d != "scifact" or _cached(d, embedder)],
                "tokens": ["cranfield"] + (["scifact"] if _cached("scifact", embedder) else [])}
    result: dict[str, Any] = {"embedder": embedder, "quick": quick}
    t0 = time.perf_counter()
    result["retrieval"] = retrieval.run_many(sets["retrieval"], out_dir=out, embedder=embedder, message=message)
    timings["retrieval"] = time.perf_counter() - t0
    t0 = time.perf_counter()
    result["tokens"] = tokens.run_many(sets["tokens"], out_dir=out, embedder=embedder, message=message)
    timings["tokens"] = time.perf_counter() - t0
    t0 = time.perf_counter()
    result["speed"] = speed.run_speed("adi" if quick else "cranfield", sizes=[2000] if quick else [10_000, 100_000],
                                      ann=not quick, embedder=embedder, ingest_chunks=50 if quick else 200,
                                      n_queries=10 if quick else 50, message=message)
    timings["speed"] = time.perf_counter() - t0
    if not quick:
        t0 = time.perf_counter()
        result["tree"] = tree.run_tree("cacm", embedder=embedder, out_dir=out, message=message)
        timings["tree"] = time.perf_counter() - t0
    result["seconds"] = {k: round(v, 1) for k, v in timings.items()}
    result["seconds"]["total"] = round(time.perf_counter() - started, 1)
    return result


def suite_markdown(result: dict[str, Any]) -> str:
    from knowtology_cli.bench.speed import speed_markdown  # deferred: loads numpy
    from knowtology_cli.bench.tokens import tokens_markdown  # deferred: loads numpy
    from knowtology_cli.bench.tree import tree_markdown  # deferred: loads numpy

    parts = ["## Retrieval"] + [retrieval_markdown(r) for r in result["retrieval"]["collections"]]
    parts += ["## Token economy", tokens_markdown(result["tokens"]), "## Speed", speed_markdown(result["speed"])]
    if result.get("tree"):
        parts += ["## Tree", tree_markdown(result["tree"])]
    parts.append("Wall time per part (s): " + ", ".join(f"{k} {v}" for k, v in result["seconds"].items()))
    return "\n\n".join(parts)
