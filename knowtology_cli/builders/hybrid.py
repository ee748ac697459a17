"""Hybrid tree builder: the offline clustering makes the tree, the LLM only names and describes its nodes.

Calls and tokens grow with the nodes, not the chunks; calls are logged and replayed when a prompt repeats.
"""

from __future__ import annotations

import math
import re
import time
import uuid
from collections import Counter
from collections.abc import Callable, Iterable, Mapping, Sequence
from dataclasses import dataclass, field
from typing import TYPE_CHECKING, Any

import numpy as np

from ..errors import BuildError
from ..llm.base import LLMContextOverflowError, LLMUnreachableError
from ..llm.limits import adopt_context_limit, fit_limits
from ..models import Assignment, BuildReport, Category, TreeReply
from ..textutil import counted
from .calls import CallLog, CallOutcome, CallPool, answered, check_server, log_totals, prompt_digest, run_call
from .cluster import ClusterItem, build_cluster_tree
from .names import origins_note, tree_name_check
from .prompts import (
    NAME_CATEGORIES,
    NAMES_MARKERS,
    NAMES_PLACEHOLDERS,
    NAMES_PROMPT_VERSION,
    NAMES_REPLY_SCHEMA,
    NAMES_SCHEMA_NAME,
    NamingGroup,
    NamingNode,
    naming_messages,
    render_naming_group,
)
from .runner import apply_reply, build_report, pending_work, run_cluster_build
from .snippets import make_snippet
from .validate import NameCheck, clean_description, clean_name, name_key

if TYPE_CHECKING:
    from ..llm.base import LLMClient
    from .context import BuildStores

ProgressFn = Callable[[str, int, int], None]
MessageFn = Callable[[str], None]


@dataclass(frozen=True)
class NamingParams:
    """Knobs of the naming calls; each value says why.

    Attributes:
        samples_per_node: passages shown per node: enough to see what unites them, few enough that
            a level of siblings fits a small model's context.
        sample_chars: each passage is an extractive one-line snippet of about this many characters.
        max_nodes_per_call: nodes named in one call; small models lose track of long id lists.
        output_tokens_per_node: a name, a 15-word description and the JSON around them.
        context_margin: share of the context window kept free (tokenizers differ between models).
        material_change: a node is re-described after an incremental build when this share of its
            members (at least one chunk) arrived or left — a fifth of a node changes what it is about
            often enough to be worth one line of output, less rarely does.
        routing_slack: an LLM label may send up to this share more of its node's passages to a sibling
            than the offline label does (a name people read easily is worth a little); beyond it the
            label no longer says where the passages live, and is refused.
    """

    samples_per_node: int = 4
    sample_chars: int = 120
    max_nodes_per_call: int = 16
    output_tokens_per_node: int = 60
    context_margin: float = 0.1
    material_change: float = 0.2
    routing_slack: float = 0.1


@dataclass
class NodeView:
    """A node to name: its current path, name, description, parent path, members and child paths."""

    path: str
    name: str
    description: str
    parent: str
    members: list[str] = field(default_factory=list)
    children: list[str] = field(default_factory=list)


@dataclass
class Named:
    """The final name and description of a node and where the name came from (llm, llm_reasked, offline)."""

    name: str
    description: str
    origin: str


def tree_views(categories: Iterable[Category], mapping: Mapping[str, str]) -> dict[str, NodeView]:
    """Nodes from category paths (parents first) and ``chunk_id -> leaf path``; members count recursively."""
    views: dict[str, NodeView] = {}
    for cat in sorted(categories, key=lambda c: c.path.count("/")):
        parts = cat.path.split("/")
        for i in range(1, len(parts) + 1):
            path = "/".join(parts[:i])
            if path not in views:
                parent = "/".join(parts[: i - 1])
                views[path] = NodeView(path, parts[i - 1], "", parent)
                if parent in views:
                    views[parent].children.append(path)
        views[cat.path].description = cat.description
    for chunk_id, leaf in mapping.items():
        parts = leaf.split("/")
        for i in range(1, len(parts) + 1):
            node = views.get("/".join(parts[:i]))
            if node is not None:
                node.members.append(chunk_id)
    return views


def changed_nodes(before: Mapping[str, str], after: Mapping[str, str], share: float) -> set[str]:
    """Paths whose membership changed materially between two ``chunk_id -> leaf path`` mappings.

    A node (leaf or inner) is changed when the chunks that arrived or left number at least
    ``max(1, share × its size before)``; a node that did not exist before is changed.
    """

    def members(mapping: Mapping[str, str]) -> dict[str, set[str]]:
        out: dict[str, set[str]] = {}
        for chunk_id, leaf in mapping.items():
            parts = leaf.split("/")
            for i in range(1, len(parts) + 1):
                out.setdefault("/".join(parts[:i]), set()).add(chunk_id)
        return out

    old, new = members(before), members(after)
    changed = set()
    for path, now in new.items():
        was = old.get(path)
        if was is None:
            changed.add(path)
        elif len(now ^ was) >= max(1, math.ceil(share * len(was))):
            changed.add(path)
    return changed


def naming_check(check: NameCheck) -> NameCheck:
    """A copy of a tree-building :class:`NameCheck` that knows the naming prompt's placeholders and text."""
    out = NameCheck.__new__(NameCheck)
    out.__dict__.update(check.__dict__)
    out.placeholders = set(check.placeholders) | {p.casefold() for p in NAMES_PLACEHOLDERS}
    out.markers = tuple(check.markers) + NAMES_MARKERS
    extra = NameCheck(instructions=NAME_CATEGORIES, rules=check.rules)
    out.instruction_runs = set(check.instruction_runs) | extra.instruction_runs
    return out


def collection_check(stores: BuildStores, collection: str, chunks: Sequence[Any]) -> NameCheck:
    """The :class:`NameCheck` of naming calls: the collection's chunk ids, files and document titles."""
    meta = {c.chunk_id: (c.doc_id, c.file_name) for c in chunks}
    titles = {c.chunk_id: c.title for c in chunks}
    return naming_check(tree_name_check(stores, collection, meta, meta, titles))


class NodeNamer:
    """Names and describes given nodes with batched, cached, validated LLM calls (see the module).

    Args:
        llm: the client (its profile, after ``fit_limits``, sizes the calls).
        log: where calls are logged and replayed from.
        check: validates the names (``NameCheck`` of the collection, knowing the naming prompt).
        texts: ``chunk_id -> (text, title, doc_id)`` of the members.
        vectors: ``chunk_id -> unit vector`` of the members (to pick representative passages).
        embed: the collection's embedder; when given, a label (``name — description``) must tell its
            node's passages from its siblings' about as well as the offline label (:meth:`_fit`).
    """

    def __init__(self, llm: LLMClient, log: CallLog, check: NameCheck, texts: Mapping[str, tuple[str, str, str]],
                 vectors: Mapping[str, np.ndarray], *, params: NamingParams = NamingParams(), concurrency: int = 1,
                 embed: Callable[[Sequence[str]], np.ndarray] | None = None,
                 message: MessageFn = lambda _m: None, progress: ProgressFn = lambda _s, _d, _t: None) -> None:
        self.embed = embed
        self.llm = llm
        self.log = log
        self.check = check
        self.texts = texts
        self.vectors = vectors
        self.params = params
        self.concurrency = max(1, concurrency)
        self.message = message
        self.progress = progress
        self.origins: Counter[str] = Counter()
        self.rejected: list[tuple[str, str]] = []
        self.outcomes: list[CallOutcome] = []
        self.cached = 0
        self.failed = 0
        self.changed = 0  # LLM names that differ from the draft (offline) name
        #: nodes left with their offline name because their naming failed (the call failed, or the name
        #: was missing, invalid or a sibling's after the re-ask): path → why; a name refused only
        #: because the offline label tells the node's passages apart better is no failure
        self.fallbacks: dict[str, str] = {}
        self.judged: set[str] = set()
        #: nodes whose naming failed before: a call naming one is sent even when the log holds its prompt
        #: (the logged reply is the one that was refused)
        self.retry: set[str] = set()

    # ------------------------------------------------------------------------------ planning
    def samples(self, node: NodeView) -> tuple[str, ...]:
        """A few member passages nearest the node's centroid, distinct documents first."""
        ids = [i for i in node.members if i in self.vectors and i in self.texts]
        if not ids:
            return ()
        matrix = np.stack([self.vectors[i] for i in ids])
        centroid = matrix.mean(axis=0)
        order = np.argsort(-(matrix @ centroid), kind="stable")
        picked: list[str] = []
        docs: set[str] = set()
        for rank in order:  # first pass: one per document
            cid = ids[int(rank)]
            if self.texts[cid][2] not in docs:
                picked.append(cid)
                docs.add(self.texts[cid][2])
            if len(picked) == self.params.samples_per_node:
                break
        for rank in order:
            if len(picked) >= self.params.samples_per_node:
                break
            if ids[int(rank)] not in picked:
                picked.append(ids[int(rank)])
        return tuple(make_snippet(self.texts[c][0], self.texts[c][1], max_chars=self.params.sample_chars)
                     for c in picked)

    def _budget(self, nodes: int) -> tuple[int, int]:
        """(input tokens a call may use, max output tokens) for ``nodes`` nodes."""
        profile = self.llm.profile
        out = min(profile.max_output_tokens, 100 + nodes * self.params.output_tokens_per_node)
        usable = math.floor(profile.context_window * (1 - self.params.context_margin))
        system = self.llm.count_tokens(NAME_CATEGORIES) + 400  # roles, schema framing
        return usable - system - out, out

    def pack(self, groups: Sequence[NamingGroup]) -> list[list[NamingGroup]]:
        """Groups packed into calls by node count and tokens; a group too big for one call is cut."""
        calls: list[list[NamingGroup]] = []
        current: list[NamingGroup] = []
        size = tokens = 0
        pieces: list[NamingGroup] = []
        cap = self.params.max_nodes_per_call
        for g in groups:
            for start in range(0, len(g.nodes), cap):
                pieces.append(NamingGroup(g.parent, g.nodes[start:start + cap], g.taken))
        for g in pieces:
            g_tokens = self.llm.count_tokens(render_naming_group(g)) + 2
            room, _ = self._budget(size + len(g.nodes))
            if current and (size + len(g.nodes) > cap or tokens + g_tokens > room):
                calls.append(current)
                current, size, tokens = [], 0, 0
            current.append(g)
            size += len(g.nodes)
            tokens += g_tokens
        if current:
            calls.append(current)
        return calls

    def plan(self, views: Mapping[str, NodeView], targets: Iterable[str]) -> list[tuple[int, int, int]]:
        """``(nodes, input tokens, output tokens)`` per call the naming of ``targets`` would make (no call)."""
        out = []
        for level_groups in self._levels(views, set(targets), {}):
            for call in self.pack(level_groups):
                system, user = naming_messages(call)
                nodes = sum(len(g.nodes) for g in call)
                out.append((nodes, self.llm.count_tokens(system + user) + 400,
                            nodes * self.params.output_tokens_per_node))
        return out

    def _levels(self, views: Mapping[str, NodeView], targets: set[str],
                final: Mapping[str, Named]) -> Iterable[list[NamingGroup]]:
        depth = max((p.count("/") + 1 for p in targets), default=0)
        for level in range(1, depth + 1):
            parents: dict[str, list[str]] = {}
            for path in sorted(targets):
                if path.count("/") + 1 == level:
                    parents.setdefault(views[path].parent, []).append(path)
            groups = []
            for parent, paths in parents.items():
                siblings = [c for c in (views[parent].children if parent else
                                        [p for p in views if "/" not in p]) if c not in paths]
                taken = tuple(final[s].name if s in final else views[s].name for s in siblings)
                nodes = tuple(
                    NamingNode(node_id=path, draft=views[path].name, size=len(views[path].members),
                               samples=self.samples(views[path]),
                               children=tuple(views[c].name for c in views[path].children))
                    for path in paths)
                groups.append(NamingGroup(self._parent_name(parent, views, final), nodes, taken))
            yield groups

    @staticmethod
    def _parent_name(parent: str, views: Mapping[str, NodeView], final: Mapping[str, Named]) -> str:
        if not parent:
            return "(the whole collection)"
        return final[parent].name if parent in final else views[parent].name

    # ------------------------------------------------------------------------------ naming
    def name(self, views: Mapping[str, NodeView], targets: Iterable[str]) -> dict[str, Named]:
        """Final name and description of every target path, top level first (see the module)."""
        final: dict[str, Named] = {}
        targets = {t for t in targets if t in views}
        done = 0
        for groups in self._levels(views, targets, final):
            answers, refused = self._round(groups, views, final, None)
            if refused:
                retry_groups = [NamingGroup(g.parent, tuple(n for n in g.nodes if n.node_id in refused),
                                            tuple(dict.fromkeys(
                                                (*g.taken, *(answers[n.node_id][0] for n in g.nodes
                                                             if n.node_id in answers)))))
                                for g in groups]
                retry_groups = [g for g in retry_groups if g.nodes]
                again, refused_again = self._round(retry_groups, views, final, refused)
                for path, value in again.items():
                    answers[path] = (*value[:2], "llm_reasked")
                refused = refused_again
            for g in groups:
                for node in g.nodes:
                    path = node.node_id
                    view = views[path]
                    if path in answers and path not in refused:
                        name, description, origin = answers[path]
                        final[path] = Named(name, description or view.description, origin)
                        self.changed += int(name_key(name) != name_key(view.name))
                    else:
                        final[path] = Named(view.name, view.description, "offline")
                        said, why = refused.get(path, ("", "no usable name came back"))
                        if path not in self.judged:  # the naming failed (not: the offline label is better)
                            self.fallbacks[path] = f"{said!r} {why}" if said else why
                self._dedupe(g, views, final)
                for node in g.nodes:
                    self.origins[final[node.node_id].origin] += 1
                    if final[node.node_id].origin != "offline":
                        self.fallbacks.pop(node.node_id, None)
                    elif node.node_id not in self.judged:
                        self.fallbacks.setdefault(node.node_id, "its name was a sibling's")
                done += len(g.nodes)
                self.progress("naming", done, len(targets))
        return final

    def _round(self, groups: Sequence[NamingGroup], views: Mapping[str, NodeView], final: Mapping[str, Named],
               feedback: dict[str, tuple[str, str]] | None) -> tuple[dict[str, tuple[str, str, str]],
                                                                       dict[str, tuple[str, str]]]:
        """One round of calls for ``groups``: (accepted ``path -> (name, description, origin)``, refused).

        A call cut at the output limit or refused as longer than the context is split in halves
        (after adopting the context the server stated) until it fits or holds one node.
        """
        self.judged = set()  # refused by _fit: a sound name the offline one serves better
        pending = self.pack(groups)
        answered: list[tuple[list[NamingGroup], dict[str, str], dict[str, Any] | None]] = []
        while pending:
            jobs = []
            for call in pending:
                ids = {n.node_id: str(k + 1) for k, n in enumerate(n for g in call for n in g.nodes)}
                wire = [NamingGroup(g.parent, tuple(NamingNode(ids[n.node_id], n.draft, n.size, n.samples,
                                                               n.children) for n in g.nodes), g.taken) for g in call]
                wire_feedback = {ids[p]: v for p, v in (feedback or {}).items() if p in ids}
                system, user = naming_messages(wire, feedback=wire_feedback or None)
                jobs.append((call, {v: k for k, v in ids.items()}, system, user))
            pending = []
            for (call, back, _s, _u), (data, outcome) in zip(jobs, self._send(jobs, feedback is not None)):
                nodes = [n for g in call for n in g.nodes]
                if data is None and outcome is not None and outcome.status in ("truncated", "overflow") \
                        and len(nodes) > 1:
                    if outcome.status == "overflow":
                        adopt_context_limit(self.llm, outcome.error.context_limit
                                            if isinstance(outcome.error, LLMContextOverflowError) else None)
                    pending.extend(_halves(call))
                    continue
                answered.append((call, back, data))
        accepted: dict[str, tuple[str, str, str]] = {}
        refused: dict[str, tuple[str, str]] = {}
        for call, back, data in answered:
            got: dict[str, tuple[str, str]] = {}
            for item in (data or {}).get("names") or []:
                if not isinstance(item, dict) or str(item.get("id", "")).strip() not in back:
                    continue
                got.setdefault(back[str(item["id"]).strip()], (str(item.get("name") or ""),
                                                               str(item.get("description") or "")))
            for g in call:
                used = {name_key(t) for t in g.taken}
                for node in g.nodes:
                    path = node.node_id
                    if path not in got:
                        refused[path] = ("", "it was missing from your reply" if data is not None
                                         else "the call failed")
                        continue
                    raw_name, raw_desc = got[path]
                    name = clean_name(raw_name)
                    reason = self._problem(name, views[path], views, final, used)
                    if reason:
                        refused[path] = (name, reason)
                        self.rejected.append((name, reason))
                        continue
                    used.add(name_key(name))
                    accepted[path] = (name, self._description(raw_desc, node, views[path]), "llm")
        self._fit(accepted, refused, groups, views)
        return accepted, refused

    def _description(self, raw: str, node: NamingNode, view: NodeView) -> str:
        """The LLM's description, or "" (the offline one stays) when it says nothing of its own."""
        desc = clean_description(raw)
        if not desc or self.check.description_problem(desc) or self.check.copies_passage(desc, node.samples):
            return ""
        parts = {p.strip().casefold() for p in re.split(r"[;,]", desc) if p.strip()}
        if len(parts) >= 2 and parts <= {c.rsplit("/", 1)[-1].casefold() for c in view.children}:
            return ""  # the subcategory list of the prompt, not a description
        return desc

    def _fit(self, accepted: dict[str, tuple[str, str, str]], refused: dict[str, tuple[str, str]],
             groups: Sequence[NamingGroup], views: Mapping[str, NodeView]) -> None:
        """Keep only labels that tell a node's passages from its siblings' about as well as the offline one.

        The name alone must not sit nearer a sibling's passages (centroid) than its own where the draft
        name does not. Then the label (``name — description``) is tried with the LLM's description, then
        with the offline one; it fails when it sits nearer a sibling's passages than its own while the
        offline label does not, or when, sending the node's passages to the nearest sibling label (the
        siblings keeping theirs), more than ``params.routing_slack`` fewer land on the node than with
        the offline label. A name with no fitting label is refused (and asked for again).
        """
        if self.embed is None:
            return
        for g in groups:
            paths = [n.node_id for n in g.nodes if n.node_id in accepted]
            parent = views[paths[0]].parent if paths else ""
            siblings = views[parent].children if parent else [p for p in views if "/" not in p]
            paths = [p for p in paths if p in siblings]
            if len(siblings) < 2 or not paths:
                continue
            centroids = []
            for sib in siblings:
                rows = [self.vectors[c] for c in views[sib].members if c in self.vectors]
                mean = np.mean(rows, axis=0) if rows else None
                centroids.append(mean / (np.linalg.norm(mean) or 1.0) if mean is not None else None)
            dim = next(c.shape[0] for c in centroids if c is not None)
            centre = np.stack([c if c is not None else np.zeros(dim, dtype=np.float32) for c in centroids])
            texts = [f"{views[p].name} — {views[p].description}" for p in siblings]
            for p in paths:
                name, desc = accepted[p][0], accepted[p][1]
                texts += [name, views[p].name, f"{name} — {desc or views[p].description}",
                          f"{name} — {views[p].description}"]
            vecs = np.asarray(self.embed(texts), dtype=np.float32)
            offline, rest = vecs[: len(siblings)], vecs[len(siblings):]
            for k, path in enumerate(paths):
                own = siblings.index(path)
                name_vec, draft_vec, own_label, offline_desc_label = rest[4 * k: 4 * k + 4]
                near = int(np.argmax(centre @ name_vec))
                if near != own and int(np.argmax(centre @ draft_vec)) == own:
                    reason = f"names the passages of its sibling {views[siblings[near]].name!r} better than its own"
                else:
                    options = [(accepted[path][1], own_label)] + ([("", offline_desc_label)] if accepted[path][1] else [])
                    reason = None
                    for desc, label in options:
                        reason = self._misleads(path, label, siblings, views, offline, centre)
                        if reason is None:
                            accepted[path] = (accepted[path][0], desc, accepted[path][2])
                            break
                if reason:
                    name = accepted.pop(path)[0]
                    refused[path] = (name, reason)
                    self.rejected.append((name, reason))
                    self.judged.add(path)

    def _misleads(self, path: str, label: np.ndarray, siblings: list[str], views: Mapping[str, NodeView],
                  offline: np.ndarray, centre: np.ndarray) -> str | None:
        """Why ``label`` would send ``path``'s passages to its siblings more than the offline label, or None."""
        rows = [self.vectors[c] for c in views[path].members if c in self.vectors]
        if not rows:
            return None
        members = np.stack(rows)
        own = siblings.index(path)
        nearest = int(np.argmax(centre @ label))
        if nearest != own and int(np.argmax(centre @ offline[own])) == own:
            return (f"fits the passages of its sibling {views[siblings[nearest]].name!r} better than its own; "
                    "name what sets its passages apart")
        share_offline = float(np.mean(np.argmax(members @ offline.T, axis=1) == own))
        labels = offline.copy()
        labels[own] = label
        share_llm = float(np.mean(np.argmax(members @ labels.T, axis=1) == own))
        if share_llm < share_offline - self.params.routing_slack:
            return (f"sends {1 - share_llm:.0%} of its passages to a sibling (its draft {1 - share_offline:.0%}); "
                    "name and describe what sets them apart")
        return None

    def _problem(self, name: str, view: NodeView, views: Mapping[str, NodeView], final: Mapping[str, Named],
                 used: set[str]) -> str | None:
        if not name:
            return "is empty"
        if "/" in name:
            return "contains '/'"
        reason = self.check.segment_problem(name) or self.check.title_problem(name, view.members)
        if reason:
            return reason
        parent = self._parent_name(view.parent, views, final) if view.parent else ""
        if parent and name_key(name) == name_key(parent):
            return "repeats its parent's name"
        if name_key(name) in used:
            return "is already the name of a sibling"
        return None

    def _send(self, jobs: Sequence[tuple[Any, Any, str, str]],
              reask: bool) -> list[tuple[dict[str, Any] | None, CallOutcome | None]]:
        """Run the calls of one round (cached ones from the log), in parallel up to ``concurrency``."""
        results: list[tuple[dict[str, Any] | None, CallOutcome | None]] = [(None, None)] * len(jobs)
        todo = []
        for k, (call, _back, system, user) in enumerate(jobs):
            h = prompt_digest(NAMES_PROMPT_VERSION, self.llm.spec, NAMES_SCHEMA_NAME, system, user)
            retried = any(n.node_id in self.retry for g in call for n in g.nodes)
            cached = None if retried else self.log.cached(h)
            if cached is not None:
                self.cached += 1
                results[k] = (cached, None)
                continue
            nodes = sum(len(g.nodes) for g in call)
            todo.append((k, h, system, user, self._budget(nodes)[1]))

        def one(item: tuple[int, str, str, str, int]) -> tuple[int, CallOutcome]:
            k, h, system, user, max_out = item
            return k, run_call(self.llm, kind="rename" if reask else "name", prompt_hash=h, system=system, user=user,
                               schema=NAMES_REPLY_SCHEMA, schema_name=NAMES_SCHEMA_NAME, max_output_tokens=max_out,
                               validate=_check_names_reply)

        with CallPool(self.concurrency, "kt-name") as pool:
            futures = [pool.submit(one, item) for item in todo]
            logged: set[int] = set()
            try:
                for future in futures:
                    k, outcome = future.result()
                    self.log.record(outcome)
                    logged.add(k)
                    if isinstance(outcome.error, LLMUnreachableError):  # nothing else can be asked of it
                        raise outcome.error
                    self.outcomes.append(outcome)
                    results[k] = (outcome.data if outcome.ok else None, outcome)
                    if not outcome.ok:
                        self.failed += 1
                        self.message(f"naming call failed ({outcome.status}): {str(outcome.error)[:200]}")
                    u = (sum(o.usage.input_tokens for o in self.outcomes),
                         sum(o.usage.output_tokens for o in self.outcomes))
                    self.message(f"naming: {len(self.outcomes)} calls ({self.cached} cached) · {u[0]:,} tokens in / "
                                 f"{u[1]:,} out")
            except BaseException:  # interrupted: log the calls that came back, so a re-run is not charged again
                for k, outcome in answered(futures):
                    if k not in logged:
                        self.log.record(outcome)
                raise
        return results

    def _dedupe(self, group: NamingGroup, views: Mapping[str, NodeView], final: dict[str, Named]) -> None:
        """Siblings never share a name: a clash falls back to the offline name, then gets a number."""
        seen = {name_key(t) for t in group.taken}
        for node in group.nodes:
            named = final[node.node_id]
            if name_key(named.name) in seen and named.origin != "offline":
                view = views[node.node_id]
                named = final[node.node_id] = Named(view.name, view.description, "offline")
            base, n = named.name, 2
            while name_key(named.name) in seen:
                named.name = f"{base} ({n})"
                n += 1
            seen.add(name_key(named.name))


def _halves(call: Sequence[NamingGroup]) -> list[list[NamingGroup]]:
    """A call's nodes in two calls of about half the nodes each (groups kept together where they fit)."""
    nodes = [(g, n) for g in call for n in g.nodes]
    half = (len(nodes) + 1) // 2
    out = []
    for part in (nodes[:half], nodes[half:]):
        groups: dict[int, list[NamingNode]] = {}
        owner: dict[int, NamingGroup] = {}
        for g, n in part:
            groups.setdefault(id(g), []).append(n)
            owner[id(g)] = g
        out.append([NamingGroup(owner[k].parent, tuple(v), owner[k].taken) for k, v in groups.items()])
    return out


def _check_names_reply(data: dict[str, Any]) -> None:
    if not isinstance(data.get("names"), list):
        raise ValueError("reply has no 'names' list")


# ------------------------------------------------------------------------------- applying names
def renamed_paths(views: Mapping[str, NodeView], named: Mapping[str, Named]) -> dict[str, str]:
    """``old path -> new path`` of every node once ``named`` nodes take their new names."""
    out: dict[str, str] = {}
    for path in sorted(views, key=lambda p: p.count("/")):
        view = views[path]
        name = named[path].name if path in named else view.name
        out[path] = f"{out[view.parent]}/{name}" if view.parent else name
    return out


def rewrite_tree(stores: BuildStores, collection: str, named: Mapping[str, Named],
                 fallbacks: Mapping[str, str] | None = None) -> None:
    """Give ``named`` nodes their new names and descriptions, in one transaction over the whole tree.

    ``fallbacks`` (path → why) are the named nodes left with the offline name because the LLM's
    failed; other named nodes lose such a mark, the rest keep theirs.
    """
    nodes = stores.tree.nodes(collection)
    mappings = stores.tree.mappings(collection)
    views = tree_views([Category(path=n.path, description=n.description) for n in nodes],
                       {m.chunk_id: m.path for m in mappings})
    new_path = renamed_paths(views, named)
    hashes = stores.tree.mapping_hashes(collection)
    categories = [Category(path=new_path[p], description=named[p].description if p in named else v.description)
                  for p, v in sorted(views.items(), key=lambda kv: kv[0].count("/"))]
    moved = [(m.model_copy(update={"path": new_path[m.path]}), hashes.get(m.chunk_id, "")) for m in mappings]
    marks = {n.path: n.name_fallback for n in nodes if n.name_fallback and n.path not in named}
    marks.update((p, why) for p, why in (fallbacks or {}).items() if p in named)
    stores.tree.apply(collection, categories, moved, replace=True,
                      fallbacks={new_path[p]: why for p, why in marks.items() if p in new_path})


# ------------------------------------------------------------------------------- the builder
class HybridTreeBuilder:
    """``--builder hybrid``: offline structure, LLM names.

    Level by level from the top, sibling nodes are named together (each with its offline name as a
    draft, its size, a few member passages and its subcategories' drafts) under their parent's final
    name, several sibling groups packed into one call up to the model's limits. Each name is
    validated like every LLM name (``validate.NameCheck``); refused or missing names are asked once
    more with the reason, then the node keeps its offline name. The same step re-describes nodes
    whose membership changed materially after an incremental build.
    """

    def __init__(self, stores: BuildStores, collection: str, llm: LLMClient, *, concurrency: int = 1,
                 use_cache: bool = True, params: NamingParams = NamingParams(),
                 progress: ProgressFn | None = None, message: MessageFn | None = None) -> None:
        self.stores = stores
        self.collection = collection
        self.llm = llm
        self.concurrency = max(1, concurrency)
        self.use_cache = use_cache
        self.params = params
        self.progress = progress or (lambda _s, _d, _t: None)
        self.message = message or (lambda _m: None)
        self.build_id = uuid.uuid4().hex[:12]

    def run(self, *, rebuild: bool = False, dry_run: bool = False) -> BuildReport:
        """Build (or extend and re-describe) the tree."""
        started = time.perf_counter()
        pending, orphans, hashes = pending_work(self.stores, self.collection)
        info = self.stores.tree.get_collection(self.collection)
        nodes = self.stores.tree.nodes(self.collection)
        has_tree = bool(nodes)
        named_before = info is not None and info.builder in ("hybrid", "llm")
        retry = set() if rebuild else {n.path for n in nodes if n.name_fallback}  # namings that failed before
        if has_tree and not rebuild and not pending and not orphans and named_before and not retry:
            return self._finish(started, ["tree is up to date; no calls"], dry_run=dry_run)
        full = rebuild or not has_tree
        if full and not dry_run:
            # a stopped server: one line now, not after the clustering
            check_server(self.llm, self.stores.tree, self.collection, use_cache=self.use_cache, message=self.message)
        limits_note = fit_limits(self.llm)
        chunks, vectors = self._load()
        texts = {c.chunk_id: (c.text, c.title, c.doc_id or c.file_name) for c in chunks}
        check = collection_check(self.stores, self.collection, chunks)
        log = CallLog(self.stores.tree, self.collection, self.build_id, use_cache=self.use_cache)
        namer = NodeNamer(self.llm, log, check, texts, vectors, params=self.params, concurrency=self.concurrency,
                          embed=self.stores.embedder_for(self.collection).embed_documents, message=self.message,
                          progress=self.progress)
        if full:
            self.message(f"clustering {counted(len(chunks), 'chunk')}…")
            reply = self._cluster(chunks, vectors)
            views = tree_views(reply.categories, {a.chunk_id: a.path for a in reply.assignments})
            targets = set(views)
            what = f"{'would name' if dry_run else 'named'} the {len(views)} nodes of the offline tree"
        else:
            before = {m.chunk_id: m.path for m in self.stores.tree.mappings(self.collection)}
            if dry_run:
                views, targets = self._current_views(), set(retry)
                what = f"place {counted(len(pending), 'chunk')} offline, then re-describe the nodes that change"
            else:
                run_cluster_build(self.stores, self.collection, rebuild=False, dry_run=False, progress=self.progress,
                                  message=self.message)
                retry = {n.path for n in self.stores.tree.nodes(self.collection) if n.name_fallback}  # paths now
                after = {m.chunk_id: m.path for m in self.stores.tree.mappings(self.collection)}
                views = self._current_views()
                targets = set(views) if not named_before else changed_nodes(before, after,
                                                                            self.params.material_change)
                targets |= retry
                what = (f"placed {len(pending)} new or changed chunks offline, removed {len(orphans)}; "
                        f"{len(targets - retry)} nodes changed materially (≥{self.params.material_change:.0%} of "
                        "members)" if named_before else f"named the {len(views)} nodes of the existing offline tree")
            if retry:
                what += (f"; {'would ask' if dry_run else 'asked'} the model again for the {len(retry)} names "
                         "that fell back to the offline builder's")
        namer.retry = retry
        if targets and not full and not dry_run:
            check_server(self.llm, self.stores.tree, self.collection, use_cache=self.use_cache, message=self.message)
        plan = namer.plan(views, targets)
        plan_note = (f"plan: {len(targets)} nodes to name in {len(plan)} calls "
                     f"(≤{self.params.max_nodes_per_call} nodes per call, level by level) with {self.llm.spec}")
        if dry_run:
            tin = sum(p[1] for p in plan)
            tout = sum(p[2] for p in plan)
            notes = [what, plan_note, limits_note, "dry run: estimated tokens and cost at list price; re-asks not "
                     "included; nothing was called", _spent_note(self.stores, self.collection)]
            return self._finish(started, notes, dry_run=True, calls=len(plan), input_tokens=tin, output_tokens=tout,
                                cost=self.llm.profile.cost(tin, tout))
        self.message(plan_note)
        self.message(limits_note)
        named = namer.name(views, targets) if targets else {}
        if targets and namer.outcomes and all(not o.ok for o in namer.outcomes) and not namer.cached:
            last = namer.outcomes[-1].error
            raise BuildError(
                f"no naming call succeeded ({len(namer.outcomes)} failed; last error: {str(last)[:300]}); "
                + ("the tree was kept as it was" if full else "new chunks were placed offline, names kept"),
                hint=(last.hint if last is not None else None) or "check the provider and run `kt build` again")
        if full:
            new_path = renamed_paths(views, named)
            categories = [Category(path=new_path[p], description=named[p].description if p in named else v.description)
                          for p, v in sorted(views.items(), key=lambda kv: kv[0].count("/"))]
            assignments = [Assignment(chunk_id=a.chunk_id, path=new_path[a.path], snippet=a.snippet)
                           for a in reply.assignments]
            apply_reply(self.stores, self.collection, TreeReply(categories=categories, assignments=assignments), hashes,
                        remove=orphans, replace=True,
                        fallbacks={new_path[p]: why for p, why in namer.fallbacks.items()})
        elif named:
            rewrite_tree(self.stores, self.collection, named, namer.fallbacks)
        self.stores.tree.set_builder(self.collection, "hybrid")
        notes = [what, plan_note, limits_note]
        if namer.rejected:
            shown = "; ".join(f"{n!r} {r}" for n, r in namer.rejected[:3])
            notes.append(f"rejected {len(namer.rejected)} proposed names ({shown})")
        note = origins_note(namer.origins)
        if note:
            notes.append(note + f"; {namer.changed} of them differ from the offline draft")
        if namer.cached:
            notes.append(f"{namer.cached} calls served from the call log (identical prompts)")
        return self._finish(started, notes, origins=dict(namer.origins), rejected=len(namer.rejected),
                            cached=namer.cached)

    def _load(self) -> tuple[list[Any], dict[str, np.ndarray]]:
        chunks: list[Any] = []
        vectors: dict[str, np.ndarray] = {}
        for batch, matrix in self.stores.vectors.iter_rows(self.collection, with_vectors=True):
            assert matrix is not None
            norms = np.linalg.norm(matrix, axis=1, keepdims=True)
            unit = matrix / np.where(norms > 0, norms, 1.0)
            for c, v in zip(batch, unit):
                chunks.append(c)
                vectors[c.chunk_id] = v
        chunks.sort(key=lambda c: c.chunk_id)
        return chunks, vectors

    def _cluster(self, chunks: Sequence[Any], vectors: Mapping[str, np.ndarray]) -> TreeReply:
        items = [ClusterItem(chunk_id=c.chunk_id, text=c.text, title=c.title, doc_id=c.doc_id,
                             file_name=c.file_name) for c in chunks]
        if not items:
            return TreeReply()
        return build_cluster_tree(items, np.stack([vectors[c.chunk_id] for c in chunks]))

    def _current_views(self) -> dict[str, NodeView]:
        nodes = self.stores.tree.nodes(self.collection)
        mapping = {m.chunk_id: m.path for m in self.stores.tree.mappings(self.collection)}
        return tree_views([Category(path=n.path, description=n.description) for n in nodes], mapping)

    def _finish(self, started: float, notes: list[str], *, dry_run: bool = False, calls: int | None = None,
                input_tokens: int = 0, output_tokens: int = 0, cost: float = 0.0,
                origins: dict[str, int] | None = None, rejected: int = 0, cached: int = 0) -> BuildReport:
        if calls is None:
            spent = log_totals(self.stores.tree, self.collection, self.build_id)
            calls, input_tokens, output_tokens, cost, estimated = (spent.calls, spent.input_tokens,
                                                                  spent.output_tokens, spent.cost_usd, spent.estimated)
        else:
            estimated = 0
        fallbacks = {n.path: n.name_fallback for n in self.stores.tree.nodes(self.collection) if n.name_fallback}
        if fallbacks and not dry_run:
            shown = "; ".join(f"{p!r}: {why}" for p, why in list(fallbacks.items())[:3])
            notes = [*notes, f"{len(fallbacks)} categories keep the offline builder's name because their LLM naming "
                             f"failed ({shown}{' …' if len(fallbacks) > 3 else ''}); the next `kt build` asks the "
                             "model for them again"]
        return build_report(self.stores, self.collection, "hybrid", started, dry_run=dry_run, notes=notes, batches=calls,
                       llm_calls=calls, cached_calls=cached, input_tokens=input_tokens, output_tokens=output_tokens,
                       cost_usd=round(cost, 6), model=self.llm.spec, name_origins=origins or {},
                       rejected_names=rejected, estimated_calls=estimated, fallback_names=fallbacks,
                       naming_failed=len(fallbacks))


def _spent_note(stores: BuildStores, collection: str) -> str:
    spent = log_totals(stores.tree, collection)
    return (f"call log of {collection!r} so far: {spent.calls} calls, {spent.input_tokens:,} tokens in, "
            f"{spent.output_tokens:,} out, ${spent.cost_usd:.4f}")


def run_hybrid_build(stores: BuildStores, collection: str, *, llm: LLMClient, rebuild: bool, dry_run: bool,
                     concurrency: int, progress: ProgressFn, message: MessageFn, use_cache: bool = True) -> BuildReport:
    """``kt build --builder hybrid`` over ``collection`` (see :class:`HybridTreeBuilder`)."""
    return HybridTreeBuilder(stores, collection, llm, concurrency=concurrency, use_cache=use_cache, progress=progress,
                             message=message).run(rebuild=rebuild, dry_run=dry_run)


def redescribe_changed(stores: BuildStores, collection: str, llm: LLMClient, log: CallLog, before: Mapping[str, str],
                       *, params: NamingParams = NamingParams(), concurrency: int = 1, skip: Iterable[str] = (),
                       message: MessageFn = lambda _m: None) -> tuple[int, NodeNamer | None]:
    """After an incremental build: new names and descriptions for nodes whose membership changed materially.

    ``before`` is ``chunk_id -> leaf path`` before the build; nodes in ``skip`` (just named by the
    build itself) are left alone. Returns (nodes re-described, the namer — for its origins and
    rejections — or None when nothing changed).
    """
    nodes = stores.tree.nodes(collection)
    after = {m.chunk_id: m.path for m in stores.tree.mappings(collection)}
    existed = {p for leaf in before.values() for p in _prefixes(leaf)}
    targets = {p for p in changed_nodes(before, after, params.material_change) if p in existed} - set(skip)
    if not targets:
        return 0, None
    views = tree_views([Category(path=n.path, description=n.description) for n in nodes], after)
    members = sorted({c for p in targets for c in views[p].members})
    chunks = [c for start in range(0, len(members), 2000) for c in stores.vectors.get(collection, members[start:start + 2000])]
    raw = stores.vectors.vectors(collection, members)
    vectors = {}
    for cid, vec in raw.items():
        v = np.asarray(vec, dtype=np.float32)
        vectors[cid] = v / (np.linalg.norm(v) or 1.0)
    texts = {c.chunk_id: (c.text, c.title, c.doc_id or c.file_name) for c in chunks}
    namer = NodeNamer(llm, log, collection_check(stores, collection, chunks), texts, vectors, params=params,
                      concurrency=concurrency, embed=stores.embedder_for(collection).embed_documents, message=message)
    named = namer.name(views, targets)
    changed = {p: n for p, n in named.items() if (n.name, n.description) != (views[p].name, views[p].description)}
    if changed:
        rewrite_tree(stores, collection, changed)
    return len(targets), namer


def _prefixes(path: str) -> list[str]:
    parts = path.split("/")
    return ["/".join(parts[:i]) for i in range(1, len(parts) + 1)]
