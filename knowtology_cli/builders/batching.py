"""Token-aware batching: pack chunks into calls that can overflow neither the context nor the output."""

from __future__ import annotations

import json
import math
from collections.abc import Sequence
from dataclasses import dataclass

from pydantic import BaseModel, ConfigDict, Field

from knowtology_cli.errors import ConfigError
from knowtology_cli.llm.profiles import ModelProfile
from knowtology_cli.tokens import count_tokens as count

from .prompts import CountTokens, render_chunk

#: A realistic assignment at the top of the snippet range, pretty-printed as models often do.
_ASSIGNMENT_TEMPLATE = json.dumps(
    {
        "chunk_id": "",
        "path": "Clinical Research Methods/Randomized Controlled Trials/Outcome Measures",
        "snippet": "Randomized trial of 412 adults finds the intervention lowers systolic blood "
        "pressure by 8 mmHg over twelve weeks.",
    },
    indent=6,
) + ",\n    "


@dataclass(frozen=True)
class BatchLimits:
    """Knobs of the planner (defaults are safe for every built-in profile).

    Attributes:
        per_chunk_cap: tokens of chunk text sent per chunk.
        context_margin: fraction of the context window kept free.
        output_margin: fraction of the output budget kept free (models write longer than asked).
        max_output_tokens: output budget per call; default ``min(profile.max_output_tokens,
            24_576)``: large enough for every seed batch size, small enough that a reply finishes
            well inside the client's default 600 s timeout even on slow models (~45 tokens/s).
        category_tokens: output tokens allowed per category in a reply.
        max_categories: categories allowed for in one reply.
        max_batch_chunks: optional hard cap on chunks per call.
    """

    per_chunk_cap: int = 400
    context_margin: float = 0.05
    output_margin: float = 0.10
    max_output_tokens: int | None = None
    category_tokens: int = 40
    max_categories: int = 60
    max_batch_chunks: int | None = None

    def output_budget(self, profile: ModelProfile) -> int:
        return min(profile.max_output_tokens, self.max_output_tokens or 24_576)


@dataclass(frozen=True)
class ChunkCost:
    """Provider tokens one chunk adds to a call's input and expected output."""

    chunk_id: str
    input_tokens: int
    output_tokens: int


class Batch(BaseModel):
    """One planned call: its chunks, token estimates and the ``max_output_tokens`` to request."""

    model_config = ConfigDict(frozen=True)

    chunk_ids: tuple[str, ...]
    input_tokens: int
    output_tokens: int
    max_output_tokens: int


class PlanEstimate(BaseModel):
    """What a build would cost: calls and tokens (expected, not worst case) and USD at list price."""

    model_config = ConfigDict(frozen=True)

    model: str
    chunks: int
    calls: int
    seed_calls: int
    input_tokens: int
    output_tokens: int
    cost_usd: float
    price_known: bool = True
    largest_batch: int = 0
    smallest_batch: int = 0
    batches: list[Batch] = Field(default_factory=list, exclude=True)


def _provider_counter(profile: ModelProfile, count_tokens: CountTokens | None) -> CountTokens:
    if count_tokens is not None:
        return count_tokens

    return lambda text: count(text, profile.encoding)


def assignment_tokens(count_tokens: CountTokens) -> int:
    """Output tokens of one assignment apart from its chunk id (the template, counted once)."""
    return count_tokens(_ASSIGNMENT_TEMPLATE)


def category_allowance(n: int, limits: BatchLimits) -> int:
    """Output tokens reserved for the ``categories`` list of a reply assigning ``n`` chunks."""
    if n <= 0:
        return 0
    return limits.category_tokens * min(limits.max_categories, 3 + n // 2)


def chunk_costs(
    items: Sequence[tuple[str, str]],
    profile: ModelProfile,
    *,
    per_chunk_cap: int = 400,
    count_tokens: CountTokens | None = None,
) -> list[ChunkCost]:
    """Input and output tokens of every chunk, in the provider's tokens (``profile.token_ratio``)."""
    count = _provider_counter(profile, count_tokens)
    fixed = assignment_tokens(count)
    out = []
    for chunk_id, text in items:
        block = render_chunk(chunk_id, text, per_chunk_cap=per_chunk_cap, count_tokens=count_tokens)
        id_tokens = count(json.dumps(chunk_id, ensure_ascii=False))
        # +2: BPE merges across the newline that joins blocks can differ by a token or two; the id
        # is also one entry of the reply schema's chunk_id enum (``prompts.tree_reply_schema``)
        out.append(ChunkCost(
            chunk_id,
            profile.provider_tokens(count(block) + 2 + id_tokens + 1),
            profile.provider_tokens(fixed + id_tokens),
        ))
    return out


class _Packer:
    def __init__(self, profile: ModelProfile, prompt_tokens: int, tree_tokens: int, limits: BatchLimits):
        self.limits = limits
        self.fixed_in = profile.provider_tokens(prompt_tokens + tree_tokens)
        self.out_cap = limits.output_budget(profile)
        self.out_usable = math.floor(self.out_cap * (1 - limits.output_margin))
        self.ctx_usable = math.floor(profile.context_window * (1 - limits.context_margin))

    def fits(self, n: int, in_sum: int, out_sum: int) -> bool:
        if self.limits.max_batch_chunks and n > self.limits.max_batch_chunks:
            return False
        expected_out = out_sum + category_allowance(n, self.limits)
        if expected_out > self.out_usable:
            return False
        reserved_out = math.ceil(expected_out / (1 - self.limits.output_margin))
        return self.fixed_in + in_sum + reserved_out <= self.ctx_usable

    def batch(self, costs: Sequence[ChunkCost]) -> Batch:
        in_tok = self.fixed_in + sum(c.input_tokens for c in costs)
        out_tok = sum(c.output_tokens for c in costs) + category_allowance(len(costs), self.limits)
        # feasibility guarantees ctx_usable - in_tok >= out_tok / (1 - output_margin)
        return Batch(
            chunk_ids=tuple(c.chunk_id for c in costs), input_tokens=in_tok, output_tokens=out_tok,
            max_output_tokens=min(self.out_cap, self.ctx_usable - in_tok),
        )

    def pack(self, costs: Sequence[ChunkCost], cap: int | None = None) -> list[list[ChunkCost]]:
        batches: list[list[ChunkCost]] = []
        current: list[ChunkCost] = []
        in_sum = out_sum = 0
        for cost in costs:
            n = len(current) + 1
            if current and ((cap is not None and n > cap)
                            or not self.fits(n, in_sum + cost.input_tokens, out_sum + cost.output_tokens)):
                batches.append(current)
                current, in_sum, out_sum = [], 0, 0
            if not current and not self.fits(1, cost.input_tokens, cost.output_tokens):
                raise ConfigError(
                    f"chunk {cost.chunk_id!r} does not fit one call: prompt + tree + chunk need "
                    f"{self.fixed_in + cost.input_tokens} input tokens, the model allows "
                    f"{self.ctx_usable} (context minus margins and reply)",
                    hint="the model's context is too small for one chunk: if it is larger, say so with "
                         "--context-window N (or context_window in [profiles.\"MODEL\"] of config.toml); else "
                         "use a model with a larger context",
                )
            current.append(cost)
            in_sum += cost.input_tokens
            out_sum += cost.output_tokens
        if current:
            batches.append(current)
        return batches


def plan(
    items: Sequence[tuple[str, str]] | Sequence[ChunkCost],
    profile: ModelProfile,
    *,
    prompt_tokens: int,
    tree_tokens: int = 0,
    per_chunk_cap: int = 400,
    count_tokens: CountTokens | None = None,
    limits: BatchLimits | None = None,
) -> list[Batch]:
    """Pack ``items`` into batches, with per-batch token estimates and ``max_output_tokens``.

    Each chunk costs input tokens (its rendered ``<chunk>`` block, text cut to ``per_chunk_cap``)
    and output tokens (its assignment: id + path + snippet, JSON framing). A batch is feasible when

    * expected output = Σ assignment tokens + category allowance ≤ output budget × (1 - output_margin)
    * prompt + tree + Σ chunk tokens + expected output / (1 - output_margin)
      ≤ context × (1 - context_margin)

    Both sums only grow with more chunks, so every subset of a feasible batch is feasible. Batches
    are packed greedily in input order (neighbouring chunks stay together), then evened out without
    adding a call. If every run of ``seed_batch_size`` consecutive chunks is feasible, greedy packing
    needs at most ``ceil(n / seed_batch_size)`` calls, and fewer whenever chunks are short.

    Args:
        items: ``(chunk_id, text)`` pairs in the order to keep, or precomputed :class:`ChunkCost`.
        profile: the model's limits.
        prompt_tokens: tokens of everything but chunks and tree (``prompts.prompt_overhead_tokens``).
        tree_tokens: budget of the tree listing in EXTEND calls (render the tree with the same
            ``max_tokens``); 0 for a CREATE-only plan.
        per_chunk_cap: chunk text budget, as passed to ``prompts.render_user``.
        count_tokens: token counter (default: tiktoken with ``profile.encoding``).
        limits: other knobs; ``limits.per_chunk_cap`` is overridden by ``per_chunk_cap``.

    Raises:
        ConfigError: one chunk alone cannot fit a call (context too small for prompt + tree).
    """
    limits = limits or BatchLimits()
    if limits.per_chunk_cap != per_chunk_cap:
        limits = BatchLimits(**{**limits.__dict__, "per_chunk_cap": per_chunk_cap})
    costs: list[ChunkCost]
    if items and isinstance(items[0], ChunkCost):
        costs = list(items)  # type: ignore[arg-type]
    else:
        costs = chunk_costs(items, profile, per_chunk_cap=per_chunk_cap, count_tokens=count_tokens)  # type: ignore[arg-type]
    if not costs:
        return []
    packer = _Packer(profile, prompt_tokens, tree_tokens, limits)
    greedy = packer.pack(costs)
    if len(greedy) > 1:
        # even the batches out (no tiny last call) without adding one
        even = packer.pack(costs, cap=math.ceil(len(costs) / len(greedy)))
        if len(even) == len(greedy):
            greedy = even
    return [packer.batch(b) for b in greedy]


def plan_batches(
    items: Sequence[tuple[str, str]],
    profile: ModelProfile,
    *,
    prompt_tokens: int,
    tree_tokens: int = 0,
    per_chunk_cap: int = 400,
    count_tokens: CountTokens | None = None,
    limits: BatchLimits | None = None,
) -> list[list[str]]:
    """The chunk ids of each call, in order (see :func:`plan` for the arguments)."""
    batches = plan(items, profile, prompt_tokens=prompt_tokens, tree_tokens=tree_tokens,
                   per_chunk_cap=per_chunk_cap, count_tokens=count_tokens, limits=limits)
    return [list(b.chunk_ids) for b in batches]


def seed_calls(n: int, profile: ModelProfile) -> int:
    """Calls the seed implementation made for ``n`` chunks (fixed batches of ``seed_batch_size``)."""
    return math.ceil(n / profile.seed_batch_size) if n else 0


def estimate_plan(
    items: Sequence[tuple[str, str]],
    profile: ModelProfile,
    *,
    prompt_tokens: int,
    tree_tokens: int = 0,
    per_chunk_cap: int = 400,
    count_tokens: CountTokens | None = None,
    limits: BatchLimits | None = None,
    create_prompt_tokens: int | None = None,
) -> PlanEstimate:
    """A dry run: calls, expected input/output tokens and cost at list price.

    The first call is a CREATE call (no tree: ``create_prompt_tokens`` if given, tree 0); the
    others carry the tree budget. Retries and follow-up calls for missing ids are not included.
    """
    batches = plan(items, profile, prompt_tokens=prompt_tokens, tree_tokens=tree_tokens,
                   per_chunk_cap=per_chunk_cap, count_tokens=count_tokens, limits=limits)
    in_tok = sum(b.input_tokens for b in batches)
    if batches:
        first_prompt = prompt_tokens if create_prompt_tokens is None else create_prompt_tokens
        in_tok -= profile.provider_tokens(prompt_tokens + tree_tokens) - profile.provider_tokens(first_prompt)
    out_tok = sum(b.output_tokens for b in batches)
    sizes = [len(b.chunk_ids) for b in batches]
    return PlanEstimate(
        model=profile.name,
        chunks=len(items),
        calls=len(batches),
        seed_calls=seed_calls(len(items), profile),
        input_tokens=in_tok,
        output_tokens=out_tok,
        cost_usd=round(profile.cost(in_tok, out_tok), 6),
        price_known=profile.known,
        largest_batch=max(sizes, default=0),
        smallest_batch=min(sizes, default=0),
        batches=batches,
    )

