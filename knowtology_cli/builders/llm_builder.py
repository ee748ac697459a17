"""LLM tree builder: token-aware batches, CREATE then parallel EXTEND calls, validated, logged, resumable.

Design — "seeded EXTEND": one CREATE call, then EXTEND calls that may run in parallel.

1. The pending chunks are planned into token-aware batches (``batching.plan``): as many chunks per
   call as the model's context *and* output budget allow, so the call count stays at or below the
   seed's fixed batches wherever the seed's batches fit the model at all.
2. Without a tree, the first call is CREATE on a *stride sample* of the pending chunks (every
   k-th chunk, as many as fit one call), so the proposed taxonomy sees the whole collection and
   not just its first files — the taxonomy-from-a-sample idea of TNT-LLM, but without a separate
   taxonomy call: the sample's chunks are assigned by that same call.
3. Every other call is EXTEND: it sees the current tree (one leaf path per line, folded to a token
   budget) and places its chunks, creating categories only where nothing fits. EXTEND calls are
   independent of each other, so up to ``concurrency`` run at once (a bounded thread pool); each
   one is rendered against the tree as it stands when it is sent. Results are validated and
   applied on the calling thread, one transaction per call, as soon as each call returns, so a
   later call already sees the categories an earlier one created.
4. Because calls of one wave don't see each other's new categories, replies are reconciled when
   applied: a new category whose name is a near-duplicate of an existing sibling (case, punctuation,
   plural, word order, "&"/"and", catch-all synonyms such as Misc/Other, or a one-letter typo) is
   merged into that sibling before validation; ``validate.parse_reply`` then enforces depth ≤ 3 and
   the breadth caps (overflow goes to ``Other``) against the tree *including* everything applied
   before.

Why this and not strictly sequential CREATE/EXTEND, or a full two-phase TNT-LLM pipeline?
Measured with ``kt bench build`` (1,000 SciFact chunks, gpt-4o-mini profile with replies capped at
4,096 tokens so the build needs 23 calls, standalone fake server answering after 2 s):

=============  ======  ==========  ==========  ===========
concurrency    calls   wall time   tokens in   categories
=============  ======  ==========  ==========  ===========
1 (sequential)   23      51.2 s      384,862      108
2                23      25.9 s      384,143      103
4                23      15.7 s      384,663      111
8                23       9.4 s      383,819      117
=============  ======  ==========  ==========  ===========

Same calls, input tokens within 0.3 %, a tree of about the same size (near-duplicate merging
keeps parallel calls from inflating it; the fake server's keyword brain writes the replies, so
this says how replies are reconciled, not how good a real model's tree is), and wall time falling with the pool (5.4× at 8; the floor is
the CREATE call plus ceil(22 / N) rounds). Strictly sequential EXTEND would pin the build at the
first row. A two-phase design needs extra taxonomy calls (TNT-LLM summarises and refines over
several minibatches) that buy little over CREATE-on-a-sample, and a frozen taxonomy can't grow
for topics the sample missed. With ``concurrency=1`` this builder *is* the sequential
CREATE/EXTEND design and fully deterministic: identical inputs give identical prompts, which the
call log then serves for free. The plan needs no more calls than the seed's fixed batches for
every profile whose seed batches fit the model (SciFact, 5,183 chunks: gpt-4o-mini 26 vs 35,
claude-haiku-4-5 20 vs 52); gpt-4 (8k context) and gpt-4-turbo (4k output) need more, because
the seed's batches would overflow them.

Validation and repair (DESIGN §6): replies must have the schema's shape (else the client retries
them); unknown ids are ignored; chunks missing from a reply are sent again in a smaller follow-up
call (up to ``max_followups`` rounds); a reply cut at the output limit is split in halves; a batch
that still fails is logged as failed and the build ends with a :class:`BuildError` naming the
unmapped chunks and how to resume. Nothing already paid for is lost: every call is logged with
its response (the log doubles as a cache keyed by the prompt hash), and each reply is applied in
its own transaction right after the call, so a killed build resumes with only the unmapped chunks.
"""

from __future__ import annotations

import difflib
import hashlib
import json
import math
import re
import time
import uuid
from collections import deque
from collections.abc import Callable, Iterable, Sequence
from concurrent.futures import FIRST_COMPLETED, Future, ThreadPoolExecutor, wait
from dataclasses import dataclass, field
from typing import TYPE_CHECKING, Any

from ..errors import BuildError, LLMError, LLMOutputError
from ..llm.base import LLMTimeoutError, LLMTruncatedError
from ..models import BuildReport
from .batching import Batch, BatchLimits, ChunkCost, chunk_costs, plan, seed_calls
from .prompts import (
    PROMPT_VERSION,
    REPLY_SCHEMA_NAME,
    TREE_REPLY_SCHEMA,
    TreeCaps,
    build_messages,
    default_tree_tokens,
    prompt_overhead_tokens,
)
from .runner import _report, apply_reply, pending_work
from .snippets import make_snippet
from .validate import check_reply, parse_reply

if TYPE_CHECKING:
    from ..kb import KnowledgeBase
    from ..llm.base import LLMClient, LLMResponse
    from ..llm.profiles import ModelProfile

ProgressFn = Callable[[str, int, int], None]
MessageFn = Callable[[str], None]

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
    from ..tokens import count_tokens

    return lambda text: count_tokens(text, profile.encoding)


def prompt_hash(spec: str, system: str, user: str) -> str:
    """Cache key of one call: prompt version, provider:model and both messages."""
    blob = json.dumps([PROMPT_VERSION, spec, REPLY_SCHEMA_NAME, system, user], ensure_ascii=False)
    return hashlib.sha256(blob.encode()).hexdigest()


# ----------------------------------------------------------------------- near-duplicate merge
_CATCH_ALL = frozenset({"other", "others", "misc", "miscellaneous", "various", "uncategorized", "uncategorised",
                        "unsorted", "topic", "topics", "other topics"})
_STOP = frozenset({"and", "of", "the", "for", "in", "on", "to", "a", "an", "with"})
_NONWORD = re.compile(r"[^0-9a-z]+")


def _singular(word: str) -> str:
    if len(word) > 4 and word.endswith("ies"):
        return word[:-3] + "y"
    if len(word) > 3 and word.endswith("s") and not word.endswith(("ss", "us", "is")):
        return word[:-1]
    return word


def name_key(name: str) -> str:
    """What two category names must share to count as the same: words, singular, sorted."""
    words = [w for w in _NONWORD.split(name.casefold().replace("&", " and ")) if w and w not in _STOP]
    if not words or set(words) <= _CATCH_ALL:
        return "\x00other"
    return " ".join(sorted(_singular(w) for w in words))


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


@dataclass
class _Tally:
    calls: int = 0
    cached: int = 0
    failed: int = 0
    followups: int = 0
    splits: int = 0
    input_tokens: int = 0
    output_tokens: int = 0
    cost_usd: float = 0.0
    notes: list[str] = field(default_factory=list)


class LLMTreeBuilder:
    """Builds or extends one collection's tree with an LLM (see the module docstring).

    Args:
        kb: the knowledge base (tree store, vector store).
        collection: the collection to map.
        llm: the client; its ``profile`` sizes the batches.
        concurrency: EXTEND calls in flight at once (1 = strictly sequential).
        caps: depth and breadth of the tree.
        limits: batching knobs (``batching.BatchLimits``).
        per_chunk_cap: tokens of text sent per chunk.
        max_followups: rounds of smaller calls for chunks a reply left out or that failed.
        max_consecutive_failures: calls failing in a row (provider down) before the build stops.
        use_cache: serve identical prompts from the call log.
    """

    def __init__(
        self,
        kb: KnowledgeBase,
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
        self.kb = kb
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

    # ------------------------------------------------------------------------ public
    def run(self, *, rebuild: bool = False, dry_run: bool = False) -> BuildReport:
        """Plan, then (unless ``dry_run``) call, validate and apply; see ``KnowledgeBase.build``.

        Raises:
            BuildError: chunks are still unmapped at the end (the message says how to resume).
        """
        started = time.perf_counter()
        pending, orphans, hashes = pending_work(self.kb, self.collection)
        if rebuild:
            pending = sorted(hashes)
        self.hashes = hashes
        self.paths: list[str] = [] if rebuild else [n.path for n in self.kb.tree.nodes(self.collection)]
        self.replace_next = rebuild
        spec = self.llm.spec
        if not pending and not orphans:
            return self._finish(started, dry_run, [f"tree is up to date; no calls ({spec})"], 0, _Tally())
        self._load(pending)
        costs = chunk_costs([(i, self.texts[i]) for i in self.order], self.profile, per_chunk_cap=self.per_chunk_cap)
        self.costs = {c.chunk_id: c for c in costs}
        tree_tokens = None
        if self.paths:
            from .prompts import render_tree

            tree_tokens = _counter(self.profile)(render_tree(self.paths))
        build_plan = plan_build(costs, self.profile, has_tree=bool(self.paths), caps=self.caps, limits=self.limits,
                                per_chunk_cap=self.per_chunk_cap, tree_tokens=tree_tokens)
        self.tree_budget = build_plan.tree_budget
        plan_note = (f"plan: {len(pending)} chunks in {build_plan.calls} calls "
                     f"({'1 CREATE + ' if build_plan.create else ''}{len(build_plan.extend)} EXTEND; "
                     f"the seed's fixed batches: {build_plan.seed_calls} calls) with {spec}")
        if dry_run:
            tally = _Tally(calls=build_plan.calls, input_tokens=build_plan.input_tokens,
                           output_tokens=build_plan.output_tokens, cost_usd=build_plan.cost_usd)
            notes = [plan_note, "dry run: estimated tokens and cost at list price"
                     + ("" if build_plan.price_known else f" (no price known for {self.llm.model}: cost shows 0)")
                     + "; retries and follow-up calls not included; nothing was called"]
            if orphans:
                notes.append(f"{len(orphans)} deleted chunks would leave the tree")
            return self._finish(started, True, notes, build_plan.calls, tally)
        self.message(plan_note)
        if orphans:
            self.kb.tree.apply(self.collection, [], [], remove=orphans)
            if not rebuild:  # a rebuild starts from no tree whatever the old one holds
                self.paths = [n.path for n in self.kb.tree.nodes(self.collection)]
        tally = self._execute(build_plan)
        notes = [plan_note, *tally.notes]
        if orphans:
            notes.append(f"removed {len(orphans)} deleted chunks from the tree")
        if self.done or orphans:  # a build that changed nothing (every call failed) leaves the store as it was
            self.kb.tree.set_builder(self.collection, "llm")
        report = self._finish(started, False, notes, build_plan.calls, tally)
        still, _, _ = pending_work(self.kb, self.collection)
        if self.replace_next and self.order:  # --rebuild, and not one reply could be applied
            raise BuildError(
                f"rebuild failed: no reply could be applied, so the previous tree is kept "
                f"({tally.failed} batch(es) failed; last error: "
                f"{(self.failures[-1].error if self.failures else 'none')[:300]}). This run: {tally.calls} calls, "
                f"{tally.input_tokens:,} tokens in, {tally.output_tokens:,} out, ${tally.cost_usd:.4f}",
                hint=self._timeout_hint("run `kt build --rebuild` again")
                or "check the provider and run `kt build --rebuild` again",
            )
        if still:
            raise self._incomplete(still, report, tally)
        return report

    # ------------------------------------------------------------------------ inputs
    def _load(self, pending: Sequence[str]) -> None:
        chunks = []
        for start in range(0, len(pending), 2000):
            chunks.extend(self.kb.vectors.get(self.collection, list(pending[start:start + 2000])))
        chunks.sort(key=lambda c: (c.file_name, c.doc_id, c.chunk_index, c.chunk_id))
        self.order = [c.chunk_id for c in chunks]
        self.texts: dict[str, str] = {}
        self.titles: dict[str, str] = {}
        for c in chunks:
            title = c.title.strip()
            self.titles[c.chunk_id] = title
            head = c.text.lstrip()[: len(title) + 40]
            self.texts[c.chunk_id] = f"{title}\n{c.text}" if title and title not in head else c.text

    def _snippet(self, chunk_id: str) -> str:
        return make_snippet(self.texts.get(chunk_id, ""), self.titles.get(chunk_id, ""))

    def _task(self, ids: Sequence[str], depth: int, reason: str) -> list[_Task]:
        """Tasks for ``ids`` sized by the planner (a subset of a feasible batch is one call)."""
        costs = [self.costs[i] for i in ids]
        p_tokens = prompt_overhead_tokens(_counter(self.profile), self.caps, extend=True)
        batches = plan(costs, self.profile, prompt_tokens=p_tokens, tree_tokens=self.tree_budget,
                       per_chunk_cap=self.per_chunk_cap, limits=self.limits)
        return [_Task(b.chunk_ids, b.max_output_tokens, depth, reason) for b in batches]

    # ------------------------------------------------------------------------ the call loop
    def _execute(self, build_plan: BuildPlan) -> _Tally:
        tally = _Tally()
        self.failures: list[_Failure] = []
        self.done = 0
        total = build_plan.chunks
        queue: deque[_Task] = deque(_Task(b.chunk_ids, b.max_output_tokens) for b in build_plan.batches)
        in_flight: dict[Future[LLMResponse], _Sent] = {}
        usage0 = (self.llm.usage.input_tokens, self.llm.usage.output_tokens, self.llm.usage.cost_usd)
        consecutive = 0
        stopped: str | None = None
        self.merges = 0
        self.repairs: list[str] = []
        self.progress("mapping", 0, total)
        pool = ThreadPoolExecutor(max_workers=self.concurrency, thread_name_prefix="kt-llm")
        try:
            while (queue and stopped is None) or in_flight:
                # no tree yet: one call at a time until a CREATE reply has been applied
                while queue and stopped is None and len(in_flight) < (self.concurrency if self.paths else 1):
                    task = queue.popleft()
                    kind = ("extend" if task.depth == 0 else "followup") if self.paths else "create"
                    system, user = build_messages(
                        [(i, self.texts[i]) for i in task.chunk_ids], self.paths or None, caps=self.caps,
                        per_chunk_cap=self.per_chunk_cap, tree_max_tokens=self.tree_budget,
                    )
                    h = prompt_hash(self.llm.spec, system, user)
                    cached = self.kb.tree.cached_response(h) if self.use_cache else None
                    if cached is not None:
                        tally.cached += 1
                        queue.extendleft(reversed(self._accept(task, cached["response"], tally)))
                        continue
                    fut = pool.submit(self._call, system, user, task.max_output_tokens)
                    in_flight[fut] = _Sent(task, kind, h, time.perf_counter())
                if not in_flight:
                    continue
                finished, _ = wait(in_flight, return_when=FIRST_COMPLETED)
                for fut in sorted(finished, key=lambda f: in_flight[f].started):
                    sent = in_flight.pop(fut)
                    more, ok, fatal = self._handle(sent, fut, tally)
                    queue.extendleft(reversed(more))
                    consecutive = 0 if ok else consecutive + (1 if fatal else 0)
                    if consecutive >= self.max_consecutive_failures and stopped is None:
                        stopped = f"stopped after {consecutive} failed calls in a row"
                        self.message(stopped + "; waiting for calls in flight")
                    self._say(tally, usage0, total)
        except BaseException:
            pool.shutdown(wait=False, cancel_futures=True)  # interrupted: don't wait for calls in flight
            raise
        pool.shutdown(wait=True)
        if stopped:
            tally.notes.append(stopped + f"; {sum(len(t.chunk_ids) for t in queue)} chunks not sent")
        tally.input_tokens = self.llm.usage.input_tokens - usage0[0]
        tally.output_tokens = self.llm.usage.output_tokens - usage0[1]
        tally.cost_usd = self.llm.usage.cost_usd - usage0[2]
        if tally.cached:
            tally.notes.append(f"{tally.cached} calls served from the call log (identical prompts)")
        if not self.use_cache:
            tally.notes.append("call log not consulted (no cache): every prompt was sent to the model")
        if tally.followups or tally.splits:
            tally.notes.append(f"repair: {tally.followups} follow-up calls for missing chunks, "
                               f"{tally.splits} batches split after unusable replies")
        if self.merges:
            tally.notes.append(f"merged {self.merges} near-duplicate category names into existing ones")
        if self.repairs:
            tally.notes.append(f"validation repaired {len(self.repairs)} items (e.g. {self.repairs[0]})")
        return tally

    def _call(self, system: str, user: str, max_output_tokens: int) -> LLMResponse:
        return self.llm.complete_json(system, user, TREE_REPLY_SCHEMA, max_output_tokens=max_output_tokens,
                                      schema_name=REPLY_SCHEMA_NAME, validate=check_reply)

    def _log(self, sent: _Sent, status: str, *, resp: LLMResponse | None = None, error: str | None = None) -> None:
        self.kb.tree.log_call({
            "collection": self.collection, "build_id": self.build_id, "kind": sent.kind,
            "model": (resp.model if resp and resp.model else self.llm.spec), "prompt_hash": sent.prompt_hash,
            "chunk_count": len(sent.task.chunk_ids),
            "input_tokens": resp.input_tokens if resp else 0, "output_tokens": resp.output_tokens if resp else 0,
            "cost_usd": resp.cost_usd if resp else 0.0, "status": status, "error": error,
            "response": resp.data if resp else None,
            "seconds": round(time.perf_counter() - sent.started, 3),
        })

    def _handle(self, sent: _Sent, fut: Future[LLMResponse], tally: _Tally) -> tuple[list[_Task], bool, bool]:
        """Log and apply one finished call: (tasks to queue, succeeded?, counts toward a stop?)."""
        task = sent.task
        tally.calls += 1
        try:
            resp = fut.result()
        except LLMTruncatedError as exc:
            self._log(sent, "truncated", error=str(exc)[:500])
            return self._split(task, tally, str(exc)), False, False
        except LLMOutputError as exc:
            self._log(sent, "error", error=str(exc)[:500])
            return self._split(task, tally, str(exc)), False, False
        except LLMError as exc:
            self._log(sent, "error", error=str(exc)[:500])
            self._fail(task.chunk_ids, str(exc), tally,
                       timeout=exc.timeout if isinstance(exc, LLMTimeoutError) else None)
            return [], False, True
        self._log(sent, "ok", resp=resp)  # logged before it is applied: a kill in between is served from the log
        return self._accept(task, resp.data, tally), True, False

    def _split(self, task: _Task, tally: _Tally, error: str) -> list[_Task]:
        if len(task.chunk_ids) == 1 or task.depth >= self.max_followups:
            self._fail(task.chunk_ids, error, tally)
            return []
        tally.splits += 1
        half = (len(task.chunk_ids) + 1) // 2
        return [t for part in (task.chunk_ids[:half], task.chunk_ids[half:])
                for t in self._task(part, task.depth + 1, "split")]

    def _fail(self, ids: Sequence[str], error: str, tally: _Tally, *, timeout: float | None = None) -> None:
        tally.failed += 1
        self.failures.append(_Failure(tuple(ids), error, timeout))
        self.message(f"batch of {len(ids)} chunks failed: {error[:200]}")

    def _accept(self, task: _Task, data: Any, tally: _Tally) -> list[_Task]:
        """Validate a reply against the current tree, apply it, and return follow-up tasks."""
        merger = NameMerger(self.paths)
        if isinstance(data, dict):
            data = merger.rewrite(data)
        try:
            valid = parse_reply(data, task.chunk_ids, existing_paths=self.paths, caps=self.caps)
        except LLMOutputError as exc:
            return self._split(task, tally, str(exc))
        self.merges += merger.merged
        self.repairs.extend(valid.notes)
        if valid.assignments:
            reply = valid.to_tree_reply(self._snippet)
            apply_reply(self.kb, self.collection, reply, self.hashes, replace=self.replace_next)
            self.replace_next = False
            self.paths = [n.path for n in self.kb.tree.nodes(self.collection)]
            self.done += len(valid.assignments)
            self.progress("mapping", self.done, len(self.order))
        if not valid.missing_ids:
            return []
        if task.depth >= self.max_followups:
            self._fail(valid.missing_ids, f"{len(valid.missing_ids)} chunks still missing from replies after "
                                          f"{task.depth} follow-up calls", tally)
            return []
        tally.followups += 1
        return self._task(valid.missing_ids, task.depth + 1, "missing")

    def _say(self, tally: _Tally, usage0: tuple[int, int, float], total: int) -> None:
        u = self.llm.usage
        self.message(f"{self.done}/{total} chunks mapped · {tally.calls} calls ({tally.cached} cached) · "
                     f"{u.input_tokens - usage0[0]:,} tokens in / {u.output_tokens - usage0[1]:,} out · "
                     f"${u.cost_usd - usage0[2]:.4f}")

    # ------------------------------------------------------------------------ results
    def _finish(self, started: float, dry_run: bool, notes: list[str], batches: int, tally: _Tally) -> BuildReport:
        return _report(
            self.kb, self.collection, "llm", started, dry_run=dry_run, notes=notes, batches=batches,
            llm_calls=tally.calls, cached_calls=tally.cached, input_tokens=tally.input_tokens,
            output_tokens=tally.output_tokens, cost_usd=round(tally.cost_usd, 6), model=self.llm.spec,
        )

    def _incomplete(self, still: list[str], report: BuildReport, tally: _Tally) -> BuildError:
        shown = ", ".join(still[:8]) + (f" … (+{len(still) - 8} more)" if len(still) > 8 else "")
        why = self.failures[-1].error if self.failures else "no reply assigned them"
        return BuildError(
            f"build incomplete: {len(still)} of {report.mapped + report.unmapped} chunks are unmapped "
            f"({tally.failed} batch(es) failed; last error: {why[:300]}). Unmapped: {shown}. "
            f"This run: {tally.calls} calls ({tally.cached} cached), {tally.input_tokens:,} tokens in, "
            f"{tally.output_tokens:,} out, ${tally.cost_usd:.4f}",
            hint=self._timeout_hint("run `kt build` again to resume (the chunks mapped so far are kept)")
            or ("run the same `kt build` again to resume: the chunks mapped so far are kept and paid calls are "
                "served from the call log, so only the unmapped chunks are sent" if self.use_cache else
                "run `kt build` again to resume: the chunks mapped so far are kept, so only the unmapped chunks "
                "are sent (without --no-cache, calls already paid for are served from the call log)"),
        )

    def _timeout_hint(self, then: str) -> str | None:
        """What to do when the failed calls ran out of time: raise the per-attempt timeout."""
        timeouts = [f.timeout for f in self.failures if f.timeout is not None]
        if not timeouts:
            return None
        return (f"{len(timeouts)} call(s) timed out after {max(timeouts):g} s per attempt: raise the timeout "
                f"(--timeout SECONDS or KNOWTOLOGY_LLM_TIMEOUT), then {then}")


def run_llm_build(
    kb: KnowledgeBase,
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
    builder = LLMTreeBuilder(kb, collection, llm, concurrency=concurrency, progress=progress, message=message,
                             **options)
    return builder.run(rebuild=rebuild, dry_run=dry_run)
