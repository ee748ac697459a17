"""Shared fixtures: isolated env, small real stores (LanceDB + SQLite in tmp dirs), the CLI runner."""

from __future__ import annotations

import os
import sys
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest

from knowtology_cli.stores.base import TreeStore

ROOT = Path(__file__).resolve().parent.parent
SAMPLE = ROOT / "sample_corpus"
BENCH_DATA = ROOT.parent / "shared" / "bench-data"
KT = str(Path(sys.executable).parent / "kt")

os.environ.setdefault("LANCEDB_LOG", "error")
os.environ.setdefault("LANCE_LOG", "error")
if os.environ.get("PYTEST_XDIST_WORKER"):
    # pytest-xdist gives its workers COLUMNS=80 and LINES=24; `kt` run by a test would then cut its
    # lines to 80 columns where a serial run (a pipe, no COLUMNS) never cuts them
    for _size in ("COLUMNS", "LINES"):
        os.environ.pop(_size, None)


@pytest.fixture(autouse=True)
def _isolated_env(monkeypatch: pytest.MonkeyPatch, tmp_path: Path) -> None:
    """No test sees the user's store, keys or config."""
    for key in list(os.environ):
        if key.startswith("KNOWTOLOGY_") or key in ("OPENAI_API_KEY", "ANTHROPIC_API_KEY", "OPENAI_BASE_URL",
                                                    "ANTHROPIC_BASE_URL"):
            monkeypatch.delenv(key, raising=False)
    monkeypatch.chdir(tmp_path)


DOCS = {
    "policies/refunds.md": """# Refund policy

## Perishables
Fresh and frozen food can be refunded within 48 hours of delivery. Opened perishables are excluded
unless they arrived spoiled. Send a photo through the app to get store credit or a card refund.

## Non-perishables
Pantry goods can be returned within 30 days in their original packaging for a full refund.
""",
    "policies/shipping.md": """# Shipping and delivery

## Delivery windows
Orders placed before 11:00 arrive the same day between 17:00 and 21:00. Remote areas take one or two
extra days. Delivery is free above 40 euros.

## Missed deliveries
If nobody is home the driver leaves insulated boxes at the door; cold packs keep food safe for six hours.
""",
    "engineering/failover.md": """# Database failover runbook

## When to fail over
Fail over the primary PostgreSQL database when replication lag exceeds 30 seconds for five minutes
or the primary stops answering health checks. Page the on-call engineer first.

## Steps
Run `pgctl promote --replica db-2` and update the connection string in the config service.
Verify writes succeed, then open an incident ticket with severity SEV2.
""",
    "engineering/oncall.md": """# On-call rotation

## Paging
The on-call engineer is paged through PagerDuty for SEV1 and SEV2 incidents and must acknowledge
within 5 minutes. SEV3 incidents wait for business hours.

## Handover
Rotations change every Monday at 10:00 with a written handover of open incidents.
""",
}


@pytest.fixture
def docs_dir(tmp_path: Path) -> Path:
    """A tiny Markdown corpus on disk."""
    root = tmp_path / "docs"
    for rel, text in DOCS.items():
        path = root / rel
        path.parent.mkdir(parents=True, exist_ok=True)
        path.write_text(text, encoding="utf-8")
    return root


@pytest.fixture
def store_dir(tmp_path: Path) -> Path:
    return tmp_path / "store"


@pytest.fixture
def built_store(docs_dir: Path, store_dir: Path) -> Path:
    """A store with the tiny corpus ingested (hash embedder) and a cluster-built tree."""
    from knowtology_cli.kb import KnowledgeBase

    kb = KnowledgeBase.open(store_dir)
    kb.ingest([str(docs_dir)], embedder="hash")
    kb.build(builder="cluster")
    kb.close()
    return store_dir


@pytest.fixture(scope="session")
def sample_store(tmp_path_factory: pytest.TempPathFactory) -> Path:
    """sample_corpus/ ingested once through `kt ingest --embedder hash`; tests copy it, never write it."""
    import json

    from typer.testing import CliRunner

    from knowtology_cli.cli.app import app

    store = tmp_path_factory.mktemp("sample-template") / "store"
    result = CliRunner().invoke(app, ["ingest", str(SAMPLE), "--embedder", "hash", "--store", str(store), "--json"])
    assert result.exit_code == 0, result.output
    assert json.loads(result.stdout)["total"] > 100
    return store


@pytest.fixture
def cli():
    """Invoke the Typer app in-process: ``cli("browse", "--store", d)`` → click Result."""
    from typer.testing import CliRunner

    from knowtology_cli.cli.app import app

    runner = CliRunner()

    def invoke(*args: str, input: str | None = None):
        return runner.invoke(app, [str(a) for a in args], input=input, catch_exceptions=False)

    return invoke


@pytest.fixture(params=["sqlite", "memory", "postgres"])
def tree(request: pytest.FixtureRequest, tmp_path: Path) -> Iterator[TreeStore]:
    """Each tree store implementation (SQLite, in-memory, PostgreSQL), opened empty."""
    if request.param == "sqlite":
        from knowtology_cli.stores.sqlite import SQLiteTreeStore

        store: TreeStore = SQLiteTreeStore(tmp_path / "tree.db")
    elif request.param == "memory":
        from knowtology_cli.stores.memory import InMemoryTreeStore

        store = InMemoryTreeStore()
    else:
        from knowtology_cli.stores.pg import PostgresTreeStore

        store = PostgresTreeStore(request.getfixturevalue("pg_dsn"))
    yield store
    store.close()


@pytest.fixture
def no_backoff(monkeypatch: pytest.MonkeyPatch) -> None:
    """LLM retries without waiting between attempts (the attempts themselves are real HTTP calls)."""
    monkeypatch.setattr("knowtology_cli.llm.base.LLMClient._backoff", lambda self, attempt, retry_after: 0.0)


def point_llm_at(monkeypatch: pytest.MonkeyPatch, srv: Any, key: str) -> None:
    """Both SDKs' base URLs at the loopback fake server ``srv``, with ``key`` as their API key."""
    monkeypatch.setenv("OPENAI_BASE_URL", srv.openai_base_url)
    monkeypatch.setenv("OPENAI_API_KEY", key)
    monkeypatch.setenv("ANTHROPIC_BASE_URL", srv.anthropic_base_url)
    monkeypatch.setenv("ANTHROPIC_API_KEY", key)
