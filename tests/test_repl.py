"""``kt repl`` driven in a real pseudo-terminal with pexpect."""

from __future__ import annotations

# ruff: noqa: F811
import re
import time

import pytest

pexpect = pytest.importorskip("pexpect")

from _agent_fixtures import KT, agent_store, agent_store_copy, env, leaf_with_chunks  # noqa: E402,F401

from knowtology_cli.render import ALREADY_READ  # noqa: E402

CURSOR_FORWARD = re.compile(r"\x1b\[(\d*)C")
ANSI = re.compile(r"\x1b\[[0-9;?<>=]*[A-Za-z]|\x1b\][^\x07\x1b]*(\x07|\x1b\\)|\x1b[()][A-Za-z0-9]|\x1b[=>]|\r")


class Pty:
    """A child in a pty; waits on its output with terminal escape codes stripped."""

    def __init__(self, *args: str) -> None:
        environment = env() | {"TERM": "xterm", "PROMPT_TOOLKIT_NO_CPR": "1", "COLUMNS": "200", "LINES": "50"}
        self.child = pexpect.spawn(KT, list(args), env=environment, encoding="utf-8", timeout=60,
                                   dimensions=(50, 200))
        self.raw = ""
        self.pos = 0

    @property
    def text(self) -> str:
        spaced = CURSOR_FORWARD.sub(lambda m: " " * int(m.group(1) or 1), self.raw)
        return ANSI.sub("", spaced)

    def wait_for(self, needle: str, timeout: float = 60) -> str:
        """Block until ``needle`` appears after the last match; returns the text up to it."""
        deadline = time.monotonic() + timeout
        while True:
            found = self.text.find(needle, self.pos)
            if found >= 0:
                chunk = self.text[self.pos:found + len(needle)]
                self.pos = found + len(needle)
                return chunk
            if time.monotonic() > deadline:
                raise AssertionError(f"timed out waiting for {needle!r}; output so far:\n{self.text[self.pos:]}")
            try:
                self.raw += self.child.read_nonblocking(4096, timeout=0.2)
            except pexpect.TIMEOUT:
                continue
            except pexpect.EOF:
                if self.text.find(needle, self.pos) < 0:
                    raise AssertionError(f"EOF before {needle!r}; output:\n{self.text[self.pos:]}") from None

    def run(self, line: str, prompt: str = "kt:default:/>") -> str:
        """Send a command line and return its output up to the next prompt."""
        self.child.sendline(line)
        self.wait_for(line)
        return self.wait_for("\n" + prompt)  # the input line is redrawn in place; output starts below


def _top_categories(store) -> list[str]:
    from knowtology_cli.kb import KnowledgeBase

    kb = KnowledgeBase.open(store)
    try:
        return [n.name for n in kb.tree.children("default", None)]
    finally:
        kb.close()


def test_repl_session_in_a_pty(agent_store_copy) -> None:
    leaf, leaf_ids = leaf_with_chunks(agent_store_copy)
    tops = _top_categories(agent_store_copy)
    target = next(t for t in tops if sum(o.lower().startswith(t[:3].lower()) for o in tops) == 1)

    shell = Pty("repl", "--store", str(agent_store_copy))
    shell.wait_for("Type help")
    shell.wait_for("kt:default:/>")

    out = shell.run("ls")
    assert "root (20 chunks)" in out and all(t in out for t in tops)

    # tab completion of a category path, then cd into it
    shell.child.send("cd " + target[:3])
    shell.child.send("\t")
    shell.wait_for("cd " + target)
    shell.child.sendline("")
    shell.wait_for(f"\nkt:default:/{target}>")
    assert target in shell.run("pwd", prompt=f"kt:default:/{target}>")
    shell.run("cd ..", prompt="kt:default:/>")

    out = shell.run(f"ls /{leaf}")
    assert all(f"[{i}]" in out for i in leaf_ids)

    out = shell.run("search refund within 7 days")
    assert "[ret-1]" in out

    out = shell.run("grep 7 days, refund")
    assert next(x for x in out.splitlines() if x.lstrip().startswith("[")).lstrip().startswith("[ret-1]")

    out = shell.run("read ret-1")
    assert "within 7 days of purchase" in out
    out = shell.run("read ret-1")
    assert f"[ret-1] {ALREADY_READ}" in out

    # tab completion of a chunk id
    shell.child.send("read inc-")
    shell.child.send("\t")
    shell.child.send("\t")
    shell.child.sendline("")
    out = shell.wait_for("\nkt:default:/>")
    assert "inc-1" in out or "inc-2" in out

    out = shell.run("history")
    assert "ret-1" in out

    out = shell.run("cd No/Such/Place")
    assert "Error: no category 'No/Such/Place'" in out

    out = shell.run("help")
    assert "search [-k N] QUERY" in out and "history" in out

    shell.child.sendline("exit")
    shell.child.expect(pexpect.EOF, timeout=30)
    shell.child.close()
    assert shell.child.exitstatus == 0
    history = (agent_store_copy / "repl_history").read_text(encoding="utf-8")
    assert "search refund within 7 days" in history and "read ret-1" in history


def test_repl_history_persists_across_runs(agent_store_copy) -> None:
    first = Pty("repl", "--store", str(agent_store_copy))
    first.wait_for("kt:default:/>")
    first.run("grep password manager")
    first.child.sendline("exit")
    first.child.expect(pexpect.EOF, timeout=30)

    second = Pty("repl", "--store", str(agent_store_copy))
    second.wait_for("kt:default:/>")
    second.child.send("\x1b[A")  # arrow up: "exit", the last line of the previous run
    second.wait_for("exit")
    second.child.send("\x1b[A")
    second.wait_for("grep password manager")
    second.child.sendcontrol("u")
    second.child.sendeof()
    second.child.expect(pexpect.EOF, timeout=30)
