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


def _command_options() -> dict[str, set[str]]:
    """Every `kt` command (``bench tree``, ``session reset``) and the options it takes."""
    from knowtology_cli.cli.app import app
    from knowtology_cli.cli.group import lazy_root

    found: dict[str, set[str]] = {}

    def walk(prefix: str, group) -> None:
        for name in list(group.commands):
            command = group.commands[name]
            if hasattr(command, "commands"):
                walk(f"{prefix}{name} ", command)
            else:
                found[prefix + name] = {opt for param in command.params for opt in getattr(param, "opts", [])}

    walk("", lazy_root(app, completion=False))
    return found


def test_readme_says_which_commands_take_store_and_json() -> None:
    """The sentence under the command table matches the commands' options (`kt bench tree --store` is
    a usage error: bench commands build their own scratch stores)."""
    import re

    readme = " ".join((ROOT / "README.md").read_text(encoding="utf-8").split())
    commands = _command_options()
    bench = {name for name in commands if name.startswith("bench ")}
    assert bench and "the `kt bench` commands build their own scratch stores and take neither" in readme
    assert all("--store" not in commands[name] and "-c" not in commands[name] for name in bench)
    assert all("--store" in options for name, options in commands.items() if name not in bench)
    claim = re.search(r"Every command but (.+?) takes `--json`", readme)
    assert claim is not None
    assert {name for name, options in commands.items() if "--json" not in options} == \
        set(re.findall(r"`kt (\w+)`", claim.group(1)))
