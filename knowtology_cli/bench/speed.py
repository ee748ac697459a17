"""``kt bench speed``: cold CLI start-up, ingest throughput, warm latency at 10k/100k chunks, peak RSS."""

from __future__ import annotations

import compileall
import functools
import json
import os
import shutil
import statistics
import subprocess
import sys
import tempfile
import time
from collections.abc import Callable, Iterator
from contextlib import contextmanager
from pathlib import Path
from typing import Any

import numpy as np

import knowtology_cli
from knowtology_cli.bench.data import (
    COLLECTION,
    cache_root,
    chunk_lines,
    load_dataset,
    open_store,
    store_dir_for,
)
from knowtology_cli.bench.metrics import latency
from knowtology_cli.bench.report import table
from knowtology_cli.bench.tokens import ensure_tree
from knowtology_cli.embedders import canonical_name, get_embedder
from knowtology_cli.errors import BuildError
from knowtology_cli.ingest import content_hash
from knowtology_cli.kb import KnowledgeBase
from knowtology_cli.llm import get_llm
from knowtology_cli.models import Chunk
from knowtology_cli.retrieval.fusion import fuse_lists
from knowtology_cli.retrieval.presets import get_preset
from knowtology_cli.stores import heavy_imports
from knowtology_cli.stores.ann import VECTOR_INDEX_NAME, has_vector_index, maybe_create_vector_index
from knowtology_cli.stores.base import CollectionInfo
from knowtology_cli.stores.lance import LanceVectorStore, lance_dataset
from knowtology_cli.stores.routing import ForwardingVectorStore
from knowtology_cli.testing.fake_llm import FakeLLMServer
from knowtology_cli.tokens import count_tokens

NOISE = 0.05
RUNS = 3


_LAUNCHER = (
    "import os, subprocess, sys, time\n"
    "t0 = time.perf_counter()\n"
    "p = subprocess.Popen(sys.argv[1:], stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL)\n"
    "_, status, u = os.wait4(p.pid, 0)\n"
    "print(time.perf_counter() - t0, u.ru_maxrss, u.ru_utime + u.ru_stime, os.waitstatus_to_exitcode(status))\n"
)


def _run_cold(argv: list[str], env: dict[str, str]) -> tuple[float, float, float, int]:
    """(wall s, peak RSS MiB, CPU s, exit code) of one fresh process.

    A tiny launcher process forks and waits, so the child's peak RSS is not inflated by a fork of
    this (large) benchmark process.
    """
    out = subprocess.run([sys.executable, "-c", _LAUNCHER, *argv], env=env, capture_output=True, text=True,
                         check=True).stdout.split()
    return float(out[0]), int(out[1]) / 1024, float(out[2]), int(out[3])


def cold_commands(store: Path, query: str, chunk_id: str, leaf: str | None, runs: int = RUNS) -> list[dict[str, Any]]:
    """Median cold wall time and peak RSS of each CLI command beside ``python -c pass``.

    Each command runs as a fresh process (3 runs, median wall time) next to ``python -c pass``
    measured in the same run; peak RSS of each process comes from ``os.wait4``.
    """
    kt = str(Path(sys.executable).with_name("kt"))
    env = {**os.environ, "KNOWTOLOGY_STORE": str(store), "KNOWTOLOGY_COLLECTION": COLLECTION,
           "KNOWTOLOGY_SESSION": "bench-speed", "LANCEDB_LOG": "error", "LANCE_LOG": "error"}
    commands: list[tuple[str, list[str]]] = [
        ("python -c pass", [sys.executable, "-c", "pass"]),
        ("kt --help", [kt, "--help"]),
        ("kt status", [kt, "status"]),
        ("kt browse", [kt, "browse"]),
    ]
    if leaf:
        commands.append(("kt browse LEAF", [kt, "browse", leaf]))
    commands += [
        ("kt grep", [kt, "grep", query]),
        ("kt search --preset fast", [kt, "search", query, "--preset", "fast"]),
        ("kt search (default: hybrid)", [kt, "search", query]),
        ("kt read", [kt, "read", chunk_id, "--force"]),
    ]
    rows: list[dict[str, Any]] = []
    for name, argv in commands:
        timed = [_run_cold(argv, env) for _ in range(max(1, runs))]
        rows.append({"command": name, "wall_ms": round(statistics.median(r[0] for r in timed) * 1000, 1),
                     "cpu_ms": round(statistics.median(r[2] for r in timed) * 1000, 1),
                     "peak_rss_mib": round(max(r[1] for r in timed), 1), "exit": max(r[3] for r in timed)})
    base, base_cpu = rows[0]["wall_ms"], rows[0]["cpu_ms"]
    for r in rows:
        r["x_python"] = round(r["wall_ms"] / base, 2) if base else None
        r["x_python_cpu"] = round(r["cpu_ms"] / base_cpu, 2) if base_cpu else None
    return rows


#: start-up targets of issue 16, as multiples of a bare ``python -c pass`` (paired medians)
STARTUP_TARGETS = {"kt --help": 4.0, "kt browse": 8.0}
STARTUP_RUNS = 21


def startup_ratios(store: Path, runs: int = STARTUP_RUNS) -> dict[str, Any]:
    """Cold ``kt --help`` and ``kt browse`` as paired multiples of ``python -c pass``.

    Each round starts the three as fresh processes back to back, in an order that rotates from
    round to round, and takes each command's ratio to that round's ``python -c pass``: pairing
    cancels most of the drift a busy machine adds, and the median of the ratios is reported (with
    the median walls). The package is byte-compiled first (also when PYTHONDONTWRITEBYTECODE is
    set) and each command run once unmeasured, so every round reads cached bytecode and a warm
    page cache, as a user's second run does.
    """
    compileall.compile_dir(str(Path(knowtology_cli.__file__).parent), quiet=1)
    kt = str(Path(sys.executable).with_name("kt"))
    env = {**os.environ, "KNOWTOLOGY_STORE": str(store), "KNOWTOLOGY_COLLECTION": COLLECTION,
           "LANCEDB_LOG": "error", "LANCE_LOG": "error"}
    for key in ("COLUMNS", "NO_COLOR", "FORCE_COLOR"):
        env.pop(key, None)
    commands = {"python -c pass": [sys.executable, "-c", "pass"], "kt --help": [kt, "--help"],
                "kt browse": [kt, "browse"]}
    for argv in commands.values():
        _run_cold(argv, env)
    walls: dict[str, list[float]] = {name: [] for name in commands}
    names = list(commands)
    for round_no in range(max(1, runs)):
        shift = round_no % len(names)
        for name in names[shift:] + names[:shift]:
            wall, _, _, code = _run_cold(commands[name], env)
            if code != 0:
                raise RuntimeError(f"{name} exited {code} on {store}")
            walls[name].append(wall)
    rows = []
    for name in names[1:]:
        ratios = [c / b for c, b in zip(walls[name], walls["python -c pass"])]
        ratio = statistics.median(ratios)
        rows.append({"command": name, "median_ms": round(statistics.median(walls[name]) * 1000, 1),
                     "python_ms": round(statistics.median(walls["python -c pass"]) * 1000, 1),
                     "x_python": round(ratio, 2), "target": STARTUP_TARGETS[name],
                     "within_target": ratio <= STARTUP_TARGETS[name]})
    return {"runs": runs, "rows": rows}


def startup_store(data_dir: str, embedder: str, message: Callable[[str], None]) -> tuple[Path, dict[str, Any]]:
    """The cached scratch store of ``data_dir`` with its offline tree (built once), and its size."""
    ds = load_dataset(data_dir)
    kb, store, _ = open_store(ds, embedder, message=message)
    try:
        if not ensure_tree(kb, message):
            raise BuildError(f"no offline tree for {ds.name}: kt browse would time an empty map",
                             hint="see the message above; `kt build` on that store shows the error")
        size = {"collection": ds.name, "chunks": kb.vectors.count(COLLECTION),
                "categories": len(kb.tree.nodes(COLLECTION))}
    finally:
        kb.close()
    return store, size


def ingest_throughput(texts: list[dict[str, str]], embedder_name: str) -> dict[str, Any]:
    """Library ingest vs the bare embedder on the same chunks, plus the CLI ingest as a process.

    Chunks/s of ``KnowledgeBase.ingest`` next to the bare embedder's ``embed_documents`` on the same
    texts (same embedder instance, model already loaded).
    """
    model = get_embedder(embedder_name)
    inputs = [f"{o['title']}\n{o['text']}" if o["title"] else o["text"] for o in texts]
    model.embed_documents(inputs[:8])  # load the model outside the timing
    t0 = time.perf_counter()
    model.embed_documents(inputs)
    bare = time.perf_counter() - t0
    with tempfile.TemporaryDirectory(prefix="kt-speed-") as tmp:
        path = Path(tmp, "chunks.jsonl")
        path.write_text("\n".join(json.dumps(o) for o in texts) + "\n")
        kb = KnowledgeBase.open(Path(tmp, "lib"), embedder=model)
        t0 = time.perf_counter()
        kb.ingest([str(path)], collection=COLLECTION, embedder=embedder_name)
        lib = time.perf_counter() - t0
        kb.close()
        kt = str(Path(sys.executable).with_name("kt"))
        env = {**os.environ, "LANCEDB_LOG": "error", "LANCE_LOG": "error"}
        wall, rss, _, code = _run_cold([kt, "ingest", str(path), "--store", str(Path(tmp, "cli")), "--embedder",
                                     embedder_name, "-c", COLLECTION], env)
    n = len(texts)
    return {"chunks": n, "embedder": model.name, "bare_embedder_chunks_per_s": round(n / bare, 1),
            "ingest_chunks_per_s": round(n / lib, 1), "ingest_overhead": round(lib / bare - 1, 3),
            "cli_ingest_wall_s": round(wall, 2), "cli_ingest_chunks_per_s": round(n / wall, 1),
            "cli_ingest_peak_rss_mib": round(rss, 1), "cli_exit": code}


def scaled_store(data_dir: str, size: int, message: Callable[[str], None], embedder: str = "local") -> tuple[Path, str]:
    """A cached store of ``size`` chunks: the collection's text repeated with distinct ids (see module doc).

    The collection's real text repeated with distinct ids up to N chunks. Vectors are not re-embedded:
    each copy gets its original's stored vector plus Gaussian noise (σ = 0.05 per dimension,
    re-normalised; random unit vectors when no embedded store exists).
    """
    ds = load_dataset(data_dir)
    name = canonical_name(embedder)
    dim = get_embedder(embedder).dimension
    directory = cache_root() / f"scale-{ds.name}-{size}-{name.replace(':', '_').replace('/', '_')}"
    marker = directory / "bench.json"
    if marker.is_file():
        meta = json.loads(marker.read_text())
        return directory, meta["vectors"]
    if directory.exists():
        shutil.rmtree(directory)
    base_vectors: dict[str, np.ndarray] = {}
    source = "random unit vectors"
    try:
        src, _, _ = open_store(ds, embedder, message=message) if _has_store(ds, embedder) else (None, None, None)
        if src is not None:
            for stored, stored_vecs in src.vectors.iter_rows(COLLECTION, with_vectors=True):
                assert stored_vecs is not None  # with_vectors=True
                base_vectors.update({c.chunk_id: v for c, v in zip(stored, stored_vecs, strict=True)})
            src.close()
            source = f"stored {name} vectors of the original + N(0, {NOISE}²) noise"
    except Exception:  # noqa: BLE001 - fall back to random vectors
        base_vectors = {}
    message(f"building a {size:,}-chunk store from {ds.name} ({source})…")
    lines = chunk_lines(ds)
    rng = np.random.default_rng(7)
    kb = KnowledgeBase.open(directory)
    kb.tree.ensure_collection(CollectionInfo(name=COLLECTION, embedder=name, dimension=dim))
    batch_n = 10_000
    for start in range(0, size, batch_n):
        chunks: list[Chunk] = []
        vecs: list[np.ndarray] = []
        for i in range(start, min(size, start + batch_n)):
            o = lines[i % len(lines)]
            copy = i // len(lines)
            cid = o["_id"] if copy == 0 else f"{o['_id']}~{copy}"
            chunks.append(Chunk(chunk_id=cid, text=o["text"], doc_id=cid, file_name="corpus.jsonl", chunk_index=0,
                                title=o["title"], content_hash=content_hash(o["text"], o["title"])))
            v = base_vectors.get(o["_id"])
            v = rng.standard_normal(dim).astype(np.float32) if v is None else v + rng.normal(0, NOISE, dim)
            vecs.append(v / np.linalg.norm(v))
        kb.vectors.upsert(COLLECTION, chunks, np.asarray(vecs, dtype=np.float32))
        message(f"  {min(size, start + batch_n):,}/{size:,}")
    kb.vectors.refresh_indexes(COLLECTION)
    kb.close()
    marker.write_text(json.dumps({"size": size, "vectors": source}))
    return directory, source


def _has_store(ds: Any, embedder: str) -> bool:
    return (store_dir_for(ds, embedder) / "bench.json").is_file()


def _exact_top10(kb: Any, query_vectors: np.ndarray) -> list[list[str]]:
    ids: list[str] = []
    blocks = []
    for chunks, vecs in kb.vectors.iter_rows(COLLECTION, with_vectors=True):
        ids.extend(c.chunk_id for c in chunks)
        blocks.append(vecs)
    sims = query_vectors @ np.concatenate(blocks).T
    return [[ids[i] for i in np.argsort(-row)[:10]] for row in sims]


class _Serial(ForwardingVectorStore):
    """The same store with its searches kept one after the other (hybrid without the overlap)."""

    def concurrent_reads(self, collection: str) -> bool:
        return False


def _timed(fn: Callable[[], Any]) -> tuple[float, float]:
    t0, c0 = time.perf_counter(), time.process_time()
    fn()
    return time.perf_counter() - t0, time.process_time() - c0


def stage_split(kb: KnowledgeBase, queries: list[str], k: int = 10, preset: str = "default") -> dict[str, Any]:
    """Each stage of a ``preset`` search run on its own, in the order the search runs them: query
    embedding, vector and keyword lists at the preset's depth, fusion, and the ``k`` hits' leads
    (snippets: from the tree's map, else read from the table by the row ids the searches returned).
    In a hybrid search the keyword list is fetched beside the embedding and the vector list, so
    the search costs about embedding + vector + fusion + snippets when two cores are free."""
    chosen = get_preset(preset)
    store = kb.vectors
    embedder = kb.embedder_for(COLLECTION)
    stages: dict[str, list[tuple[float, float]]] = {name: [] for name in
                                                     ("query embedding", "vector search", "keyword search",
                                                      "fusion", "snippets")}

    def one(query: str) -> list[tuple[float, float]]:
        box: dict[str, Any] = {}
        return [
            _timed(lambda: box.update(v=embedder.embed_query(query))),
            _timed(lambda: box.update(dense=store.vector_search(COLLECTION, box["v"], chosen.depth))),
            _timed(lambda: box.update(sparse=store.keyword_search(COLLECTION, query, chosen.depth))),
            _timed(lambda: box.update(fused=fuse_lists({"dense": box["dense"], "keyword": box["sparse"]},
                                                       rule=chosen.fusion))),
            _timed(lambda: kb._hits(COLLECTION, box["fused"][:k])),
        ]

    one(queries[0])  # unmeasured: warms every stage
    for q in queries:
        for name, pair in zip(stages, one(q), strict=True):
            stages[name].append(pair)
    return {"preset": preset, "depth": chosen.depth,
            "stages": {name: latency([p[0] for p in v], [p[1] for p in v]) for name, v in stages.items()}}


@contextmanager
def _one_shot(value: bool) -> Iterator[None]:
    """Measure as a one-shot ``kt`` command (vectors searched through Lance) or as a process that
    answers many queries (vectors in memory when they fit), whatever this process is."""
    before = heavy_imports.ONE_SHOT
    heavy_imports.ONE_SHOT = value
    try:
        yield
    finally:
        heavy_imports.ONE_SHOT = before


def warm_latency(directory: Path, queries: list[str], *, ann: bool, message: Callable[[str], None]) -> dict[str, Any]:
    """Warm library latency of search (3 modes), grep and read on the store as ingest leaves it.

    With ``ann``, a copy of the store is measured with the vector index toggled: the product's own
    index (``stores.ann``, built automatically past its threshold) added to a flat store, or dropped
    from an indexed one — so both sides of the threshold are measured at every size.
    """
    kb = KnowledgeBase.open(directory)
    out: dict[str, Any] = {"chunks": kb.vectors.count(COLLECTION)}
    ids = list(kb.vectors.fingerprints(COLLECTION))
    rng = np.random.default_rng(3)
    embedder = kb.embedder_for(COLLECTION)
    qv = np.stack([embedder.embed_query(q) for q in queries])
    exact = _exact_top10(kb, qv)

    timed = _timed

    def recall(store: Any) -> float:
        got = [[s.chunk_id for s in store.vectors.vector_search(COLLECTION, v, 10)] for v in qv]
        return round(float(np.mean([len(set(g) & set(e)) / 10 for g, e in zip(got, exact, strict=True)])), 4)

    def measure(store: Any, label: str, full: bool) -> None:
        # (key, mode, preset): "hybrid" is the default preset; fast and thorough are the other presets
        runs = [("semantic", "semantic", "default"), ("hybrid", None, "default")]
        if full:
            runs += [("keyword", "keyword", "default"), ("fast", None, "fast"), ("thorough", None, "thorough")]
        for key, mode, preset in runs:
            store.search(queries[0], collection=COLLECTION, k=10, mode=mode, preset=preset)
            pairs = [timed(functools.partial(store.search, q, collection=COLLECTION, k=10, mode=mode, preset=preset))
                     for q in queries]
            out[f"{label}search_{key}"] = latency([p[0] for p in pairs], [p[1] for p in pairs])
        if not full:
            return
        # the default preset with its two retrievers one after the other, for the overlap's gain
        vectors = store.vectors
        store.vectors = _Serial(vectors)
        try:
            pairs = [timed(functools.partial(store.search, q, collection=COLLECTION, k=10)) for q in queries]
        finally:
            store.vectors = vectors
        out["search_hybrid_serial"] = latency([p[0] for p in pairs], [p[1] for p in pairs])
        out["default_stages"] = stage_split(store, queries)
        out["rerank_llm"] = rerank_cost(directory, queries, timed)
        pairs = [timed(functools.partial(store.grep, q, collection=COLLECTION, k=10)) for q in queries]
        out["grep"] = latency([p[0] for p in pairs], [p[1] for p in pairs])
        picks = [[ids[i] for i in rng.integers(0, len(ids), 3)] for _ in queries]
        pairs = [timed(functools.partial(store.read, p, collection=COLLECTION, session="bench-speed", force=True))
                 for p in picks]
        out["read_3"] = latency([p[0] for p in pairs], [p[1] for p in pairs])

    indexed = has_vector_index(lance_dataset(kb.vectors, COLLECTION))
    index = "ANN (automatic)" if indexed else "none (flat)"
    with _one_shot(False):  # a process that answers many queries, as the library, serve, mcp and repl are
        measure(kb, "", True)
        out["recall@10_vs_exact"] = recall(kb)
    backend = kb.vectors.backend_for(COLLECTION)
    held = isinstance(backend, LanceVectorStore) and backend.holds_vectors(COLLECTION)
    out["vector_index"] = "in memory (exact)" if held else index
    with _one_shot(True):  # the path of a one-shot `kt search`: Lance, with its index past the threshold
        measure(kb, "lance_", False)
        out["lance_recall@10_vs_exact"] = recall(kb)
    out["lance_index"] = f"Lance, {index} (one-shot kt)"
    kb.close()
    if ann:
        label = "flat_" if indexed else "ann_"
        message(f"  {'dropping' if indexed else 'creating'} the vector index on a copy of {out['chunks']:,} rows…")
        with tempfile.TemporaryDirectory(prefix="kt-ann-") as tmp:
            copy = Path(tmp, "store")
            shutil.copytree(directory, copy, ignore=shutil.ignore_patterns("sessions"))
            other = KnowledgeBase.open(copy)
            ds = lance_dataset(other.vectors, COLLECTION)
            t0 = time.perf_counter()
            if indexed:
                ds.drop_index(VECTOR_INDEX_NAME)
            else:
                maybe_create_vector_index(ds, threshold=0)
                out["ann_build_s"] = round(time.perf_counter() - t0, 1)
            other.vectors.forget(COLLECTION)
            out["alternative"] = "Lance, flat (index dropped)" if indexed else "Lance, ANN (product index forced)"
            with _one_shot(True):
                measure(other, label, False)
                out[f"{label}recall@10_vs_exact"] = recall(other)
            other.close()
    return out


def rerank_cost(directory: Path, queries: list[str], timed: Callable[[Callable[[], Any]], tuple[float, float]],
                model: str = "openai:gpt-4o-mini") -> dict[str, Any]:
    """What ``--rerank llm`` adds per query to the default preset: wall time against the loopback fake
    server (SDK, prompt and parsing; a real model's own latency comes on top), and the tokens and
    dollars of the one call at ``model``'s list prices (tiktoken o200k_base on the sent messages)."""
    with FakeLLMServer(keep_bodies=True) as server:
        client = get_llm(model, api_key="bench-fake-key", base_url=server.openai_base_url)
        with tempfile.TemporaryDirectory(prefix="kt-rerank-") as tmp:  # a fresh call log: every query is a miss
            copy = Path(tmp, "store")
            shutil.copytree(directory, copy, ignore=shutil.ignore_patterns("sessions"))
            kb = KnowledgeBase.open(copy, llm=client)
            plain = [timed(functools.partial(kb.search, q, collection=COLLECTION, k=10)) for q in queries]
            pairs = [timed(functools.partial(kb.search, q, collection=COLLECTION, k=10, rerank="llm")) for q in queries]
            kb.close()
        calls = [c for c in server.calls if c.kind == "rerank"]
        sent = [sum(count_tokens(str(m.get("content", "")), "o200k_base") for m in (c.body or {}).get("messages", []))
                for c in calls]
    n = max(1, len(queries))
    out_tokens = 8 * 20  # ~8 tokens per graded candidate in the reply
    input_tokens = sum(sent) / max(1, len(sent))
    return {"model": model, "calls_per_query": round(len(calls) / n, 2),
            "input_tokens_per_query": round(input_tokens, 1), "output_tokens_per_query_est": out_tokens,
            "usd_per_query": round(client.profile.cost(int(input_tokens), out_tokens), 6),
            "added_p50_ms": round((float(np.median([p[0] for p in pairs])) - float(np.median([p[0] for p in plain])))
                                  * 1000, 2)}


def run_speed(data_dir: str = "scifact", *, sizes: list[int] | None = None, ann: bool = True, embedder: str = "local",
              ingest_chunks: int = 200, n_queries: int = 50, runs: int = RUNS, out_dir: Any = None,
              startup_data: str | None = "scifact", startup_runs: int = STARTUP_RUNS,
              message: Callable[[str], None] = lambda _m: None) -> dict[str, Any]:
    """Every speed measurement."""
    result_startup: dict[str, Any] | None = None
    if startup_data:
        store, size = startup_store(startup_data, embedder, message)
        message(f"start-up: kt --help and kt browse vs python -c pass, {startup_runs} paired rounds on "
                f"{size['collection']} ({size['chunks']:,} chunks, {size['categories']} categories)…")
        result_startup = {**startup_ratios(store, startup_runs), **size}
    ds = load_dataset(data_dir)
    queries = list(ds.judged(n_queries).values())
    result: dict[str, Any] = {"dataset": ds.name, "cpus": os.cpu_count(), "python": sys.version.split()[0],
                              "load_average_at_start": [round(x, 2) for x in os.getloadavg()]}
    if result_startup is not None:
        result["startup"] = result_startup
    small = load_dataset("adi") if ds.name != "adi" else ds
    kb, store, _ = open_store(small, embedder, message=message)
    leaf = None
    try:
        if ensure_tree(kb, message):
            leaves = [n.path for n in kb.tree.nodes(COLLECTION) if not kb.tree.children(COLLECTION, n.path)]
            leaf = leaves[0] if leaves else None
        chunk_id = next(iter(kb.vectors.fingerprints(COLLECTION)))
    finally:
        kb.close()
    message("cold CLI commands…")
    result["cold"] = cold_commands(store, next(iter(small.judged().values())), chunk_id, leaf, runs)
    result["cold_runs"] = runs
    result["cold_store"] = f"{small.name} ({embedder})"
    message(f"ingest throughput on {ingest_chunks} {ds.name} chunks…")
    result["ingest"] = ingest_throughput(chunk_lines(ds)[:ingest_chunks], embedder)
    result["scale"] = []
    for n_chunks in sizes if sizes is not None else [10_000, 100_000]:
        directory, source = scaled_store(data_dir, n_chunks, message, embedder)
        message(f"warm latency at {n_chunks:,} chunks…")
        row = warm_latency(directory, queries, ann=ann, message=message)
        row["vectors"] = source
        result["scale"].append(row)
    result["load_average_at_end"] = [round(x, 2) for x in os.getloadavg()]
    return result


def speed_markdown(result: dict[str, Any]) -> str:
    parts = [f"Load average at start / end: {result['load_average_at_start']} / {result.get('load_average_at_end')} "
             f"on {result['cpus']} CPUs.",
             *([startup_markdown(result["startup"])] if result.get("startup") else []),
             f"### Cold start (fresh process, median of {result.get('cold_runs', RUNS)}; store: {result['cold_store']})\n\n"
             + table(result["cold"], ["command", "wall_ms", "x_python", "cpu_ms", "x_python_cpu", "peak_rss_mib", "exit"],
                     ["command", "wall ms", "× python -c pass", "CPU ms", "CPU × python", "peak RSS MiB", "exit"])]
    ing = result["ingest"]
    parts.append("### Ingest\n\n" + table([ing], ["chunks", "embedder", "bare_embedder_chunks_per_s",
                                                   "ingest_chunks_per_s", "ingest_overhead", "cli_ingest_wall_s",
                                                   "cli_ingest_peak_rss_mib"],
                                          ["chunks", "embedder", "bare embedder chunks/s", "ingest chunks/s",
                                           "overhead", "CLI ingest s", "CLI peak RSS MiB"]))
    rows = []
    for s in result["scale"]:
        for key in ("search_fast", "search_hybrid", "search_hybrid_serial", "search_thorough", "search_semantic",
                    "search_keyword", "grep",
                    "read_3", "lance_search_semantic", "lance_search_hybrid", "ann_search_semantic",
                    "ann_search_hybrid", "flat_search_semantic", "flat_search_hybrid"):
            if key in s:
                prefix = key.split("search_")[0] if key.startswith(("lance_", "ann_", "flat_")) else ""
                index = {"": s["vector_index"], "lance_": s.get("lance_index")}.get(prefix, s.get("alternative"))
                rows.append({"chunks": s["chunks"], "operation": key.removeprefix(prefix),
                             "vector index": index if "search_" in key and "keyword" not in key else "–", **s[key]})
    parts.append("### Warm latency (library, k=10)\n\n" + table(
        rows, ["chunks", "operation", "vector index", "p50_ms", "p95_ms", "mean_ms", "cpu_p50_ms"],
        ["chunks", "operation", "vector index", "p50 ms", "p95 ms", "mean ms", "CPU p50 ms"]))
    stage_rows = [{"chunks": s["chunks"], "stage": name, **figures}
                  for s in result["scale"] if "default_stages" in s
                  for name, figures in s["default_stages"]["stages"].items()]
    if stage_rows:
        parts.append("### Default preset by stage (library, k=10, each stage run on its own; the keyword search "
                     "runs beside embedding + vector search in `search_hybrid`, one after the other in "
                     "`search_hybrid_serial`)\n\n" + table(
                         stage_rows, ["chunks", "stage", "p50_ms", "p95_ms", "cpu_p50_ms"],
                         ["chunks", "stage", "p50 ms", "p95 ms", "CPU p50 ms"]))
    rerank = [{"chunks": s["chunks"], **s["rerank_llm"]} for s in result["scale"] if "rerank_llm" in s]
    if rerank:
        parts.append("### Rerank cost per query (`--rerank llm` on the default preset; fast, default and thorough "
                     "rerank nothing themselves)\n\n" + table(
                         rerank, ["chunks", "model", "calls_per_query", "input_tokens_per_query",
                                  "output_tokens_per_query_est", "usd_per_query", "added_p50_ms"],
                         ["chunks", "priced as", "LLM calls", "input tokens", "output tokens (est.)", "USD",
                          "added p50 ms (loopback fake)"]))
    for s in result["scale"]:
        alt = next((k for k in ("ann_recall@10_vs_exact", "flat_recall@10_vs_exact") if k in s), None)
        lance = (f"; {s['lance_index']}: recall@10 {s['lance_recall@10_vs_exact']}"
                 if "lance_recall@10_vs_exact" in s else "")
        parts.append(f"{s['chunks']:,} chunks: vector search {s['vector_index']} — recall@10 vs exact "
                     f"{s['recall@10_vs_exact']}" + lance + (f"; {s['alternative']}: recall@10 {s[alt]}" if alt else "")
                     + (f", index built in {s['ann_build_s']} s" if "ann_build_s" in s else "")
                     + f". Vectors: {s['vectors']}.")
    return "\n\n".join(parts)


def startup_markdown(startup: dict[str, Any]) -> str:
    """The start-up section: paired medians against the issue-16 targets."""
    return (f"### Start-up (paired with `python -c pass`, median of {startup['runs']} rounds; "
            f"{startup['collection']}: {startup['chunks']:,} chunks, {startup['categories']} categories)\n\n"
            + table(startup["rows"], ["command", "median_ms", "python_ms", "x_python", "target", "within_target"],
                    ["command", "median ms", "python -c pass ms", "× python (paired median)", "target ×",
                     "within target"]))
