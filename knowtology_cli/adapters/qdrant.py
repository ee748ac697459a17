"""The Qdrant store name of the original Knowtology library (``[qdrant]`` extra), resolved on first use."""

from __future__ import annotations

from typing import Any

from knowtology_cli.errors import ConfigError

__all__ = ["QdrantVectorStore"]  # noqa: F822 (resolved by __getattr__)


def __getattr__(name: str) -> Any:
    if name in __all__:
        try:
            from knowtology_cli.stores import qdrant  # deferred: loads numpy
        except ImportError as exc:
            raise ConfigError(f"{name} is unavailable: {exc}",
                              hint='install the Qdrant extra: pip install "knowtology-cli[qdrant]"') from exc
        return getattr(qdrant, name)
    raise AttributeError(f"module {__name__!r} has no attribute {name!r}")
