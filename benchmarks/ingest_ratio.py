"""Ingest throughput next to the bare embedder on the same texts.

``python -m benchmarks.ingest_ratio CORPUS.jsonl [N] [--as jsonl|markdown|pdf]`` takes the first N
rows and

* ``jsonl`` (default): embeds them with the bare local embedder, then ingests the same rows as a
  JSONL file into a fresh temporary store through ``KnowledgeBase.ingest`` (validation, embedding,
  Lance upserts, full-text and ANN index upkeep);
* ``markdown``: writes each row as a Markdown file (``# title`` + text), parses and chunks them once
  to learn the exact strings ingest embeds, embeds those with the bare embedder, then ingests the
  folder (parsing, chunking, embedding, writing);
* ``pdf``: writes all rows into one PDF (a bookmarked section each, fpdf2), and reports the parse
  rate in pages/s and the whole ingest's pages/s beside the bare embedder on its chunks.

Each prints both rates and their ratio, by wall time and by CPU time (the CPU ratio holds on a
shared machine, where wall times swing with the other jobs).
"""

from __future__ import annotations

import json
import sys
import tempfile
import time
from pathlib import Path


def _bare(texts: list[str]) -> tuple[float, float]:
    """Wall and CPU seconds of the bare local embedder on ``texts``."""
    from knowtology_cli.embedders import get_embedder

    embedder = get_embedder("local")
    embedder.embed_documents(texts[:8])  # load the model outside the timed part, as ingest's own warm-up
    started, cpu = time.perf_counter(), time.process_time()
    embedder.embed_documents(texts)
    return time.perf_counter() - started, time.process_time() - cpu


def _ingest(path: Path, store: Path) -> tuple[float, float]:
    """Wall and CPU seconds of ``KnowledgeBase.ingest`` of ``path`` into a fresh store."""
    from knowtology_cli.kb import KnowledgeBase

    kb = KnowledgeBase.open(store)
    started, cpu = time.perf_counter(), time.process_time()
    kb.ingest([str(path)])
    seconds = time.perf_counter() - started, time.process_time() - cpu
    kb.close()
    return seconds


def _embedded_strings(path: Path) -> list[str]:
    """What ingest embeds for the documents under ``path`` (title + text of every chunk)."""
    from knowtology_cli.ingest import read_inputs

    batch = read_inputs([str(path)])
    return [f"{c.title}\n{c.text}" if c.title else c.text for c in batch.chunks]


def main(argv: list[str]) -> None:
    mode = "jsonl"
    if "--as" in argv:
        at = argv.index("--as")
        mode = argv[at + 1]
        argv = argv[:at] + argv[at + 2 :]
    corpus, limit = Path(argv[0]), int(argv[1]) if len(argv) > 1 else 600
    lines = corpus.read_text(encoding="utf-8").splitlines()[:limit]
    rows = [json.loads(line) for line in lines]
    with tempfile.TemporaryDirectory() as tmp:
        if mode == "jsonl":
            texts = [f"{r['title']}\n{r['text']}" if r.get("title") else r["text"] for r in rows]
            source = Path(tmp, "sample.jsonl")
            source.write_text("\n".join(lines) + "\n", encoding="utf-8")
        elif mode == "markdown":
            source = Path(tmp, "docs")
            source.mkdir()
            for index, row in enumerate(rows):
                title = row.get("title") or row.get("_id") or f"Document {index}"
                Path(source, f"doc-{index:05d}.md").write_text(f"# {title}\n\n{row['text']}\n", encoding="utf-8")
            started = time.perf_counter()
            texts = _embedded_strings(source)
            print(f"parse + chunk : {len(rows) / (time.perf_counter() - started):6.1f} files/s")
        elif mode == "pdf":
            from benchmarks.parser_choice import write_pdf

            source = Path(tmp, "docs")
            source.mkdir()
            pages = write_pdf([(r.get("title") or r["_id"], r["text"]) for r in rows], source / "abstracts.pdf")
            started = time.perf_counter()
            texts = _embedded_strings(source)
            parse = time.perf_counter() - started
            print(f"parse + chunk : {pages / parse:6.1f} pages/s ({pages} pages, {len(texts)} chunks, {parse:.2f} s)")
        else:
            raise SystemExit(f"--as must be jsonl, markdown or pdf, not {mode!r}")
        (bare, bare_cpu), (ingest, ingest_cpu) = _bare(texts), _ingest(source, Path(tmp, "store"))
    n = len(texts)
    print(f"bare embedder : {n / bare:6.1f} chunks/s ({bare:.1f} s for {n}; CPU {bare_cpu:.1f} s)")
    print(f"kb.ingest     : {n / ingest:6.1f} chunks/s ({ingest:.1f} s; CPU {ingest_cpu:.1f} s) = "
          f"{100 * bare / ingest:.0f}% of bare by wall time, {100 * bare_cpu / ingest_cpu:.0f}% by CPU time")
    if mode == "pdf":
        print(f"kb.ingest     : {pages / ingest:6.1f} pages/s")

if __name__ == "__main__":
    main(sys.argv[1:])
