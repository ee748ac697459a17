"""LLM tree builder: token-aware batches, CREATE then parallel EXTEND calls, validated, logged, resumable."""

from __future__ import annotations

import difflib
import math
import re
import threading
import time
import uuid
from collections import Counter, deque
from collections.abc import Callable, Iterable, Sequence
from concurrent.futures import FIRST_COMPLETED, Future, wait
from dataclasses import dataclass, field
from typing import TYPE_CHECKING, Any

import numpy as np

from ..errors import BuildError, ConfigError, LLMOutputError
from ..llm.base import LLMContextOverflowError, LLMTimeoutError, LLMTruncatedError, LLMUnreachableError
from ..llm.limits import adopt_context_limit, fit_limits
from ..models import BuildReport, Category, TreeReply
from ..textutil import counted
from ..tokens import count_tokens
from .batching import Batch, BatchLimits, ChunkCost, chunk_costs, plan, seed_calls
from .calls import CallLog, CallOutcome, CallPool, answered, check_server, log_totals, prompt_digest, run_call
from .cluster import ClusterItem, name_tree
from .context import StoreSet
from .hybrid import NamingParams, redescribe_changed
from .names import origins_note, tree_name_check
from .prompts import (
    PROMPT_VERSION,
    REPLY_SCHEMA_NAME,
    TreeCaps,
    build_messages,
    default_tree_tokens,
    prompt_overhead_tokens,
    render_feedback,
    render_tree,
    tree_reply_schema,
)
from .runner import apply_reply, build_report, collapse_single_children, pending_work
from .snippets import make_snippet
from .staging import StagedTree
from .validate import OTHER, RejectedName, check_reply, name_key, parse_reply, salvage_cut_reply

__all__ = ["BuildPlan", "LLMTreeBuilder", "NameMerger", "name_key", "plan_build", "prompt_hash", "run_llm_build"]

if TYPE_CHECKING:
    from ..llm.base import LLMClient
    from ..llm.profiles import ModelProfile
    from .context import BuildStores

ProgressFn = Callable[[str, int, int], None]
MessageFn = Callable[[str], None]
_NUMBERED = re.compile(r" \(\d+\)$")

#: Tokens of one leaf line in the tree listing (three short names and two slashes), for estimates.
LEAF_LINE_TOKENS = 9
#: Chunks per leaf a finished tree has on average, for estimating the listing's size.
CHUNKS_PER_LEAF = 10


# --------------------------------------------------------------------------------- planning
@dataclass(frozen=True)
class BuildPlan:
    """The calls a build will make: an optional CREATE batch, then EXTEND batches.

    Token figures are expectations (the tree listing is counted at its expected size, not at its
    budget); retries and follow-up calls are not included.
    """

    model: str
    chunks: int
    create: Batch | None
    extend: tuple[Batch, ...]
    seed_calls: int
    input_tokens: int
    output_tokens: int
    cost_usd: float
    price_known: bool
    tree_budget: int

    @property
    def batches(self) -> list[Batch]:
        return ([self.create] if self.create else []) + list(self.extend)

    @property
    def calls(self) -> int:
        return len(self.batches)

    def as_dict(self) -> dict[str, Any]:
        sizes = [len(b.chunk_ids) for b in self.batches]
        return {"model": self.model, "chunks": self.chunks, "calls": self.calls, "seed_calls": self.seed_calls,
                "input_tokens": self.input_tokens, "output_tokens": self.output_tokens,
                "cost_usd": round(self.cost_usd, 6), "price_known": self.price_known,
                "largest_batch": max(sizes, default=0), "smallest_batch": min(sizes, default=0)}


def _stride_sample(costs: Sequence[ChunkCost], k: int) -> list[ChunkCost]:
    n = len(costs)
    k = max(1, min(k, n))
    return [costs[(2 * i + 1) * n // (2 * k)] for i in range(k)]


def plan_build(
    costs: Sequence[ChunkCost],
    profile: ModelProfile,
    *,
    has_tree: bool,
    caps: TreeCaps = TreeCaps(),
    limits: BatchLimits | None = None,
    per_chunk_cap: int = 400,
    tree_tokens: int | None = None,
    count_tokens: Callable[[str], int] | None = None,
) -> BuildPlan:
    """Plan a build over ``costs`` (from ``batching.chunk_costs``, in the order to keep).

    Args:
        has_tree: a tree exists, so every call is EXTEND; else the first is CREATE on a sample.
        tree_tokens: expected size of the tree listing (default: estimated from the chunk count).
    """
    count = count_tokens or _counter(profile)
    budget = default_tree_tokens(profile.context_window)
    p_extend = prompt_overhead_tokens(count, caps, extend=True)
    p_create = prompt_overhead_tokens(count, caps, extend=False)
    opts: dict[str, Any] = {"per_chunk_cap": per_chunk_cap, "limits": limits}
    create: Batch | None = None
    rest = list(costs)
    if costs and not has_tree:
        natural = plan(rest, profile, prompt_tokens=p_create, tree_tokens=0, **opts)
        size = len(natural[0].chunk_ids)
        if len(natural) == 1:
            create, rest = natural[0], []
        else:
            for _ in range(8):  # a sample of other chunks may be longer: shrink until it fits one call
                sample = _stride_sample(costs, size)
                first = plan(sample, profile, prompt_tokens=p_create, tree_tokens=0, **opts)
                if len(first) == 1 or size == 1:
                    create = first[0]
                    break
                size = max(1, min(len(first[0].chunk_ids), size - 1))
            assert create is not None
            taken = set(create.chunk_ids)
            rest = [c for c in costs if c.chunk_id not in taken]
    extend = plan(rest, profile, prompt_tokens=p_extend, tree_tokens=budget, **opts) if rest else []
    if tree_tokens is None:
        leaves = min(caps.max_top * caps.max_children ** max(0, caps.max_depth - 1),
                     math.ceil(len(costs) / CHUNKS_PER_LEAF))
        tree_tokens = leaves * LEAF_LINE_TOKENS // (1 if has_tree else 2)  # a new tree grows during the build
    expected_tree = profile.provider_tokens(min(budget, tree_tokens))
    reserved = profile.provider_tokens(p_extend + budget) - profile.provider_tokens(p_extend)
    in_tok = sum(b.input_tokens for b in extend) - len(extend) * (reserved - expected_tree)
    in_tok += create.input_tokens if create else 0
    out_tok = sum(b.output_tokens for b in ([create] if create else []) + extend)
    return BuildPlan(
        model=profile.name, chunks=len(costs), create=create, extend=tuple(extend),
        seed_calls=seed_calls(len(costs), profile), input_tokens=in_tok, output_tokens=out_tok,
        cost_usd=profile.cost(in_tok, out_tok), price_known=profile.known, tree_budget=budget,
    )


def _counter(profile: ModelProfile) -> Callable[[str], int]:
    return lambda text: count_tokens(text, profile.encoding)


def prompt_hash(spec: str, system: str, user: str) -> str:
    """Cache key of one call: prompt version, provider:model and both messages."""
    return prompt_digest(PROMPT_VERSION, spec, REPLY_SCHEMA_NAME, system, user)


# ----------------------------------------------------------------------- near-duplicate merge
def _one_typo_apart(a: str, b: str) -> bool:
    """Keys that differ in one longish alphabetic word by about one edit ("Databse" vs "Database").

    Words with digits or short words never match fuzzily: "Type 1"/"Type 2" and "Hepatitis B"/"C" differ.
    """
    wa, wb = a.split(), b.split()
    if len(wa) != len(wb):
        return False
    diff = [(x, y) for x, y in zip(wa, wb) if x != y]
    if len(diff) != 1:
        return False
    x, y = diff[0]
    if min(len(x), len(y)) < 5 or not (x.isalpha() and y.isalpha()):
        return False
    return difflib.SequenceMatcher(None, x, y).ratio() >= 0.85


class NameMerger:
    """Rewrites reply paths so new names reuse a near-identical sibling's spelling."""

    def __init__(self, paths: Iterable[str]) -> None:
        self.children: dict[str, dict[str, str]] = {}
        self.merged = 0
        for path in sorted(paths, key=lambda p: p.count("/")):
            self.path(path, count=False)

    def _match(self, parent: str, name: str) -> str | None:
        siblings = self.children.get(parent, {})
        key = name_key(name)
        if key in siblings:
            return siblings[key]
        for other, spelling in siblings.items():
            if _one_typo_apart(key, other):
                return spelling
        return None

    def path(self, path: str, *, count: bool = True) -> str:
        """``path`` with each segment replaced by an existing near-identical sibling, if any."""
        parent, out = "", []
        for raw in path.split("/"):
            name = raw.strip()
            if not name:
                continue
            hit = self._match(parent, name)
            if hit is None:
                self.children.setdefault(parent, {})[name_key(name)] = name
                hit = name
            elif hit != name and count:
                self.merged += 1
            out.append(hit)
            parent = f"{parent}/{hit}" if parent else hit
        return "/".join(out)

    def rewrite(self, data: dict[str, Any]) -> dict[str, Any]:
        """A copy of a reply with every category and assignment path rewritten."""
        out = dict(data)
        for key in ("categories", "assignments"):
            items = data.get(key)
            if isinstance(items, list):
                out[key] = [
                    {**item, "path": self.path(item["path"])}
                    if isinstance(item, dict) and isinstance(item.get("path"), str) else item
                    for item in items
                ]
        return out


# ----------------------------------------------------------------------------- the builder
@dataclass
class _Task:
    chunk_ids: tuple[str, ...]
    max_output_tokens: int
    depth: int = 0  # follow-up / split generation
    reason: str = "batch"
    feedback: tuple[tuple[str, str], ...] = ()  # (name, why refused) of an earlier reply: this is a re-ask


@dataclass
class _Sent:
    task: _Task
    kind: str
    prompt_hash: str
    started: float


@dataclass
class _Failure:
    chunk_ids: tuple[str, ...]
    error: str
    timeout: float | None = None  # seconds per attempt, when every attempt timed out
    hint: str | None = None


@dataclass
class _Tally:
    calls: int = 0
    cached: int = 0
    failed: int = 0
    followups: int = 0
    splits: int = 0
    reasks: int = 0
    salvaged: int = 0  # replies cut at the output limit whose complete assignments were kept
    input_tokens: int = 0
    output_tokens: int = 0
    cost_usd: float = 0.0
    estimated: int = 0
    notes: list[str] = field(default_factory=list)

    def add(self, outcome: CallOutcome) -> None:
        self.calls += 1
        self.input_tokens += outcome.usage.input_tokens
        self.output_tokens += outcome.usage.output_tokens
        self.cost_usd += outcome.usage.cost_usd
        self.estimated += int(outcome.usage.estimated)


class LLMTreeBuilder:
    """Builds or extends one collection's tree with an LLM.

    1. The pending chunks are planned into token-aware batches (``batching.plan``).
    2. Without a tree, the first call is CREATE on a stride sample of the pending chunks (every k-th
       chunk, as many as fit one call), so the proposed taxonomy sees the whole collection.
    3. Every other call is EXTEND: it sees the current tree (leaf paths, folded to a token budget)
       and places its chunks, creating categories only where nothing fits. Up to ``concurrency``
       EXTEND calls run at once; replies are validated and applied on the calling thread, one
       transaction per call, as each returns.
    4. A new category whose name is a near-duplicate of an existing sibling (case, punctuation,
       plural, word order, "&"/"and", catch-all synonyms, a one-letter typo) is merged into it before
       ``validate.parse_reply`` enforces depth and breadth against the tree as applied so far.

    Unknown ids are ignored; chunks missing from a reply are sent again in smaller follow-up calls
    (up to ``max_followups`` rounds); a reply cut at the output limit keeps its complete assignments
    (``validate.salvage_cut_reply``) and the rest is sent again, or is split in halves when none was whole; a batch
    that still fails ends the build with a ``BuildError`` naming the unmapped chunks. Every call is
    logged with its response (the log doubles as a cache keyed by the prompt hash), so a killed
    build resumes with only the unmapped chunks. ``kt bench build`` measures the concurrency.

    Args:
        stores: the knowledge base (tree store, vector store).
        collection: the collection to map.
        llm: the client; its ``profile`` sizes the batches (after the server's limits are asked).
        concurrency: EXTEND calls in flight at once (1 = strictly sequential).
        caps: depth and breadth of the tree.
        limits: batching knobs (``batching.BatchLimits``).
        per_chunk_cap: tokens of text sent per chunk.
        max_followups: rounds of smaller calls for chunks a reply left out or that failed.
        max_consecutive_failures: calls failing in a row (provider down) before the build stops; then
            no queued batch and no retry is sent.
        use_cache: serve identical prompts from the call log.
    """

    def __init__(
        self,
        stores: BuildStores,
        collection: str,
        llm: LLMClient,
        *,
        concurrency: int = 4,
        caps: TreeCaps = TreeCaps(),
        limits: BatchLimits | None = None,
        per_chunk_cap: int = 400,
        max_followups: int = 3,
        max_consecutive_failures: int = 3,
        use_cache: bool = True,
        progress: ProgressFn | None = None,
        message: MessageFn | None = None,
    ) -> None:
        self.stores = stores
        self.collection = collection
        self.llm = llm
        self.concurrency = max(1, int(concurrency))
        self.caps = caps
        self.limits = limits
        self.per_chunk_cap = per_chunk_cap
        self.max_followups = max_followups
        self.max_consecutive_failures = max(1, max_consecutive_failures)
        self.use_cache = use_cache
        self.progress = progress or (lambda stage, done, total: None)
        self.message = message or (lambda text: None)
        self.profile = llm.profile
        self.build_id = uuid.uuid4().hex[:12]
        self.origins: Counter[str] = Counter()
        self.rejected: list[RejectedName] = []
        self.renamed: list[str] = []
        self.stop_note = ""
        self.staged = False  # building a rebuild's new tree beside the old one (staging.StagedTree)

    # ------------------------------------------------------------------------ public
    def run(self, *, rebuild: bool = False, dry_run: bool = False) -> BuildReport:
        """Plan, then (unless ``dry_run``) call, validate and apply; see ``KnowledgeBase.build``.

        A ``rebuild`` assembles the new tree beside the old one (:class:`~.staging.StagedTree`): the old
        tree stays what every reader sees until the new one holds every chunk, then one transaction swaps
        it in. A rebuild that fails or is interrupted keeps the old tree, and the next rebuild resumes
        what it staged (``use_cache=False`` starts it over).

        Raises:
            BuildError: chunks are still unmapped at the end (the message says how to resume).
        """
        if not rebuild:
            return self._run(dry_run)
        staged = StagedTree(self.stores.tree, self.collection)
        if not dry_run and not self.use_cache:
            staged.discard()
        stores, self.stores = self.stores, StoreSet(self.stores.vectors, staged, self.stores.embedder_for)
        self.staged = True
        try:
            report = self._run(dry_run)
        finally:
            self.stores = stores
        if dry_run:  # the plan is the staged tree's; the counts are what readers see now
            now = build_report(stores, self.collection, "llm", time.perf_counter())
            return report.model_copy(update={"nodes": now.nodes, "mapped": now.mapped, "unmapped": now.unmapped})
        staged.promote()
        return report

    def _run(self, dry_run: bool) -> BuildReport:
        started = time.perf_counter()
        pending, orphans, hashes = pending_work(self.stores, self.collection)
        self.hashes = hashes
        self.paths: list[str] = [n.path for n in self.stores.tree.nodes(self.collection)]
        spec = self.llm.spec
        if not pending and not orphans:
            return self._finish(started, dry_run, [f"tree is up to date; no calls ({spec})"], 0, _Tally())
        if pending and not dry_run:
            # a stopped server: one line now, not a plan and failed calls
            check_server(self.llm, self.stores.tree, self.collection, use_cache=self.use_cache, message=self.message)
        limits_note = fit_limits(self.llm)
        self.profile = self.llm.profile
        self._load(pending)
        meta, titles = self._mapped_meta()
        self.names = tree_name_check(self.stores, self.collection, hashes, {**meta, **self.meta},
                                     {**titles, **self.titles}, self.caps)
        costs = chunk_costs([(i, self.texts[i]) for i in self.order], self.profile, per_chunk_cap=self.per_chunk_cap)
        self.costs = {c.chunk_id: c for c in costs}
        tree_tokens = None
        if self.paths:
            tree_tokens = _counter(self.profile)(render_tree(self.paths))
        build_plan = plan_build(costs, self.profile, has_tree=bool(self.paths), caps=self.caps, limits=self.limits,
                                per_chunk_cap=self.per_chunk_cap, tree_tokens=tree_tokens)
        self.tree_budget = build_plan.tree_budget
        plan_note = (f"plan: {counted(len(pending), 'chunk')} in {build_plan.calls} calls "
                     f"({'1 CREATE + ' if build_plan.create else ''}{len(build_plan.extend)} EXTEND; "
                     f"the seed's fixed batches: {build_plan.seed_calls} calls) with {spec}")
        if self.staged and self.paths:
            plan_note += (f"; resuming the rebuild stopped earlier: {len(hashes) - len(pending)} chunks are already "
                          "in the new tree (the previous tree stays until it is complete)")
        if dry_run:
            tally = _Tally(calls=build_plan.calls, input_tokens=build_plan.input_tokens,
                           output_tokens=build_plan.output_tokens, cost_usd=build_plan.cost_usd)
            notes = [plan_note, limits_note, "dry run: estimated tokens and cost at list price"
                     + ("" if build_plan.price_known else f" (no price known for {self.llm.model}: cost shows 0)")
                     + "; retries and follow-up calls not included; nothing was called", self._spent_note()]
            if orphans:
                notes.append(f"{len(orphans)} deleted chunks would leave the tree")
            return self._finish(started, True, notes, build_plan.calls, tally)
        self.message(plan_note)
        self.message(limits_note)
        if self.paths:  # names an earlier build gave, checked before any prompt shows them
            self._recheck_names(None, self.message)
            self.paths = [n.path for n in self.stores.tree.nodes(self.collection)]
        before = {m.chunk_id: m.path for m in self.stores.tree.mappings(self.collection)} if self.paths else {}
        existing = set(self.paths)
        if orphans:
            self.stores.tree.apply(self.collection, [], [], remove=orphans)
            self.paths = [n.path for n in self.stores.tree.nodes(self.collection)]
        tally = self._execute(build_plan)
        if self.unreachable is not None:  # the server went away: nothing else can be asked of it
            raise self.unreachable
        if self.renamed:
            tally.notes.append(f"renamed {len(self.renamed)} nodes whose names failed validation once their members "
                               f"changed, with offline names ({'; '.join(self.renamed[:3])}"
                               + (" …)" if len(self.renamed) > 3 else ")"))
        if before and self.done:  # an incremental build: nodes that changed materially get new names
            tally.notes.extend(self._redescribe(before, existing))
        if self.done or orphans:  # a model's lone subcategory, or chunks that moved or went: no parent keeps one child
            collapse_single_children(self.stores, self.collection)
        notes = [plan_note, limits_note, *tally.notes]
        if orphans:
            notes.append(f"removed {len(orphans)} deleted chunks from the tree")
        if self.done or orphans:  # a build that changed nothing (every call failed) leaves the store as it was
            self.stores.tree.set_builder(self.collection, "llm")
        report = self._finish(started, False, notes, build_plan.calls, tally)
        still, _, _ = pending_work(self.stores, self.collection)
        if still:
            raise self._incomplete(still, report, tally)
        return report

    def _redescribe(self, before: dict[str, str], existing: set[str]) -> list[str]:
        """The re-description call(s) for nodes whose membership changed materially (``hybrid.NodeNamer``)."""
        created = {n.path for n in self.stores.tree.nodes(self.collection)} - existing
        count, namer = redescribe_changed(self.stores, self.collection, self.llm, self.log, before,
                                          params=NamingParams(), concurrency=self.concurrency, skip=created,
                                          message=self.message)
        if namer is None:
            return []
        for origin, n in namer.origins.items():
            self.origins[f"renamed_{origin}"] += n
        return [f"re-described {count} existing nodes whose members changed by ≥{NamingParams().material_change:.0%}"
                f" ({namer.origins['llm'] + namer.origins['llm_reasked']} new names from the LLM, "
                f"{namer.origins['offline']} kept)"]

    def _spent_note(self) -> str:
        spent = log_totals(self.stores.tree, self.collection)
        return (f"call log of {self.collection!r} so far: {spent.calls} calls, {spent.input_tokens:,} tokens in, "
                f"{spent.output_tokens:,} out, ${spent.cost_usd:.4f}"
                + (f" ({spent.estimated} with estimated usage)" if spent.estimated else ""))

    # ------------------------------------------------------------------------ inputs
    def _load(self, pending: Sequence[str]) -> None:
        chunks = []
        for start in range(0, len(pending), 2000):
            chunks.extend(self.stores.vectors.get(self.collection, list(pending[start:start + 2000])))
        chunks.sort(key=lambda c: (c.file_name, c.doc_id, c.chunk_index, c.chunk_id))
        self.order = [c.chunk_id for c in chunks]
        self.texts: dict[str, str] = {}
        self.titles: dict[str, str] = {}
        self.meta: dict[str, tuple[str, str]] = {}
        for c in chunks:
            title = c.title.strip()
            self.titles[c.chunk_id] = title
            self.meta[c.chunk_id] = (c.doc_id, c.file_name)
            head = c.text.lstrip()[: len(title) + 40]
            self.texts[c.chunk_id] = f"{title}\n{c.text}" if title and title not in head else c.text

    def _snippet(self, chunk_id: str) -> str:
        return make_snippet(self.texts.get(chunk_id, ""), self.titles.get(chunk_id, ""))

    def _task(self, ids: Sequence[str], depth: int, reason: str,
              feedback: tuple[tuple[str, str], ...] = ()) -> list[_Task]:
        """Tasks for ``ids`` sized by the planner (a subset of a feasible batch is one call)."""
        costs = [self.costs[i] for i in ids]
        p_tokens = prompt_overhead_tokens(_counter(self.profile), self.caps, extend=True)
        p_tokens += _counter(self.profile)(render_feedback(feedback)) if feedback else 0
        try:
            batches = plan(costs, self.profile, prompt_tokens=p_tokens, tree_tokens=self.tree_budget,
                           per_chunk_cap=self.per_chunk_cap, limits=self.limits)
        except ConfigError as exc:  # the context learnt from the server is too small for one chunk
            self._fail(ids, exc.message, None, hint=exc.hint)
            return []
        return [_Task(b.chunk_ids, b.max_output_tokens, depth, reason, feedback) for b in batches]

    # ------------------------------------------------------------------------ the call loop
    def _execute(self, build_plan: BuildPlan) -> _Tally:
        tally = _Tally()
        self.tally = tally
        self.failures: list[_Failure] = []
        self.done = 0
        self.unsent: list[str] = []
        self.unreachable: LLMUnreachableError | None = None
        self.cancel = threading.Event()
        self.log = CallLog(self.stores.tree, self.collection, self.build_id, use_cache=self.use_cache)
        total = build_plan.chunks
        queue: deque[_Task] = deque(_Task(b.chunk_ids, b.max_output_tokens) for b in build_plan.batches)
        in_flight: dict[Future[CallOutcome], _Sent] = {}
        consecutive = 0
        stopped: str | None = None
        self.merges = 0
        self.repairs: list[str] = []
        self.dropped_descriptions = 0
        self.progress("mapping", 0, total)
        pool = CallPool(self.concurrency, "kt-llm")
        try:
            while (queue and stopped is None) or in_flight:
                # no tree yet: one call at a time until a CREATE reply has been applied
                while queue and stopped is None and len(in_flight) < (self.concurrency if self.paths else 1):
                    task = queue.popleft()
                    kind = ("reask" if task.feedback else "extend" if task.depth == 0 else "followup") \
                        if self.paths else "create"
                    system, user = build_messages(
                        [(i, self.texts[i]) for i in task.chunk_ids], self.paths or None, caps=self.caps,
                        per_chunk_cap=self.per_chunk_cap, tree_max_tokens=self.tree_budget, feedback=task.feedback,
                    )
                    h = prompt_hash(self.llm.spec, system, user)
                    cached = self.log.cached(h)
                    if cached is not None:
                        tally.cached += 1
                        queue.extendleft(reversed(self._accept(task, cached, tally)))
                        continue
                    fut = pool.submit(run_call, self.llm, kind=kind, prompt_hash=h, system=system, user=user,
                                      schema=tree_reply_schema(task.chunk_ids), schema_name=REPLY_SCHEMA_NAME,
                                      max_output_tokens=task.max_output_tokens, chunk_count=len(task.chunk_ids),
                                      validate=check_reply, cancel=self.cancel)
                    in_flight[fut] = _Sent(task, kind, h, time.perf_counter())
                if not in_flight:
                    continue
                finished, _ = wait(in_flight, return_when=FIRST_COMPLETED)
                for fut in sorted(finished, key=lambda f: in_flight[f].started):
                    sent = in_flight.pop(fut)
                    more, ok, fatal = self._handle(sent, fut.result(), tally)
                    queue.extendleft(reversed(more))
                    consecutive = 0 if ok else consecutive + (1 if fatal else 0)
                    if self.unreachable is not None and stopped is None:
                        stopped = "stopped: the server is unreachable"
                        self.cancel.set()
                    if consecutive >= self.max_consecutive_failures and stopped is None:
                        stopped = f"stopped after {consecutive} failed calls in a row"
                        self.cancel.set()  # calls in flight send no retry; queued batches are not sent
                        self.message(stopped + "; no queued batch is sent, calls in flight end without retries")
                    self._say(tally, total)
        except BaseException:
            self.cancel.set()
            pool.shutdown(wait=False)  # interrupted: calls in flight are abandoned, not waited for
            for outcome in answered(in_flight):  # replies that came back are logged: a re-run is not charged again
                self.log.record(outcome)
            raise
        pool.shutdown(wait=True)
        self.stop_note = ""
        if stopped:
            not_sent = sum(len(t.chunk_ids) for t in queue) + len(self.unsent)
            for t in queue:
                self.unsent.extend(t.chunk_ids)
            self.stop_note = stopped + f"; {not_sent} chunks not sent"
            tally.notes.append(self.stop_note)
        if tally.cached:
            tally.notes.append(f"{tally.cached} calls served from the call log (identical prompts)")
        if not self.use_cache:
            tally.notes.append("call log not consulted (no cache): every prompt was sent to the model")
        if tally.salvaged:
            tally.notes.append(f"kept the complete assignments of {tally.salvaged} replies cut at the output limit")
        if tally.followups or tally.splits:
            tally.notes.append(f"repair: {tally.followups} follow-up calls for missing chunks, "
                               f"{tally.splits} batches split after unusable, cut or too long replies")
        if self.rejected:
            shown = "; ".join(f"{r.name!r} {r.reason}" for r in self.rejected[:3])
            tally.notes.append(f"rejected {len(self.rejected)} proposed names ({shown}); {tally.reasks} re-ask calls")
        note = origins_note(self.origins)
        if note:
            tally.notes.append(note)
        if self.dropped_descriptions:
            tally.notes.append(f"dropped {self.dropped_descriptions} descriptions that were placeholders or copies "
                               "of the instructions")
        if self.merges:
            tally.notes.append(f"merged {self.merges} near-duplicate category names into existing ones")
        if self.repairs:
            tally.notes.append(f"validation repaired {len(self.repairs)} items (e.g. {self.repairs[0]})")
        if tally.estimated:
            tally.notes.append(f"{tally.estimated} calls reported no usage: their tokens were counted with the "
                               "tokenizer (estimated)")
        return tally

    def _handle(self, sent: _Sent, outcome: CallOutcome, tally: _Tally) -> tuple[list[_Task], bool, bool]:
        """Log and apply one finished call: (tasks to queue, succeeded?, counts toward a stop?)."""
        task = sent.task
        if outcome.status == "cancelled" and outcome.usage.attempts == 0:
            self.unsent.extend(task.chunk_ids)
            return [], False, False
        tally.add(outcome)
        self.log.record(outcome)  # logged before it is applied: a kill in between is served from the log
        error = str(outcome.error) if outcome.error is not None else ""
        if outcome.ok:
            return self._accept(task, outcome.data, tally), True, False
        if outcome.status == "cancelled":
            self.unsent.extend(task.chunk_ids)
            return [], False, False
        if outcome.status == "truncated":
            kept = salvage_cut_reply(outcome.error.partial if isinstance(outcome.error, LLMTruncatedError) else None)
            if kept is not None:  # what came before the cut was paid for: keep it, send only the rest again
                tally.salvaged += 1
                return self._accept(task, kept, tally), False, False
            return self._split(task, tally, error, hint=(
                f"a reply for one chunk did not fit {task.max_output_tokens:,} output tokens: set the model's "
                "real output limit with --max-output N (or max_output_tokens in [profiles.\"MODEL\"] of "
                "config.toml)")), False, False
        if outcome.status == "overflow":
            limit = outcome.error.context_limit if isinstance(outcome.error, LLMContextOverflowError) else None
            if adopt_context_limit(self.llm, limit):
                self.profile = self.llm.profile
                self.tree_budget = default_tree_tokens(self.profile.context_window)
                tally.notes.append(f"the server says the context is {limit:,} tokens: batches re-planned for it")
                self.message(tally.notes[-1])
                return self._task(task.chunk_ids, task.depth, "replan", task.feedback), False, False
            return self._split(task, tally, error, hint=(
                "one chunk with the prompt does not fit the server's context: set its real size with "
                "--context-window N (or context_window in [profiles.\"MODEL\"] of config.toml), or use a "
                "model with a larger context")), False, False
        if outcome.status == "error" and isinstance(outcome.error, LLMOutputError):
            return self._split(task, tally, error), False, False
        if isinstance(outcome.error, LLMUnreachableError):
            self.unreachable = outcome.error
            return [], False, True
        self._fail(task.chunk_ids, error, tally,
                   timeout=outcome.error.timeout if isinstance(outcome.error, LLMTimeoutError) else None,
                   hint=outcome.error.hint if outcome.error is not None else None)
        return [], False, True

    def _split(self, task: _Task, tally: _Tally, error: str, *, hint: str | None = None) -> list[_Task]:
        if len(task.chunk_ids) == 1 or task.depth >= self.max_followups:
            self._fail(task.chunk_ids, error, tally, hint=hint if len(task.chunk_ids) == 1 else None)
            return []
        tally.splits += 1
        half = (len(task.chunk_ids) + 1) // 2
        return [t for part in (task.chunk_ids[:half], task.chunk_ids[half:])
                for t in self._task(part, task.depth + 1, "split", task.feedback)]

    def _fail(self, ids: Sequence[str], error: str, tally: _Tally | None, *, timeout: float | None = None,
              hint: str | None = None) -> None:
        (tally or self.tally).failed += 1
        self.failures.append(_Failure(tuple(ids), error, timeout, hint))
        self.message(f"batch of {counted(len(ids), 'chunk')} failed: {error[:200]}")

    def _accept(self, task: _Task, data: Any, tally: _Tally) -> list[_Task]:
        """Validate a reply against the current tree, apply it, and return follow-up tasks."""
        merger = NameMerger(self.paths)
        if isinstance(data, dict):
            data = merger.rewrite(data)
        try:
            valid = parse_reply(data, task.chunk_ids, existing_paths=self.paths, caps=self.caps, names=self.names)
        except LLMOutputError as exc:
            return self._split(task, tally, str(exc))
        self.merges += merger.merged
        self.repairs.extend(valid.notes)
        self.dropped_descriptions += len(valid.dropped_descriptions)
        if valid.assignments:
            reply = valid.to_tree_reply(self._snippet)
            self._apply(reply)
            self.origins["llm_reasked" if task.feedback else "llm"] += len(reply.categories)
        followups: list[_Task] = []
        if valid.rejected:
            self.rejected.extend(valid.rejected)
            if task.feedback:  # refused again after the re-ask: the offline builder names these nodes
                self._offline_names(valid.rejected)
            else:
                tally.reasks += 1
                feedback = tuple(dict.fromkeys((r.name, r.reason) for r in valid.rejected))
                followups += self._task([r.chunk_id for r in valid.rejected], task.depth, "reask", feedback)
        if not valid.missing_ids:
            return followups
        if len(valid.missing_ids) == len(task.chunk_ids) and not valid.rejected:
            # The reply placed none of them (a small model writes ranks or paths for ids): the same
            # prompt again would get the same reply, and the call log would serve it. Halve the batch.
            return followups + self._split(task, tally, f"no chunk of the batch of {len(task.chunk_ids)} was placed "
                                                        f"(the reply named none of its chunk ids)")
        if task.depth >= self.max_followups:
            self._fail(valid.missing_ids, f"{len(valid.missing_ids)} chunks still missing from replies after "
                                          f"{task.depth} follow-up calls", tally)
            return followups
        tally.followups += 1
        return followups + self._task(valid.missing_ids, task.depth + 1, "missing", task.feedback)

    def _apply(self, reply: TreeReply) -> None:
        apply_reply(self.stores, self.collection, reply, self.hashes)
        self._recheck_names({a.path for a in reply.assignments})
        self.paths = [n.path for n in self.stores.tree.nodes(self.collection)]
        self.done += len(reply.assignments)
        self.progress("mapping", self.done, len(self.order))

    def _mapped_meta(self) -> tuple[dict[str, tuple[str, str]], dict[str, str]]:
        """``(chunk id → (doc_id, file_name), chunk id → title)`` of the chunks the tree already holds."""
        ids = [m.chunk_id for m in self.stores.tree.mappings(self.collection)]
        meta: dict[str, tuple[str, str]] = {}
        titles: dict[str, str] = {}
        for start in range(0, len(ids), 2000):
            for c in self.stores.vectors.get(self.collection, ids[start:start + 2000], with_text=False):
                meta[c.chunk_id] = (c.doc_id, c.file_name)
                titles[c.chunk_id] = c.title.strip()
        return meta, titles

    def _recheck_names(self, leaves: set[str] | None, say: MessageFn | None = None) -> None:
        """Validate again the names of nodes whose members changed (``leaves`` and their ancestors; None:
        every node), and give each that fails the name the offline builder gives it among its siblings.

        A name accepted for a node's first chunks can stop fitting as the node grows (a document's title
        over mostly other documents' chunks), and a tree from an earlier build may hold names made before
        a rule existed. A node whose offline name fails too, or is a sibling's, keeps its name.
        """
        nodes = {n.path: n for n in self.stores.tree.nodes(self.collection)}
        wanted = set(nodes) if leaves is None else {
            "/".join(p.split("/")[:i]) for p in leaves for i in range(1, p.count("/") + 2)}
        # only a bad label or a document's title can fail: the members (every mapping) are read for those
        suspects = [p for p in sorted(wanted & set(nodes)) if self.names.segment_problem(nodes[p].name)
                    or nodes[p].name.strip().casefold() in self.names.title_docs]
        if not suspects:
            return
        leaf_of = {m.chunk_id: m.path for m in self.stores.tree.mappings(self.collection)}
        members: dict[str, list[str]] = {}
        for chunk_id, leaf in leaf_of.items():
            parts = leaf.split("/")
            for i in range(1, len(parts) + 1):
                members.setdefault("/".join(parts[:i]), []).append(chunk_id)
        flagged: dict[str, str] = {}
        for path in suspects:
            name, under = nodes[path].name, members.get(path, [])
            why = self.names.segment_problem(name) or (self.names.title_problem(name, under) if under else None)
            if why and under:
                flagged[path] = why
        if not flagged:
            return
        changes: dict[str, tuple[str | None, str | None]] = {}
        for parent in sorted({p.rpartition("/")[0] for p in flagged}, key=lambda p: (p.count("/"), p)):
            scope = [c for c, leaf in leaf_of.items() if not parent or leaf.startswith(parent + "/")]
            named = name_tree(*self._cluster_items(scope), [leaf_of[c] for c in scope])
            taken = {n.name.casefold() for n in nodes.values() if n.path.rpartition("/")[0] == parent}
            for path in sorted(p for p in flagged if p.rpartition("/")[0] == parent):
                old = nodes[path].name
                name, description = named.get(path, (OTHER, ""))
                # the namer numbers a name its fresh name for the parent already has ("Runbook (2)");
                # the parent keeps its own name, so the plain one is free unless that is it
                base = _NUMBERED.sub("", name)
                if base != name and base.casefold() not in taken | {nodes[parent].name.casefold() if parent else ""}:
                    name = base
                if name.casefold() in taken or "/" in name or self.names.segment_problem(name) \
                        or self.names.title_problem(name, members[path]):
                    name, description = OTHER, ""
                    if OTHER.casefold() in taken:
                        continue
                taken.discard(old.casefold())
                taken.add(name.casefold())
                changes[path] = (name, description)
                self.renamed.append(f"{old!r} {flagged[path]}: now {name!r}")
                self.origins["offline"] += 1
        if changes:
            self.stores.tree.rename_nodes(self.collection, changes)
            if say is not None:
                say(f"renamed {len(changes)} nodes whose names failed validation: " + "; ".join(self.renamed[-3:]))

    def _cluster_items(self, ids: Sequence[str]) -> tuple[list[ClusterItem], np.ndarray]:
        chunks = self.stores.vectors.get(self.collection, list(ids))
        return cluster_inputs(self.stores, self.collection, ids,
                              {c.chunk_id: (c.text, c.title, c.doc_id, c.file_name) for c in chunks})

    def _offline_names(self, rejected: Sequence[RejectedName]) -> None:
        """Place chunks whose proposed names were refused twice under nodes named by the offline builder.

        Each group of chunks that shared a refused path becomes one node under the valid part of that
        path, named (and described) by ``cluster.name_tree`` from its members, as a full offline build
        would name it.
        """
        groups: dict[tuple[str, ...], list[str]] = {}
        for r in rejected:
            prefix = tuple(r.path.split("/")[: min(r.index, self.caps.max_depth - 1)])
            groups.setdefault(prefix, []).append(r.chunk_id)
        names = offline_group_names(self.stores, self.collection, list(groups.values()),
                                    {i: (self.texts[i], self.titles[i], *self.meta[i]) for i in self.texts})
        categories: list[Category] = []
        assignments: list[dict[str, str]] = []
        for (prefix, ids), (name, description) in zip(groups.items(), names):
            if self.names.segment_problem(name) is not None:
                name, description = OTHER, ""
            path = "/".join((*prefix, name))
            categories.append(Category(path=path, description=description))
            assignments.extend({"chunk_id": i, "path": path, "snippet": ""} for i in ids)
        data = {"categories": [c.model_dump() for c in categories], "assignments": assignments}
        valid = parse_reply(data, [i for ids in groups.values() for i in ids], existing_paths=self.paths,
                            caps=self.caps)
        if valid.assignments:
            reply = valid.to_tree_reply(self._snippet)
            self._apply(reply)
            self.origins["offline"] += len(reply.categories)

    def _say(self, tally: _Tally, total: int) -> None:
        self.message(f"{self.done}/{total} chunks mapped · {tally.calls} calls ({tally.cached} cached) · "
                     f"{tally.input_tokens:,} tokens in / {tally.output_tokens:,} out · ${tally.cost_usd:.4f}"
                     + (" (some estimated)" if tally.estimated else ""))

    # ------------------------------------------------------------------------ results
    def _finish(self, started: float, dry_run: bool, notes: list[str], batches: int, tally: _Tally) -> BuildReport:
        if dry_run:
            calls, tin, tout, cost, estimated = tally.calls, tally.input_tokens, tally.output_tokens, tally.cost_usd, 0
        else:  # what the call log holds for this build: the one record of spend
            spent = log_totals(self.stores.tree, self.collection, self.build_id)
            calls, tin, tout, cost, estimated = (spent.calls, spent.input_tokens, spent.output_tokens, spent.cost_usd,
                                                 spent.estimated)
        return build_report(
            self.stores, self.collection, "llm", started, dry_run=dry_run, notes=notes, batches=batches,
            llm_calls=calls, cached_calls=tally.cached, input_tokens=tin, output_tokens=tout,
            cost_usd=round(cost, 6), model=self.llm.spec, name_origins=dict(self.origins),
            rejected_names=len(self.rejected), estimated_calls=estimated,
        )

    def _incomplete(self, still: list[str], report: BuildReport, tally: _Tally) -> BuildError:
        shown = ", ".join(still[:8]) + (f" … (+{len(still) - 8} more)" if len(still) > 8 else "")
        why = self.failures[-1].error if self.failures else "no reply assigned them"
        spent = (f"This run: {report.llm_calls} calls ({tally.cached} cached), {report.input_tokens:,} tokens in, "
                 f"{report.output_tokens:,} out, ${report.cost_usd:.4f}")
        stop = f"{self.stop_note[0].upper()}{self.stop_note[1:]}. " if self.stop_note else ""
        if self.staged:
            return BuildError(
                f"rebuild incomplete, so the previous tree is kept: {len(still)} of "
                f"{report.mapped + report.unmapped} chunks are not in the new tree yet ({tally.failed} batch(es) "
                f"failed; last error: {why[:300]}). {stop}{spent}",
                hint=self._failure_hint("run `kt build --rebuild` again to resume the rebuild")
                or ("run the same `kt build --rebuild` again to resume: the chunks placed in the new tree so far "
                    "are kept and paid calls are served from the call log, so only the rest are sent"
                    if self.use_cache else "run `kt build --rebuild` again without --no-cache to resume the "
                    "rebuild from the chunks placed so far (--no-cache starts it over)"),
            )
        return BuildError(
            f"build incomplete: {len(still)} of {report.mapped + report.unmapped} chunks are unmapped "
            f"({tally.failed} batch(es) failed; last error: {why[:300]}). {stop}Unmapped: {shown}. {spent}",
            hint=self._failure_hint("run `kt build` again to resume (the chunks mapped so far are kept)")
            or ("run the same `kt build` again to resume: the chunks mapped so far are kept and paid calls are "
                "served from the call log, so only the unmapped chunks are sent" if self.use_cache else
                "run `kt build` again to resume: the chunks mapped so far are kept, so only the unmapped chunks "
                "are sent (without --no-cache, calls already paid for are served from the call log)"),
        )

    def _failure_hint(self, then: str) -> str | None:
        """What to do about the failures: raise the timeout, or set the limits the server really has."""
        timeouts = [f.timeout for f in self.failures if f.timeout is not None]
        if timeouts:
            return (f"{len(timeouts)} call(s) timed out after {max(timeouts):g} s per attempt: raise the timeout "
                    f"(--timeout SECONDS or KNOWTOLOGY_LLM_TIMEOUT), then {then}")
        hints = [f.hint for f in self.failures if f.hint and ("--context-window" in f.hint or "--max-output" in f.hint)]
        return f"{hints[-1]}; then {then}" if hints else None


def cluster_inputs(stores: BuildStores, collection: str, ids: Sequence[str],
                   info: dict[str, tuple[str, str, str, str]]) -> tuple[list[ClusterItem], np.ndarray]:
    """The offline namer's inputs for ``ids``: items (``info`` maps an id to ``(text, title, doc_id,
    file_name)``) and their unit vectors."""
    vectors = stores.vectors.vectors(collection, list(ids))
    rows = [np.asarray(vectors[i], dtype=np.float32) for i in ids]
    matrix = np.stack(rows) if rows else np.zeros((0, 1), dtype=np.float32)
    norms = np.linalg.norm(matrix, axis=1, keepdims=True)
    items = [ClusterItem(chunk_id=i, text=info[i][0], title=info[i][1], doc_id=info[i][2], file_name=info[i][3])
             for i in ids]
    return items, matrix / np.where(norms > 0, norms, 1.0)


def offline_group_names(stores: BuildStores, collection: str, groups: Sequence[Sequence[str]],
                        info: dict[str, tuple[str, str, str, str]]) -> list[tuple[str, str]]:
    """Offline ``(name, description)`` of each group of chunk ids, named as siblings by ``cluster.name_tree``.

    ``info`` maps a chunk id to ``(text, title, doc_id, file_name)``.
    """
    ids = [i for group in groups for i in group]
    items, unit = cluster_inputs(stores, collection, ids, info)
    keys = [f"group{k}" for k, group in enumerate(groups) for _ in group]
    named = name_tree(items, unit, keys)
    return [named.get(f"group{k}", (OTHER, "")) for k in range(len(groups))]


def run_llm_build(
    stores: BuildStores,
    collection: str,
    *,
    llm: LLMClient,
    rebuild: bool,
    dry_run: bool,
    concurrency: int,
    progress: ProgressFn,
    message: MessageFn,
    **options: Any,
) -> BuildReport:
    """Build or extend ``collection``'s tree with ``llm`` (see :class:`LLMTreeBuilder` for ``options``)."""
    builder = LLMTreeBuilder(stores, collection, llm, concurrency=concurrency, progress=progress, message=message,
                             **options)
    return builder.run(rebuild=rebuild, dry_run=dry_run)
