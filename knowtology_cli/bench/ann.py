"""ANN benchmark: flat vs indexed Lance vector search at 100k / 1M chunks (p50, recall@10, RSS, disk).

Run ``python -m knowtology_cli.bench.ann --rows 100000`` (``--index-type IVF_PQ --keep DIR`` for 1M).
"""

from __future__ import annotations

import argparse
import json
import os
import resource
import shutil
import statistics
import tempfile
import time
from pathlib import Path
from typing import Any

import numpy as np

from knowtology_cli.stores.ann import index_config, index_params

os.environ.setdefault("LANCEDB_LOG", "error")
os.environ.setdefault("LANCE_LOG", "error")

#: Noise norm relative to the (unit) topic centre: neighbours are close but not trivially so.
SPREAD = 1.0


def rss_mb() -> float:
    """Current resident set size in MiB."""
    for line in Path("/proc/self/status").read_text().splitlines():
        if line.startswith("VmRSS:"):
            return int(line.split()[1]) / 1024
    return 0.0


def peak_rss_mb() -> float:
    return resource.getrusage(resource.RUSAGE_SELF).ru_maxrss / 1024


def du_mb(path: Path) -> float:
    return sum(f.stat().st_size for f in path.rglob("*") if f.is_file()) / 2**20


def mixture(n: int, dim: int, centers: np.ndarray, rng: np.random.Generator, spread: float) -> np.ndarray:
    labels = rng.integers(0, len(centers), n)
    x = centers[labels] + rng.standard_normal((n, dim), dtype=np.float32) * np.float32(spread / np.sqrt(dim))
    x /= np.linalg.norm(x, axis=1, keepdims=True)
    return x.astype(np.float32)


def exact_topk(data_batches: list[np.ndarray], queries: np.ndarray, k: int) -> np.ndarray:
    best_scores = np.full((len(queries), k), -np.inf, dtype=np.float32)
    best_ids = np.zeros((len(queries), k), dtype=np.int64)
    offset = 0
    for batch in data_batches:
        scores = queries @ batch.T
        ids = np.broadcast_to(np.arange(offset, offset + len(batch)), scores.shape)
        all_scores = np.concatenate([best_scores, scores], axis=1)
        all_ids = np.concatenate([best_ids, ids], axis=1)
        top = np.argpartition(-all_scores, k, axis=1)[:, :k]
        best_scores = np.take_along_axis(all_scores, top, axis=1)
        best_ids = np.take_along_axis(all_ids, top, axis=1)
        offset += len(batch)
    return best_ids


def timed_search(ds: Any, queries: np.ndarray, k: int, **nearest: Any) -> tuple[list[float], list[list[int]]]:
    times, results = [], []
    for q in queries:
        started = time.perf_counter()
        table = ds.to_table(columns=["row"], nearest={"column": "vector", "q": q, "k": k, "metric": "cosine",
                                                      **nearest})
        times.append((time.perf_counter() - started) * 1000)
        results.append(table.column("row").to_pylist())
    return times, results


def recall(results: list[list[int]], truth: np.ndarray, k: int) -> float:
    return float(np.mean([len(set(r[:k]) & set(t[:k].tolist())) / k for r, t in zip(results, truth, strict=True)]))


def run(rows: int, dim: int, queries_n: int, index_type: str, nprobes: list[int], refine: list[int],
        workdir: Path, seed: int = 7, batch: int = 100_000, spread: float = SPREAD) -> dict[str, Any]:
    import lance  # deferred: heavy
    import lancedb  # deferred: heavy
    import pyarrow as pa  # deferred: heavy

    rng = np.random.default_rng(seed)
    n_centers = max(16, rows // 1000)
    centers = rng.standard_normal((n_centers, dim)).astype(np.float32)
    centers /= np.linalg.norm(centers, axis=1, keepdims=True)
    db = lancedb.connect(workdir)
    rss0 = rss_mb()
    started = time.perf_counter()
    batches: list[np.ndarray] = []
    table = None
    for start in range(0, rows, batch):
        n = min(batch, rows - start)
        vecs = mixture(n, dim, centers, rng, spread=spread)
        batches.append(vecs)
        data = pa.table({
            "row": pa.array(np.arange(start, start + n), pa.int64()),
            "chunk_id": [f"c{i}" for i in range(start, start + n)],
            "text": [f"synthetic chunk {i}" for i in range(start, start + n)],
            "vector": pa.FixedSizeListArray.from_arrays(pa.array(vecs.ravel()), dim),
        })
        if table is None:
            table = db.create_table("chunks", data=data, mode="overwrite")
        else:
            table.add(data)
    write_s = time.perf_counter() - started
    queries = mixture(queries_n, dim, centers, rng, spread=spread)
    truth = exact_topk(batches, queries, 10)
    del batches
    disk_data = du_mb(workdir)
    ds = lance.dataset(str(workdir / "chunks.lance"))
    timed_search(ds, queries[:3], 10, use_index=False)
    flat_times, flat_res = timed_search(ds, queries, 10, use_index=False)
    out: dict[str, Any] = {
        "rows": rows, "dim": dim, "queries": queries_n, "spread": spread, "index_type": index_type, "write_s": round(write_s, 1),
        "flat": {"p50_ms": round(statistics.median(flat_times), 2), "recall@10": round(recall(flat_res, truth, 10), 4)},
        "disk_data_mb": round(disk_data, 1),
    }
    params = index_params(rows, dim, index_type)
    started = time.perf_counter()
    rss_before_build = rss_mb()
    assert table is not None  # rows > 0: the loop above created it
    table.create_index("vector", config=index_config(rows, dim, index_type), replace=True, name="vector_idx")
    out["index_params"] = params
    out["cpu_s"] = round(sum(os.times()[:2]), 1)
    out["build_s"] = round(time.perf_counter() - started, 1)
    out["peak_rss_mb_build"] = round(peak_rss_mb(), 0)
    out["rss_before_build_mb"] = round(rss_before_build - rss0, 0)
    out["disk_index_mb"] = round(du_mb(workdir / "chunks.lance" / "_indices"), 1)
    ds = lance.dataset(str(workdir / "chunks.lance"))
    timed_search(ds, queries[:5], 10)  # warm the index cache
    rss_warm = rss_mb()
    grid = []
    for p in nprobes:
        for r in refine:
            extra: dict[str, Any] = {"nprobes": p}
            if r > 1:
                extra["refine_factor"] = r
            if index_type.startswith("IVF_HNSW"):
                extra["ef"] = max(100, 10 * r)
            timed_search(ds, queries[:10], 10, **extra)  # warm this configuration's partitions
            times, res = timed_search(ds, queries, 10, **extra)
            grid.append({"nprobes": p, "refine_factor": r, "p50_ms": round(statistics.median(times), 2),
                         "p95_ms": round(float(np.percentile(times, 95)), 2),
                         "recall@10": round(recall(res, truth, 10), 4)})
    out["indexed"] = grid
    out["rss_searching_mb"] = round(rss_warm, 0)
    out["peak_rss_mb"] = round(peak_rss_mb(), 0)
    return out


def main(argv: list[str] | None = None) -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--rows", type=int, default=100_000)
    parser.add_argument("--dim", type=int, default=384)
    parser.add_argument("--queries", type=int, default=100)
    parser.add_argument("--index-type", default="IVF_SQ")
    parser.add_argument("--nprobes", default="10,20,50")
    parser.add_argument("--refine", default="1,10")
    parser.add_argument("--spread", type=float, default=SPREAD, help="noise norm around each topic centre")
    parser.add_argument("--keep", help="write the table here (default: a temporary directory, removed)")
    args = parser.parse_args(argv)
    workdir = Path(args.keep) if args.keep else Path(tempfile.mkdtemp(prefix="kt-ann-"))
    workdir.mkdir(parents=True, exist_ok=True)
    try:
        result = run(args.rows, args.dim, args.queries, args.index_type,
                     [int(x) for x in args.nprobes.split(",")], [int(x) for x in args.refine.split(",")], workdir,
                     spread=args.spread)
    finally:
        if not args.keep:
            shutil.rmtree(workdir, ignore_errors=True)
    print(json.dumps(result, indent=2))


if __name__ == "__main__":
    main()
