"""``kt bench build``: LLM build plans per profile, wall time per ``--concurrency``, builders compared."""

from __future__ import annotations

import argparse
import functools
import io
import json
import math
import os
import shutil
import subprocess
import sys
import tempfile
import time
import urllib.request
from collections.abc import Callable, Sequence
from pathlib import Path
from typing import Any

import numpy as np

from knowtology_cli.bench.data import chunk_lines, load_dataset
from knowtology_cli.bench.report import table
from knowtology_cli.bench.tree import name_routing
from knowtology_cli.builders.batching import ChunkCost, chunk_costs
from knowtology_cli.builders.calls import log_totals
from knowtology_cli.builders.llm_builder import LLMTreeBuilder, plan_build
from knowtology_cli.kb import KnowledgeBase
from knowtology_cli.llm import get_llm, get_profile
from knowtology_cli.llm.profiles import PROFILES, ModelProfile

MessageFn = Callable[[str], None]
FAKE_KEY = "sk-bench-fake-server"
#: Reply budget of the wall-time runs: small enough that 1,000 chunks need ~25 calls to spread out.
WALL_MAX_OUTPUT = 4096


def _prefixed(message: Callable[[str], None], builder: str, text: str) -> None:
    message(f"  {builder}: {text}")


def _costs_by_encoding(items: Sequence[tuple[str, str]], profiles: Sequence[ModelProfile],
                       per_chunk_cap: int) -> dict[str, list[ChunkCost]]:
    """Raw (ratio 1) costs once per tokenizer; profiles scale them (same result as ``chunk_costs``)."""
    out: dict[str, list[ChunkCost]] = {}
    for p in profiles:
        if p.encoding not in out:
            neutral = p.model_copy(update={"token_ratio": 1.0})
            out[p.encoding] = chunk_costs(items, neutral, per_chunk_cap=per_chunk_cap)
    return out


def _scaled(costs: Sequence[ChunkCost], profile: ModelProfile) -> list[ChunkCost]:
    if profile.token_ratio == 1.0:
        return list(costs)
    return [ChunkCost(c.chunk_id, profile.provider_tokens(c.input_tokens), profile.provider_tokens(c.output_tokens))
            for c in costs]


def stride_sample(items: Sequence[Any], n: int) -> list[Any]:
    """``n`` items spread evenly over ``items`` (deterministic)."""
    if n >= len(items):
        return list(items)
    return [items[(2 * i + 1) * len(items) // (2 * n)] for i in range(n)]


def plan_table(items: Sequence[tuple[str, str]], *, sample: int = 1000, per_chunk_cap: int = 400,
               profiles: Sequence[ModelProfile] | None = None, message: MessageFn = lambda _m: None) -> list[dict]:
    """One row per (corpus size, profile): our calls vs the seed's, tokens, cost."""
    profiles = list(profiles or PROFILES.values())
    message(f"counting tokens of {len(items):,} chunks…")
    raw = _costs_by_encoding(items, profiles, per_chunk_cap)
    rows = []
    sample_ids = {cid for cid, _ in stride_sample(items, sample)}
    for label, keep in ((f"{len(items):,} chunks", None), (f"{min(sample, len(items)):,}-chunk sample", sample_ids)):
        for p in profiles:
            costs = _scaled([c for c in raw[p.encoding] if keep is None or c.chunk_id in keep], p)
            bp = plan_build(costs, p, has_tree=False, per_chunk_cap=per_chunk_cap)
            d = bp.as_dict()
            rows.append({"corpus": label, "profile": p.name, "calls": d["calls"], "seed_calls": d["seed_calls"],
                         "within_seed": d["calls"] <= d["seed_calls"], "per_call": d["largest_batch"],
                         "seed_per_call": p.seed_batch_size, "input_tokens": d["input_tokens"],
                         "output_tokens": d["output_tokens"], "cost_usd": d["cost_usd"],
                         "why": _why(p, d) if d["calls"] > d["seed_calls"] else ""})
    return rows


def _why(p: ModelProfile, d: dict) -> str:
    if p.context_window <= 8192:
        return f"{p.context_window:,}-token context: {p.seed_batch_size} chunks don't fit one prompt"
    return (f"{p.max_output_tokens:,}-token output cap: {p.seed_batch_size} assignments overflow the reply "
            f"(≤{d['largest_batch']} fit)")


# ------------------------------------------------------------------------- fake server runs
class StandaloneFakeServer:
    """``python -m knowtology_cli.testing.fake_llm`` in a subprocess (its first stdout line is the URL)."""

    def __init__(self, latency: float = 0.0, fail_rate: float = 0.0, *, prefill_tps: float = 0.0,
                 gen_tps: float = 0.0, serial: bool = False) -> None:
        self.args = [sys.executable, "-m", "knowtology_cli.testing.fake_llm", "--port", "0",
                     "--latency", str(latency), "--fail-rate", str(fail_rate), "--seed", "0",
                     "--prefill-tps", str(prefill_tps), "--gen-tps", str(gen_tps), *(["--serial"] if serial else [])]
        self.proc: subprocess.Popen[str] | None = None
        self.url = ""

    def __enter__(self) -> StandaloneFakeServer:
        self.proc = subprocess.Popen(self.args, stdout=subprocess.PIPE, stderr=subprocess.DEVNULL, text=True)
        assert self.proc.stdout is not None
        self.url = self.proc.stdout.readline().strip()
        if not self.url.startswith("http"):
            raise RuntimeError("the fake server did not start")
        return self

    def __exit__(self, *exc: object) -> None:
        if self.proc is not None:
            self.proc.terminate()
            self.proc.wait(timeout=10)

    def calls(self) -> list[dict]:
        with urllib.request.urlopen(self.url + "/_calls", timeout=10) as resp:
            return json.loads(resp.read())


def _scratch_kb(rows: Sequence[dict], directory: Path, message: MessageFn) -> Any:
    kb = KnowledgeBase.open(directory)
    message(f"ingesting {len(rows):,} chunks (hash embedder) into {directory}…")
    stream = io.StringIO("".join(json.dumps(r, ensure_ascii=False) + "\n" for r in rows))
    kb.ingest(["-"], stdin=stream, embedder="hash")
    return kb


def concurrency_runs(rows: Sequence[dict], *, latency: float, levels: Sequence[int],
                     max_output_tokens: int = WALL_MAX_OUTPUT, message: MessageFn = lambda _m: None) -> list[dict]:
    """Wall time of the same build at each concurrency level (cache off, fake server with ``latency``)."""
    profile = get_profile("gpt-4o-mini").with_overrides(max_output_tokens=max_output_tokens)
    out: list[dict[str, Any]] = []
    with tempfile.TemporaryDirectory(prefix="kt-bench-build-") as tmp, StandaloneFakeServer(latency=latency) as srv:
        kb = _scratch_kb(rows, Path(tmp) / "store", message)
        for level in levels:
            llm = get_llm("openai:gpt-4o-mini", api_key=FAKE_KEY, base_url=srv.url + "/v1", profile=profile)
            before = len(srv.calls())
            started = time.perf_counter()
            report = LLMTreeBuilder(kb, "default", llm, concurrency=level, use_cache=False).run(rebuild=True)
            seconds = time.perf_counter() - started
            served = len(srv.calls()) - before
            message(f"concurrency {level}: {seconds:.1f} s, {report.llm_calls} calls, {report.nodes} categories")
            out.append({"concurrency": level, "seconds": round(seconds, 1), "calls": report.llm_calls,
                        "server_requests": served, "input_tokens": report.input_tokens,
                        "output_tokens": report.output_tokens, "categories": report.nodes,
                        "mapped": report.mapped, "unmapped": report.unmapped,
                        "ideal_seconds": round(latency * (1 + math.ceil((report.llm_calls - 1) / level)), 1)})
        kb.close()
    base = out[0]["seconds"] if out else 0
    for r in out:
        r["speedup"] = round(base / r["seconds"], 2) if r["seconds"] else None
    return out


def full_builds(rows: Sequence[dict], *, specs: Sequence[str], concurrency: int = 4,
                message: MessageFn = lambda _m: None) -> list[dict]:
    """Build the whole collection with each provider's SDK against the fake server (no latency)."""
    out = []
    with tempfile.TemporaryDirectory(prefix="kt-bench-full-") as tmp, StandaloneFakeServer() as srv:
        kb = _scratch_kb(rows, Path(tmp) / "store", message)
        for spec in specs:
            base = srv.url + "/v1" if spec.startswith("openai:") else srv.url
            llm = get_llm(spec, api_key=FAKE_KEY, base_url=base)
            started = time.perf_counter()
            report = LLMTreeBuilder(kb, "default", llm, concurrency=concurrency, use_cache=False).run(rebuild=True)
            nodes = kb.tree.nodes("default")
            message(f"{spec}: {report.mapped:,} mapped, {report.unmapped} unmapped, {report.llm_calls} calls")
            out.append({"spec": spec, "chunks": report.mapped + report.unmapped, "mapped": report.mapped,
                        "unmapped": report.unmapped, "calls": report.llm_calls, "batches": report.batches,
                        "input_tokens": report.input_tokens, "output_tokens": report.output_tokens,
                        "cost_usd": report.cost_usd, "categories": len(nodes),
                        "top_level": sum(1 for n in nodes if n.level == 1),
                        "max_depth": max((n.level for n in nodes), default=0),
                        "seconds": round(time.perf_counter() - started, 1)})
        kb.close()
    return out


# ------------------------------------------------------------------------------ builders compared
#: The fake server's cost model: a 0.5B model on an idle 2-core machine answers at about this many
#: prompt and reply tokens per second (../shared/tools/local-llm/README.md: 50-160 and 5-35).
LOCAL_PREFILL_TPS = 100.0
LOCAL_GEN_TPS = 20.0


def routing_accuracy(kb: Any, collection: str) -> list[dict[str, Any]]:
    """Name routing accuracy per level beside the majority-sibling baseline (``kt bench tree``'s measure).

    Each node's ``name — description`` is embedded with the collection's embedder and every chunk is
    sent to the nearest sibling at each level; see :func:`knowtology_cli.bench.tree.name_routing`.
    """
    embedder = kb.embedder_for(collection)
    leaf_of = {m.chunk_id: m.path for m in kb.tree.mappings(collection)}
    vectors: dict[str, np.ndarray] = {}
    for chunks, matrix in kb.vectors.iter_rows(collection, with_vectors=True):
        assert matrix is not None
        unit = matrix / np.maximum(np.linalg.norm(matrix, axis=1, keepdims=True), 1e-12)
        vectors.update((c.chunk_id, v) for c, v in zip(chunks, unit))
    rows = name_routing(kb.tree.nodes(collection), leaf_of, vectors,
                        lambda texts: np.stack([embedder.embed_query(t) for t in texts]))
    return [{"level": r["level"], "chunks": r["chunks"], "routing_accuracy": r["routing"],
             "majority_baseline": r["majority"]} for r in rows]


def compare_builders(source: str | Path, *, spec: str = "openai:qwen2.5-coder-0.5b-instruct", real: bool = False,
                     builders: Sequence[str] = ("cluster", "hybrid", "llm"), embedder: str = "local",
                     prefill_tps: float = LOCAL_PREFILL_TPS, gen_tps: float = LOCAL_GEN_TPS,
                     timeout: float | None = None, message: MessageFn = lambda _m: None) -> list[dict[str, Any]]:
    """Build ``source`` (anything ``kt ingest`` reads) with each builder and measure it (see the module).

    The offline, hybrid and LLM builders on the same documents: calls, tokens in/out, wall time,
    names by origin and the name routing accuracy of each tree (:func:`routing_accuracy`). Against
    the fake server with a local model's cost model (``--prefill-tps``/``--gen-tps``, one request at
    a time), or a real server with ``--real``. Token figures come from the call log.
    """
    rows = []
    with tempfile.TemporaryDirectory(prefix="kt-bench-builders-") as tmp:
        base = Path(tmp) / "base"
        kb = KnowledgeBase.open(base)
        message(f"ingesting {source} ({embedder} embedder)…")
        kb.ingest([str(source)], embedder=embedder)
        kb.close()
        fake = None if real else StandaloneFakeServer(prefill_tps=prefill_tps, gen_tps=gen_tps, serial=True)
        saved = {k: os.environ.get(k) for k in ("OPENAI_BASE_URL", "OPENAI_API_KEY", "ANTHROPIC_BASE_URL",
                                                 "ANTHROPIC_API_KEY")}
        try:
            if fake is not None:
                fake.__enter__()
                os.environ.update(OPENAI_BASE_URL=fake.url + "/v1", OPENAI_API_KEY=FAKE_KEY,
                                  ANTHROPIC_BASE_URL=fake.url, ANTHROPIC_API_KEY=FAKE_KEY)
            for builder in builders:
                store = Path(tmp) / builder
                shutil.copytree(base, store)
                kb = KnowledgeBase.open(store)
                message(f"{builder}: building…")
                started = time.perf_counter()
                report = kb.build(builder=builder, llm=None if builder == "cluster" else spec, timeout=timeout,
                                  message=functools.partial(_prefixed, message, builder))
                seconds = time.perf_counter() - started
                spent = log_totals(kb.tree, "default")
                routing = {r["level"]: r for r in routing_accuracy(kb, "default")}
                rows.append({
                    "builder": builder, "model": report.model or "—", "calls": spent.calls,
                    "input_tokens": spent.input_tokens, "output_tokens": spent.output_tokens,
                    "estimated_calls": spent.estimated, "seconds": round(seconds, 1), "nodes": report.nodes,
                    "unmapped": report.unmapped, "names_llm": report.name_origins.get("llm", 0)
                    + report.name_origins.get("llm_reasked", 0),
                    "names_reasked": report.name_origins.get("llm_reasked", 0),
                    "names_offline": report.name_origins.get("offline", 0), "rejected": report.rejected_names,
                    **{f"routing_l{lv}": routing[lv]["routing_accuracy"] if lv in routing else None for lv in (1, 2)},
                    **{f"majority_l{lv}": routing[lv]["majority_baseline"] if lv in routing else None for lv in (1, 2)},
                })
                message(f"{builder}: {rows[-1]}")
                kb.close()
        finally:
            if fake is not None:
                fake.__exit__(None, None, None)
            for k, v in saved.items():
                if v is None:
                    os.environ.pop(k, None)
                else:
                    os.environ[k] = v
    return rows


def builders_markdown(result: dict[str, Any]) -> str:
    """The builder comparison table."""
    where = ("the real server at OPENAI_BASE_URL" if result.get("real") else
             f"the fake server's cost model ({result['prefill_tps']:g} prompt / {result['gen_tps']:g} reply "
             "tokens per second, one request at a time)")
    return (f"## Builders on {result['source']} with {result['spec']} — {where}\n\n"
            + table(result["builders"], ["builder", "calls", "input_tokens", "output_tokens", "seconds", "nodes",
                                         "unmapped", "names_llm", "names_reasked", "names_offline", "rejected",
                                         "routing_l1", "majority_l1", "routing_l2", "majority_l2"],
                    ["builder", "calls", "tokens in", "tokens out", "wall s", "nodes", "unmapped", "LLM names",
                     "of them re-asked", "offline names", "names refused", "routing L1", "majority L1",
                     "routing L2", "majority L2"]))


# ------------------------------------------------------------------------------ entry points
def run_build_bench(
    data_dir: str | Path = "scifact",
    *,
    sample: int = 1000,
    latency: float = 2.0,
    concurrency: Sequence[int] = (1, 2, 4, 8),
    full_build: bool = False,
    out_dir: Path | None = None,
    message: MessageFn = lambda _m: None,
) -> dict[str, Any]:
    """Plan table, concurrency wall times and (optionally) full builds; a JSON-ready dict.

    * plan: for the whole collection and a 1,000-chunk stride sample, per model profile, the calls the
      planner makes (CREATE on a sample + EXTEND batches), the fixed-batch call count of the original
      library, expected input/output tokens and cost at list price. Nothing is called.
    * concurrency: a real build of the sample against the standalone fake server over the OpenAI
      SDK, once per ``--concurrency`` value, with the call log's cache off.
    * full build (``--full-build``): the whole collection through both providers' SDKs against the
      fake server; every chunk must end up mapped.
    """
    ds = load_dataset(data_dir)
    lines = chunk_lines(ds)
    items = [(o["_id"], f"{o['title']}\n{o['text']}" if o["title"] else o["text"]) for o in lines]
    result: dict[str, Any] = {"dataset": ds.name, "chunks": len(items), "sample": min(sample, len(items)),
                              "plan": plan_table(items, sample=sample, message=message)}
    sample_rows = stride_sample(lines, sample)
    if concurrency:
        result["latency"] = latency
        result["wall_max_output_tokens"] = WALL_MAX_OUTPUT
        result["concurrency"] = concurrency_runs(sample_rows, latency=latency, levels=list(concurrency),
                                                 message=message)
    if full_build:
        result["full_build"] = full_builds(lines, specs=["openai:gpt-4o-mini", "anthropic:claude-haiku-4-5"],
                                           message=message)
    return result


def build_markdown(result: dict[str, Any]) -> str:
    """The tables of :func:`run_build_bench`."""
    parts = [f"## LLM build plan on {result['dataset']} — our calls vs the seed's fixed batches\n",
             table(result["plan"], ["corpus", "profile", "calls", "seed_calls", "within_seed", "per_call",
                                    "seed_per_call", "input_tokens", "output_tokens", "cost_usd", "why"],
                   ["corpus", "profile", "calls", "seed calls", "≤ seed", "chunks/call", "seed chunks/call",
                    "tokens in", "tokens out", "est. USD", "why more"])]
    if result.get("concurrency"):
        parts.append(f"\n## Wall time vs --concurrency ({result['sample']:,} chunks, fake server "
                     f"{result['latency']:g} s per call, replies capped at {result['wall_max_output_tokens']:,} tokens)\n")
        parts.append(table(result["concurrency"], ["concurrency", "calls", "seconds", "ideal_seconds", "speedup",
                                                   "input_tokens", "categories", "unmapped"],
                           ["concurrency", "calls", "wall s", "ideal s", "speed-up", "tokens in", "categories",
                            "unmapped"]))
    if result.get("full_build"):
        parts.append(f"\n## Full build of {result['chunks']:,} chunks through both SDKs (fake server)\n")
        parts.append(table(result["full_build"], ["spec", "chunks", "mapped", "unmapped", "calls", "input_tokens",
                                                  "output_tokens", "cost_usd", "categories", "top_level",
                                                  "max_depth", "seconds"]))
    return "\n".join(parts)


def main(argv: Sequence[str] | None = None) -> int:
    """``python -m knowtology_cli.bench.build [DATA] [--sample N] [--latency S] [--concurrency 1,2,4,8]``."""
    ap = argparse.ArgumentParser(prog="python -m knowtology_cli.bench.build", description=__doc__.split("\n")[0])
    ap.add_argument("data", nargs="?", default="scifact")
    ap.add_argument("--sample", type=int, default=1000)
    ap.add_argument("--latency", type=float, default=2.0)
    ap.add_argument("--concurrency", default="1,2,4,8", help="comma-separated levels; empty skips the runs")
    ap.add_argument("--full-build", action="store_true")
    ap.add_argument("--json", action="store_true")
    args = ap.parse_args(argv)
    os.environ.setdefault("LANCEDB_LOG", "error")
    os.environ.setdefault("LANCE_LOG", "error")
    result = run_build_bench(args.data, sample=args.sample, latency=args.latency,
                             concurrency=[int(x) for x in args.concurrency.split(",") if x.strip()],
                             full_build=args.full_build, message=lambda m: print(m, file=sys.stderr, flush=True))
    print(json.dumps(result, indent=1) if args.json else build_markdown(result))
    return 0


if __name__ == "__main__":
    sys.exit(main())
