"""``import lance`` for short-lived processes, without pyarrow's pandas probe.

Importing ``lance`` loads ``pyarrow.dataset``, whose module init checks whether pandas is
importable by importing it: 0.2 s of a 0.5 s ``kt grep`` when pandas is installed, for a
conversion no read path makes. Kept free of heavy imports: the ``kt`` entry point imports it.
"""

from __future__ import annotations

import sys
from importlib.machinery import ModuleSpec
from importlib.util import find_spec
from types import ModuleType
from typing import Any

#: Set by the ``kt`` entry point: a one-shot process never converts Arrow data to pandas.
SKIP_PANDAS_PROBE = False


class _PandasProbeBlocker:
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


def import_lance() -> ModuleType:
    """``import lance``, without pyarrow's pandas probe when `SKIP_PANDAS_PROBE` is set."""
    if "lance" in sys.modules or not SKIP_PANDAS_PROBE or "pandas" in sys.modules or find_spec("pandas") is None:
        import lance

        return lance
    blocker = _PandasProbeBlocker()
    sys.meta_path.insert(0, blocker)
    try:
        import lance
    finally:
        sys.meta_path.remove(blocker)
    return lance
