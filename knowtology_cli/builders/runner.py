"""Build orchestration: decide what to (re)map, run the chosen builder, apply atomically."""

from __future__ import annotations

import time
from collections.abc import Callable
from typing import TYPE_CHECKING, Any

import numpy as np

from ..models import BuildReport, ChunkMapping, TreeReply
from ..provenance import provenance

if TYPE_CHECKING:
    from ..kb import KnowledgeBase
    from ..llm.base import LLMClient


def pending_work(kb: KnowledgeBase, collection: str) -> tuple[list[str], list[str], dict[str, str]]:
    """(chunk ids to map, mapped ids whose chunk is gone, chunk_id -> current content hash)."""
    stored = {i: h for i, (h, _) in kb.vectors.fingerprints(collection).items()}
    mapped = kb.tree.mapping_hashes(collection)
    orphans = sorted(i for i in mapped if i not in stored)
    pending = sorted(i for i, h in stored.items() if mapped.get(i) != h)
    return pending, orphans, stored


def apply_reply(kb: KnowledgeBase, collection: str, reply: TreeReply, hashes: dict[str, str], *,
                remove: list[str] | tuple[str, ...] = (), replace: bool = False) -> None:
    """Write a validated reply (categories + assignments) into the tree store in one transaction."""
    ids = [a.chunk_id for a in reply.assignments]
    meta = {c.chunk_id: c for c in kb.vectors.get(collection, ids, with_text=False)}
    mappings = []
    for a in reply.assignments:
        c = meta.get(a.chunk_id)
        if c is None:
            continue
        mappings.append((ChunkMapping(collection=collection, chunk_id=a.chunk_id, tree_node_id=0, snippet=a.snippet,
                                      doc_id=c.doc_id, file_name=c.file_name, chunk_index=c.chunk_index,
                                      path=a.path, **provenance(c.metadata)), hashes.get(a.chunk_id, c.content_hash)))
    kb.tree.apply(collection, reply.categories, mappings, remove=list(remove), replace=replace)


def run_build(
    kb: KnowledgeBase,
    collection: str,
    *,
    builder: str,
    llm: LLMClient | None,
    rebuild: bool,
    dry_run: bool,
    concurrency: int,
    progress: Callable[[str, int, int], None],
    message: Callable[[str], None],
    use_cache: bool = True,
) -> BuildReport:
    """Run the cluster or LLM builder over what needs mapping; see ``KnowledgeBase.build``.

    ``use_cache=False`` makes the LLM builder call the model even for prompts the call log has answered.
    """
    started = time.perf_counter()
    if builder == "hybrid":
        from .hybrid import run_hybrid_build

        assert llm is not None
        return run_hybrid_build(kb, collection, llm=llm, rebuild=rebuild, dry_run=dry_run, concurrency=concurrency,
                                progress=progress, message=message, use_cache=use_cache)
    if builder == "llm":
        from .llm_builder import run_llm_build

        assert llm is not None
        return run_llm_build(kb, collection, llm=llm, rebuild=rebuild, dry_run=dry_run, concurrency=concurrency,
                             progress=progress, message=message, use_cache=use_cache)
    pending, orphans, hashes = pending_work(kb, collection)
    has_tree = bool(kb.tree.nodes(collection))
    full = rebuild or not has_tree
    notes: list[str] = []
    if dry_run:
        notes.append(("full clustering of all" if full else "nearest-leaf assignment of")
                     + f" {len(hashes) if full else len(pending)} chunks; no LLM calls")
        return _report(kb, collection, "cluster", started, dry_run=True, notes=notes)
    if full:
        _cluster_all(kb, collection, hashes, progress, message)
        notes.append(f"clustered {len(hashes)} chunks")
    elif pending or orphans:
        _assign_incremental(kb, collection, pending, orphans, hashes, progress)
        notes.append(f"assigned {len(pending)} new or changed chunks to nearest leaves, removed {len(orphans)}")
    else:
        notes.append("tree is up to date")
    kb.tree.set_builder(collection, "cluster")
    return _report(kb, collection, "cluster", started, notes=notes)


def _cluster_all(kb: KnowledgeBase, collection: str, hashes: dict[str, str],
                 progress: Callable[[str, int, int], None], message: Callable[[str], None]) -> None:
    from .cluster import ClusterItem, build_cluster_tree

    items: list[Any] = []
    blocks: list[np.ndarray] = []
    for chunks, vectors in kb.vectors.iter_rows(collection, with_vectors=True):
        items.extend(ClusterItem(chunk_id=c.chunk_id, text=c.text, title=c.title, doc_id=c.doc_id,
                                 file_name=c.file_name) for c in chunks)
        assert vectors is not None
        blocks.append(vectors)
        progress("loading", len(items), len(hashes))
    if not items:
        kb.tree.apply(collection, [], [], replace=True)
        return
    order = sorted(range(len(items)), key=lambda i: items[i].chunk_id)
    matrix = np.concatenate(blocks)[order]
    items = [items[i] for i in order]
    message(f"clustering {len(items)} chunks…")
    reply = build_cluster_tree(items, matrix)
    apply_reply(kb, collection, reply, hashes, replace=True)


def _assign_incremental(kb: KnowledgeBase, collection: str, pending: list[str], orphans: list[str],
                        hashes: dict[str, str], progress: Callable[[str, int, int], None]) -> None:
    from ..models import Assignment
    from .cluster import assign_to_leaves
    from .snippets import make_snippet

    pending_set = set(pending)
    leaves: dict[str, list[str]] = {}
    for m in kb.tree.mappings(collection):
        if m.chunk_id not in pending_set and m.chunk_id not in orphans:
            leaves.setdefault(m.path, []).append(m.chunk_id)
    assignments = []
    if pending:
        mapped_vectors = kb.vectors.vectors(collection, [i for ids in leaves.values() for i in ids])
        centroids = {}
        for path, ids in leaves.items():
            rows = [mapped_vectors[i] for i in ids if i in mapped_vectors]
            if rows:
                centroid = np.mean(rows, axis=0)
                centroids[path] = centroid / (np.linalg.norm(centroid) or 1.0)
        if not centroids:  # every old chunk changed: start over
            _cluster_all(kb, collection, hashes, progress, lambda _: None)
            return
        chunks = kb.vectors.get(collection, pending)
        vectors = kb.vectors.vectors(collection, pending)
        matrix = np.stack([vectors[c.chunk_id] for c in chunks])
        paths = assign_to_leaves(matrix, centroids)
        assignments = [Assignment(chunk_id=c.chunk_id, path=p, snippet=make_snippet(c.text, c.title))
                       for c, p in zip(chunks, paths)]
    apply_reply(kb, collection, TreeReply(categories=[], assignments=assignments), hashes, remove=orphans)


def _report(kb: KnowledgeBase, collection: str, builder: str, started: float, *, dry_run: bool = False,
            notes: list[str] | None = None, **calls: Any) -> BuildReport:
    stored = kb.vectors.fingerprints(collection)
    mapped = sum(1 for i in kb.tree.mapping_hashes(collection) if i in stored)
    return BuildReport(collection=collection, builder=builder, nodes=len(kb.tree.nodes(collection)), mapped=mapped,
                       unmapped=len(stored) - mapped, dry_run=dry_run, seconds=round(time.perf_counter() - started, 3),
                       notes=notes or [], **calls)
