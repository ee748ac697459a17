"""Knowtology: tree-structured knowledge maps for LLM agents — browse, search, grep and read.

Public names import on first use, so ``import knowtology_cli`` stays cheap.
"""

from __future__ import annotations

import importlib
from typing import TYPE_CHECKING, Any

__version__ = "0.1.0"
__all__ = ["KnowledgeBase", "KnowledgeMapTools", "TreeBuilder", "__version__"]

_LAZY = {
    "KnowledgeBase": "knowtology_cli.kb",
    "KnowledgeMapTools": "knowtology_cli.tools",
    "TreeBuilder": "knowtology_cli.builder_api",
}

if TYPE_CHECKING:
    from .builder_api import TreeBuilder
    from .kb import KnowledgeBase
    from .tools import KnowledgeMapTools


def __getattr__(name: str) -> Any:
    module = _LAZY.get(name)
    if module is None:
        raise AttributeError(f"module {__name__!r} has no attribute {name!r}")

    value = getattr(importlib.import_module(module), name)
    globals()[name] = value
    return value


def __dir__() -> list[str]:
    return sorted([*globals(), *_LAZY])
