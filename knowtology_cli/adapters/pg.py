"""PostgreSQL store names of the original Knowtology library (``[pg]`` extra), resolved on first use."""

from __future__ import annotations

from typing import Any

from knowtology_cli.errors import ConfigError

__all__ = ["PostgresTextStore", "PostgresTreeStore"]  # noqa: F822 (resolved by __getattr__)


def __getattr__(name: str) -> Any:
    if name in __all__:
        try:
            from knowtology_cli.stores import pg  # deferred: resolved on first use
        except ImportError as exc:
            raise ConfigError(f"{name} is unavailable: {exc}",
                              hint='install the PostgreSQL extra: pip install "knowtology-cli[pg]"') from exc
        return getattr(pg, name)
    raise AttributeError(f"module {__name__!r} has no attribute {name!r}")
