"""Shared fixtures for the agent-surface tests: a small store built with the real CLI."""

from __future__ import annotations

import os
import subprocess
import sys
from pathlib import Path

import pytest

KT = str(Path(sys.executable).parent / "kt")

CORPUS = {
    "returns.md": """# Returns and Refunds

## Refund window
Customers can request a refund within 7 days of purchase. Opened food is excluded from refunds,
except when it arrived spoiled. Refunds go back to the original payment method.

## Exchanges
Exchanges are accepted within 14 days when the item is unopened. The driver collects the item on
the next delivery.
""",
    "shipping.md": """# Shipping and Delivery

## Delivery times
Standard shipping takes 2-3 business days. Remote areas add 1-2 days. Express delivery arrives the
next morning for orders placed before 8 pm.

## Cold chain
Chilled and frozen groceries travel in insulated bags with ice packs; a warm frozen item is refunded.
""",
    "security.md": """# Information Security

## Passwords
Passwords need at least 14 characters. Rotate the password when a breach is suspected. Use the
company password manager; never reuse a password.

## Incident reporting
Report phishing emails to the security team within one hour using the report button.
""",
    "leave.md": """# Paid Time Off

## Annual leave
Employees accrue 25 days of paid leave a year. Unused days carry over up to 5 days.

## Sick leave
Sick leave needs a doctor's note after three consecutive days off.
""",
}


def env() -> dict[str, str]:
    """The environment for CLI subprocesses: quiet Lance, no inherited store or session."""
    out = {k: v for k, v in os.environ.items() if not k.startswith("KNOWTOLOGY_")}
    out.update(LANCEDB_LOG="error", LANCE_LOG="error", NO_COLOR="1")
    return out


def kt(*args: str, check: bool = True, **kwargs) -> subprocess.CompletedProcess:
    """Run the real ``kt`` console script."""
    proc = subprocess.run([KT, *args], capture_output=True, text=True, env=env(), timeout=180, **kwargs)
    if check and proc.returncode != 0:
        raise AssertionError(f"kt {' '.join(args)} failed ({proc.returncode}):\n{proc.stdout}\n{proc.stderr}")
    return proc


def write_corpus(directory: Path) -> Path:
    directory.mkdir(parents=True, exist_ok=True)
    for name, text in CORPUS.items():
        (directory / name).write_text(text, encoding="utf-8")
    return directory


def build_store(root: Path) -> Path:
    """Ingest the corpus with the hash embedder and build the tree offline, through the CLI."""
    docs = write_corpus(root / "docs")
    store = root / "store"
    kt("ingest", str(docs), "--embedder", "hash", "--store", str(store))
    kt("build", "--builder", "cluster", "--store", str(store))
    return store


@pytest.fixture(scope="session")
def agent_store(tmp_path_factory: pytest.TempPathFactory) -> Path:
    """A store holding the small corpus with a cluster-built tree (read-only for tests)."""
    return build_store(tmp_path_factory.mktemp("agents"))


@pytest.fixture()
def agent_store_copy(tmp_path: Path, agent_store: Path) -> Path:
    """A private copy of ``agent_store`` (for tests that write sessions or history)."""
    import shutil

    target = tmp_path / "store"
    shutil.copytree(agent_store, target)
    return target


def leaf_with_chunks(store: Path) -> tuple[str, list[str]]:
    """A leaf path of the built tree and its chunk ids."""
    from knowtology_cli.kb import KnowledgeBase

    kb = KnowledgeBase.open(store)
    try:
        nodes = kb.tree.nodes("default")
        parents = {n.path.rsplit("/", 1)[0] for n in nodes if "/" in n.path}
        leaf = next(n.path for n in nodes if n.path not in parents and n.chunk_count)
        return leaf, [m.chunk_id for m in kb.tree.mappings("default", under=leaf) if m.path == leaf]
    finally:
        kb.close()
