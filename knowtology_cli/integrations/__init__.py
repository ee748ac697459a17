"""Thin adapters publishing the four tools to MCP, LangChain and FastAPI (each an optional extra)."""

from __future__ import annotations

import importlib
from types import ModuleType

from knowtology_cli.errors import ConfigError


def require(module: str, extra: str, what: str) -> ModuleType:
    """Import ``module`` or raise a ``ConfigError`` naming the extra that provides it."""
    try:
        return importlib.import_module(module)
    except ImportError as exc:
        raise ConfigError(f"{what} needs the {module.split('.')[0]!r} package, which is not installed",
                          hint=f'pip install "knowtology-cli[{extra}]"') from exc
