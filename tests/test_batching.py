"""Token-aware batching: never overflow, never more calls than the seed, fewer for short chunks."""

from __future__ import annotations

import json
import math
import random

import pytest
from conftest import BENCH_DATA

from knowtology_cli.builders.batching import (
    BatchLimits,
    chunk_costs,
    estimate_plan,
    plan,
    plan_batches,
    seed_calls,
)
from knowtology_cli.builders.prompts import (
    TREE_REPLY_SCHEMA,
    build_messages,
    default_tree_tokens,
    prompt_overhead_tokens,
)
from knowtology_cli.errors import ConfigError
from knowtology_cli.llm.profiles import DEFAULT_PROFILE, PROFILES, get_profile
from knowtology_cli.tokens import count_tokens

WORDS = (
    "cell protein gene expression tumor patients trial randomized dose mice receptor pathway signaling "
    "immune response infection virus bacteria cohort risk mortality clinical outcome treatment therapy "
    "mutation sequencing genome brain neurons cortex insulin glucose obesity diabetes heart blood vessel"
).split()


def corpus(n: int, low: int, high: int, seed: int = 0) -> list[tuple[str, str]]:
    """``n`` chunks of ``low``-``high`` words with SciFact-like ids (a numeric string)."""
    rng = random.Random(seed)
    return [
        (str(rng.randrange(1_000, 40_000_000)), " ".join(rng.choice(WORDS) for _ in range(rng.randint(low, high))))
        for _ in range(n)
    ]


def counter(profile):
    return lambda text: count_tokens(text, profile.encoding)


def overhead(profile) -> tuple[int, int]:
    return prompt_overhead_tokens(counter(profile)), default_tree_tokens(profile.context_window)


# SciFact abstracts: ~200-300 words (≈ 250-450 tokens) with a title
SCIFACT_LIKE = corpus(1000, 150, 330)


@pytest.mark.parametrize("name", ["gpt-4o", "gpt-4o-mini", "gpt-3.5-turbo", "claude-opus-4-6",
                                  "claude-sonnet-4-6", "claude-haiku-4-5"])
def test_never_more_calls_than_the_seed(name):
    profile = PROFILES[name]
    prompt, tree = overhead(profile)
    batches = plan_batches(SCIFACT_LIKE, profile, prompt_tokens=prompt, tree_tokens=tree)
    assert len(batches) <= seed_calls(1000, profile)
    assert [i for b in batches for i in b] == [i for i, _ in SCIFACT_LIKE]  # every chunk once, in order


def test_gpt4o_1000_chunks_within_seven_calls():
    profile = PROFILES["gpt-4o"]
    prompt, tree = overhead(profile)
    est = estimate_plan(SCIFACT_LIKE, profile, prompt_tokens=prompt, tree_tokens=tree)
    assert est.seed_calls == 7
    assert est.calls <= 7


@pytest.mark.parametrize("name", ["gpt-4o", "gpt-4o-mini", "claude-sonnet-4-6", "claude-haiku-4-5"])
def test_short_chunks_need_fewer_calls(name):
    profile = PROFILES[name]
    prompt, tree = overhead(profile)
    short = corpus(1000, 10, 30, seed=1)
    assert len(plan_batches(short, profile, prompt_tokens=prompt, tree_tokens=tree)) < seed_calls(1000, profile)


@pytest.mark.parametrize("name", [*PROFILES, "some-local-model"])
@pytest.mark.parametrize("lengths", [(5, 20), (150, 330), (400, 900)])
def test_no_batch_can_overflow(name, lengths):
    profile = get_profile(name)
    prompt, tree = overhead(profile)
    items = corpus(300, *lengths, seed=2)
    limits = BatchLimits()
    for b in plan(items, profile, prompt_tokens=prompt, tree_tokens=tree, limits=limits):
        assert b.input_tokens + b.max_output_tokens <= profile.context_window
        assert b.output_tokens <= b.max_output_tokens <= profile.max_output_tokens
        assert b.output_tokens <= limits.output_budget(profile) * (1 - limits.output_margin)


@pytest.mark.parametrize("name", ["gpt-4o-mini", "gpt-4", "claude-haiku-4-5"])
def test_planned_input_bounds_the_real_prompt(name):
    """The estimate is an upper bound of the messages that will really be sent."""
    profile = PROFILES[name]
    count = counter(profile)
    items = corpus(400, 100, 700, seed=3)
    tree_paths = [f"Topic {i}/Area {j}/Leaf {k}" for i in range(12) for j in range(8) for k in range(8)]
    tree_budget = default_tree_tokens(profile.context_window)
    prompt = prompt_overhead_tokens(count)
    text = dict(items)
    for b in plan(items, profile, prompt_tokens=prompt, tree_tokens=tree_budget, count_tokens=count):
        system, user = build_messages([(i, text[i]) for i in b.chunk_ids], tree_paths,
                                      tree_max_tokens=tree_budget, count_tokens=count)
        real = count(system) + count(user) + count(json.dumps(TREE_REPLY_SCHEMA))
        assert real <= profile.provider_tokens(real) <= b.input_tokens


def test_seed_batches_that_overflow_are_split():
    """gpt-4's 8k context can't hold the seed's 50 SciFact-sized chunks: more calls, none overflowing."""
    profile = PROFILES["gpt-4"]
    prompt, tree = overhead(profile)
    batches = plan(SCIFACT_LIKE[:200], profile, prompt_tokens=prompt, tree_tokens=tree)
    assert len(batches) > seed_calls(200, profile)
    assert all(b.input_tokens + b.max_output_tokens <= profile.context_window for b in batches)


def test_batches_are_evened_out():
    profile = PROFILES["gpt-4o-mini"]
    sizes = [len(b) for b in plan_batches(corpus(450, 150, 330), profile, prompt_tokens=1200, tree_tokens=0)]
    assert max(sizes) - min(sizes) <= max(sizes) // 2


def test_max_batch_chunks_is_respected():
    profile = PROFILES["claude-opus-4-6"]
    batches = plan_batches(corpus(100, 5, 10), profile, prompt_tokens=1200,
                           limits=BatchLimits(max_batch_chunks=30))
    assert max(len(b) for b in batches) <= 30 and len(batches) == 4


def test_pure_logic_with_a_simple_counter():
    profile = DEFAULT_PROFILE.with_overrides(context_window=10_000, max_output_tokens=2_000, token_ratio=1.0)
    items = [(f"c{i}", "x" * 400) for i in range(40)]  # 100 "tokens" of text each with len // 4
    batches = plan(items, profile, prompt_tokens=1000, count_tokens=lambda t: len(t) // 4)
    assert sum(len(b.chunk_ids) for b in batches) == 40
    for b in batches:
        assert b.input_tokens + b.max_output_tokens <= 10_000


def test_chunk_text_is_capped_per_chunk():
    profile = PROFILES["gpt-4o"]
    long_text = " ".join(["word"] * 5000)
    (cost,) = chunk_costs([("a", long_text)], profile, per_chunk_cap=400)
    assert 400 < cost.input_tokens < 420


def test_a_context_too_small_for_one_chunk_is_a_config_error():
    profile = DEFAULT_PROFILE.with_overrides(context_window=1_000)
    with pytest.raises(ConfigError, match="does not fit one call"):
        plan([("a", "text " * 300)], profile, prompt_tokens=800)


def test_empty_input_plans_nothing():
    est = estimate_plan([], PROFILES["gpt-4o"], prompt_tokens=1000)
    assert (est.calls, est.seed_calls, est.input_tokens, est.cost_usd) == (0, 0, 0, 0.0)


def test_estimate_adds_up_and_prices_at_list_price():
    profile = PROFILES["gpt-4o-mini"]
    create, extend = prompt_overhead_tokens(extend=False), prompt_overhead_tokens()
    tree = default_tree_tokens(profile.context_window)
    est = estimate_plan(SCIFACT_LIKE[:500], profile, prompt_tokens=extend, tree_tokens=tree,
                        create_prompt_tokens=create)
    batches = est.batches
    assert est.calls == len(batches) and est.chunks == 500 and est.price_known
    assert est.input_tokens == sum(b.input_tokens for b in batches) - (extend + tree - create)
    assert est.output_tokens == sum(b.output_tokens for b in batches)
    assert est.cost_usd == pytest.approx(profile.cost(est.input_tokens, est.output_tokens), abs=1e-6)
    assert "batches" not in est.model_dump()
    assert est.largest_batch >= est.smallest_batch > 0


def test_unknown_model_prices_are_flagged():
    est = estimate_plan(corpus(20, 10, 20), get_profile("mystery-7b"), prompt_tokens=1000)
    assert not est.price_known and est.cost_usd == 0.0 and est.calls >= 1


@pytest.mark.slow
@pytest.mark.parametrize("name", list(PROFILES))
def test_scifact_corpus(name):
    """Real SciFact (read-only, not copied): seed-fitting models never need more calls than the seed."""
    path = BENCH_DATA / "scifact" / "corpus.jsonl"
    if not path.exists():
        pytest.skip("SciFact corpus not available")
    items = []
    with path.open() as fh:
        for line in fh:
            d = json.loads(line)
            items.append((d["_id"], f"{d.get('title', '')}\n{d['text']}".strip()))
    profile = PROFILES[name]
    prompt, tree = overhead(profile)
    est = estimate_plan(items, profile, prompt_tokens=prompt, tree_tokens=tree)
    for b in est.batches:
        assert b.input_tokens + b.max_output_tokens <= profile.context_window
    if name in ("gpt-4", "gpt-4-turbo"):  # the seed's batches overflow these (8k context / 4k output)
        assert est.calls > est.seed_calls
    else:
        assert est.calls <= est.seed_calls == math.ceil(len(items) / profile.seed_batch_size)
