"""Embedder registry: names to embedder instances, with heavy backends imported lazily."""

from __future__ import annotations

from ..errors import ConfigError
from .base import Embedder
from .hash import HashEmbedder
from .local import LocalOnnxEmbedder
from .openai import OpenAIEmbedder

DEFAULT_EMBEDDER = "local:all-MiniLM-L6-v2"
_LOCAL_ALIASES = {"local", "minilm", "all-minilm-l6-v2", "local:all-minilm-l6-v2"}


def canonical_name(name: str) -> str:
    """The name a collection records for ``name`` (aliases folded)."""
    lowered = name.strip().lower()
    if lowered in _LOCAL_ALIASES:
        return DEFAULT_EMBEDDER
    if lowered == "hash:64":
        return "hash"
    return name.strip()


def get_embedder(name: str | None = None, **options: object) -> Embedder:
    """Build the embedder registered under ``name`` (default: the local MiniLM).

    Names: ``local:all-MiniLM-L6-v2`` (aliases ``local``, ``minilm``), ``local:/path/to/model-dir``,
    ``openai:MODEL`` (OpenAI or any compatible server via ``OPENAI_BASE_URL``),
    ``hash`` / ``hash:DIM`` (deterministic, tests only).
    """
    name = canonical_name(name or DEFAULT_EMBEDDER)
    kind, _, arg = name.partition(":")
    if kind == "hash":
        try:
            return HashEmbedder(int(arg) if arg else 64)
        except ValueError as exc:
            raise ConfigError(f"bad hash embedder dimension: {arg!r}", hint="use hash or hash:DIM") from exc
    if kind == "local":
        return LocalOnnxEmbedder(arg or "all-MiniLM-L6-v2", **options)  # type: ignore[arg-type]
    if kind == "openai":
        if not arg:
            raise ConfigError("openai embedder needs a model", hint="e.g. openai:text-embedding-3-small")
        return OpenAIEmbedder(arg, **options)  # type: ignore[arg-type]
    raise ConfigError(
        f"unknown embedder {name!r}",
        hint="use local (default), openai:MODEL or hash",
    )


__all__ = ["DEFAULT_EMBEDDER", "Embedder", "canonical_name", "get_embedder"]
