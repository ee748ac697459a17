"""Regenerate README.md's CLI tour from real runs of ``kt`` on sample_corpus/ (or check it is current).

    .venv/bin/python scripts/tour.py           # rewrite the tour blocks in README.md
    .venv/bin/python scripts/tour.py --check   # exit 1 with a diff when README.md has drifted

Each fenced block that follows a ``<!-- tour:NAME -->`` line in README.md is the transcript of the
commands of that name below (a ```mermaid block: the bare output of one command), run in a fresh store with the default (local) embedder and the
offline builder, output into a pipe as a user's terminal would show it (stdout and stderr in
order, no colour). Category paths and chunk ids are taken from earlier output, never written here,
so the tour follows the builders as they change. ``--check`` ignores wall times (``12.3s``).
"""

from __future__ import annotations

import argparse
import difflib
import json
import os
import re
import subprocess
import sys
import tempfile
from collections.abc import Callable
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent
README = ROOT / "README.md"
KT = str(Path(sys.executable).with_name("kt"))
MARKER = re.compile(r"^<!-- tour:(?P<name>[a-z-]+) -->\n```(?P<lang>[a-z]+)\n(?P<body>.*?)^```$", re.M | re.S)
#: parts of the output that change from run to run and are ignored by --check
VOLATILE = [re.compile(r"\b\d+\.\ds\)")]
COMMENT_COLUMN = 36

Step = tuple[list[str], str]  # (kt arguments, comment shown after the command)


def _kt(args: list[str], env: dict[str, str]) -> str:
    proc = subprocess.run([KT, *args], cwd=ROOT, env=env, stdout=subprocess.PIPE, stderr=subprocess.STDOUT,
                          text=True, timeout=900)
    if proc.returncode != 0:
        raise SystemExit(f"tour: `kt {' '.join(args)}` exited {proc.returncode}:\n{proc.stdout}")
    return proc.stdout


def _shown(args: list[str]) -> str:
    """The command as a person would type it (double quotes around words with spaces)."""
    def quote(arg: str) -> str:
        if re.fullmatch(r"[\w./#:@%+=,-]+", arg):
            return arg
        return '"' + arg + '"' if not re.search(r'["$`\\!]', arg) else "'" + arg.replace("'", "'\\''") + "'"

    return "kt " + " ".join(quote(a) for a in args)


def _transcript(steps: list[Step], env: dict[str, str]) -> str:
    parts = []
    for args, comment in steps:
        line = "$ " + _shown(args)
        if comment:
            line = (line + "  ").ljust(COMMENT_COLUMN) + "# " + comment
        parts.append(line + "\n" + _kt(args, env).rstrip("\n"))
    return "\n\n".join(parts) + "\n"


def _json(args: list[str], env: dict[str, str]) -> dict:
    return json.loads(_kt([*args, "--json"], env))


def tour_blocks() -> dict[str, str]:
    """Run the tour in a fresh store; block name -> transcript."""
    with tempfile.TemporaryDirectory(prefix="kt-tour-") as tmp:
        env = {k: v for k, v in os.environ.items()
               if not k.startswith("KNOWTOLOGY_") and k not in ("COLUMNS", "FORCE_COLOR", "OPENAI_API_KEY",
                                                                  "ANTHROPIC_API_KEY")}
        env.update(KNOWTOLOGY_STORE=str(Path(tmp, ".knowtology")), NO_COLOR="1", PYTHONUNBUFFERED="1",
                   LANCEDB_LOG="error", LANCE_LOG="error")
        blocks: dict[str, str] = {}
        plan: list[tuple[str, Callable[[], list[Step]]]] = [  # steps are made when their block runs
            ("ingest", lambda: [
                (["ingest", "sample_corpus/"], ""),
                (["browse"], "before a build: the map is empty"),
                (["ingest", "sample_corpus/"], "again: nothing changed, nothing embedded"),
                (["build"], "no LLM configured → offline clustering"),
            ]),
            ("browse", lambda: [(["browse"], ""), (["browse", _branch(env)], "")]),
            ("search", lambda: _search_steps(env)),
            ("presets", lambda: [(["search", QUESTION, "-k", "3", "--preset", "thorough", "--explain"], "")]),
        ]
        for name, steps in plan:
            blocks[name] = _transcript(steps(), env)
        blocks["mermaid"] = _kt(["export", "--format", "mermaid", "--depth", "2"], env)
        return blocks


def _branch(env: dict[str, str]) -> str:
    """The first top-level category that has subcategories (the most to see)."""
    children = _json(["browse", "--depth", "2"], env)["children"]
    tops = [c["path"] for c in children if c["level"] == 1]
    return next((t for t in tops if any(c["path"].startswith(t + "/") for c in children)), tops[0])


#: The tour's question (the search and presets blocks ask the same).
QUESTION = "how long do I have to get a refund for spoiled groceries?"


def _search_steps(env: dict[str, str]) -> list[Step]:
    question = QUESTION
    top = _json(["search", question, "-k", "3"], env)["hits"][0]["chunk_id"]
    return [
        (["search", question, "-k", "3"], ""),
        (["grep", "PAY-502", "-k", "3"], ""),
        (["browse", _branch(env).lower()], "any letter case, when only one category fits"),
        (["read", top], ""),
        (["read", top], "again, in the same session"),
    ]


def render(text: str, blocks: dict[str, str]) -> str:
    """README text with each marked block replaced (unknown names are an error)."""
    def replace(match: re.Match[str]) -> str:
        name = match["name"]
        if name not in blocks:
            raise SystemExit(f"tour: README has a block tour:{name} the script does not make")
        return f"<!-- tour:{name} -->\n```{match['lang']}\n{blocks[name]}```"

    found = {m["name"] for m in MARKER.finditer(text)}
    missing = set(blocks) - found
    if missing:
        raise SystemExit(f"tour: README.md lacks the marker(s) {', '.join(f'<!-- tour:{n} -->' for n in sorted(missing))}")
    return MARKER.sub(replace, text)


def stable(text: str) -> str:
    for pattern in VOLATILE:
        text = pattern.sub("<time>)", text)
    return text


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--check", action="store_true", help="exit 1 with a diff when README.md has drifted")
    args = parser.parse_args(argv)
    current = README.read_text(encoding="utf-8")
    fresh = render(current, tour_blocks())
    if args.check:
        if stable(fresh) == stable(current):
            print("README.md's CLI tour matches what the commands print.")
            return 0
        diff = difflib.unified_diff(stable(current).splitlines(), stable(fresh).splitlines(), "README.md (now)",
                                    "README.md (as kt prints it)", lineterm="", n=1)
        print("\n".join(diff))
        print("\nREADME.md's CLI tour has drifted from what kt prints: run `make tour` "
              "(.venv/bin/python scripts/tour.py) and commit README.md.", file=sys.stderr)
        return 1
    if fresh != current:
        README.write_text(fresh, encoding="utf-8")
        print("README.md: CLI tour regenerated.")
    else:
        print("README.md: CLI tour already current.")
    return 0


if __name__ == "__main__":
    sys.exit(main())
