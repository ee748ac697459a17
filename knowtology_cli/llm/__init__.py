"""LLM clients behind one small ABC: ``get_llm("openai:gpt-4o-mini")``, ``get_llm("anthropic:...")``.

Provider SDKs are imported lazily (on the first call), so importing this package is cheap.
"""

from __future__ import annotations

from collections.abc import Mapping
from typing import Any

from knowtology_cli.errors import ConfigError

from .anthropic import AnthropicClient
from .base import (
    CallUsage,
    ChatMessage,
    ChatTurn,
    LLMCancelledError,
    LLMClient,
    LLMContextOverflowError,
    LLMResponse,
    LLMTimeoutError,
    LLMTruncatedError,
    LLMUnreachableError,
    ProviderFailure,
    ServerLimits,
    ToolCall,
    ToolSpec,
    usage_of,
)
from .openai import OpenAIClient
from .profiles import DEFAULT_PROFILE, PROFILES, ModelProfile, get_profile

PROVIDERS = ("openai", "anthropic")

__all__ = [
    "PROVIDERS", "PROFILES", "DEFAULT_PROFILE", "CallUsage", "ChatMessage", "ChatTurn", "LLMCancelledError",
    "LLMClient", "LLMContextOverflowError", "LLMResponse", "LLMTimeoutError", "LLMTruncatedError",
    "LLMUnreachableError", "ModelProfile",
    "ProviderFailure", "ServerLimits", "ToolCall", "ToolSpec", "get_llm", "get_profile", "parse_spec", "usage_of",
]


def parse_spec(spec: str) -> tuple[str, str]:
    """Split ``PROVIDER:MODEL`` (``openai:gpt-4o``, ``openai:llama3.1:8b``) into its two parts.

    Raises:
        ConfigError: no provider, an unknown provider, or an empty model name.
    """
    if not isinstance(spec, str) or ":" not in spec:
        raise ConfigError(
            f"invalid LLM spec {spec!r}",
            hint="use PROVIDER:MODEL, e.g. openai:gpt-4o-mini or anthropic:claude-sonnet-4-6",
        )
    provider, model = spec.split(":", 1)
    provider, model = provider.strip().lower(), model.strip()
    if provider not in PROVIDERS:
        raise ConfigError(
            f"unknown LLM provider {provider!r} in {spec!r}",
            hint=f"providers: {', '.join(PROVIDERS)} (OpenAI-compatible servers: openai: + OPENAI_BASE_URL)",
        )
    if not model:
        raise ConfigError(f"no model name in LLM spec {spec!r}", hint="e.g. openai:gpt-4o-mini")
    return provider, model


def get_llm(
    spec: str,
    *,
    api_key: str | None = None,
    base_url: str | None = None,
    timeout: float | None = None,
    max_retries: int | None = None,
    profile_overrides: Mapping[str, Mapping[str, Any]] | None = None,
    **kwargs: Any,
) -> LLMClient:
    """The client for ``PROVIDER:MODEL``.

    Args:
        spec: ``openai:MODEL`` or ``anthropic:MODEL``.
        api_key / base_url: explicit values; when None the provider's env variables are used
            (``OPENAI_API_KEY``/``OPENAI_BASE_URL``, ``ANTHROPIC_API_KEY``/``ANTHROPIC_BASE_URL``).
        timeout / max_retries: per-attempt timeout in seconds and transport retries.
        profile_overrides: ``config.toml`` ``[profiles.*]`` tables (model or prefix → fields).
        **kwargs: other :class:`LLMClient` settings (``backoff_base``, ``sleep``, ``seed``, ...).

    Raises:
        ConfigError: a bad spec, or no key (the message names the variable to set, never a key).
    """
    provider, model = parse_spec(spec)
    options: dict[str, Any] = dict(kwargs)
    if timeout is not None:
        options["timeout"] = timeout
    if max_retries is not None:
        options["max_retries"] = max_retries
    options.setdefault("profile", get_profile(model, profile_overrides))
    if provider == "openai":
        return OpenAIClient(api_key=api_key, model=model, base_url=base_url, **options)

    return AnthropicClient(api_key=api_key, model=model, base_url=base_url, **options)
