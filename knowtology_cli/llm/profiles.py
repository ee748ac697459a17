"""Model profiles: context window, output limit, list prices and the fixed batch size per model.

Unknown models get :data:`DEFAULT_PROFILE`; ``config.toml`` overrides any field per model.
"""

from __future__ import annotations

import math
from collections.abc import Mapping
from typing import Any

from pydantic import BaseModel, ConfigDict, ValidationError

from knowtology_cli.errors import ConfigError


class ModelProfile(BaseModel):
    """Limits and prices of one model.

    Attributes:
        name: the profile key (a model name or prefix).
        context_window: input + output tokens the model accepts in one call.
        max_output_tokens: the largest ``max_tokens`` the API accepts.
        input_usd_per_mtok / output_usd_per_mtok: list prices per million tokens.
        seed_batch_size: chunks per call the seed implementation used (the call-count bound).
        encoding: the tiktoken encoding used to count tokens.
        token_ratio: provider tokens per counted token; above 1 where the provider's tokenizer is
            not public (Claude), so estimates err on the safe side.
        known: False for the fallback profile (prices unknown, limits guessed).
    """

    model_config = ConfigDict(frozen=True, extra="forbid")

    name: str
    context_window: int
    max_output_tokens: int
    input_usd_per_mtok: float = 0.0
    output_usd_per_mtok: float = 0.0
    seed_batch_size: int = 50
    encoding: str = "o200k_base"
    token_ratio: float = 1.0
    known: bool = True

    def cost(self, input_tokens: int, output_tokens: int) -> float:
        """USD for ``input_tokens`` in and ``output_tokens`` out at list price."""
        return (
            input_tokens * self.input_usd_per_mtok + output_tokens * self.output_usd_per_mtok
        ) / 1_000_000

    def provider_tokens(self, counted: int) -> int:
        """``counted`` local tokens scaled to the provider's (rounded up)."""
        return counted if self.token_ratio == 1.0 else math.ceil(counted * self.token_ratio)

    def with_overrides(self, **changes: Any) -> ModelProfile:
        """A copy with ``changes`` applied and validated; unknown fields are a ``ConfigError``."""
        changes = {k: v for k, v in changes.items() if v is not None}
        if not changes:
            return self
        try:
            return ModelProfile.model_validate({**self.model_dump(), **changes})
        except ValidationError as exc:
            raise ConfigError(
                f"bad profile override for {self.name}: {exc.errors()[0]['msg']} "
                f"({'.'.join(str(p) for p in exc.errors()[0]['loc'])})",
                hint="profile fields: " + ", ".join(ModelProfile.model_fields),
            ) from exc


_CLAUDE_RATIO = 1.25  # Claude's tokenizer is not public; it yields more tokens than o200k on prose

PROFILES: dict[str, ModelProfile] = {
    p.name: p
    for p in (
        ModelProfile(name="gpt-4o", context_window=128_000, max_output_tokens=16_384,
                     input_usd_per_mtok=2.50, output_usd_per_mtok=10.00, seed_batch_size=150),
        ModelProfile(name="gpt-4o-mini", context_window=128_000, max_output_tokens=16_384,
                     input_usd_per_mtok=0.15, output_usd_per_mtok=0.60, seed_batch_size=150),
        ModelProfile(name="gpt-4-turbo", context_window=128_000, max_output_tokens=4_096,
                     input_usd_per_mtok=10.00, output_usd_per_mtok=30.00, seed_batch_size=120,
                     encoding="cl100k_base"),
        ModelProfile(name="gpt-4", context_window=8_192, max_output_tokens=8_192,
                     input_usd_per_mtok=30.00, output_usd_per_mtok=60.00, seed_batch_size=50,
                     encoding="cl100k_base"),
        ModelProfile(name="gpt-3.5-turbo", context_window=16_385, max_output_tokens=4_096,
                     input_usd_per_mtok=0.50, output_usd_per_mtok=1.50, seed_batch_size=20,
                     encoding="cl100k_base"),
        ModelProfile(name="claude-opus-4-6", context_window=1_000_000, max_output_tokens=128_000,
                     input_usd_per_mtok=5.00, output_usd_per_mtok=25.00, seed_batch_size=200,
                     token_ratio=_CLAUDE_RATIO),
        ModelProfile(name="claude-sonnet-4-6", context_window=1_000_000, max_output_tokens=128_000,
                     input_usd_per_mtok=3.00, output_usd_per_mtok=15.00, seed_batch_size=150,
                     token_ratio=_CLAUDE_RATIO),
        ModelProfile(name="claude-haiku-4-5", context_window=200_000, max_output_tokens=64_000,
                     input_usd_per_mtok=1.00, output_usd_per_mtok=5.00, seed_batch_size=100,
                     token_ratio=_CLAUDE_RATIO),
    )
}  # fmt: skip

DEFAULT_PROFILE = ModelProfile(
    name="default",
    context_window=8_192,
    max_output_tokens=2_048,
    seed_batch_size=50,
    token_ratio=1.1,
    known=False,
)


def _match(model: str, keys: Mapping[str, Any]) -> str | None:
    """The longest key that is ``model`` or a prefix of it at a ``-``, ``:`` or ``@`` boundary."""
    model = model.strip().lower()
    if "/" in model:  # "openai/gpt-4o" from routers, "library/model" from Ollama
        model = model.rsplit("/", 1)[1]
    best = None
    for key in keys:
        k = key.lower()
        if model == k or (model.startswith(k) and model[len(k)] in "-:@"):
            if best is None or len(k) > len(best):
                best = key
    return best


def get_profile(model: str, overrides: Mapping[str, Mapping[str, Any]] | None = None) -> ModelProfile:
    """The profile for ``model`` (longest prefix match), with config overrides applied.

    Figures are the providers' public limits and list prices (USD per million tokens). Unknown
    models get :data:`DEFAULT_PROFILE` (small and free-priced) so a plan never overflows an unknown
    server; ``[profiles."my-model"] context_window = 32768`` in ``config.toml`` overrides a field.

    ``gpt-4o-mini-2024-07-18`` resolves to ``gpt-4o-mini``, ``claude-haiku-4-5-20251001`` to
    ``claude-haiku-4-5``; anything unknown to the conservative default. ``overrides`` maps model
    names or prefixes to field changes (``config.toml``'s ``[profiles.*]`` tables); the longest
    matching key wins, and it may also describe a model that has no built-in profile.
    """
    key = _match(model, PROFILES)
    profile = PROFILES[key] if key else DEFAULT_PROFILE.model_copy(update={"name": model})
    if overrides:
        okey = _match(model, overrides)
        if okey is not None:
            profile = profile.with_overrides(**dict(overrides[okey]))
    return profile


def matching_override(model: str, overrides: Mapping[str, Mapping[str, Any]]) -> tuple[str, Mapping[str, Any]] | None:
    """``(key, fields)`` of the ``config.toml`` profile override that applies to ``model``, or None."""
    key = _match(model, overrides) if overrides else None
    return (key, overrides[key]) if key is not None else None
