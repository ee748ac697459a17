"""Dev harness for the offline namer: build (or re-name) the offline tree of cached bench stores in
process and print name routing accuracy per level, the largest level-1 share and, where labels
exist, level-1 AMI/NMI — the figures of ``kt bench tree`` without writing a tree to any store.

    python -m benchmarks.naming_check adi sample_corpus medline cranfield cacm scifact
    python -m benchmarks.naming_check cacm --rename   # keep the last built shape, only re-name it
    python -m benchmarks.naming_check cranfield --heldout  # choose on 2/3 of the documents, measure on 1/3
    python -m benchmarks.naming_check path/to/docs/        # a folder of documents, ingested like sample_corpus

Stores are the ``kt bench`` scratch stores (``KNOWTOLOGY_BENCH_CACHE``), opened read-only; the
built shapes are cached under ``$KNOWTOLOGY_BENCH_CACHE/naming-check`` so ``--rename`` measures a
naming change on a fixed shape. The shipped measure is ``kt bench tree``; this only saves time.
"""

from __future__ import annotations

import argparse
import json
import time
from collections.abc import Sequence
from pathlib import Path
from types import SimpleNamespace
from typing import Any

import numpy as np

from knowtology_cli.bench.data import COLLECTION, cache_root, load_dataset, open_documents_store, open_store
from knowtology_cli.bench.tree import agreement, name_routing, read_labels
from knowtology_cli.builders.cluster import build_cluster_tree, name_tree
from knowtology_cli.builders.runner import _load_items, query_embedder

ROOT = Path(__file__).resolve().parents[1]


def _open(name: str) -> tuple[Any, Path | None]:
    if name == "sample_corpus" or Path(name).is_dir() and not (Path(name) / "corpus.jsonl").is_file():
        kb, _, _ = open_documents_store(ROOT / name if name == "sample_corpus" else Path(name), "local")
        return kb, None
    ds = load_dataset(name)
    kb, _, _ = open_store(ds, "local")
    return kb, ds.root


def measure(name: str, rename: bool, plain: bool = False) -> dict[str, Any]:
    kb, root = _open(name)
    try:
        items, matrix = _load_items(kb, COLLECTION)
        embedder = kb.embedder_for(COLLECTION)
        embed = None if plain else query_embedder(kb, COLLECTION)
    finally:
        pass
    shapes = cache_root() / "naming-check"
    shapes.mkdir(parents=True, exist_ok=True)
    shape_file = shapes / f"{Path(name).name}.json"
    t0 = time.perf_counter()
    if rename and shape_file.is_file():
        leaf_of = json.loads(shape_file.read_text())
        given = [leaf_of[it.chunk_id] for it in items]
        named = name_tree(items, matrix, given, embed_names=embed)
        rename_map = {path: nm for path, (nm, _) in named.items()}

        def real(path: str) -> str:
            parts = path.split("/")
            return "/".join(rename_map["/".join(parts[: i + 1])] for i in range(len(parts)))

        nodes = [SimpleNamespace(path=real(p), name=nm, description=desc) for p, (nm, desc) in named.items()]
        leaves = {it.chunk_id: real(leaf_of[it.chunk_id]) for it in items}
    else:
        reply = build_cluster_tree(items, matrix, embed_names=embed)
        nodes = [SimpleNamespace(path=c.path, name=c.path.rsplit("/", 1)[-1], description=c.description)
                 for c in reply.categories]
        leaves = {a.chunk_id: a.path for a in reply.assignments}
        shape_file.write_text(json.dumps(leaves))
    seconds = time.perf_counter() - t0
    vectors = {it.chunk_id: matrix[i] for i, it in enumerate(items)}
    rows = name_routing(nodes, leaves, vectors, lambda texts: np.stack([embedder.embed_query(t) for t in texts]))
    out: dict[str, Any] = {"collection": name, "chunks": len(items), "seconds": round(seconds, 1),
                           "levels": rows, "nodes": nodes}
    labels = root / "labels.tsv" if root is not None else None
    if labels is not None and labels.is_file():
        gold = read_labels(labels)
        docs = {it.doc_id: leaves[it.chunk_id] for it in items}
        out["ami"] = [agreement({d: "/".join(p.split("/")[:lv]) for d, p in docs.items()}, gold)
                      for lv in (1, 2, 3)]
    kb.close()
    return out


def heldout(name: str, levels: int = 1) -> str:
    """Descriptions chosen by routing on the chunks of two thirds of the documents (document code
    not divisible by 3), routing measured on the chunks of the other third, against the full ones;
    ``levels`` as ``TreeParams.routed_description_levels``."""
    from dataclasses import replace

    import knowtology_cli.builders.naming as naming
    from knowtology_cli.builders.params import DEFAULT_PARAMS

    kb, _ = _open(name)
    items, matrix = _load_items(kb, COLLECTION)
    embedder = kb.embedder_for(COLLECTION)
    held: set[str] = set()
    original = naming.Namer.__init__

    def hide_third(self: Any, *args: Any, **kwargs: Any) -> None:
        original(self, *args, **kwargs)
        hidden = self.doc_of % 3 == 0
        held.update(self.items[i].chunk_id for i in np.flatnonzero(hidden))
        if self.vectors is not None:  # a zero vector routes nowhere: the choice cannot see it
            self.vectors = self.vectors.copy()
            self.vectors[hidden] = 0.0

    vectors = {it.chunk_id: matrix[i] for i, it in enumerate(items)}
    out = []
    naming.Namer.__init__ = hide_third  # type: ignore[method-assign]
    try:
        for embed in (None, query_embedder(kb, COLLECTION)):
            held.clear()
            reply = build_cluster_tree(items, matrix, embed_names=embed,
                                       params=replace(DEFAULT_PARAMS, routed_description_levels=levels))
            nodes = [SimpleNamespace(path=c.path, name=c.path.rsplit("/", 1)[-1], description=c.description)
                     for c in reply.categories]
            leaves = {a.chunk_id: a.path for a in reply.assignments if a.chunk_id in held}
            rows = name_routing(nodes, leaves, vectors, lambda t: np.stack([embedder.embed_query(x) for x in t]))
            out.append(" ".join(f"L{r['level']} {r['routing']:.3f}" for r in rows))
    finally:
        naming.Namer.__init__ = original  # type: ignore[method-assign]
        kb.close()
    return f"{name:14s} held-out chunks {len(held)}: full {out[0]} | chosen {out[1]}"


def main(argv: Sequence[str] | None = None) -> None:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("collections", nargs="+")
    parser.add_argument("--rename", action="store_true", help="re-name the cached shape instead of rebuilding")
    parser.add_argument("--names", action="store_true", help="print the level-1 names and descriptions")
    parser.add_argument("--plain", action="store_true", help="describe without the embedder (full descriptions)")
    parser.add_argument("--heldout", action="store_true", help="held-out check of the description choice")
    parser.add_argument("--levels", type=int, default=1, help="with --heldout: levels whose descriptions are chosen")
    args = parser.parse_args(argv)
    for name in args.collections:
        if args.heldout:
            print(heldout(name, args.levels), flush=True)
            continue
        r = measure(name, args.rename, args.plain)
        line = " ".join(f"L{x['level']} {x['routing']:.3f}/{x['majority']:.3f} n={x['nodes']}" for x in r["levels"])
        top = r["levels"][0]["largest_share"] if r["levels"] else 0
        ami = ""
        if "ami" in r:
            ami = " AMI " + "/".join(f"{a['ami_l1']:.3f}" for a in r["ami"]) + " NMI " + "/".join(
                f"{a['nmi_l1']:.3f}" for a in r["ami"])
        print(f"{name:14s} {r['chunks']:5d} {r['seconds']:6.1f}s top={top:.3f} {line}{ami}", flush=True)
        if args.names:
            for n in r["nodes"]:
                if "/" not in n.path:
                    print(f"    {n.name} — {n.description[:300]}")


if __name__ == "__main__":
    main()
