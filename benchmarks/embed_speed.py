"""Throughput of the bare local embedder (texts/s and model tokens/s) on realistic paragraphs.

    python -m benchmarks.embed_speed [--corpus corpus.jsonl] [-n 200] [--threads N]

The paragraphs are read from a BEIR ``corpus.jsonl`` (default: SciFact under
``$KNOWTOLOGY_BENCH_DATA`` or ``/work/shared/bench-data``); nothing is copied anywhere.
"""

from __future__ import annotations

import argparse
import json
import os
import time
from collections.abc import Sequence
from pathlib import Path

from knowtology_cli.embedders.base import Embedder


def default_corpus() -> Path:
    """SciFact's corpus in the shared benchmark data directory."""
    root = Path(os.environ.get("KNOWTOLOGY_BENCH_DATA", Path(__file__).resolve().parents[2] / "shared" / "bench-data"))
    return root / "scifact" / "corpus.jsonl"


def read_paragraphs(path: Path, limit: int) -> list[str]:
    """The first ``limit`` non-empty ``title. text`` paragraphs of a BEIR corpus file."""
    texts: list[str] = []
    with path.open(encoding="utf-8") as handle:
        for line in handle:
            record = json.loads(line)
            text = " ".join(part for part in (record.get("title", ""), record.get("text", "")) if part).strip()
            if text:
                texts.append(text)
            if len(texts) >= limit:
                break
    return texts


def measure(texts: Sequence[str], embedder: Embedder | None = None, *, warmup: int = 8) -> dict:
    """Embed ``texts`` as documents once (after a short warm-up) and time it.

    Returns:
        ``{"embedder", "threads", "texts", "tokens", "truncated", "seconds", "texts_per_s",
        "tokens_per_s", "cpu_seconds", "load_average"}``; tokens are the model's (word pieces,
        with [CLS]/[SEP]); the load average is the machine's 1-minute figure before the run.
    """
    if embedder is None:
        from knowtology_cli.embedders.local import LocalOnnxEmbedder

        embedder = LocalOnnxEmbedder()
    token_ids = getattr(embedder, "token_ids", None)
    lengths = [len(row) for row in token_ids(texts)] if token_ids else []
    max_length = getattr(embedder, "max_length", None)
    if warmup:
        embedder.embed_documents(list(texts[:warmup]))
    load_before = _load_average()
    started, cpu_started = time.perf_counter(), time.process_time()
    embedder.embed_documents(list(texts))
    seconds = time.perf_counter() - started
    cpu_seconds = time.process_time() - cpu_started
    tokens = sum(lengths)
    return {
        "embedder": embedder.name,
        "threads": getattr(embedder, "threads", None),
        "texts": len(texts),
        "tokens": tokens,
        "truncated": sum(1 for n in lengths if n == max_length),
        "seconds": round(seconds, 3),
        "texts_per_s": round(len(texts) / seconds, 1) if seconds else None,
        "tokens_per_s": round(tokens / seconds) if seconds and tokens else None,
        # Wall figures drop when other processes share the cores; CPU time and load tell why.
        "cpu_seconds": round(cpu_seconds, 3),
        "load_average": load_before,
    }


def _load_average() -> float | None:
    try:
        return round(os.getloadavg()[0], 2)
    except (AttributeError, OSError):
        return None


def main(argv: Sequence[str] | None = None) -> None:
    """Print the throughput figures (and the JSON record) for ``-n`` paragraphs."""
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--corpus", type=Path, default=None, help="BEIR corpus.jsonl (default: SciFact)")
    parser.add_argument("-n", type=int, default=200, help="paragraphs to embed")
    parser.add_argument("--threads", type=int, default=None, help="onnxruntime threads (default: all cores)")
    args = parser.parse_args(argv)
    from knowtology_cli.embedders.local import LocalOnnxEmbedder

    texts = read_paragraphs(args.corpus or default_corpus(), args.n)
    result = measure(texts, LocalOnnxEmbedder(threads=args.threads))
    print(
        f"{result['embedder']} ({result['threads']} threads): {result['texts']} paragraphs, "
        f"{result['tokens']} tokens ({result['truncated']} truncated at 256) in {result['seconds']} s — "
        f"{result['texts_per_s']} texts/s, {result['tokens_per_s']} tokens/s "
        f"(CPU {result['cpu_seconds']} s, load average {result['load_average']} on {os.cpu_count()} cores)"
    )
    print(json.dumps(result))


if __name__ == "__main__":
    main()
