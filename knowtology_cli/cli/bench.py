"""`kt bench ...`: benchmarks as a product feature (tables on stdout, --json, PNG plots in --out)."""

from __future__ import annotations

import sys
from pathlib import Path
from typing import Annotated, Any

import typer

from .common import JsonOpt, emit_json, handled

bench_app = typer.Typer(help="Benchmarks on BEIR-layout collections: retrieval, tokens, speed, tree.",
                        no_args_is_help=True)

DataDirs = Annotated[list[str], typer.Argument(help="BEIR folders (corpus.jsonl, queries.jsonl, qrels.tsv) or names "
                                                    "under ../shared/bench-data.")]
OutOpt = Annotated[Path, typer.Option("--out", help="Directory for JSON results and PNG plots.")]
LimitOpt = Annotated[int | None, typer.Option("--queries", "--limit", help="Only the first N judged queries (quick runs).")]
EmbedderOpt = Annotated[str, typer.Option("--embedder", help="Embedder for the scratch stores (local, hash, openai:MODEL).")]
DEFAULT_OUT = Path("bench-results")


def _say(text: str) -> None:
    print(text, file=sys.stderr, flush=True)


def _finish(name: str, result: dict[str, Any], out: Path, as_json: bool, markdown: str) -> None:
    from knowtology_cli.bench.report import write_json  # deferred: keeps kt --help fast

    path = write_json(out, name, result)
    if as_json:
        emit_json(result)
    else:
        print(markdown)
        print(f"\n(results: {path})")


@bench_app.command("retrieval")
def retrieval(
    data_dirs: DataDirs,
    embedder: EmbedderOpt = "local",
    limit: LimitOpt = None,
    fts_variants: Annotated[bool, typer.Option("--fts-variants", help="Also measure Lance FTS tokenizer options.")] = False,
    out: OutOpt = DEFAULT_OUT,
    as_json: JsonOpt = False,
) -> None:
    """nDCG@10, Recall@10/100, MRR@10 and latency of keyword/semantic/hybrid beside BM25, exact dense, fusion."""
    from knowtology_cli.bench.report import (  # deferred: keeps kt --help fast
        presets_markdown,
        retrieval_markdown,
    )
    from knowtology_cli.bench.retrieval import run_many  # deferred: loads numpy

    with handled(as_json):
        result = run_many(data_dirs, out_dir=out, embedder=embedder, limit=limit, fts_variants=fts_variants,
                          message=_say)
    _finish("retrieval", result, out, as_json, "\n\n".join(
        [presets_markdown(result["presets"])] + [retrieval_markdown(r) for r in result["collections"]]))


@bench_app.command("tokens")
def tokens(
    data_dirs: DataDirs,
    embedder: EmbedderOpt = "local",
    limit: LimitOpt = None,
    out: OutOpt = DEFAULT_OUT,
    as_json: JsonOpt = False,
) -> None:
    """Token economy (tiktoken o200k_base): full chunks vs snippets-then-read, single turn and sessions."""
    from knowtology_cli.bench.tokens import run_many, tokens_markdown  # deferred: loads numpy

    with handled(as_json):
        result = run_many(data_dirs, out_dir=out, embedder=embedder, limit=limit, message=_say)
    _finish("tokens", result, out, as_json, tokens_markdown(result))


@bench_app.command("speed")
def speed(
    data_dir: Annotated[str, typer.Option("--data", help="Collection whose text is used and scaled up.")] = "cranfield",
    sizes: Annotated[str, typer.Option("--sizes", help="Comma-separated chunk counts for warm latency ('' skips it).")] = "10000,100000",
    ann: Annotated[bool, typer.Option("--ann/--no-ann", help="Also measure a LanceDB ANN vector index.")] = True,
    embedder: EmbedderOpt = "local",
    runs: Annotated[int, typer.Option("--runs", help="Cold runs per command (median is reported).")] = 3,
    startup_data: Annotated[str, typer.Option("--startup-data", help="Collection (≥ 5,000 chunks) whose store times kt --help and kt browse against python -c pass; '' skips it.")] = "scifact",
    startup_runs: Annotated[int, typer.Option("--startup-runs", min=1, help="Paired rounds for the start-up ratios.")] = 21,
    queries: Annotated[int, typer.Option("--queries", help="Queries for warm latency.")] = 50,
    out: OutOpt = DEFAULT_OUT,
    as_json: JsonOpt = False,
) -> None:
    """Cold CLI start-up vs `python -c pass`, ingest vs bare embedder, warm latency at scale, peak RSS."""
    from knowtology_cli.bench.speed import run_speed, speed_markdown  # deferred: loads numpy

    with handled(as_json):
        result = run_speed(data_dir, sizes=[int(s) for s in sizes.split(",") if s.strip()], ann=ann, out_dir=out,
                           embedder=embedder, runs=runs, n_queries=queries, startup_data=startup_data or None,
                           startup_runs=startup_runs, message=_say)
    _finish("speed", result, out, as_json, speed_markdown(result))


@bench_app.command("tree")
def tree(
    data_dirs: Annotated[list[str] | None, typer.Argument(
        help="BEIR folders (or names under ../shared/bench-data) or folders of documents; default cacm.")] = None,
    labels: Annotated[Path | None, typer.Option("--labels", help="TSV with doc_id, codes, l1, l2, l3 (default: DATA_DIR/labels.tsv where it exists).")] = None,
    embedder: EmbedderOpt = "local",
    llm: Annotated[str | None, typer.Option("--llm", help="Also judge the LLM builder with PROVIDER:MODEL.")] = None,
    incremental: Annotated[bool, typer.Option("--incremental", help="Instead: incremental placement (build on part, add --added, kt build) vs a full rebuild.")] = False,
    added: Annotated[float, typer.Option("--added", help="With --incremental: share of the documents added after the first build.")] = 0.2,
    seed: Annotated[int, typer.Option("--seed", help="With --incremental: which documents are added.")] = 0,
    out: OutOpt = DEFAULT_OUT,
    as_json: JsonOpt = False,
) -> None:
    """Name routing accuracy and balance per level of built trees, and AMI/NMI against a gold taxonomy.

    With --incremental: placement of added documents by an incremental build vs a full rebuild.
    """
    from knowtology_cli.bench.tree import (  # deferred: loads numpy
        incremental_markdown,
        run_incremental,
        run_trees,
        trees_markdown,
    )

    if incremental:
        with handled(as_json):
            result = run_incremental((data_dirs or ["cacm"])[0], labels=labels, embedder=embedder, added=added,
                                     seed=seed, message=_say)
        return _finish("tree-incremental", result, out, as_json, incremental_markdown(result))
    with handled(as_json):
        result = run_trees(data_dirs or ["cacm"], labels=labels, embedder=embedder, llm=llm, out_dir=out, message=_say)
    _finish("tree", result, out, as_json, trees_markdown(result))


@bench_app.command("build")
def build_(
    data_dir: Annotated[str, typer.Argument(help="BEIR folder (or name) to plan and build.")] = "scifact",
    sample: Annotated[int, typer.Option("--sample", help="Chunks in the smaller plan and the wall-time runs.")] = 1000,
    latency: Annotated[float, typer.Option("--latency", help="Fake server seconds per call.")] = 2.0,
    concurrency: Annotated[str, typer.Option("--concurrency", help="Comma-separated levels ('' skips the runs).")] = "1,2,4,8",
    full_build: Annotated[bool, typer.Option("--full-build", help="Also build the whole collection with both SDKs.")] = False,
    compare: Annotated[Path | None, typer.Option("--compare", help="Instead: build these documents with each builder and compare calls, tokens, time, names.")] = None,
    builders: Annotated[str, typer.Option("--builders", help="Builders to compare (with --compare).")] = "cluster,hybrid,llm",
    llm: Annotated[str, typer.Option("--llm", help="Model for --compare.")] = "openai:qwen2.5-coder-0.5b-instruct",
    real: Annotated[bool, typer.Option("--real", help="With --compare: call the server at OPENAI_BASE_URL / ANTHROPIC_BASE_URL, not the fake.")] = False,
    timeout: Annotated[float | None, typer.Option("--timeout", help="Seconds per LLM call attempt (with --real).")] = None,
    embedder: EmbedderOpt = "local",
    out: OutOpt = DEFAULT_OUT,
    as_json: JsonOpt = False,
) -> None:
    """LLM build plan per model profile vs the seed's call count, and wall time vs --concurrency (fake server).

    With --compare PATH: the offline, hybrid and seed LLM builders on the same documents — calls, tokens,
    wall time, where names came from, and name routing accuracy.
    """
    from knowtology_cli.bench.build import (  # deferred: loads numpy
        LOCAL_GEN_TPS,
        LOCAL_PREFILL_TPS,
        build_markdown,
        builders_markdown,
        compare_builders,
        run_build_bench,
    )

    with handled(as_json):
        if compare is not None:
            rows = compare_builders(compare, spec=llm, real=real, builders=[b for b in builders.split(",") if b],
                                    embedder=embedder, timeout=timeout, message=_say)
            result = {"source": str(compare), "spec": llm, "real": real, "prefill_tps": LOCAL_PREFILL_TPS,
                      "gen_tps": LOCAL_GEN_TPS, "builders": rows}
            return _finish("builders", result, out, as_json, builders_markdown(result))
        result = run_build_bench(data_dir, sample=sample, latency=latency, full_build=full_build, message=_say,
                                 concurrency=[int(x) for x in concurrency.split(",") if x.strip()])
    _finish("build", result, out, as_json, build_markdown(result))


@bench_app.command("all")
def all_(
    embedder: EmbedderOpt = "local",
    quick: Annotated[bool, typer.Option("--quick", help="Small collections and sizes only (a few minutes).")] = False,
    out: OutOpt = DEFAULT_OUT,
    as_json: JsonOpt = False,
) -> None:
    """The default set behind `make bench` (≈15 min on 2 cores once the stores are cached)."""
    from knowtology_cli.bench.suite import run_all, suite_markdown  # deferred: keeps kt --help fast

    with handled(as_json):
        result = run_all(embedder=embedder, quick=quick, out_dir=out, message=_say)
    _finish("all", result, out, as_json, suite_markdown(result))


def register(app: typer.Typer) -> None:
    """Add ``kt bench`` to ``app``."""
    app.add_typer(bench_app, name="bench")
