"""The offline tree builder: recursive spherical k-means over embeddings + LSA, named by :mod:`.naming`.

Used when no LLM is configured; numpy only, deterministic; thresholds live in :class:`.params.TreeParams`.
"""

from __future__ import annotations

import math
from collections.abc import Collection, Mapping, Sequence
from dataclasses import dataclass

import numpy as np

from ..errors import BuildError
from ..models import Assignment, Category, TreeReply
from .naming import EmbedTexts, Node, name_nodes
from .params import DEFAULT_PARAMS, TreeParams
from .snippets import make_snippet
from .terms import TermIndex, build_term_index, lsa_features

__all__ = [
    "DEFAULT_MAX_LEAF",
    "DEFAULT_MIN_LEAF",
    "ClusterItem",
    "Prepared",
    "assign_to_leaves",
    "build_cluster_tree",
    "leaf_centroids",
    "name_tree",
    "prepare",
    "spherical_kmeans",
]

DEFAULT_MIN_LEAF = 3
DEFAULT_MAX_LEAF = 40


@dataclass(frozen=True)
class ClusterItem:
    """One chunk to place: its id, text and the labels that help name and group it."""

    chunk_id: str
    text: str
    title: str = ""
    doc_id: str = ""
    file_name: str = ""


# --------------------------------------------------------------------------- k-means


def _normalise(matrix: np.ndarray) -> np.ndarray:
    norms = np.linalg.norm(matrix, axis=1, keepdims=True)
    norms[norms == 0] = 1.0
    return matrix / norms


def _kmeans_pp(x: np.ndarray, k: int, rng: np.random.Generator) -> np.ndarray:
    """k-means++ seeding on cosine distance (``1 - cos`` is half the squared chord length)."""
    n = x.shape[0]
    centres = [int(rng.integers(n))]
    distance = np.clip(1.0 - x @ x[centres[0]], 0.0, None)
    for _ in range(1, k):
        total = float(distance.sum())
        if total <= 1e-12:
            pick = int(rng.integers(n))
        else:
            pick = int(np.searchsorted(np.cumsum(distance), rng.random() * total))
            pick = min(pick, n - 1)
        centres.append(pick)
        distance = np.minimum(distance, np.clip(1.0 - x @ x[pick], 0.0, None))
    return x[centres].copy()


def _lloyd(x: np.ndarray, centroids: np.ndarray, max_iter: int, settled_share: float) -> tuple[np.ndarray, np.ndarray, float]:
    k = centroids.shape[0]
    labels = np.full(x.shape[0], -1)
    settled = int(x.shape[0] * settled_share)
    for _ in range(max_iter):
        sims = x @ centroids.T
        new_labels = np.argmax(sims, axis=1)
        moved = int(np.count_nonzero(new_labels != labels))
        labels = new_labels
        if moved <= settled:
            break
        onehot = np.zeros((x.shape[0], k), dtype=x.dtype)
        onehot[np.arange(x.shape[0]), labels] = 1.0
        sums = onehot.T @ x
        counts = np.bincount(labels, minlength=k)
        for empty in np.flatnonzero(counts == 0):
            # Re-seed an empty cluster with the point worst served by its centroid.
            worst = int(np.argmin(sims[np.arange(len(labels)), labels]))
            sums[empty] = x[worst]
            labels[worst] = empty
        centroids = _normalise(sums)
    sims = x @ centroids.T
    labels = np.argmax(sims, axis=1)
    inertia = float(np.sum(1.0 - sims[np.arange(len(labels)), labels]))
    return labels, centroids, inertia


def spherical_kmeans(
    x: np.ndarray, k: int, *, seed: int = 0, params: TreeParams = DEFAULT_PARAMS
) -> tuple[np.ndarray, np.ndarray]:
    """Cluster unit rows by cosine: ``(labels, unit centroids)`` of the best of ``kmeans_restarts`` runs.

    Above ``kmeans_fit_sample`` rows each run is fitted on a fixed random sample, then refined on all rows.
    """
    n = x.shape[0]
    k = max(1, min(k, n))
    rng = np.random.default_rng(seed)
    fit = x
    if n > params.kmeans_fit_sample:
        fit = x[np.sort(rng.choice(n, params.kmeans_fit_sample, replace=False))]
    best_inertia, best_centroids = math.inf, np.zeros((0, x.shape[1]), dtype=x.dtype)
    for run in range(params.kmeans_restarts):
        run_rng = np.random.default_rng([seed, run])
        _, centroids, inertia = _lloyd(fit, _kmeans_pp(fit, k, run_rng), params.kmeans_max_iter,
                                       params.kmeans_settled_share)
        if fit is not x:
            _, centroids, inertia = _lloyd(x, centroids, params.kmeans_refine_iter, params.kmeans_settled_share)
        if inertia < best_inertia - 1e-9:
            best_inertia, best_centroids = inertia, centroids
    return np.argmax(x @ best_centroids.T, axis=1), best_centroids


def _merge_small(x: np.ndarray, labels: np.ndarray, min_size: int) -> list[np.ndarray]:
    """Groups (row positions) after merging clusters under ``min_size`` into their nearest sibling."""
    groups = [np.flatnonzero(labels == c) for c in range(int(labels.max()) + 1)]
    groups = [g for g in groups if len(g)]
    while len(groups) > 1:
        sizes = [len(g) for g in groups]
        smallest = int(np.argmin(sizes))
        if sizes[smallest] >= min_size:
            break
        centroids = _normalise(np.stack([x[g].sum(axis=0) for g in groups]))
        sims = centroids @ centroids[smallest]
        sims[smallest] = -np.inf
        target = int(np.argmax(sims))
        groups[target] = np.sort(np.concatenate([groups[target], groups[smallest]]))
        del groups[smallest]
    return groups


# --------------------------------------------------------------------------- features


def _features(
    items: Sequence[ClusterItem], vectors: np.ndarray, index: TermIndex, text_weight: float, doc_weight: float, seed: int,
    params: TreeParams = DEFAULT_PARAMS,
) -> np.ndarray:
    features = _normalise(np.asarray(vectors, dtype=np.float32))
    if text_weight > 0 and index.n_terms > 1:
        lsa = lsa_features(index, seed=seed, params=params)
        if lsa.shape[1]:
            features = np.hstack([math.sqrt(1 - text_weight) * features, math.sqrt(text_weight) * lsa])
            features = _normalise(features)
    if doc_weight > 0:
        groups: dict[str, list[int]] = {}
        for i, item in enumerate(items):
            key = item.doc_id or item.file_name
            if key:
                groups.setdefault(key, []).append(i)
        # Coherence of a group: how much closer its chunks sit to their own centroid than to the
        # collection's. A coherent document pulls its chunks together; a file of unrelated
        # records (a mail export) barely does.
        overall = _normalise(features.mean(axis=0, keepdims=True))[0]
        baseline = float(np.mean(features @ overall))
        smoothed = features.copy()
        for rows in groups.values():
            if len(rows) > 1:
                mean = features[rows].mean(axis=0)
                coherence = float(np.mean(features[rows] @ _normalise(mean[None])[0]))
                pull = np.clip((coherence - baseline) / max(1e-6, 1.0 - baseline), 0.0, 1.0)
                smoothed[rows] = features[rows] + doc_weight * pull * _normalise(mean[None])[0]
        features = _normalise(smoothed)
    return features.astype(np.float32)


# --------------------------------------------------------------------------- tree shape


def _effective_depth(n: int, max_depth: int, min_leaf: int) -> int:
    depth = max(1, max_depth)
    while depth > 1 and n < min_leaf * 2**depth:
        depth -= 1
    return depth


def _k_range(n: int, last_split: bool, branching: int | None, min_leaf: int, max_leaf: int,
             params: TreeParams = DEFAULT_PARAMS) -> tuple[int, int]:
    """The smallest and largest number of children worth trying for a node of ``n`` chunks."""
    most = min(n // max(1, min_leaf), n)
    if most < 2:
        return 1, 1
    if branching is not None:
        k = min(branching, most)
        return k, k
    k = max(2, min(params.max_children, round(math.sqrt(n / params.k_sqrt_divisor))))
    if last_split:
        k = max(k, min(params.max_last_children, math.ceil(n / max(1, max_leaf))))
    k = min(k, most)
    return max(2, math.ceil(k * params.k_low_ratio)), k


def simplified_silhouette(x: np.ndarray, labels: np.ndarray, centroids: np.ndarray) -> float:
    """Mean of ``(b - a) / max(a, b)`` with cosine distances to the own and the nearest other centroid."""
    sims = x @ centroids.T
    rows = np.arange(len(labels))
    own = 1.0 - sims[rows, labels]
    sims[rows, labels] = -np.inf
    other = 1.0 - sims.max(axis=1)
    return float(np.mean((other - own) / np.maximum(np.maximum(own, other), 1e-9)))


def _cluster_node(x: np.ndarray, k_low: int, k_high: int, seed: int, params: TreeParams,
                  max_share: float | None = None, why: list[str] | None = None) -> np.ndarray:
    """Labels of the best k in ``[k_low, k_high]`` by simplified silhouette (ties to the larger k).

    With ``max_share``, the best among the k whose largest cluster holds at most that share of
    the rows wins, when any k achieves it. Above ``select_sample`` rows the k is chosen on a fixed
    sample, then fitted on all rows. When the split kept has a larger cluster, ``why`` gets the reason.
    """
    if k_low == k_high:
        return spherical_kmeans(x, k_high, seed=seed, params=params)[0]
    probe = x
    if x.shape[0] > params.select_sample:
        rng = np.random.default_rng([seed, 1])
        probe = x[np.sort(rng.choice(x.shape[0], params.select_sample, replace=False))]
    tried: list[tuple[float, bool, int, np.ndarray]] = []
    for k in range(k_high, k_low - 1, -1):
        labels, centroids = spherical_kmeans(probe, k, seed=seed, params=params)
        score = simplified_silhouette(probe, labels, centroids)
        balanced = max_share is not None and np.bincount(labels).max() <= max_share * len(labels)
        tried.append((score, balanced, k, labels))
    top = max(score for score, *_ in tried)
    floor = top - params.balance_slack * abs(top)
    # The best silhouette (ties to the larger k), unless a balanced split scores nearly as well.
    best = max(tried, key=lambda t: (t[1] and t[0] >= floor, t[0], t[2]))
    if why is not None and max_share is not None and not best[1]:
        even = max((t for t in tried if t[1]), key=lambda t: (t[0], t[2]), default=None)
        why.append(f"no split into {k_low}-{k_high} parts kept every part under {max_share:.0%}" if even is None else
                   f"the best split keeping every part under {max_share:.0%} ({even[2]} parts) tells the"
                   f" topics apart clearly less well (silhouette {even[0]:.2f} vs {top:.2f})")
    if probe is x:
        return best[3]
    return spherical_kmeans(x, best[2], seed=seed, params=params)[0]


def _split(
    node: Node,
    x: np.ndarray,
    doc_of: np.ndarray,
    depth: int,
    branching: int | None,
    min_leaf: int,
    max_leaf: int,
    seed: int,
    counter: list[int],
    params: TreeParams = DEFAULT_PARAMS,
    notes: list[str] | None = None,
) -> None:
    """Split ``node`` recursively; a node that cannot be cut into two parts of ``min_leaf`` stays a leaf.

    The root always gets at least one child, so even a tiny collection has a level-1 category. A
    level-1 category over ``max_top_share`` is explained in ``notes`` (the data keeps it together).
    """
    if node.level >= depth:
        return
    n = len(node.members)
    groups: list[np.ndarray] = []
    k_low, k_high = _k_range(n, node.level == depth - 1, branching, min_leaf, max_leaf, params)
    # Parts of one short document read best together: its sections are the leaf's snippets.
    one_document = n < params.one_document_leaves * min_leaf and len(np.unique(doc_of[node.members])) == 1
    if k_high >= 2 and n >= 2 * min_leaf and not one_document:
        sub = x[node.members]
        why: list[str] = []
        labels = _cluster_node(sub, k_low, k_high, seed * 1_000_003 + counter[0], params,
                               params.max_top_share if node.level == 0 else None, why)
        counter[0] += 1
        k = int(labels.max()) + 1
        groups = _merge_small(sub, labels, max(min_leaf, round(n / (params.merge_divisor * k))))
        largest = max(len(g) for g in groups) / n
        if notes is not None and node.level == 0 and len(groups) > 1 and largest > params.max_top_share:
            reason = why[0] if why else "parts too small to stand as categories joined it"
            notes.append(f"the largest level-1 category holds {largest:.0%} of the chunks: {reason}")
    if len(groups) < 2:
        if node.level > 0:
            return  # a single child would only repeat its parent: this node is a leaf
        groups = [np.arange(n)]
    children = [Node(members=node.members[g], level=node.level + 1) for g in groups]
    children.sort(key=lambda c: (-len(c.members), int(c.members[0])))
    node.children = children
    for child in children:
        _split(child, x, doc_of, depth, branching, min_leaf, max_leaf, seed, counter, params, notes)


# --------------------------------------------------------------------------- public API


def build_cluster_tree(
    items: Sequence[ClusterItem],
    vectors: np.ndarray,
    *,
    max_depth: int = 3,
    branching: int | None = None,
    min_leaf: int = DEFAULT_MIN_LEAF,
    max_leaf: int = DEFAULT_MAX_LEAF,
    seed: int = 0,
    text_weight: float | None = None,
    doc_weight: float | None = None,
    params: TreeParams = DEFAULT_PARAMS,
    embed_names: EmbedTexts | None = None,
    notes: list[str] | None = None,
) -> TreeReply:
    """Build a topical category tree offline, in the shape an LLM build call returns.

    1. Features. Each chunk's embedding is blended with an LSA vector of its title and text
       (sublinear TF-IDF -> randomized SVD), ``sqrt(1-w)*e ++ sqrt(w)*l`` with ``w = text_weight``,
       and nudged towards the mean of its document's chunks (``doc_weight``).
    2. Splits. From the root down, every node is split by spherical k-means (k-means++ seeding, a few
       restarts, the lowest inertia wins). ``k`` is at most ``sqrt(n/2)`` clamped to
       ``[2, max_children]`` (the last split may go up to ``max_last_children`` so leaves stay under
       ``max_leaf``) and never more than ``n // min_leaf``; within ``[k_max/2, k_max]`` the k with the
       best simplified silhouette wins (at the root, among those whose largest child stays under
       ``max_top_share``, when any does). Clusters smaller than ``max(min_leaf, n / (4k))`` merge into
       the sibling with the nearest centroid.
    3. Depth. A node becomes a leaf when it cannot be cut into two parts of at least ``min_leaf``
       chunks, or when it is one short document. Only the root of a collection too small to split
       gets one child.
    4. Names and descriptions: :mod:`.naming`.

    Every item is assigned to exactly one leaf. Leaves sit at levels 1 to ``max_depth`` (fewer
    levels for collections under ``min_leaf * 2**max_depth`` chunks); a node that cannot be split
    into two parts of ``min_leaf`` chunks is a leaf, so no node has a single child.
    Categories are listed for every node, parents before children; assignments follow the item
    order and carry a one-line extractive snippet.

    Args:
        items: The chunks, aligned with ``vectors``; chunk ids must be unique.
        vectors: L2-normalised embeddings, one row per item.
        max_depth: Number of levels (1-3).
        branching: Fixed number of children per split (default: chosen by node size).
        min_leaf: Smallest cluster kept apart (smaller ones merge into the nearest sibling).
        max_leaf: Leaf size the last split aims to stay under.
        seed: Seed of the k-means++ initialisation.
        text_weight: Share of the LSA text features in the clustering space (0 disables them;
            None: ``params.text_weight``).
        doc_weight: Pull of a chunk towards its document's mean (0 disables it; None: ``params.doc_weight``).
        params: Every other threshold of clustering and naming (see :class:`.params.TreeParams`).
        embed_names: The collection's embedder for texts as queries; when given, each node's
            description is chosen among variants by how well it routes chunks among its siblings.
        notes: When given, gets a line on what the user should know of the shape (a level-1
            category over ``max_top_share`` and why the data keeps it together).

    Raises:
        BuildError: when items and vectors do not line up or chunk ids repeat.
    """
    n = len(items)
    matrix = np.asarray(vectors, dtype=np.float32)
    if matrix.ndim != 2 or matrix.shape[0] != n:
        raise BuildError(
            f"cluster build got {n} items but vectors of shape {matrix.shape}",
            hint="pass one embedding row per item",
        )
    ids = [item.chunk_id for item in items]
    if len(set(ids)) != n:
        raise BuildError("cluster build got duplicate chunk ids", hint="chunk ids must be unique")
    if n == 0:
        return TreeReply()
    if not 1 <= max_depth <= 3:
        raise BuildError(f"max_depth must be 1-3, got {max_depth}", hint="paths have 1-3 segments")
    min_leaf = max(1, int(min_leaf))
    max_leaf = max(min_leaf, int(max_leaf))
    if branching is not None and branching < 2:
        raise BuildError(f"branching must be at least 2, got {branching}")

    index, x, doc_of = _prepare(items, matrix, text_weight, doc_weight, seed, params)
    depth = _effective_depth(n, max_depth, min_leaf)
    root = Node(members=np.arange(n), level=0)
    _split(root, x, doc_of, depth, branching, min_leaf, max_leaf, seed, [0], params, notes)
    name_nodes(root, index, items, x, doc_of, params, vectors=matrix, embed=embed_names)

    categories: list[Category] = []
    leaf_of = np.empty(n, dtype=object)

    def walk(node: Node) -> None:
        for child in node.children:
            categories.append(Category(path=child.path, description=child.description))
            if child.children:
                walk(child)
            else:
                leaf_of[child.members] = child.path

    walk(root)
    assignments = [
        Assignment(chunk_id=item.chunk_id, path=str(leaf_of[i]), snippet=make_snippet(item.text, item.title))
        for i, item in enumerate(items)
    ]
    return TreeReply(categories=categories, assignments=assignments)


def _prepare(items: Sequence[ClusterItem], matrix: np.ndarray, text_weight: float | None, doc_weight: float | None,
             seed: int, params: TreeParams) -> tuple[TermIndex, np.ndarray, np.ndarray]:
    """The term index, the clustering features and each item's document code (a weight left None is
    the parameters' own)."""
    text_weight = params.text_weight if text_weight is None else text_weight
    doc_weight = params.doc_weight if doc_weight is None else doc_weight
    index = build_term_index(
        [it.text for it in items], [it.title for it in items], [it.file_name or it.doc_id for it in items], params
    )
    x = _features(items, matrix, index, text_weight, doc_weight, seed, params)
    keys = [it.doc_id or it.file_name or it.chunk_id for it in items]
    doc_codes = {key: code for code, key in enumerate(dict.fromkeys(keys))}
    return index, x, np.asarray([doc_codes[key] for key in keys], dtype=np.int64)


def name_tree(
    items: Sequence[ClusterItem],
    vectors: np.ndarray,
    leaf_of: Sequence[str],
    *,
    seed: int = 0,
    text_weight: float | None = None,
    doc_weight: float | None = None,
    params: TreeParams = DEFAULT_PARAMS,
    embed_names: EmbedTexts | None = None,
    wanted: Collection[str] | None = None,
    prepared: Prepared | None = None,
) -> dict[str, tuple[str, str]]:
    """Offline names for a tree whose shape is given: ``leaf_of[i]`` is item ``i``'s leaf path.

    Returns ``{given path: (name, description)}`` for every node (each path prefix). The shape is
    kept as it is; only names and descriptions are (re)computed from the members, as a full build
    would name them (``embed_names`` as in :func:`build_cluster_tree`). Incremental builds use it to
    refresh nodes whose membership changed: with ``wanted`` (given paths), only those nodes' names and
    descriptions are as a full build gives them (their sibling groups' descriptions are chosen by
    routing); the others' descriptions are the full ones, which need no embedding. ``prepared`` is
    :func:`prepare` of the same items, when the caller has it.
    """
    n = len(items)
    matrix = np.asarray(vectors, dtype=np.float32)
    if matrix.ndim != 2 or matrix.shape[0] != n or len(leaf_of) != n:
        raise BuildError(f"name_tree got {n} items, {len(leaf_of)} leaf paths and vectors of shape {matrix.shape}")
    if n == 0:
        return {}
    if prepared is not None and prepared.x.shape[0] != n:
        raise BuildError(f"name_tree got {n} items but features prepared for {prepared.x.shape[0]}")
    index, x, doc_of = (prepared.index, prepared.x, prepared.doc_of) if prepared is not None else _prepare(
        items, matrix, text_weight, doc_weight, seed, params)
    root = Node(members=np.arange(n), level=0)
    given: dict[int, str] = {}  # id(node) -> the path it was given

    def grow(node: Node, prefix: str, rows: np.ndarray) -> None:
        groups: dict[str, list[int]] = {}
        depth = prefix.count("/") + 1 if prefix else 0
        for r in rows.tolist():
            segments = leaf_of[r].split("/")
            if len(segments) > depth:
                groups.setdefault(segments[depth], []).append(r)
        for segment in sorted(groups):
            path = f"{prefix}/{segment}" if prefix else segment
            child = Node(members=np.asarray(groups[segment], dtype=np.int64), level=node.level + 1)
            given[id(child)] = path
            node.children.append(child)
            grow(child, path, child.members)
        # Siblings are named largest first, as a full build orders them.
        node.children.sort(key=lambda c: (-len(c.members), int(c.members[0])))

    grow(root, "", root.members)
    keep = None if wanted is None else frozenset(wanted)
    name_nodes(root, index, items, x, doc_of, params, vectors=matrix, embed=embed_names,
               wanted=None if keep is None else (lambda node: given.get(id(node)) in keep))
    out: dict[str, tuple[str, str]] = {}

    def collect(node: Node) -> None:
        for child in node.children:
            out[given[id(child)]] = (child.name, child.description)
            collect(child)

    collect(root)
    return out


@dataclass(frozen=True)
class Prepared:
    """What clustering and naming read from a collection's items (:func:`prepare`): the term index,
    the clustering features (one unit row per item) and each item's document code."""

    index: TermIndex
    x: np.ndarray
    doc_of: np.ndarray


def prepare(
    items: Sequence[ClusterItem], vectors: np.ndarray, *, seed: int = 0, text_weight: float | None = None,
    doc_weight: float | None = None, params: TreeParams = DEFAULT_PARAMS,
) -> Prepared:
    """The term index and the space :func:`build_cluster_tree` splits in (embedding + LSA text +
    document pull), with the same defaults. Incremental builds place new chunks in that space, so they
    land where a rebuild would put them, and name the tree from the same index (``name_tree(prepared=)``)
    instead of building it twice."""
    matrix = np.asarray(vectors, dtype=np.float32)
    if matrix.ndim != 2 or matrix.shape[0] != len(items):
        raise BuildError(f"prepare got {len(items)} items but vectors of shape {matrix.shape}")
    return Prepared(*_prepare(items, matrix, text_weight, doc_weight, seed, params))


def leaf_centroids(paths: Sequence[str], vectors: np.ndarray) -> dict[str, np.ndarray]:
    """Unit mean vector of each leaf, from the leaf path of every row of ``vectors``.

    Feed the result to :func:`assign_to_leaves` to place new chunks without a rebuild.
    """
    matrix = np.asarray(vectors, dtype=np.float32)
    if matrix.shape[0] != len(paths):
        raise BuildError(f"{len(paths)} paths but {matrix.shape[0]} vectors")
    rows: dict[str, list[int]] = {}
    for i, path in enumerate(paths):
        rows.setdefault(path, []).append(i)
    return {path: _normalise(matrix[r].sum(axis=0, keepdims=True))[0] for path, r in sorted(rows.items())}


def assign_to_leaves(vectors: np.ndarray, leaf_centroids: Mapping[str, np.ndarray]) -> list[str]:
    """The leaf path whose centroid is nearest (cosine) to each vector; ties go to the first path in sort order."""
    matrix = np.atleast_2d(np.asarray(vectors, dtype=np.float32))
    if matrix.shape[0] == 0:
        return []
    if not leaf_centroids:
        raise BuildError("no leaves to assign to", hint="build the tree first")
    paths = sorted(leaf_centroids)
    centroids = _normalise(np.stack([np.asarray(leaf_centroids[p], dtype=np.float32) for p in paths]))
    if centroids.shape[1] != matrix.shape[1]:
        raise BuildError(
            f"vectors have dimension {matrix.shape[1]} but leaf centroids {centroids.shape[1]}",
            hint="use the collection's embedder",
        )
    best = np.argmax(_normalise(matrix) @ centroids.T, axis=1)
    return [paths[int(b)] for b in best]
