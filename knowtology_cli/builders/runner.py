"""The offline builder and what every builder shares: what to (re)map, applying a reply, freshness, drift."""

from __future__ import annotations

import time
from collections.abc import Callable, Mapping, Sequence
from dataclasses import dataclass, field
from typing import TYPE_CHECKING, Any

import numpy as np

from ..errors import BuildError, KnowtologyError
from ..models import Assignment, BuildReport, Category, ChunkMapping, TreeNode, TreeReply
from ..provenance import provenance
from ..textutil import counted

if TYPE_CHECKING:
    from ..stores.base import TreeState
    from .cluster import Prepared
    from .context import BuildStores


@dataclass(frozen=True)
class FreshnessParams:
    """When a category needs new names, and when the whole tree would be better rebuilt."""

    #: Churn (members added, removed, moved or changed since naming) at which a node is stale:
    #: a tenth of the members it was named for. Offline names need a term in half of a node, so a
    #: tenth new or gone can already move a name across that line; an LLM re-description per
    #: stale node stays a small share of the calls of a rebuild.
    stale_share: float = 0.1
    #: Drift at which a rebuild is advised: a fifth of the map placed without the clustering
    #: seeing it as a whole (see docs/benchmarks.md, "Incremental placement", for what 20% costs).
    rebuild_drift: float = 0.2


FRESHNESS = FreshnessParams()


@dataclass
class Freshness:
    """What ``kt status`` says about a collection's tree."""

    state: str
    stale_nodes: list[str] = field(default_factory=list)
    drift: float = 0.0
    rebuild_advised: bool = False
    advice: str = ""


def pending_work(stores: BuildStores, collection: str) -> tuple[list[str], list[str], dict[str, str]]:
    """(chunk ids to map, mapped ids whose chunk is gone, chunk_id -> current content hash)."""
    stored = {i: h for i, (h, _) in stores.vectors.fingerprints(collection).items()}
    mapped = stores.tree.mapping_hashes(collection)
    orphans = sorted(i for i in mapped if i not in stored)
    pending = sorted(i for i, h in stored.items() if mapped.get(i) != h)
    return pending, orphans, stored


def is_stale(node: TreeNode, params: FreshnessParams = FRESHNESS) -> bool:
    """True when the node's members changed materially since it was named."""
    return node.churn > 0 and node.churn >= params.stale_share * max(1, node.named_count or 0)


def stale_nodes(stores: BuildStores, collection: str, params: FreshnessParams = FRESHNESS) -> list[TreeNode]:
    """Nodes whose membership changed materially since they were last named, parents first.

    Every tree write counts, per node, the members added, removed, moved or changed since it was last
    named (``churn``, beside ``named_count``). A node is stale when its churn reaches
    ``FRESHNESS.stale_share`` of ``named_count``.

    The offline builder renames them (:func:`refresh_offline`); the LLM builder re-describes them.
    After naming a node, record it with ``stores.tree.mark_named(collection, [path])`` (or pass the
    paths as ``named`` to ``stores.tree.rename_nodes``).
    """
    return sorted((n for n in stores.tree.nodes(collection) if is_stale(n, params)), key=lambda n: (n.level, n.path))


def drift(state: TreeState, mapped: int) -> float:
    """The share of the map placed or removed since the last full build (0 right after one).

    ``(placed + removed) / (mapped + removed)``: the part of the tree no clustering has seen as a
    whole. At ``FRESHNESS.rebuild_drift`` or more, ``kt build`` and ``kt status`` suggest ``--rebuild``.
    """
    moved = state.placed + state.removed
    return round(min(1.0, moved / max(1, mapped + state.removed)), 4) if moved else 0.0


def tree_freshness(stores: BuildStores, collection: str, *, chunks: int, unmapped: int, orphans: int,
                   nodes: Sequence[TreeNode], params: FreshnessParams = FRESHNESS) -> Freshness:
    """State, stale categories, drift and what to run, for ``kt status`` and ``kt build``."""
    if not chunks and not nodes:
        return Freshness("empty", advice="no chunks yet: kt ingest PATH")
    if not nodes:
        return Freshness("unbuilt", advice=f"no tree yet for {counted(chunks, 'chunk')}: kt build")
    stale = sorted((n for n in nodes if is_stale(n, params)), key=lambda n: (n.level, n.path))
    value = drift(stores.tree.tree_state(collection), chunks - unmapped)
    advised = value >= params.rebuild_drift
    parts: list[str] = []
    if unmapped or orphans:
        state = "unmapped"
        what = [f"{unmapped} new or changed chunks not placed"] if unmapped else []
        what += [f"{orphans} removed chunks still mapped"] if orphans else []
        parts.append(", ".join(what) + ": kt build")
    elif stale:
        state = "stale"
        parts.append(f"{len(stale)} categories changed since they were named (e.g. {stale[0].path!r}): kt build")
    else:
        state = "current"
    if advised:
        parts.append(f"{value:.0%} of the map was placed or removed since the last full build:"
                     " kt build --rebuild would give a better map")
    return Freshness(state, [n.path for n in stale], value, advised, "; ".join(parts))


def apply_reply(stores: BuildStores, collection: str, reply: TreeReply, hashes: dict[str, str], *,
                remove: list[str] | tuple[str, ...] = (), replace: bool = False,
                fallbacks: Mapping[str, str] | None = None) -> None:
    """Write a validated reply (categories + assignments) into the tree store in one transaction
    (``fallbacks``: see ``TreeStore.apply``)."""
    ids = [a.chunk_id for a in reply.assignments]
    meta = {c.chunk_id: c for c in stores.vectors.get(collection, ids, with_text=False)}
    mappings = []
    for a in reply.assignments:
        c = meta.get(a.chunk_id)
        if c is None:
            continue
        mappings.append((ChunkMapping(collection=collection, chunk_id=a.chunk_id, tree_node_id=0, snippet=a.snippet,
                                      doc_id=c.doc_id, file_name=c.file_name, chunk_index=c.chunk_index,
                                      path=a.path, **provenance(c.metadata)), hashes.get(a.chunk_id, c.content_hash)))
    stores.tree.apply(collection, reply.categories, mappings, remove=list(remove), replace=replace, fallbacks=fallbacks)


def run_cluster_build(
    stores: BuildStores,
    collection: str,
    *,
    rebuild: bool,
    dry_run: bool,
    progress: Callable[[str, int, int], None],
    message: Callable[[str], None],
) -> BuildReport:
    """The offline builder: cluster every chunk (a full build), else place new or changed chunks top
    down, unmap removed ones and rename stale categories."""
    started = time.perf_counter()
    pending, orphans, hashes = pending_work(stores, collection)
    has_tree = bool(stores.tree.nodes(collection))
    full = rebuild or not has_tree
    stale = [] if full else stale_nodes(stores, collection)
    notes: list[str] = []
    if dry_run:
        if full:
            notes.append(f"full clustering of all {counted(len(hashes), 'chunk')}; no LLM calls")
        else:
            notes.append(f"top-down placement of {counted(len(pending), 'chunk')}, {len(orphans)} removed;"
                         f" {len(stale)} categories to rename; no LLM calls")
        return build_report(stores, collection, "cluster", started, dry_run=True, notes=notes)
    if full:
        shape = _cluster_all(stores, collection, hashes, progress, message)
        stores.tree.mark_named(collection)
        notes.append(f"clustered {counted(len(hashes), 'chunk')}")
        notes.extend(shape)
    elif pending or orphans or stale:
        notes.extend(_extend(stores, collection, pending, orphans, hashes, progress, message))
    else:
        notes.append("tree is up to date")
    stores.tree.set_builder(collection, "cluster")
    if not full:
        notes.extend(_drift_note(stores, collection))
    return build_report(stores, collection, "cluster", started, notes=notes)


def _drift_note(stores: BuildStores, collection: str) -> list[str]:
    mapped = len(stores.tree.mapping_hashes(collection))
    value = drift(stores.tree.tree_state(collection), mapped)
    if value >= FRESHNESS.rebuild_drift:
        return [f"drift {value:.2f}: {value:.0%} of the map was placed or removed since the last full build;"
                " kt build --rebuild would give a better map"]
    return []


def _cluster_all(stores: BuildStores, collection: str, hashes: dict[str, str],
                 progress: Callable[[str, int, int], None], message: Callable[[str], None]) -> list[str]:
    """Cluster every chunk into a new tree; returns the builder's notes on its shape."""
    from .cluster import build_cluster_tree  # deferred: keeps kt status fast

    progress("loading", 0, len(hashes))
    items, matrix = _load_items(stores, collection)
    progress("loading", len(items), len(hashes))
    notes: list[str] = []
    if not items:
        stores.tree.apply(collection, [], [], replace=True)
        return notes
    message(f"clustering {counted(len(items), 'chunk')}…")
    reply = build_cluster_tree(items, matrix, embed_names=query_embedder(stores, collection, message), notes=notes)
    apply_reply(stores, collection, reply, hashes, replace=True)
    return notes


def query_embedder(stores: BuildStores, collection: str,
                   message: Callable[[str], None] | None = None) -> Callable[[list[str]], np.ndarray]:
    """Embeds texts as queries with the collection's embedder, in its batches (loaded on first use),
    so the namer can judge descriptions the way a search or a router reads them. An embedder error
    is passed to ``message`` and raised (the namer then keeps the full descriptions)."""

    def embed(texts: list[str]) -> np.ndarray:
        try:
            embedder = stores.embedder_for(collection)
            size = max(1, embedder.batch_size)
            parts = [np.asarray(embedder.embed_batch(texts[i:i + size], "query"), dtype=np.float32)
                     for i in range(0, len(texts), size)]
        except KnowtologyError as exc:
            if message is not None:
                message(f"descriptions not chosen by routing (embedder unavailable: {exc})")
            raise
        return np.concatenate(parts) if parts else np.zeros((0, embedder.dimension), dtype=np.float32)

    return embed


def collapse_single_children(stores: BuildStores, collection: str) -> int:
    """Fold every category left with one child (after removals or re-placements) into that child's place.

    A full build never makes a node with a single child; a removal can, and so can placing changed
    chunks anew when they were all of a leaf's members. The child's members move
    up (a leaf child makes its parent the leaf; an inner child's children become the parent's), in
    one tree write. The parent's membership is unchanged, so its name stays. Returns how many
    nodes were folded away.
    """
    folded = 0
    while True:
        nodes = stores.tree.nodes(collection)
        kids: dict[int | None, list[TreeNode]] = {}
        for n in nodes:
            kids.setdefault(n.parent_id, []).append(n)
        lonely = [n for n in nodes if len(kids.get(n.id, [])) == 1]
        if not lonely:
            return folded
        parent = min(lonely, key=lambda n: (n.level, n.path))
        child = kids[parent.id][0]
        hashes = stores.tree.mapping_hashes(collection)
        moved = []
        for m in stores.tree.mappings(collection, under=child.path):
            rest = m.path[len(child.path):]
            moved.append((m.model_copy(update={"path": parent.path + rest}), hashes.get(m.chunk_id, "")))

        categories = [Category(path=parent.path + n.path[len(child.path):], description=n.description)
                      for n in nodes if n.path.startswith(child.path + "/")]
        stores.tree.apply(collection, categories, moved)
        folded += 1


def node_names(stores: BuildStores, collection: str) -> dict[str, str]:
    """Every category's name by path, to compare with the tree after a change
    (:func:`mark_named_after_gone`)."""
    return {n.path: n.name for n in stores.tree.nodes(collection)}


def mark_named_after_gone(stores: BuildStores, collection: str, before: Mapping[str, str]) -> list[str]:
    """Mark stale each category whose name says a word of a descendant gone since ``before`` (its
    chunks deleted or placed elsewhere, or folded into it): "Gpg, THANKS & gnupg.org" no longer
    holds THANKS, however small a share of it that was. Returns the paths marked."""
    from .terms import name_words  # deferred: keeps kt status fast

    now = node_names(stores, collection)
    marked: set[str] = set()
    for path, name in before.items():
        if path in now:
            continue
        parts, words = path.split("/"), name_words(name)
        for depth in range(1, len(parts)):
            above = "/".join(parts[:depth])
            if now.get(above) == before.get(above) and name_words(now[above]) & words:
                marked.add(above)
    if marked:
        stores.tree.mark_stale(collection, sorted(marked))
    return sorted(marked)


def _load_items(stores: BuildStores, collection: str) -> tuple[list[Any], np.ndarray]:
    """Every chunk of the collection as a ``ClusterItem`` with its vector, ordered by chunk id."""
    from .cluster import ClusterItem  # deferred: keeps kt status fast

    items: list[Any] = []
    blocks: list[np.ndarray] = []
    for chunks, vectors in stores.vectors.iter_rows(collection, with_vectors=True):
        items.extend(ClusterItem(chunk_id=c.chunk_id, text=c.text, title=c.title, doc_id=c.doc_id,
                                 file_name=c.file_name) for c in chunks)
        assert vectors is not None
        blocks.append(vectors)
    if not items:
        return [], np.zeros((0, 0), dtype=np.float32)
    order = sorted(range(len(items)), key=lambda i: items[i].chunk_id)
    return [items[i] for i in order], np.concatenate(blocks)[order]


def place_top_down(features: np.ndarray, member_rows: Sequence[int], member_leaves: Sequence[str],
                   new_rows: Sequence[int]) -> list[str]:
    """The leaf path for each row of ``new_rows``: nearest level-1 centroid, then the nearest of its
    children, down to a leaf — the rule a top-down k-means split applies to a new point.

    A new or changed chunk goes where a full rebuild would put it: in the clustering's feature space
    (embedding + LSA text + document pull, recomputed over the current collection), the nearest
    level-1 centroid, then the nearest of that node's children, down to a leaf.

    Args:
        features: one unit row per chunk (the clustering space of a full build).
        member_rows: rows of the chunks already in the tree; ``member_leaves`` their leaf paths.
        new_rows: rows of the chunks to place.
    """
    sums: dict[str, np.ndarray] = {}
    children: dict[str, set[str]] = {}
    for row, leaf in zip(member_rows, member_leaves):
        segments = leaf.split("/")
        for depth in range(1, len(segments) + 1):
            path = "/".join(segments[:depth])
            parent = "/".join(segments[: depth - 1])
            children.setdefault(parent, set()).add(path)
            if path in sums:
                sums[path] += features[row]
            else:
                sums[path] = features[row].astype(np.float64)
    if not children.get(""):
        raise BuildError("no categories to place chunks in", hint="run kt build --rebuild")
    ordered = {parent: sorted(kids) for parent, kids in children.items()}
    centroids = {}
    for parent, kids in ordered.items():
        matrix = np.stack([sums[k] for k in kids])
        norms = np.linalg.norm(matrix, axis=1, keepdims=True)
        norms[norms == 0] = 1.0
        centroids[parent] = (matrix / norms).astype(np.float32)
    out = []
    for row in new_rows:
        node = ""
        while node in ordered:
            node = ordered[node][int(np.argmax(centroids[node] @ features[row]))]
        out.append(node)
    return out


def _extend(stores: BuildStores, collection: str, pending: list[str], orphans: list[str], hashes: dict[str, str],
            progress: Callable[[str, int, int], None], message: Callable[[str], None]) -> list[str]:
    """Place new and changed chunks top-down, drop removed ones, then refresh what changed (offline);
    cluster everything anew when the new chunks outnumber those the tree keeps."""
    from .cluster import prepare  # deferred: keeps kt status fast
    from .snippets import make_snippet  # deferred: keeps kt status fast

    notes = []
    items, matrix = _load_items(stores, collection)
    row_of = {item.chunk_id: i for i, item in enumerate(items)}
    skip = set(pending) | set(orphans)
    kept = [(row_of[m.chunk_id], m.path) for m in stores.tree.mappings(collection)
            if m.chunk_id not in skip and m.chunk_id in row_of]
    if len(pending) > len(kept):  # more new or changed chunks than old ones: the old map cannot hold them
        shape = _cluster_all(stores, collection, hashes, progress, message)
        stores.tree.mark_named(collection)
        why = "no chunk of the old tree was left" if not kept else \
            f"{len(pending)} new or changed chunks outnumber the {len(kept)} the tree held"
        return [f"clustered {counted(len(hashes), 'chunk')} ({why})", *shape]
    prepared = prepare(items, matrix) if items else None
    features = prepared.x if prepared is not None else matrix
    names_before = node_names(stores, collection)
    if pending:
        message(f"placing {counted(len(pending), 'chunk')}…")
        rows = [row_of[i] for i in pending if i in row_of]
        paths = place_top_down(features, [r for r, _ in kept], [p for _, p in kept], rows)
        assignments = [Assignment(chunk_id=items[r].chunk_id, path=p,
                                  snippet=make_snippet(items[r].text, items[r].title)) for r, p in zip(rows, paths)]
        apply_reply(stores, collection, TreeReply(categories=[], assignments=assignments), hashes, remove=orphans)
        notes.append(f"placed {len(assignments)} new or changed chunks top-down, removed {len(orphans)}")
    elif orphans:
        stores.tree.apply(collection, [], [], remove=orphans)
        notes.append(f"removed {counted(len(orphans), 'chunk')}")
    # a leaf whose members all changed (placed anew) or went is gone: fold a parent left with one child
    collapse_single_children(stores, collection)
    mark_named_after_gone(stores, collection, names_before)
    notes.extend(refresh_offline(stores, collection, items, matrix, prepared=prepared))
    return notes


def refresh_offline(stores: BuildStores, collection: str, items: Sequence[Any] | None = None,
                    vectors: np.ndarray | None = None, params: FreshnessParams = FRESHNESS,
                    prepared: Prepared | None = None) -> list[str]:
    """Rename and re-describe stale nodes from their members, and re-describe every other node whose
    members changed, with the names a full build would give the same tree shape. Returns notes.

    A new name that a sibling already has (or gets) is not taken, nor one that only reorders the old
    name's words or adds to them (the old name still says what the node holds, and a map people
    have learnt keeps its names); the node keeps its name and gets the new description. Stale nodes
    are then recorded as named for their current members.
    """
    from .cluster import name_tree  # deferred: keeps kt status fast
    from .terms import name_words  # deferred: as name_tree

    nodes = stores.tree.nodes(collection)
    touched = [n for n in nodes if n.churn > 0]
    if not touched:
        return []
    if items is None or vectors is None:
        items, vectors = _load_items(stores, collection)
    leaf_of = {m.chunk_id: m.path for m in stores.tree.mappings(collection)}
    rows = [i for i, item in enumerate(items) if item.chunk_id in leaf_of]
    if not rows:
        return []
    # every chunk is mapped after a placement: the caller's term index and features are these rows'
    names = name_tree([items[i] for i in rows], vectors[rows], [leaf_of[items[i].chunk_id] for i in rows],
                      embed_names=query_embedder(stores, collection), wanted=[n.path for n in touched],
                      prepared=prepared if len(rows) == len(items) else None)
    stale = {n.path for n in touched if is_stale(n, params)}
    siblings: dict[int | None, set[str]] = {}
    for n in nodes:
        siblings.setdefault(n.parent_id, set()).add(n.name)
    changes: dict[str, tuple[str | None, str | None]] = {}
    renamed = []
    for n in sorted(touched, key=lambda n: (n.level, n.path)):
        if n.path not in names:
            continue
        name, description = names[n.path]
        new_name = None
        if (n.path in stale and name and name != n.name and "/" not in name and name not in siblings[n.parent_id]
                and not name_words(n.name) <= name_words(name)):
            siblings[n.parent_id].discard(n.name)
            siblings[n.parent_id].add(name)
            new_name = name
            renamed.append(f"{n.name!r} → {name!r}")
        if new_name is not None or description != n.description:
            changes[n.path] = (new_name, description)
    stores.tree.rename_nodes(collection, changes, named=sorted(stale))
    notes = [f"refreshed {len(stale)} changed categories"
             + (f", renamed {len(renamed)}: " + "; ".join(renamed[:5]) + (" …" if len(renamed) > 5 else "")
                if renamed else " (names still fit)")] if stale else []
    return notes


def build_report(stores: BuildStores, collection: str, builder: str, started: float, *, dry_run: bool = False,
                 notes: list[str] | None = None, **calls: Any) -> BuildReport:
    """The report of a build of ``builder`` begun at ``started`` (``time.perf_counter()``): the tree's
    size and what is still unmapped, with ``notes`` and the LLM call totals in ``calls``."""
    stored = stores.vectors.fingerprints(collection)
    mapped = sum(1 for i in stores.tree.mapping_hashes(collection) if i in stored)
    return BuildReport(collection=collection, builder=builder, nodes=len(stores.tree.nodes(collection)), mapped=mapped,
                       unmapped=len(stored) - mapped, dry_run=dry_run, seconds=round(time.perf_counter() - started, 3),
                       notes=notes or [], **calls)
