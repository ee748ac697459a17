"""Ingest throughput next to the bare embedder on the same texts.

``python -m benchmarks.ingest_ratio CORPUS.jsonl [N]`` embeds the first N rows with the bare
local embedder, then ingests the same rows into a fresh temporary store through
``KnowledgeBase.ingest`` (validation, embedding, Lance upserts, full-text and ANN index upkeep) and
prints both rates and their ratio.
"""

from __future__ import annotations

import json
import sys
import tempfile
import time
from pathlib import Path


def main(argv: list[str]) -> None:
    corpus, limit = Path(argv[0]), int(argv[1]) if len(argv) > 1 else 600
    lines = corpus.read_text(encoding="utf-8").splitlines()[:limit]
    rows = [json.loads(line) for line in lines]
    texts = [f"{r['title']}\n{r['text']}" if r.get("title") else r["text"] for r in rows]
    from knowtology_cli.embedders import get_embedder
    from knowtology_cli.kb import KnowledgeBase

    embedder = get_embedder("local")
    embedder.embed_documents(texts[:8])  # load the model outside the timed part, as ingest's own warm-up
    started = time.perf_counter()
    embedder.embed_documents(texts)
    bare = time.perf_counter() - started
    with tempfile.TemporaryDirectory() as tmp:
        sample = Path(tmp, "sample.jsonl")
        sample.write_text("\n".join(lines) + "\n", encoding="utf-8")
        kb = KnowledgeBase.open(Path(tmp, "store"))
        started = time.perf_counter()
        kb.ingest([str(sample)])
        ingest = time.perf_counter() - started
    n = len(texts)
    print(f"bare embedder : {n / bare:6.1f} chunks/s ({bare:.1f} s for {n})")
    print(f"kb.ingest     : {n / ingest:6.1f} chunks/s ({ingest:.1f} s) = {100 * bare / ingest:.0f}% of bare")


if __name__ == "__main__":
    main(sys.argv[1:])
