"""The offline tree builder: recursive spherical k-means over embeddings + LSA, named by distinctive terms.

Used when no LLM is configured. Pure functions, numpy only, deterministic for a given input and seed.

How a tree is made (see :func:`build_cluster_tree`):

1. Features. Each chunk's embedding is blended with an LSA vector of its title and text
   (sublinear TF-IDF -> randomized SVD), ``sqrt(1-w)*e ++ sqrt(w)*l`` with ``w = text_weight``, and
   nudged towards the mean of its document's chunks (``doc_weight``) so the chunks of one document
   tend to stay together without being forced to.
2. Splits. From the root down, every node is split by spherical k-means (k-means++ seeding,
   4 restarts, the lowest inertia wins). The node size bounds ``k``: at most ``round(sqrt(n/2))``
   clamped to [2, 8] (the last split may go up to 12 so leaves stay under ``max_leaf``) and never
   more than ``n // min_leaf``; within ``[ceil(k_max/2), k_max]`` the k with the best simplified
   silhouette wins (measured on CACM: AMI 0.240 vs 0.226 at level 1, 0.255 vs 0.231 at the leaves,
   against always taking k_max). Clusters smaller than ``max(min_leaf, n / (4k))`` are merged into
   the sibling with the nearest centroid.
3. Depth. Splitting stops at ``max_depth`` levels (fewer below ``min_leaf * 2**max_depth``
   chunks, so small collections stay shallow). A node becomes a leaf, at whatever level, when it
   cannot be cut into two parts of at least ``min_leaf`` chunks, or when it is one short document
   (under ``4 * min_leaf`` chunks): no node has a single child. Only the root of a collection too
   small to split gets one child.
4. Names. Children are named by terms distinctive against their siblings (see :mod:`.terms`):
   unigrams, bigrams and heading phrases (title trail segments and file names), plural-folded, in
   Title Case. Shares are weighted towards documents (a chunk counts ``m ** -0.75`` for a
   document of ``m`` chunks), a term whose weight comes from one document of a mixed cluster is marked down,
   and words found in 80% of the documents (the company's name) never name a category. A name
   must be found in at least half of the node (by that weighting); a mixed node gets ``A, B & C``
   from terms that together cover it. A node made mostly of 1-3 documents is named by their short
   titles or file names (``Damaged Deliveries``, ``API Rate Limits & Release Notes``; one
   distinctive title term each when that runs long); a node mostly of records from one file
   (a ticket dump) is ``File Name: Topic``, the topic from the records' titles. Names are unique among siblings, never made only of an
   ancestor's words, never contain ``/``. Descriptions list the next terms and the documents
   nearest the node's centre.
"""

from __future__ import annotations

import math
import re
from collections.abc import Iterable, Mapping, Sequence
from dataclasses import dataclass, field

import numpy as np

from ..errors import BuildError
from ..models import Assignment, Category, TreeReply
from .snippets import make_snippet
from .terms import (
    PHRASE,
    TermIndex,
    build_term_index,
    corpus_wide_terms,
    describe_terms,
    document_weights,
    fold_plural,
    join_names,
    label_terms,
    lsa_features,
    name_words,
    presence,
    rank_terms,
    short_titles,
    spread_factor,
    term_counts,
    title_case,
    title_words,
    type_prefixes,
)

__all__ = [
    "DEFAULT_MAX_LEAF",
    "DEFAULT_MIN_LEAF",
    "ClusterItem",
    "assign_to_leaves",
    "build_cluster_tree",
    "cluster_features",
    "leaf_centroids",
    "spherical_kmeans",
]

DEFAULT_MIN_LEAF = 3
DEFAULT_MAX_LEAF = 40
_MAX_K = 8
_MAX_LEAF_K = 12
_FIT_SAMPLE = 20000
_SELECT_SAMPLE = 4000
_FALLBACK_NAME = "General"
# Title words that say what kind of document it is, not what it is about.
_GENERIC_WORDS = frozenset("guide policy procedure overview standard notes faq handbook manual runbook".split())


@dataclass(frozen=True)
class ClusterItem:
    """One chunk to place: its id, text and the labels that help name and group it."""

    chunk_id: str
    text: str
    title: str = ""
    doc_id: str = ""
    file_name: str = ""


@dataclass
class _Node:
    members: np.ndarray
    level: int
    name: str = ""
    path: str = ""
    children: list[_Node] = field(default_factory=list)
    ranked: list[tuple[int, float, float]] = field(default_factory=list)
    description: str = ""
    kind: str = ""  # how the name was made: "terms", "title", "records" or "fallback"
    support: float = 1.0  # weighted share of the members holding the name's best term
    supports: list[float] = field(default_factory=list)  # and of each of its terms
    terms: list[int] = field(default_factory=list)  # the term columns of a "terms" name


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


def _lloyd(x: np.ndarray, centroids: np.ndarray, max_iter: int) -> tuple[np.ndarray, np.ndarray, float]:
    k = centroids.shape[0]
    labels = np.full(x.shape[0], -1)
    settled = x.shape[0] // 1000  # stop when at most 0.1% of the rows still move
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
    x: np.ndarray, k: int, *, seed: int = 0, restarts: int = 4, max_iter: int = 60
) -> tuple[np.ndarray, np.ndarray]:
    """Cluster unit rows by cosine: ``(labels, unit centroids)`` of the best of ``restarts`` runs.

    Above 20,000 rows each run is fitted on a fixed random sample, then refined on all rows.
    """
    n = x.shape[0]
    k = max(1, min(k, n))
    rng = np.random.default_rng(seed)
    fit = x
    if n > _FIT_SAMPLE:
        fit = x[np.sort(rng.choice(n, _FIT_SAMPLE, replace=False))]
    best_inertia, best_centroids = math.inf, np.zeros((0, x.shape[1]), dtype=x.dtype)
    for run in range(restarts):
        run_rng = np.random.default_rng([seed, run])
        _, centroids, inertia = _lloyd(fit, _kmeans_pp(fit, k, run_rng), max_iter)
        if fit is not x:
            _, centroids, inertia = _lloyd(x, centroids, 3)
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
    items: Sequence[ClusterItem], vectors: np.ndarray, index: TermIndex, text_weight: float, doc_weight: float, seed: int
) -> np.ndarray:
    features = _normalise(np.asarray(vectors, dtype=np.float32))
    if text_weight > 0 and index.n_terms > 1:
        lsa = lsa_features(index, dim=100, seed=seed)
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
        # records (a ticket dump) barely does.
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


def _k_range(n: int, last_split: bool, branching: int | None, min_leaf: int, max_leaf: int) -> tuple[int, int]:
    """The smallest and largest number of children worth trying for a node of ``n`` chunks."""
    most = min(n // max(1, min_leaf), n)
    if most < 2:
        return 1, 1
    if branching is not None:
        k = min(branching, most)
        return k, k
    k = max(2, min(_MAX_K, round(math.sqrt(n / 2))))
    if last_split:
        k = max(k, min(_MAX_LEAF_K, math.ceil(n / max(1, max_leaf))))
    k = min(k, most)
    return max(2, math.ceil(k / 2)), k


def simplified_silhouette(x: np.ndarray, labels: np.ndarray, centroids: np.ndarray) -> float:
    """Mean of ``(b - a) / max(a, b)`` with cosine distances to the own and the nearest other centroid."""
    sims = x @ centroids.T
    rows = np.arange(len(labels))
    own = 1.0 - sims[rows, labels]
    sims[rows, labels] = -np.inf
    other = 1.0 - sims.max(axis=1)
    return float(np.mean((other - own) / np.maximum(np.maximum(own, other), 1e-9)))


def _cluster_node(x: np.ndarray, k_low: int, k_high: int, seed: int) -> np.ndarray:
    """Labels of the best k in ``[k_low, k_high]`` by simplified silhouette (ties to the larger k).

    Above 4,000 rows the k is chosen on a fixed sample, then fitted on all rows.
    """
    if k_low == k_high:
        return spherical_kmeans(x, k_high, seed=seed)[0]
    probe = x
    if x.shape[0] > _SELECT_SAMPLE:
        rng = np.random.default_rng([seed, 1])
        probe = x[np.sort(rng.choice(x.shape[0], _SELECT_SAMPLE, replace=False))]
    best: tuple[float, int, np.ndarray] | None = None
    for k in range(k_high, k_low - 1, -1):
        labels, centroids = spherical_kmeans(probe, k, seed=seed)
        score = simplified_silhouette(probe, labels, centroids)
        if best is None or score > best[0] + 1e-9:
            best = (score, k, labels)
    assert best is not None
    if probe is x:
        return best[2]
    return spherical_kmeans(x, best[1], seed=seed)[0]


def _split(
    node: _Node,
    x: np.ndarray,
    doc_of: np.ndarray,
    depth: int,
    branching: int | None,
    min_leaf: int,
    max_leaf: int,
    seed: int,
    counter: list[int],
) -> None:
    """Split ``node`` recursively; a node that cannot be cut into two parts of ``min_leaf`` stays a leaf.

    The root always gets at least one child, so even a tiny collection has a level-1 category.
    """
    if node.level >= depth:
        return
    n = len(node.members)
    groups: list[np.ndarray] = []
    k_low, k_high = _k_range(n, node.level == depth - 1, branching, min_leaf, max_leaf)
    # Parts of one short document read best together: its sections are the leaf's snippets.
    one_document = n < 4 * min_leaf and len(np.unique(doc_of[node.members])) == 1
    if k_high >= 2 and n >= 2 * min_leaf and not one_document:
        sub = x[node.members]
        labels = _cluster_node(sub, k_low, k_high, seed * 1_000_003 + counter[0])
        counter[0] += 1
        k = int(labels.max()) + 1
        groups = _merge_small(sub, labels, max(min_leaf, round(n / (4 * k))))
    if len(groups) < 2:
        if node.level > 0:
            return  # a single child would only repeat its parent: this node is a leaf
        groups = [np.arange(n)]
    children = [_Node(members=node.members[g], level=node.level + 1) for g in groups]
    children.sort(key=lambda c: (-len(c.members), int(c.members[0])))
    node.children = children
    for child in children:
        _split(child, x, doc_of, depth, branching, min_leaf, max_leaf, seed, counter)


# --------------------------------------------------------------------------- names


_SLASH = re.compile(r"\s*/\s*")
_TRAIL = re.compile(r"\s*(?:›|»|\s>\s|\|)\s*")


def _clean_name(name: str) -> str:
    name = _SLASH.sub(" ", name).strip()
    return re.sub(r"\s+", " ", name)[:60] or _FALLBACK_NAME


def _fallback_name(node: _Node, items: Sequence[ClusterItem]) -> str:
    """A name from the most common title or file name of the node, else ``General``."""
    counts: dict[str, int] = {}
    for i in node.members:
        item = items[int(i)]
        label = item.title.strip() or item.file_name.rsplit("/", 1)[-1].rsplit(".", 1)[0].replace("-", " ").replace("_", " ")
        if label:
            counts[label] = counts.get(label, 0) + 1
    if not counts:
        return _FALLBACK_NAME
    label = max(counts.items(), key=lambda kv: (kv[1], kv[0]))[0]
    words = label.split()[:3]
    return " ".join(w[:1].upper() + w[1:] for w in words)


@dataclass
class _Namer:
    """What naming needs besides the nodes: the term index and collection-wide term statistics."""

    index: TermIndex
    items: Sequence[ClusterItem]
    x: np.ndarray
    doc_of: np.ndarray
    fitness: np.ndarray
    background: np.ndarray
    n_background: float
    common: frozenset[str]
    source_of: np.ndarray
    prefixes: frozenset[str]
    column: dict[str, int]
    records: dict[int, tuple[str, frozenset[str]]]
    record_doc: np.ndarray
    shared_files: frozenset[str]  # files (or "stdin") holding several documents: no example title
    _sources: dict[int, tuple[list[str], list[str]]] = field(default_factory=dict)

    @classmethod
    def create(cls, index: TermIndex, items: Sequence[ClusterItem], x: np.ndarray, doc_of: np.ndarray) -> _Namer:
        n = len(items)
        # Words found in most documents (the company's name) never name a category; a term that
        # merely contains one (``Northwind Driver``) reads worse than one that does not.
        blocked = corpus_wide_terms(index, doc_of)
        common = {next(iter(index.words[j])) for j in np.flatnonzero(blocked) if len(index.words[j]) == 1}
        fitness = index.fitness.copy()
        long_common = [w for w in common if len(w) >= 5]
        for j, words in enumerate(index.words):
            if blocked[j] or words <= common:
                fitness[j] = 0.0
            elif words & common:
                fitness[j] *= 0.5
            elif any(sum(len(c) for c in long_common if c in w) >= 0.8 * len(w) for w in words):
                fitness[j] *= 0.3  # "northwindpantry" in a URL or a channel name
        weights = document_weights(doc_of)
        background = term_counts(index, np.arange(n), np.zeros(n, dtype=np.int64), 1, weights)[0]
        titles = [_doc_title(item) for item in items]
        prefixes = type_prefixes(titles)
        # A file of records (support tickets, a mail export) is one document whose chunks each
        # carry their own title: each record is a source of its own when telling what a node holds.
        rows_of: dict[int, list[int]] = {}
        for i, d in enumerate(doc_of.tolist()):
            rows_of.setdefault(d, []).append(i)
        column = {t: j for j, t in enumerate(index.terms)}
        records: dict[int, tuple[str, frozenset[str]]] = {}
        record_doc = np.full(n, -1, dtype=np.int64)
        source_keys: list[tuple[int, str]] = [(d, "") for d in doc_of.tolist()]
        for d, rows in rows_of.items():
            if len(rows) < 5 or len({titles[r] for r in rows}) < 0.8 * len(rows):
                continue
            item = items[rows[0]]
            label = short_titles("", item.file_name or item.doc_id, prefixes)
            # Words in most of the records ("agent", "customer") say what kind of record it is.
            entries = index.entries_of(np.asarray(rows, dtype=np.int64))
            df = np.bincount(index.indices[entries], minlength=index.n_terms)
            frequent = frozenset(
                next(iter(index.words[j])) for j in np.flatnonzero(df >= 0.4 * len(rows)) if len(index.words[j]) == 1
            )
            records[d] = (_phrase_display(label[0], index, column) if label else "", frequent)
            record_doc[rows] = d
            for r in rows:
                source_keys[r] = (d, titles[r])
        codes = {key: code for code, key in enumerate(dict.fromkeys(source_keys))}
        source_of = np.asarray([codes[key] for key in source_keys], dtype=np.int64)
        docs_in: dict[str, set[str]] = {}
        for item in items:
            docs_in.setdefault(item.file_name, set()).add(item.doc_id)
        shared = frozenset(f for f, docs in docs_in.items() if f and len(docs) > 1)
        return cls(index, items, x, doc_of, fitness, background, float(weights.sum()), frozenset(common),
                   source_of, prefixes, column, records, record_doc, shared)

    def source_names(self, source: int) -> tuple[list[str], list[str]]:
        """Short names a source already has (title, then file name) and the words of its title."""
        if source not in self._sources:
            rows = np.flatnonzero(self.source_of == source)
            titles = [_doc_title(self.items[int(r)]) for r in rows]
            title, count = max(((t, titles.count(t)) for t in set(titles)), key=lambda tc: (tc[1], tc[0]))
            if count < 0.5 * len(rows):
                title = ""  # chunks without a shared title
            file_name = self.items[int(rows[0])].file_name
            names = [
                _phrase_display((key, surface), self.index, self.column)
                for key, surface in short_titles(title, file_name, self.prefixes)
            ]
            names = [nm for nm in names if not name_words(nm) & self.common]
            self._sources[source] = (names, title_words(title, file_name, self.prefixes))
        return self._sources[source]


def _phrase_display(phrase: tuple[str, str], index: TermIndex, column: dict[str, int]) -> str:
    """The index's display form of a heading phrase (``column``: term -> index column), else its
    surface in Title Case."""
    key, surface = phrase
    j = column.get(key)
    return index.display[j] if j is not None else title_case(surface)


_RECORDS_SHARE = 0.75


def _record_files(node: _Node, namer: _Namer) -> tuple[np.ndarray, np.ndarray]:
    """The records files (their document codes) among ``node``'s members, and members of each."""
    docs = namer.record_doc[node.members]
    return np.unique(docs[docs >= 0], return_counts=True)


def _mostly_records(node: _Node, namer: _Namer) -> bool:
    """Whether one records file makes up half of ``node``, but not the 75% a records name needs."""
    _, counts = _record_files(node, namer)
    if not len(counts):
        return False
    return 0.5 * len(node.members) <= int(counts.max()) < _RECORDS_SHARE * len(node.members)


def _foreign_labels(node: _Node, namer: _Namer) -> set[str]:
    """Names of records files (``support tickets``) that do not make up most of ``node``."""
    values, counts = _record_files(node, namer)
    return {
        namer.records[int(d)][0].lower() for d, c in zip(values.tolist(), counts.tolist(), strict=True)
        if c < _RECORDS_SHARE * len(node.members) and namer.records[int(d)][0]
    }


def _records_name(
    node: _Node, namer: _Namer, rank: list[tuple[int, float, float]], banned: set[str], banned_words: set[str],
    weight: np.ndarray, ancestors: Sequence[str] = (),
) -> str | None:
    """``Support Tickets: Refunds`` for a node made (75% or more) of records from one file, else None.

    The file's name says what kind of chunks these are; the topic comes from the records' own
    terms, leaving out words found in most of the file's records (``agent``, ``customer``).
    """
    values, counts = _record_files(node, namer)
    if not len(counts):
        return None
    # The file's name says what the node holds only if nearly all of it comes from there: with a
    # quarter from elsewhere (a policy beside the tickets about it) it mislabels the rest.
    if counts.max() < _RECORDS_SHARE * len(node.members):
        return None
    label, frequent = namer.records[int(values[np.argmax(counts)])]
    prefix = "" if not label or name_words(label) <= banned_words else label
    # A word of a higher category may still be the topic of the records when none of the
    # ancestors names these records ("Support Tickets: Refunds" under "Refunds & Charge").
    said = set().union(*(name_words(a) for a in ancestors if ":" in a)) if prefix else banned_words
    skip = said | frequent | name_words(label)
    rows = node.members[namer.record_doc[node.members] >= 0]
    titles = build_term_index([namer.items[int(r)].title for r in rows], [""] * len(rows))
    index = namer.index
    scored: list[tuple[float, int]] = []
    present = np.bincount(titles.indices, minlength=titles.n_terms)
    for t, key in enumerate(titles.terms):
        j = namer.column.get(key)
        if j is None or present[t] < max(2, 0.15 * len(rows)) or index.words[j] <= skip:
            continue
        value = present[t] * namer.fitness[j] * (1.2 if " " in key else 1.0)
        if value > 0 and index.display[j].lower() not in banned:
            scored.append((value, j))
    scored.sort(key=lambda vj: (-vj[0], index.terms[vj[1]]))
    chosen: list[int] = []
    for value, j in scored:
        if len(chosen) == 2 or (chosen and value < 0.5 * scored[0][0]):
            break
        if any(index.words[j] & index.words[c] or index.words[j] > index.words[c] for c in chosen):
            continue
        chosen.append(j)
    if not chosen:
        chosen = label_terms(rank, index, banned=banned, banned_words=skip, members=node.members, row_weight=weight)[:1]
    topic = join_names([index.display[j] for j in chosen])
    name = f"{prefix}: {topic}" if prefix and topic else topic or prefix
    return name if name and name.lower() not in banned else None


def _title_name(
    node: _Node, namer: _Namer, rank: list[tuple[int, float, float]], banned: set[str], banned_words: set[str],
    shorten: bool = True,
) -> str | None:
    """A name from the titles of the 1-3 documents that make up most of ``node``, else None.

    ``Missing Items``; ``Late Deliveries & Missing Items``; when the joined titles run over five
    words, each document gives its most distinctive title term (``Severity & Escalation``).
    """
    members = node.members
    n = len(members)
    sources, counts = np.unique(namer.source_of[members], return_counts=True)
    order = np.lexsort((sources, -counts))
    main = [int(sources[o]) for o in order if counts[o] >= max(2, 0.15 * n)]
    # Stray single chunks (a ticket, a paragraph of another policy) do not count against the titles.
    if not 1 <= len(main) <= 3 or sum(int(counts[sources == s][0]) for s in main) < 0.5 * n:
        return None
    if any(namer.record_doc[members[namer.source_of[members] == s][0]] >= 0 for s in main):
        return None
    named = [namer.source_names(s) for s in main]
    if all(names for names, _ in named):
        options = [sorted(names, key=lambda nm: (len(nm.split()) > 3, names.index(nm))) for names, _ in named]
        for attempt in range(2):
            picks = [opts[min(attempt, len(opts) - 1)] for opts in options]
            if attempt:
                picks = [min(opts, key=lambda nm: (len(nm.split()), opts.index(nm))) for opts in options]
            name = join_names(picks)
            if len(picks) > 1 and any(w.lower() in ("and", "or", "&") for p in picks for w in p.split()):
                continue  # "Food Safety and Recalls & Allergens" reads as three things
            if (
                sum(len(p.split()) - sum(w.lower() in ("and", "or", "of", "the", "for", "&") for w in p.split())
                    for p in picks) <= 5
                and name.lower() not in banned
                and len({p.lower() for p in picks}) == len(picks)
            ):
                return name
    if len(main) == 1 or not shorten:
        return None
    # Too long together: each document's two-word title, else its most distinctive title term.
    index = namer.index
    picked: list[str] = []
    stems: set[str] = set()
    for names, words in named:
        brief = [nm for nm in names if len(nm.split()) == 2 and not name_words(nm) <= banned_words]
        if brief and not _stem_keys(name_words(brief[0])) & stems:
            picked.append(brief[0])
            stems |= _stem_keys(name_words(brief[0]))
            continue
        allowed = set(words) - _GENERIC_WORDS
        fits = [
            (j, score) for j, score, _ in rank
            if len(index.words[j]) <= 2 and not index.terms[j].startswith(PHRASE)
            and index.words[j] <= allowed and namer.fitness[j] >= (0.6 if len(index.words[j]) == 2 else 0.9)
            and not _stem_keys(index.words[j]) & stems
        ]
        if not fits:
            return None
        best, top = fits[0]
        # A two-word term ("Cold Chain", "Driver App") says more than its best word alone.
        best = next((j for j, score in fits if len(index.words[j]) == 2 and score >= 0.5 * top), best)
        picked.append(index.display[best])
        stems |= _stem_keys(index.words[best])
    name = join_names(picked)
    return name if name.lower() not in banned else None


def _name_children(parent: _Node, namer: _Namer, ancestors: list[str]) -> None:
    children = parent.children
    if not children:
        return
    index = namer.index
    k = len(children)
    members = np.concatenate([c.members for c in children])
    labels = np.concatenate([np.full(len(c.members), i) for i, c in enumerate(children)])
    # Each child weighs a document of m chunks as m ** 0.25: shares count documents more than chunks.
    weights = [document_weights(namer.doc_of[c.members]) for c in children]
    counts = term_counts(index, members, labels, k, np.concatenate(weights))
    present = term_counts(index, members, labels, k)
    total = counts.sum(axis=0)
    sizes = np.asarray([float(w.sum()) for w in weights])
    longer: list[list[tuple[int, float, float]]] = []
    for i, child in enumerate(children):
        outside, n_outside = (total - counts[i], float(sizes.sum() - sizes[i])) if k > 1 else (total, 0.0)
        longer.append(rank_terms(
            counts[i], float(sizes[i]), outside, n_outside, namer.background, namer.n_background,
            fitness=namer.fitness * spread_factor(index, child.members, namer.doc_of, weights[i]),
            present=present[i], n_present=len(child.members), limit=60,
        ))
        child.ranked = longer[-1][:12]

    taken = {a.lower() for a in ancestors}
    banned_words = {w for a in ancestors for w in name_words(a)}
    used: set[str] = set()
    for child, weight, rank in zip(children, weights, longer, strict=True):  # already largest first
        # A file's name never names a node that is not mostly from that file.
        foreign = _foreign_labels(child, namer)
        chosen = label_terms(
            child.ranked, index, banned=taken | used | foreign, banned_words=banned_words,
            members=child.members, row_weight=weight,
        )
        special = _records_name(child, namer, rank, taken | used, banned_words, weight, ancestors)
        child.kind = "records" if special else ""
        if special is None:
            # The titles of the few documents a node holds are names people wrote ("Warm" -> "Damaged Deliveries").
            weak = all(" " not in index.terms[j] or index.fitness[j] < 0.9 for j in chosen)
            special = _title_name(child, namer, rank, taken | used, banned_words, shorten=weak)
        if special:
            name = special
            used.add(name.lower())
            child.kind = child.kind or "title"
        elif chosen:
            name = join_names([index.display[j] for j in chosen])
            used.update(index.display[j].lower() for j in chosen)
            child.kind = "terms"
            hits = presence(index, child.members, chosen)
            share = weight / max(float(weight.sum()), 1e-12)
            child.supports = [float(share @ hits[:, c]) for c in range(len(chosen))]
            child.terms = list(chosen)
            child.support = max(child.supports)
        else:
            name = _fallback_name(child, namer.items)
            child.kind = "fallback"
            child.support = 0.0
        name = _clean_name(name)
        base, suffix = name, 2
        while name.lower() in taken:
            name = f"{base} ({suffix})"
            suffix += 1
        taken.add(name.lower())
        child.name = name
        child.path = f"{parent.path}/{name}" if parent.path else name
        _redescribe(child, namer)
    for child in children:
        _name_children(child, namer, [*ancestors, child.name])


_JOINS = re.compile(r"\s*(?:,|&)\s*")
_NAME_WORD = re.compile(r"[A-Za-z0-9][A-Za-z0-9'’-]*")
_SMALL = frozenset({"and", "or", "of", "the", "for", "a", "an", "to", "in", "on"})


def _child_head(child: _Node, namer: _Namer, short: bool, avoid: frozenset[str] = frozenset()) -> str:
    """The shortest phrase of a child's name that still says what most of it holds.

    ``Cold Chain Handling`` -> ``Cold Chain``; ``Driver App Guide`` -> ``Driver App``; of a joined
    name (``Food Safety & Dietary Information``) the part most of the child holds; with ``short``,
    one word where one will do; a phrase sharing a stem with ``avoid`` (the heads before it) is
    passed over when the name has another (``Returns and Refunds`` -> ``Returns``).
    """
    name = child.name.split(":", 1)[-1].strip()
    parts = [p.strip() for p in _JOINS.split(name) if p.strip()]
    index = namer.index
    weight = document_weights(namer.doc_of[child.members])
    weight = weight / max(float(weight.sum()), 1e-12)
    options: list[tuple[int, str, int]] = []  # (term column, surface, words)
    order: list[tuple[int, int]] = []  # where each option starts in the name
    # Beside a head already said, a word of the child's own name may read a little less well.
    for floor in (1.0, 0.7) if avoid else (1.0,):
        for p, part in enumerate(parts):
            words = _NAME_WORD.findall(part)
            for size in (1, 2):
                for start in range(len(words) - size + 1):
                    seq = words[start:start + size]
                    if any(w.lower() in _GENERIC_WORDS or w.lower() in ("and", "or", "of", "the", "for") for w in seq):
                        continue
                    j = namer.column.get(" ".join(fold_plural(w.lower()) for w in seq))
                    if j is None or index.words[j] & namer.common or _stem_keys(index.words[j]) & avoid:
                        continue
                    if namer.fitness[j] >= floor * (0.6 if size == 2 else 0.7):
                        options.append((j, " ".join(w[:1].upper() + w[1:] for w in seq), size))
                        order.append((p, start))
        if options:
            break
    if not options:
        return parts[0] if parts else name
    hits = presence(index, child.members, [j for j, _, _ in options])
    value = [float(weight @ hits[:, c]) for c in range(len(options))]
    # Of the phrases about as well supported as the best, the first in the name: its head
    # ("Cold Chain Handling" -> "Cold Chain", not "Chain Handling").
    top = max(value)
    head = min((c for c in range(len(options)) if value[c] >= 0.5 * top), key=lambda c: (order[c], -options[c][2]))
    if short and options[head][2] > 1:
        # The first word of a compound, if it reads as a name on its own ("Driver App" -> "Driver");
        # "Cold Chain" stays whole.
        first = options[head][1].split()[0]
        words = [c for c in range(len(options)) if options[c][2] == 1 and options[c][1] == first
                 and namer.fitness[options[c][0]] >= 0.9]
        if words:
            return options[words[0]][1]
    return options[head][1]


def _general_parts(node: _Node, namer: _Namer, banned: set[str]) -> str | None:
    """``node``'s joined name with each part that is also a part of a child's name cut to one word.

    A parent says what its children share, not one child's name again (a child of several parts,
    each of which the parent says): ``Incident, Call Rotation & Support Escalation`` over
    ``Incident Severity & Support Escalation`` becomes ``Incident, Call Rotation & Escalation``. The word kept is the part's most distinctive word for the
    node (else its last, the head of an English compound); None when nothing changes.
    """
    prefix, _, rest = node.name.rpartition(":")
    parts = [p.strip() for p in _JOINS.split(rest) if p.strip()]
    if len(parts) < 2:
        return None
    said = name_words(rest) - _SMALL
    child_parts: set[frozenset[str]] = set()
    for c in node.children:
        # A child of several parts, each of which the parent's name says again.
        found = [frozenset(name_words(q) - _SMALL) for q in _JOINS.split(c.name.rpartition(":")[2]) if q.strip()]
        if len(found) >= 2 and all(f & said for f in found):
            child_parts.update(found)
    rank = {j: r for r, (j, _, _) in enumerate(node.ranked)}
    changed = False
    for i, part in enumerate(parts):
        words = _NAME_WORD.findall(part)
        content = [w for w in words if w.lower() not in _SMALL]
        if len(content) < 2 or frozenset(name_words(part) - _SMALL) not in child_parts:
            continue
        others = _stem_keys(w for q in parts[:i] + parts[i + 1:] for w in name_words(q))
        fits = []
        for w in content:
            j = namer.column.get(fold_plural(w.lower()))
            if j is None or namer.fitness[j] < 0.9 or fold_plural(w.lower())[:5] in others:
                continue
            fits.append((rank.get(j, len(rank) + 1), -content.index(w), w))
        if fits:
            word = min(fits)[2]
            parts[i] = word[:1].upper() + word[1:]
            changed = True
    if not changed:
        return None
    name = join_names(parts)
    name = f"{prefix.strip()}: {name}" if prefix.strip() else name
    if name.lower() in banned or any(name.lower() == c.name.lower() for c in node.children):
        return None
    return name


def _weak_parent_name(node: _Node, namer: _Namer) -> bool:
    """A parent named by terms most of it lacks, by one word none of its children says, or by a
    term that reads less well as a name and covers under 40% of it (``Refunds & Charge``)."""
    if node.kind == "fallback":
        return True
    if node.kind == "terms" and _mostly_records(node, namer):
        return True  # records with a quarter of something else: say what both are
    if node.kind != "terms":
        return False
    if node.support < 0.5:
        return True
    if any(namer.index.fitness[j] < 1.0 and share < 0.4 for j, share in zip(node.terms, node.supports, strict=True)):
        return True
    word = next(iter(name_words(node.name)), "")
    return len(name_words(node.name)) == 1 and not any(
        word in w for c in node.children for w in name_words(c.name)  # "Phage" > "Bacteriophages"
    )


def _name_from_children(node: _Node, namer: _Namer, banned: set[str]) -> str | None:
    """``Cold Chain, Damaged Deliveries & Driver App``: heads of the 2-3 largest children covering most of ``node``."""
    n = len(node.members)
    foreign = _foreign_labels(node, namer)  # "Support Tickets" names only the tickets child
    picked = [
        c for c in node.children  # largest first
        if c.name.lower() not in foreign and (c.kind in ("title", "records", "children") or (
            c.kind == "terms" and c.support >= 0.75 and all(namer.fitness[j] >= 0.9 for j in c.terms)
            and any(len(namer.index.words[j]) > 1 for j in c.terms)
        ))  # children with names that say what they are
    ][:3]
    while len(picked) >= 2:
        if sum(len(c.members) for c in picked) < 0.55 * n:
            return None
        full: list[str] = []
        brief: list[str] = []
        for c in picked:
            said = frozenset(_stem_keys(w for h in full for w in name_words(h)))
            full.append(_child_head(c, namer, False, said))
            brief.append(_child_head(c, namer, True, said | _stem_keys(w for h in brief for w in name_words(h))))
        heads = list(full)
        while True:
            kept: list[str] = []
            stems: set[str] = set()
            for head in heads:
                found = _stem_keys(name_words(head))
                if not found & stems:
                    kept.append(head)
                    stems |= found
            name = join_names(kept)
            if len(kept) >= 2 and len(name) <= 40 and sum(len(h.split()) for h in kept) <= 5:
                if name.lower() in banned or any(name.lower() == c.name.lower() for c in node.children):
                    return None
                return name
            # Too long: the longest head, the smallest child's first, gives way to one word.
            longer = [i for i in range(len(heads)) if heads[i] != brief[i]]
            if not longer:
                break
            i = max(longer, key=lambda i: (len(heads[i].split()), i))
            heads[i] = brief[i]
        picked = picked[:-1]
    return None


def _rename_parents(node: _Node, namer: _Namer, ancestors: list[str]) -> None:
    """Bottom-up: a parent with a weak name of its own is named from its children; a part of a
    parent's name that is a part of a child's name gives way to one of its words."""
    for child in node.children:
        _rename_parents(child, namer, [*ancestors, child.name] if node.children else ancestors)
    for child in node.children:
        if not child.children:
            continue
        banned = {a.lower() for a in ancestors} | {c.name.lower() for c in node.children if c is not child}
        name = _name_from_children(child, namer, banned) if _weak_parent_name(child, namer) else None
        if name:
            child.kind = "children"
        else:
            name = _general_parts(child, namer, banned)  # a part that is a child's part, cut to one word
        if name:
            child.name = _clean_name(name)
            _redescribe(child, namer)


def _stem_keys(words: Iterable[str]) -> set[str]:
    """Crude stems, the first five letters: enough to tell ``Refunds`` and ``Refund Tickets`` say the same."""
    return {w[:5] for w in words}


def _redescribe(node: _Node, namer: _Namer) -> None:
    """``node``'s description for its current name (terms the name already says are left out)."""
    terms = describe_terms(node.ranked, namer.index, name_words(node.name), avoid=namer.common)
    node.description = _describe(node, terms, namer)


def _set_paths(node: _Node) -> None:
    for child in node.children:
        child.path = f"{node.path}/{child.name}" if node.path else child.name
        _set_paths(child)


def _doc_title(item: ClusterItem) -> str:
    """The document-level title of a chunk: the first segment of its heading trail, else its file."""
    title = _TRAIL.split(item.title.strip(), maxsplit=1)[0].strip() if item.title.strip() else ""
    if not title and (item.file_name or item.doc_id):
        title = (item.file_name or item.doc_id).replace("\\", "/").rsplit("/", 1)[-1]
    return title


def _describe(node: _Node, terms: list[str], namer: _Namer) -> str:
    """``"14 chunks: refunds, perishables, credit — e.g. Returns Policy; Damaged Deliveries FAQ"``.

    The example titles are the documents with the most weight near the node's centroid. Untitled
    chunks fall back to their file, which shows only when no member has a title, and never when
    the file holds many documents (a JSONL of records, "stdin"): that says nothing about the node.
    """
    n = len(node.members)
    text = f"{n} chunk{'s' if n != 1 else ''}"
    if terms:
        text += ": " + ", ".join(terms)
    sub = namer.x[node.members]
    centre = _normalise(sub.sum(axis=0, keepdims=True))[0]
    closeness = np.clip(sub @ centre, 0.0, None)
    titled: dict[str, float] = {}
    files: dict[str, float] = {}
    for i, score in zip(node.members, closeness, strict=True):
        item = namer.items[int(i)]
        title = _doc_title(item)
        if item.title.strip():
            titled[title] = titled.get(title, 0.0) + float(score)
        elif title and item.file_name not in namer.shared_files:
            files[title] = files.get(title, 0.0) + float(score)
    weight = titled or files
    if weight:
        top = sorted(weight, key=lambda t: (-weight[t], t))[:2]
        shown = "; ".join(t if len(t) <= 50 else t[:49].rstrip() + "…" for t in top)
        text += f" — e.g. {shown}"
    return " ".join(text.split())


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
    text_weight: float = 0.2,
    doc_weight: float = 1.0,
) -> TreeReply:
    """Build a topical category tree offline, in the shape an LLM build call returns.

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
        text_weight: Share of the LSA text features in the clustering space (0 disables them).
        doc_weight: Pull of a chunk towards its document's mean (0 disables it).

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

    index = build_term_index(
        [it.text for it in items], [it.title for it in items], [it.file_name or it.doc_id for it in items]
    )
    x = _features(items, matrix, index, text_weight, doc_weight, seed)
    depth = _effective_depth(n, max_depth, min_leaf)
    root = _Node(members=np.arange(n), level=0)
    keys = [it.doc_id or it.file_name or it.chunk_id for it in items]
    doc_codes = {key: code for code, key in enumerate(dict.fromkeys(keys))}
    doc_of = np.asarray([doc_codes[key] for key in keys], dtype=np.int64)
    _split(root, x, doc_of, depth, branching, min_leaf, max_leaf, seed, [0])

    _name_nodes(root, items, x, index, doc_of)

    categories: list[Category] = []
    leaf_of = np.empty(n, dtype=object)

    def walk(node: _Node) -> None:
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


def _name_nodes(root: _Node, items: Sequence[ClusterItem], x: np.ndarray, index: TermIndex,
                doc_of: np.ndarray) -> None:
    """Name and describe every node under ``root`` (its structure fixed) and set the paths."""
    namer = _Namer.create(index, items, x, doc_of)
    _name_children(root, namer, [])
    _rename_parents(root, namer, [])
    _set_paths(root)


def name_tree(
    items: Sequence[ClusterItem],
    vectors: np.ndarray,
    leaf_of: Sequence[str],
    *,
    seed: int = 0,
    text_weight: float = 0.2,
    doc_weight: float = 1.0,
) -> dict[str, tuple[str, str]]:
    """Offline names for a tree whose shape is given: ``leaf_of[i]`` is item ``i``'s leaf path.

    Returns ``{given path: (name, description)}`` for every node (each path prefix). The shape is
    kept as it is; only names and descriptions are (re)computed from the members, as a full build
    would name them. Incremental builds use it to refresh nodes whose membership changed.
    """
    n = len(items)
    matrix = np.asarray(vectors, dtype=np.float32)
    if matrix.ndim != 2 or matrix.shape[0] != n or len(leaf_of) != n:
        raise BuildError(f"name_tree got {n} items, {len(leaf_of)} leaf paths and vectors of shape {matrix.shape}")
    if n == 0:
        return {}
    index = build_term_index(
        [it.text for it in items], [it.title for it in items], [it.file_name or it.doc_id for it in items]
    )
    x = _features(items, matrix, index, text_weight, doc_weight, seed)
    keys = [it.doc_id or it.file_name or it.chunk_id for it in items]
    doc_codes = {key: code for code, key in enumerate(dict.fromkeys(keys))}
    doc_of = np.asarray([doc_codes[key] for key in keys], dtype=np.int64)
    root = _Node(members=np.arange(n), level=0)
    given: dict[int, str] = {}  # id(node) -> the path it was given

    def grow(node: _Node, prefix: str, rows: np.ndarray) -> None:
        groups: dict[str, list[int]] = {}
        depth = prefix.count("/") + 1 if prefix else 0
        for r in rows.tolist():
            segments = leaf_of[r].split("/")
            if len(segments) > depth:
                groups.setdefault(segments[depth], []).append(r)
        for segment in sorted(groups):
            path = f"{prefix}/{segment}" if prefix else segment
            child = _Node(members=np.asarray(groups[segment], dtype=np.int64), level=node.level + 1)
            given[id(child)] = path
            node.children.append(child)
            grow(child, path, child.members)

    grow(root, "", root.members)
    _name_nodes(root, items, x, index, doc_of)
    out: dict[str, tuple[str, str]] = {}

    def collect(node: _Node) -> None:
        for child in node.children:
            out[given[id(child)]] = (child.name, child.description)
            collect(child)

    collect(root)
    return out


def cluster_features(
    items: Sequence[ClusterItem], vectors: np.ndarray, *, seed: int = 0, text_weight: float = 0.2,
    doc_weight: float = 1.0,
) -> np.ndarray:
    """The space :func:`build_cluster_tree` splits in (embedding + LSA text + document pull), one
    unit row per item, with the same defaults. Incremental builds place new chunks in it, so they
    land where a rebuild would put them."""
    matrix = np.asarray(vectors, dtype=np.float32)
    if matrix.ndim != 2 or matrix.shape[0] != len(items):
        raise BuildError(f"cluster_features got {len(items)} items but vectors of shape {matrix.shape}")
    index = build_term_index(
        [it.text for it in items], [it.title for it in items], [it.file_name or it.doc_id for it in items]
    )
    return _features(items, matrix, index, text_weight, doc_weight, seed)


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
