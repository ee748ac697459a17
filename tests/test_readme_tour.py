"""README.md's CLI tour is what ``kt`` prints: ``scripts/tour.py --check`` re-runs it (local embedder,
offline build) and fails with a diff and the command to regenerate it when they disagree."""

from __future__ import annotations

import subprocess
import sys
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parent.parent
SCRIPT = ROOT / "scripts" / "tour.py"


def _tour():
    sys.path.insert(0, str(SCRIPT.parent))
    try:
        import tour
    finally:
        sys.path.remove(str(SCRIPT.parent))
    return tour


def test_render_replaces_marked_blocks_and_refuses_unknown_ones() -> None:
    tour = _tour()
    text = "intro\n<!-- tour:a -->\n```text\nold\n```\nmiddle\n<!-- tour:b -->\n```text\n```\nend\n"
    assert tour.render(text, {"a": "new a\n", "b": "new b\n"}) == (
        "intro\n<!-- tour:a -->\n```text\nnew a\n```\nmiddle\n<!-- tour:b -->\n```text\nnew b\n```\nend\n")
    with pytest.raises(SystemExit, match="tour:b"):
        tour.render(text, {"a": "x\n"})
    with pytest.raises(SystemExit, match="lacks the marker"):
        tour.render(text, {"a": "x\n", "b": "y\n", "c": "z\n"})
    assert tour.stable("(232 embedded with local, 12.3s)") == tour.stable("(232 embedded with local, 0.8s)")


@pytest.mark.slow
def test_readme_tour_matches_what_kt_prints() -> None:
    proc = subprocess.run([sys.executable, str(SCRIPT), "--check"], capture_output=True, text=True, timeout=1800)
    assert proc.returncode == 0, (
        f"{proc.stderr.strip()}\n{proc.stdout[-6000:]}\n"
        "(regenerate it: make tour, or .venv/bin/python scripts/tour.py, then commit README.md)")
