"""Offline names and descriptions for a tree whose shape is fixed (class-based TF-IDF, coverage, MMR)."""

from __future__ import annotations

import re
from collections.abc import Callable, Sequence
from dataclasses import dataclass, field
from typing import Protocol

import numpy as np

from ..errors import KnowtologyError
from .params import DEFAULT_PARAMS, TreeParams
from .snippets import make_snippet
from .terms import (
    PHRASE,
    TermIndex,
    corpus_wide_terms,
    document_weights,
    heading_segments,
    join_names,
    phrases,
    term_counts,
)

__all__ = ["EmbedTexts", "Node", "NamedItem", "Namer", "name_nodes"]

#: Embeds texts as queries with the collection's embedder: one row per text.
EmbedTexts = Callable[[list[str]], np.ndarray]

FALLBACK_NAME = "Other"
_TOLERANCE = 1e-12  # shares are sums of float weights: 0.5 may come out as 0.49999999999999994
_SLASH = re.compile(r"\s*/\s*")
_TRAIL = re.compile(r"\s*(?:›|»|\s>\s|\|)\s*")


class NamedItem(Protocol):
    """What naming reads from a chunk (``ClusterItem`` has it)."""

    @property
    def chunk_id(self) -> str: ...
    @property
    def text(self) -> str: ...
    @property
    def title(self) -> str: ...
    @property
    def doc_id(self) -> str: ...
    @property
    def file_name(self) -> str: ...


@dataclass
class Node:
    """A node of the tree being named: its member rows, children and the name it gets."""

    members: np.ndarray
    level: int
    name: str = ""
    path: str = ""
    description: str = ""
    children: list[Node] = field(default_factory=list)
    terms: list[int] = field(default_factory=list)  # term columns of the name
    ranked: list[int] = field(default_factory=list)  # term columns by score, for the description
    coverage: float = 0.0  # weighted share of the members holding a term of the name


def _normalise(matrix: np.ndarray) -> np.ndarray:
    norms = np.linalg.norm(matrix, axis=-1, keepdims=True)
    norms[norms == 0] = 1.0
    return matrix / norms


class Namer:
    """Names and describes the nodes of one collection."""

    def __init__(self, index: TermIndex, items: Sequence[NamedItem], x: np.ndarray, doc_of: np.ndarray,
                 params: TreeParams = DEFAULT_PARAMS, *, vectors: np.ndarray | None = None,
                 embed: EmbedTexts | None = None, wanted: Callable[[Node], bool] | None = None) -> None:
        self.index, self.items, self.x, self.doc_of, self.params = index, items, x, doc_of, params
        # Nodes whose description the caller keeps (all when None): only their sibling groups are
        # worth choosing descriptions for by routing; the others get the full one, which costs nothing.
        self.wanted = wanted
        # The chunks' own embeddings and the embedder, to choose descriptions by routing (optional).
        self.vectors = None if vectors is None or embed is None else _normalise(np.asarray(vectors, np.float32))
        self.embed = embed
        n = len(items)
        blocked = corpus_wide_terms(index, doc_of, params.corpus_wide_share, params.corpus_wide_min_docs)
        self.nameable = np.where(blocked, 0.0, index.nameability)
        # Level-1 names part the whole collection: a word most of its documents use, found in every
        # part, is its subject ("the framework's own name") and names none of them.
        self.subject = corpus_wide_terms(index, doc_of, params.subject_share, params.corpus_wide_min_docs)
        self.top_nameable = self.nameable
        weights = document_weights(doc_of, params.document_decay)
        self.background = term_counts(index, np.arange(n), np.zeros(n, dtype=np.int64), 1, weights)[0]
        self.background /= max(float(weights.sum()), 1e-12)
        rows = index.rows_of_entries()
        order = np.argsort(index.indices, kind="stable")
        self._col_rows = rows[order]
        self._col_ptr = np.concatenate(([0], np.cumsum(np.bincount(index.indices, minlength=index.n_terms))))
        self._centroids: dict[int, np.ndarray] = {}
        docs_in: dict[str, set[str]] = {}
        for item in items:
            docs_in.setdefault(item.file_name, set()).add(item.doc_id)
        # A file holding many documents (a JSONL of records, stdin) says nothing about one node.
        self.shared_files = frozenset(f for f, docs in docs_in.items() if f and len(docs) > 1)

    # ------------------------------------------------------------------ public

    def name(self, root: Node) -> None:
        """Name and describe every node under ``root`` and set the paths."""
        self._name_children(root, frozenset())
        self._describe(root)
        _set_paths(root)

    # ------------------------------------------------------------------ terms

    def centroid(self, column: int) -> np.ndarray:
        """Unit mean feature vector of the chunks holding term ``column``."""
        if column not in self._centroids:
            rows = self._col_rows[self._col_ptr[column]:self._col_ptr[column + 1]]
            self._centroids[column] = _normalise(self.x[rows].sum(axis=0))
        return self._centroids[column]

    def _similarity(self, column: int, others: Sequence[int]) -> float:
        if not others:
            return 0.0
        return float(max(self.centroid(column) @ self.centroid(o) for o in others))

    def _score_children(self, children: Sequence[Node]) -> list[tuple[np.ndarray, np.ndarray, np.ndarray]]:
        """Per child: c-TF-IDF scores, coverage shares and lifts (share over the siblings' share) of
        every term."""
        p, index = self.params, self.index
        k = len(children)
        members = np.concatenate([c.members for c in children])
        labels = np.concatenate([np.full(len(c.members), i) for i, c in enumerate(children)])
        weights = np.concatenate([document_weights(self.doc_of[c.members], p.document_decay) for c in children])
        weighted = term_counts(index, members, labels, k, weights)
        covered = term_counts(index, members, labels, k, weights, presence_only=True)
        counts = term_counts(index, members, labels, k, presence_only=True)
        sizes = np.bincount(labels, weights=weights, minlength=k)
        if children[0].level == 1:  # a subject word found in every part names none of them
            self.top_nameable = np.where(self.subject & (counts > 0).all(axis=0), 0.0, self.nameable)
        total, total_size = weighted.sum(axis=0), float(sizes.sum())
        out = []
        for i, child in enumerate(children):
            share = weighted[i] / max(sizes[i], _TOLERANCE)
            if k > 1:
                other = (total - weighted[i]) / max(total_size - sizes[i], _TOLERANCE)
            else:
                other = self.background
            eps = p.share_smoothing
            nameable = self._nameable(child)
            lift = (share + eps) / (other + eps)
            score = share * np.log(lift) * nameable
            coverage = covered[i] / max(sizes[i], _TOLERANCE)
            needed = min(p.min_chunks, len(child.members))
            score[(counts[i] < needed) | (coverage < p.min_candidate_share) | (nameable <= 0)] = -np.inf
            out.append((score, coverage, lift))
        return out

    # ------------------------------------------------------------------ names

    def _name_children(self, parent: Node, banned: frozenset[str]) -> None:
        children = parent.children
        if not children:
            return
        p, index = self.params, self.index
        scored = self._score_children(children)
        taken_terms: list[int] = []
        taken_names: set[str] = {parent.name.lower()} if parent.name else set()
        for child, (score, coverage, lift) in zip(children, scored, strict=True):
            pool = [int(j) for j in np.argsort(-score, kind="stable")[: p.candidate_pool]
                    if np.isfinite(score[j]) and score[j] > 0 and not index.words[j] <= banned]
            child.ranked = pool
            chosen = self._choose(pool, score, coverage, lift, child, taken_terms, taken_names)
            child.terms = chosen
            name = self._render(chosen) if chosen else self._fallback(child)
            name = _clean(name, p.max_name_chars)
            base, suffix = name, 2
            while name.lower() in taken_names:
                name = f"{base} ({suffix})"
                suffix += 1
            child.name = name
            taken_names.add(name.lower())
            taken_terms.extend(chosen)
        for child in children:
            # A term found (almost) only in one of the child's own children says what that part is:
            # the part may still use it ("Lenses & optics" over "Lens grinding").
            shared = [j for j in child.terms if not self._owned_by_one_child(child, j)]
            said = frozenset().union(*(self.index.words[j] for j in shared)) if shared else frozenset()
            self._name_children(child, banned | said)

    def _choose(self, pool: list[int], score: np.ndarray, coverage: np.ndarray, lift: np.ndarray, child: Node,
                taken_terms: list[int], taken_names: set[str]) -> list[int]:
        """The term columns of ``child``'s name."""
        p, index = self.params, self.index
        if not pool:
            return []
        top = float(score[pool[0]])
        open_terms = [j for j in pool if index.display[j].lower() not in taken_names
                      and self._similarity(j, taken_terms) < p.mmr_max_similarity]
        if not open_terms:
            open_terms = pool

        def mmr(j: int) -> float:
            return p.mmr_lambda * float(score[j]) / top - (1 - p.mmr_lambda) * self._similarity(j, taken_terms)

        broad = [j for j in open_terms if coverage[j] >= p.name_coverage - _TOLERANCE and lift[j] >= p.name_lift]
        if broad:
            first = max(broad, key=lambda j: (mmr(j), -j))
            longer = [j for j in open_terms if index.words[j] > index.words[first]
                      and score[j] >= p.longer_score * score[first]
                      and coverage[j] >= p.longer_coverage * coverage[first]]
            if longer:
                first = max(longer, key=lambda j: (score[j], -j))
            chosen = [first]
            if coverage[first] < p.second_term_below - _TOLERANCE:
                second = self._add_cover(open_terms, score, child, chosen, p.second_term_gain,
                                         p.second_term_score * float(score[first]), taken_terms)
                if second is not None:
                    chosen.append(second)
        else:
            chosen = []
            while len(chosen) < p.grab_bag_terms:
                pick = self._add_cover(open_terms, score, child, chosen, p.cover_gain, 0.0, taken_terms)
                if pick is None:
                    break
                chosen.append(pick)
                if self._covered(child, chosen) >= p.second_term_below - _TOLERANCE:
                    break
            if not chosen:
                chosen = [max(open_terms, key=lambda j: (mmr(j), -j))]
        child.coverage = self._covered(child, chosen)
        while len(chosen) > 1 and (sum(_content_words(index.display[j]) for j in chosen) > p.max_name_words
                                   or len(self._render(chosen)) > p.max_name_chars):
            chosen.pop()  # whole terms go, so a long name is never cut inside a word
        return chosen

    def _nameable(self, node: Node) -> np.ndarray:
        """How well each term names ``node``: 0 for words of the whole collection (for a level-1 node
        also for words of most of its documents found in every level-1 node)."""
        return self.top_nameable if node.level == 1 else self.nameable

    def _owned_by_one_child(self, node: Node, column: int) -> bool:
        """Whether one child of ``node`` holds ``owned_share`` of ``node``'s chunks with term ``column``."""
        if not node.children:
            return False
        counts = [int(self._hits(c, [column]).sum()) for c in node.children]
        return max(counts) >= self.params.owned_share * max(sum(counts), 1)

    def _covered(self, child: Node, chosen: Sequence[int]) -> float:
        """Document-weighted share of ``child``'s members holding at least one of ``chosen``."""
        hits = self._hits(child, chosen).any(axis=1)
        weight = document_weights(self.doc_of[child.members], self.params.document_decay)
        return float(weight @ hits / max(float(weight.sum()), _TOLERANCE))

    def _hits(self, child: Node, columns: Sequence[int]) -> np.ndarray:
        index = self.index
        out = np.zeros((len(child.members), len(columns)), dtype=bool)
        if not len(columns):
            return out
        position = np.full(index.n_terms, -1, dtype=np.int64)
        position[np.asarray(columns, dtype=np.int64)] = np.arange(len(columns))
        entries, lengths = index.row_entries(child.members)
        rows = np.repeat(np.arange(len(child.members)), lengths)
        cols = position[index.indices[entries]]
        hit = cols >= 0
        out[rows[hit], cols[hit]] = True
        return out

    def _add_cover(self, pool: list[int], score: np.ndarray, child: Node, chosen: list[int], min_gain: float,
                   min_score: float, taken_terms: list[int]) -> int | None:
        """The term adding the most distinctive new coverage to ``chosen`` (score x gain), or None."""
        p, index = self.params, self.index
        stems = frozenset().union(*(index.words[j] for j in chosen)) if chosen else frozenset()
        options = [j for j in pool if j not in chosen and not index.words[j] & stems and score[j] >= min_score
                   and self._nameable(child)[j] >= p.joined_nameability
                   and self._similarity(j, chosen) < p.mmr_max_similarity]
        if not options:
            return None
        weight = document_weights(self.doc_of[child.members], p.document_decay)
        weight = weight / max(float(weight.sum()), _TOLERANCE)
        hits = self._hits(child, [*chosen, *options])
        covered = hits[:, : len(chosen)].any(axis=1) if chosen else np.zeros(len(child.members), dtype=bool)
        best, best_value = None, 0.0
        for c, j in enumerate(options):
            gain = float(weight @ (hits[:, len(chosen) + c] & ~covered))
            value = float(score[j]) * gain * (1 - (1 - p.mmr_lambda) * self._similarity(j, taken_terms))
            if gain >= min_gain and value > best_value:
                best, best_value = j, value
        return best

    def _render(self, chosen: Sequence[int]) -> str:
        """Display forms joined (``A & B``), the first letter raised unless the text never writes that
        word with a capital (a command such as ``kubectl``) while it does write capitals."""
        name = join_names([self.index.display[j] for j in chosen])
        head = self.index.terms[chosen[0]].lstrip(PHRASE).split(" ", 1)[0]
        if name[:1].islower() and not self.index.ident[chosen[0]] and (
                head in self.index.capitalised or self.index.case_folded):
            name = name[:1].upper() + name[1:]
        return name

    def _fallback(self, node: Node) -> str:
        """The most common heading of the node's chunks, else :data:`FALLBACK_NAME`."""
        counts: dict[str, int] = {}
        for i in node.members:
            item = self.items[int(i)]
            for segment in heading_segments(item.title, item.file_name, self.params)[:1]:
                counts[segment] = counts.get(segment, 0) + 1
        if not counts:
            return FALLBACK_NAME
        return max(counts.items(), key=lambda kv: (kv[1], kv[0]))[0]

    # ------------------------------------------------------------------ descriptions

    def _describe(self, node: Node) -> None:
        p = self.params
        if (self.vectors is not None and len(node.children) > 1 and node.level < p.routed_description_levels
                and len(node.members) >= p.routed_min_chunks * len(node.children)
                and (self.wanted is None or any(self.wanted(c) for c in node.children))):
            self._describe_by_routing(node)
        else:
            for child in node.children:
                child.description = self.description(child)
        for child in node.children:
            self._describe(child)

    def description(self, node: Node) -> str:
        """Plain sentences: what the node is about beyond its name, its parts and example titles."""
        return " ".join(self._parts(node))

    def _parts(self, node: Node, more: int = 1, *, passages: int | None = None,
               space: np.ndarray | None = None) -> list[str]:
        """The sentences of a full description, in order (each may be missing); ``more`` times the
        usual number of example titles and passages (``passages`` times, when given, for the
        passages, chosen nearest the centre in ``space``)."""
        p, index = self.params, self.index
        said = set(_words_of(node.name))
        terms: list[str] = []
        for j in node.ranked:
            if j in node.terms or index.words[j] & said or index.terms[j].startswith(PHRASE):
                continue
            terms.append(index.display[j])
            said |= index.words[j]
            if len(terms) >= p.description_terms:
                break
        sentences = []
        if terms:
            sentences.append(f"About {_and(terms)}.")
        if node.children:
            names = [c.name for c in node.children[: p.description_children]]
            rest = len(node.children) - len(names)
            sentences.append(f"Covers {_and(names + ([f'{rest} more'] if rest else []))}.")
        # a title already said as the node's or a child's name would repeat it
        said_names = {n.casefold() for n in [node.name, *(c.name for c in node.children)]}
        titles = self._example_titles(node, p.description_titles * more, skip=said_names)
        if titles:
            sentences.append(f"Includes {_and(titles)}.")
        typical = self._typical_passages(node, p.description_passages * (passages or more), space)
        if typical:
            sentences.append("For example: " + " ".join(typical))
        return sentences

    def _variants(self, node: Node) -> list[str]:
        """Candidate descriptions: the full one first, each with one sentence left out, ones with two
        up to ``description_richest`` times the example titles and passages (more of the node's
        typical content), and one quoting that many passages nearest the node's centre as the
        embedder sees it (the space routing, and search, compare in). Only `_describe_by_routing`
        asks, when the chunks' vectors are known."""
        p = self.params
        parts = self._parts(node)
        out = [" ".join(parts)]
        if len(parts) > 1:
            out += [" ".join(parts[:i] + parts[i + 1:]) for i in range(len(parts))]
        out += [" ".join(self._parts(node, more=m)) for m in range(2, p.description_richest + 1)]
        out.append(" ".join(self._parts(node, passages=p.description_richest, space=self.vectors)))
        return list(dict.fromkeys(out))

    def _describe_by_routing(self, parent: Node) -> None:
        """Give the children of ``parent`` the descriptions (one variant each) under which the
        embedder routes most member chunks to their own child; ties go to the larger mean margin,
        then to the fuller description. Coordinate ascent from the full descriptions."""
        assert self.vectors is not None and self.embed is not None
        kids = parent.children
        options = [self._variants(c) for c in kids]
        texts = [f"{c.name} — {d}" if d else c.name for c, opts in zip(kids, options, strict=True) for d in opts]
        try:
            embedded = _normalise(np.asarray(self.embed(texts), dtype=np.float32))
        except KnowtologyError:  # the embedder is unavailable (a provider down, no key): the offline
            self.vectors = None  # build does not need it, so every node keeps its full description
            for child in kids:
                child.description = self.description(child)
            return
        rows = np.concatenate([c.members for c in kids])
        own = np.repeat(np.arange(len(kids)), [len(c.members) for c in kids])
        chunk = self.vectors[rows]
        sims, start = [], 0
        for opts in options:
            sims.append(chunk @ embedded[start:start + len(opts)].T)  # rows x variants of one child
            start += len(opts)
        pick = [0] * len(kids)
        at = np.arange(len(rows))
        half = self.doc_of[rows] % 2  # two halves of the documents: a change must help both

        def score(choice: Sequence[int]) -> np.ndarray:
            s = np.stack([sims[k][:, o] for k, o in enumerate(choice)], axis=1)
            mine = s[at, own]
            s[at, own] = -np.inf
            margin = mine - s.max(axis=1)
            right = (margin > 0).astype(np.float64)
            return np.array([[right[half == h].sum(), margin[half == h].sum()] for h in (0, 1)])

        def better(new: np.ndarray, old: np.ndarray) -> bool:
            """More chunks routed right without fewer in either half; at equal counts in both halves,
            a larger margin in both (a choice fitting one half's chunks only is noise)."""
            if (new[:, 0] >= old[:, 0]).all() and new[:, 0].sum() > old[:, 0].sum():
                return True
            return bool((new[:, 0] == old[:, 0]).all() and (new[:, 1] > old[:, 1]).all())

        best = score(pick)
        for _ in range(self.params.description_passes):
            moved = False
            for k in range(len(kids)):
                for o in range(len(options[k])):
                    if o == pick[k]:
                        continue
                    trial = pick[:k] + [o] + pick[k + 1:]
                    got = score(trial)
                    if better(got, best):
                        best, pick, moved = got, trial, True
            if not moved:
                break
        for child, opts, o in zip(kids, options, pick, strict=True):
            child.description = opts[o]

    def _typical_passages(self, node: Node, count: int, space: np.ndarray | None = None) -> list[str]:
        """Snippets of the chunks nearest the node's centre (from different documents; each a
        different passage, mostly letters); the centre in ``space``, by default the clustering features."""
        sub = (self.x if space is None else space)[node.members]
        closeness = sub @ _normalise(sub.sum(axis=0))
        out: list[str] = []
        docs = set()
        for r in np.argsort(-closeness, kind="stable"):
            row = int(node.members[r])
            if self.doc_of[row] in docs:
                continue
            item = self.items[row]
            snippet = make_snippet(item.text, item.title, self.params.passage_chars)
            if snippet.endswith((":", ";", ",")):  # it introduces what follows ("like this:"): it goes on
                snippet = snippet[:-1].rstrip() + "…"
            snippet = snippet if snippet.endswith((".", "…", "?", "!")) else snippet + "."
            shown = "".join(snippet.split())
            if (snippet in out or sum(ch.isalpha() for ch in shown) < self.params.passage_letter_share * len(shown)
                    or _in_words(snippet, self.params.passage_word_chars) < self.params.passage_word_share * len(shown)):
                continue
            docs.add(self.doc_of[row])
            out.append(snippet)
            if len(out) >= count:
                break
        return out

    def _example_titles(self, node: Node, count: int, skip: frozenset[str] | set[str] = frozenset()) -> list[str]:
        """Document titles (else file names) of the node's most typical chunks: those nearest its
        centre; titles in ``skip`` (case-folded) are passed over. Titles that read the same once cut
        to ``max_title_chars`` (parts of one series) are one example, not a repeated line."""
        p = self.params
        sub = self.x[node.members]
        closeness = sub @ _normalise(sub.sum(axis=0))
        titled: dict[str, float] = {}
        for i, score in zip(node.members, closeness, strict=True):
            item = self.items[int(i)]
            if item.title.strip():
                title = _TRAIL.split(item.title.strip(), maxsplit=1)[0].strip()
            elif item.file_name and item.file_name not in self.shared_files:
                title = item.file_name.replace("\\", "/").rsplit("/", 1)[-1]
            else:
                continue
            if title.casefold() in skip:
                continue
            shown = title if len(title) <= p.max_title_chars else title[: p.max_title_chars - 1].rstrip() + "…"
            titled[shown] = titled.get(shown, 0.0) + max(float(score), 0.0)
        return [t for t in sorted(titled, key=lambda t: (-titled[t], t)) if titled[t] > 0][:count]


def _in_words(text: str, longest: int) -> int:
    """Characters of ``text`` in words: whitespace-separated tokens that, without the punctuation
    around them, are letters (a hyphen or apostrophe inside) up to ``longest`` long; a token with a
    JSON key's or value's quote (``"Size":``) is data."""
    total = 0
    for token in text.split():
        core = token.strip(_AROUND_WORDS)
        if core and len(core) <= longest and _WORD.fullmatch(core) and not _DATA_QUOTE.search(token):
            total += len(token)
    return total


#: Punctuation a word may stand between in prose.
_AROUND_WORDS = ".,;:!?()…'\"‘’“”*"
_DATA_QUOTE = re.compile(r"\"[:,]")
_WORD = re.compile(r"[^\W\d_]+(?:['’-][^\W\d_]+)*")


def _and(parts: Sequence[str]) -> str:
    """``a, b and c``; ``a & b; c, d; and e`` when three or more parts include one that is itself a
    list (commas or "&"): the usual English rule, semicolons keep such parts apart."""
    parts = list(parts)
    if len(parts) == 1:
        return parts[0]
    if len(parts) > 2 and any(_LISTED.search(part) for part in parts):
        return "; ".join(parts[:-1]) + "; and " + parts[-1]
    return ", ".join(parts[:-1]) + " and " + parts[-1]


#: A part that is itself a list: a comma or an ampersand.
_LISTED = re.compile(r",|&")


def _words_of(name: str) -> set[str]:
    return {t.key for phrase in phrases(name) for t in phrase if t.key}


def _content_words(display: str) -> int:
    return sum(1 for phrase in phrases(display) for t in phrase if t.key)


def _clean(name: str, limit: int) -> str:
    """One line without slashes, at most ``limit`` characters: a longer name (one long heading) is
    cut at a word boundary and ends with an ellipsis."""
    name = re.sub(r"\s+", " ", _SLASH.sub(" ", name)).strip()
    if len(name) > limit:
        cut = name[: limit - 1]
        name = (cut.rsplit(" ", 1)[0] if " " in cut else cut).rstrip(" ,;&-") + "…"
    return name or FALLBACK_NAME


def _set_paths(node: Node) -> None:
    for child in node.children:
        child.path = f"{node.path}/{child.name}" if node.path else child.name
        _set_paths(child)


def name_nodes(root: Node, index: TermIndex, items: Sequence[NamedItem], x: np.ndarray, doc_of: np.ndarray,
               params: TreeParams = DEFAULT_PARAMS, *, vectors: np.ndarray | None = None,
               embed: EmbedTexts | None = None, wanted: Callable[[Node], bool] | None = None) -> None:
    """Name and describe every node under ``root`` (its structure fixed) and set the paths.

    The children of each node are named together, largest first, from the terms of :mod:`.terms`.
    Each child's terms are scored by class-based TF-IDF against its siblings and by how well the term
    reads as a name; a name must cover at least half the child. The best term is chosen by maximal
    marginal relevance against the names its siblings already have, replaced by a longer term
    containing its words when that scores nearly as well, and joined by a second term when the
    first leaves much of the child uncovered. A grab-bag child is named by the few distinctive terms
    that together cover it. Words of an ancestor's name and words found in most documents never name
    a node. A description says in plain sentences what a node holds: its next distinctive terms, its
    children, the titles of its most typical members and a passage of its most typical chunk.

    With ``vectors`` (the chunks' embeddings) and ``embed`` (the same embedder, for texts as
    queries), each top-level sibling group's descriptions are chosen among a few variants of those
    parts: the combination under which the embedder sends most member chunks to their own node
    rather than a sibling. Every threshold is in :class:`.params.TreeParams`.
    """
    Namer(index, items, x, doc_of, params, vectors=vectors, embed=embed, wanted=wanted).name(root)
