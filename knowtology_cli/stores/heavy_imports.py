"""Imports of ``lance`` and ``sqlite_utils`` for short-lived processes, without their pandas probe."""

from __future__ import annotations

import sys
from collections.abc import Iterator
from contextlib import contextmanager
from importlib.abc import Loader
from importlib.machinery import ModuleSpec
from importlib.util import find_spec
from types import ModuleType
from typing import Any

#: Set by the ``kt`` entry point: a one-shot process never converts Arrow or SQLite data to pandas.
SKIP_PANDAS_PROBE = False
#: Set by the ``kt`` entry point for commands that answer one query and exit; ``kt serve``, ``kt mcp``,
#: ``kt repl`` and ``kt ask`` clear it. Only a process that is not one-shot reads a collection's vectors
#: into memory for exact search (``stores.ann.FlatVectors``): one query does not repay the read.
ONE_SHOT = False


class _PandasProbeBlocker(Loader):
    """Meta-path finder under which ``import pandas`` fails fast while ``find_spec`` still succeeds.

    pyarrow then records "pandas absent" for its implicit checks, but its explicit conversions
    (``to_pandas``) retry the import later and succeed; lance's lazy pandas handle stays usable.
    """

    def find_spec(self, name: str, path: Any = None, target: Any = None) -> ModuleSpec | None:
        return ModuleSpec(name, self) if name == "pandas" else None

    def create_module(self, spec: ModuleSpec) -> ModuleType:
        raise ModuleNotFoundError("pandas is not loaded by one-shot kt commands", name="pandas")

    def exec_module(self, module: ModuleType) -> None:  # pragma: no cover - create_module raises first
        raise ModuleNotFoundError(name="pandas")


@contextmanager
def _pandas_probe_skipped(module: str) -> Iterator[None]:
    """Hide pandas while ``module`` is first imported, when `SKIP_PANDAS_PROBE` asks for it."""
    if module in sys.modules or not SKIP_PANDAS_PROBE or "pandas" in sys.modules or find_spec("pandas") is None:
        yield
        return
    blocker = _PandasProbeBlocker()
    sys.meta_path.insert(0, blocker)
    try:
        yield
    finally:
        sys.meta_path.remove(blocker)


def import_lance() -> ModuleType:
    """``import lance``, without pyarrow's pandas probe when `SKIP_PANDAS_PROBE` is set.

    Both probe for pandas by importing it when they load: ``lance`` through ``pyarrow.dataset``
    (0.2 s of a 0.5 s ``kt grep`` when pandas is installed) and ``sqlite_utils`` to map pandas
    timestamps (0.3 s of a first ``kt ingest``), for conversions the store never makes. Kept free of
    heavy imports: the ``kt`` entry point imports this module to set `SKIP_PANDAS_PROBE`.
    """
    with _pandas_probe_skipped("lance"):
        import lance  # deferred: heavy
    return lance


def import_sqlite_utils() -> ModuleType:
    """``import sqlite_utils``, without its pandas probe when `SKIP_PANDAS_PROBE` is set."""
    with _pandas_probe_skipped("sqlite_utils"):
        import sqlite_utils  # deferred: heavy
    return sqlite_utils
