"""Golden offline trees: the full tree (names, descriptions, counts) of fixed corpora, as reviewable text.

    python -m benchmarks.golden_trees          # rewrite tests/golden/*.txt (or: make golden)
    python -m benchmarks.golden_trees --check  # exit 1 and print the diff when a tree changed

The trees are built the way ``kt ingest`` + ``kt build --builder cluster`` build them, with the
deterministic ``hash`` embedder so the snapshot does not depend on the CPU's floating point.
``tests/test_golden_trees.py`` compares against the same files: a naming change shows up as a diff
to review, and is accepted by regenerating the snapshots with the command above.
"""

from __future__ import annotations

import argparse
import difflib
import io
import json
import sys
import tempfile
from collections.abc import Callable
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
GOLDEN = ROOT / "tests" / "golden"
BENCH_DATA = ROOT.parent / "shared" / "bench-data"
COLLECTION = "golden"


def render(nodes: list, header: str) -> str:
    """One line per node, indented by level: ``name (chunks) — description``; largest siblings first."""
    children: dict[str, list] = {}
    for node in nodes:
        children.setdefault(node.path.rpartition("/")[0], []).append(node)
    lines = [header]

    def walk(parent: str, depth: int) -> None:
        for node in sorted(children.get(parent, []), key=lambda n: (-n.chunk_count, n.name)):
            lines.append(f"{'  ' * depth}{node.name} ({node.chunk_count}) — {node.description}")
            walk(node.path, depth + 1)

    walk("", 0)
    return "\n".join(lines) + "\n"


def _tree(ingest: Callable[..., object]) -> list:
    from knowtology_cli.embedders import get_embedder
    from knowtology_cli.kb import KnowledgeBase

    with tempfile.TemporaryDirectory(prefix="kt-golden-") as tmp:
        kb = KnowledgeBase.open(Path(tmp) / "store", embedder=get_embedder("hash"))
        try:
            ingest(kb)
            kb.build(collection=COLLECTION, builder="cluster", rebuild=True)
            return kb.tree.nodes(COLLECTION)
        finally:
            kb.close()


def sample_corpus_tree() -> str:
    """The offline tree of ``sample_corpus/`` (documents, ingested with their relative paths)."""
    import os

    cwd = os.getcwd()
    os.chdir(ROOT)  # chunk ids and file names as `kt ingest sample_corpus/` run from the repo root
    try:
        nodes = _tree(lambda kb: kb.ingest(["sample_corpus"], collection=COLLECTION, embedder="hash"))
    finally:
        os.chdir(cwd)
    return render(nodes, "# offline tree of sample_corpus/ (hash embedder) — regenerate: make golden")


def adi_tree(data: Path = BENCH_DATA / "adi") -> str:
    """The offline tree of the ADI test collection (one chunk per document, as `kt bench` ingests it)."""
    from knowtology_cli.bench.data import chunk_lines, load_dataset

    lines = chunk_lines(load_dataset(data))
    stream = io.StringIO("".join(json.dumps(o, ensure_ascii=False) + "\n" for o in lines))
    nodes = _tree(lambda kb: kb.ingest(["-"], collection=COLLECTION, stdin=stream, embedder="hash"))
    return render(nodes, "# offline tree of ../shared/bench-data/adi (hash embedder) — regenerate: make golden")


SNAPSHOTS: dict[str, Callable[[], str]] = {"sample_corpus.txt": sample_corpus_tree, "adi.txt": adi_tree}


def available(name: str) -> bool:
    """Whether the corpus behind snapshot ``name`` is present (ADI lives outside the repository)."""
    return name != "adi.txt" or (BENCH_DATA / "adi" / "corpus.jsonl").is_file()


def diff(name: str, expected: str, actual: str) -> str:
    return "".join(difflib.unified_diff(expected.splitlines(True), actual.splitlines(True),
                                        f"tests/golden/{name} (snapshot)", f"{name} (built now)"))


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--check", action="store_true", help="compare instead of rewriting")
    args = parser.parse_args(argv)
    GOLDEN.mkdir(parents=True, exist_ok=True)
    changed = 0
    for name, build in SNAPSHOTS.items():
        if not available(name):
            print(f"skipped {name}: {BENCH_DATA / 'adi'} not found", file=sys.stderr)
            continue
        text, path = build(), GOLDEN / name
        old = path.read_text(encoding="utf-8") if path.is_file() else ""
        if text == old:
            print(f"{name}: unchanged", file=sys.stderr)
            continue
        changed += 1
        if args.check:
            print(diff(name, old, text))
        else:
            path.write_text(text, encoding="utf-8")
            print(f"{name}: written ({text.count(chr(10)) - 1} nodes)", file=sys.stderr)
    return 1 if args.check and changed else 0


if __name__ == "__main__":
    raise SystemExit(main())
