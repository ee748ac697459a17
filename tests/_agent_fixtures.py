"""Shared fixtures for the agent-surface tests: a small store built with the real CLI."""

from __future__ import annotations

import os
import subprocess
import sys
from pathlib import Path

import pytest

KT = str(Path(sys.executable).parent / "kt")

CHUNKS = [
    ("ret-1", "returns.md", "Refund window", "Customers can request a refund within 7 days of purchase. Opened food is excluded from refunds unless it arrived spoiled."),
    ("ret-2", "returns.md", "Refund payment", "Refunds go back to the original payment method within 5 business days; store credit is instant."),
    ("ret-3", "returns.md", "Exchanges", "Exchanges are accepted within 14 days when the item is unopened; the driver collects it on the next delivery."),
    ("ret-4", "returns.md", "Refund abuse", "Accounts with more than five refund requests a month are flagged for review by the trust team."),
    ("shp-1", "shipping.md", "Delivery times", "Standard shipping takes 2-3 business days. Remote areas add 1-2 days to delivery."),
    ("shp-2", "shipping.md", "Express delivery", "Express delivery arrives the next morning for orders placed before 8 pm; the express fee is 6 euros."),
    ("shp-3", "shipping.md", "Cold chain", "Chilled and frozen groceries travel in insulated bags with ice packs; a warm frozen item is refunded."),
    ("shp-4", "shipping.md", "Missed deliveries", "When nobody is home the driver leaves the insulated box at the door and sends a photo."),
    ("sec-1", "security.md", "Passwords", "Passwords need at least 14 characters. Use the company password manager and never reuse a password."),
    ("sec-2", "security.md", "Two-factor login", "Two-factor authentication with a hardware key is required for admin accounts and the VPN."),
    ("sec-3", "security.md", "Phishing", "Report phishing emails to the security team within one hour using the report button."),
    ("sec-4", "security.md", "Laptops", "Company laptops use full-disk encryption and lock the screen after five idle minutes."),
    ("hr-1", "leave.md", "Annual leave", "Employees accrue 25 days of paid leave a year; unused days carry over up to 5 days."),
    ("hr-2", "leave.md", "Sick leave", "Sick leave needs a doctor's note after three consecutive days off work."),
    ("hr-3", "leave.md", "Parental leave", "Parents get 16 weeks of paid parental leave, taken within the child's first year."),
    ("hr-4", "leave.md", "Public holidays", "Public holidays follow the office location calendar; working one earns a day in lieu."),
    ("inc-1", "incidents.md", "Severity levels", "SEV1 means customers cannot order; page the on-call engineer and open an incident channel."),
    ("inc-2", "incidents.md", "Database failover", "Fail over the PostgreSQL primary when replication lag exceeds 30 seconds for five minutes."),
    ("inc-3", "incidents.md", "Postmortems", "Every SEV1 and SEV2 incident gets a blameless postmortem within five business days."),
    ("inc-4", "incidents.md", "Status page", "Update the public status page within 15 minutes of declaring a customer-facing incident."),
]


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
    """The chunks as one JSONL chunk file (stable, readable ids such as ``ret-1``)."""
    import json

    directory.mkdir(parents=True, exist_ok=True)
    lines = [json.dumps({"chunk_id": cid, "file_name": name, "doc_id": name, "chunk_index": int(cid.split("-")[1]),
                         "title": title, "text": text}) for cid, name, title, text in CHUNKS]
    (directory / "chunks.jsonl").write_text("\n".join(lines) + "\n", encoding="utf-8")
    return directory / "chunks.jsonl"


def build_store(root: Path) -> Path:
    """Ingest the corpus with the hash embedder and build the tree offline, through the CLI."""
    docs = write_corpus(root / "input")
    store = root / "store"
    kt("ingest", str(docs), "--embedder", "hash", "--store", str(store))
    kt("build", "--builder", "cluster", "--store", str(store))
    return store


_BUILT: dict[str, Path] = {}


@pytest.fixture(scope="session")
def agent_store(tmp_path_factory: pytest.TempPathFactory) -> Path:
    """A store holding the small corpus with a cluster-built tree (read-only for tests).

    Each test module that imports this fixture gets its own fixture definition, so the store is
    cached here to build it once per test run.
    """
    if "store" not in _BUILT:
        _BUILT["store"] = build_store(tmp_path_factory.mktemp("agents"))
    return _BUILT["store"]


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
