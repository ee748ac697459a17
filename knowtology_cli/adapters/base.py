"""Store interface names of the original Knowtology library: ``TreeStore``, ``VectorStore``, ``TextStore``.

A ``TextStore`` is only needed when keywords live apart from the vectors; every ``VectorStore`` is one.
"""

from __future__ import annotations

from knowtology_cli.stores.base import ScoredId, TextStore, TreeStore, VectorStore

__all__ = ["ScoredId", "TextStore", "TreeStore", "VectorStore"]
