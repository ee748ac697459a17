"""A section added high up in a page shifts the ids of every chunk after it (ids are positions):
the shifted texts keep their vectors and their places in the tree, and read history follows the
text, not the position. End to end through the `kt` executable."""

from __future__ import annotations

import json
import os
import subprocess
import sys
from pathlib import Path

from knowtology_cli.builders.runner import pending_work
from knowtology_cli.kb import KnowledgeBase

KT = str(Path(sys.executable).parent / "kt")

TOPICS = ["harbour cranes", "tide tables", "pilot boarding", "ballast water", "berth booking", "mooring lines"]


def section(topic: str) -> str:
    """A section long enough (about 200 tokens) to be a chunk of its own."""
    words = topic.split()
    sentences = [f"The {topic} rule number {n} says that {words[0]} crews check the {words[-1]} log before shift "
                 f"{n}, and every {words[-1]} entry names the {words[0]} officer on duty." for n in range(1, 9)]
    return f"## {topic.title()}\n\n" + " ".join(sentences) + "\n"


def page(topics: list[str]) -> str:
    return "# Port handbook\n\n" + "\n".join(section(t) for t in topics)


def kt(*args: str, store: Path) -> subprocess.CompletedProcess[str]:
    env = {**os.environ, "KNOWTOLOGY_STORE": str(store), "LANCEDB_LOG": "error"}
    return subprocess.run([KT, *args], capture_output=True, text=True, env=env, timeout=300)


def test_an_inserted_section_shifts_ids_without_embedding_or_remapping_the_rest(tmp_path: Path) -> None:
    docs, store = tmp_path / "docs", tmp_path / "store"
    docs.mkdir()
    (docs / "port.md").write_text(page(TOPICS))
    (docs / "other.md").write_text(page(["customs forms", "crew lists"]))
    first = json.loads(kt("ingest", str(docs), "--embedder", "hash", "--json", store=store).stdout)
    assert first["added"] >= 6
    assert kt("build", "--builder", "cluster", store=store).returncode == 0
    kb = KnowledgeBase.open(store)
    before = {c.chunk_id: c.text for c in kb.vectors.get("default", [f"docs/port.md#{i}" for i in range(10)])}
    places = {m.chunk_id: m.path for m in kb.tree.mappings("default")}
    kb.close()
    ids = sorted(before, key=lambda i: int(i.rsplit("#", 1)[1]))
    assert len(ids) == len(TOPICS)
    # an agent reads the third section
    read = json.loads(kt("read", ids[2], "--session", "agent", "--json", store=store).stdout)
    assert read["chunks"][0]["text"] == before[ids[2]]

    # a new section goes in after the first: every later chunk moves one position down
    (docs / "port.md").write_text(page([TOPICS[0], "fog signals", *TOPICS[1:]]))
    again = json.loads(kt("ingest", str(docs), "--json", store=store).stdout)
    assert again["embedded"] == 1, again  # only the new section's text is new
    assert again["reused"] == len(TOPICS) - 1

    kb = KnowledgeBase.open(store)
    after = {c.chunk_id: c.text for c in kb.vectors.get("default", [f"docs/port.md#{i}" for i in range(10)])}
    assert after[ids[2].replace("#2", "#3")] == before[ids[2]]
    todo, orphans, _ = kb_pending = pending_work(kb, "default")
    assert todo == ["docs/port.md#1"] and orphans == [], kb_pending  # only the new chunk is left to place
    moved = {m.chunk_id: m.path for m in kb.tree.mappings("default")}
    for n in range(1, len(TOPICS)):  # each shifted text keeps the place it had
        assert moved[f"docs/port.md#{n + 1}"] == places[f"docs/port.md#{n}"]
    kb.close()

    # read history follows the text: the section read before is a repeat under its new id, and the
    # id it had now holds a text the agent has not read
    now = json.loads(kt("read", "docs/port.md#2", "docs/port.md#3", "--session", "agent", "--json",
                        store=store).stdout)["chunks"]
    by_id = {c["chunk_id"]: c for c in now}
    assert by_id["docs/port.md#2"]["text"] == after["docs/port.md#2"]
    assert by_id["docs/port.md#3"]["already_read"] is True
    (status,) = json.loads(kt("status", "--json", store=store).stdout)["collections"]
    assert (status["unmapped"], status["changed"]) == (1, 0)
    assert kt("build", store=store).returncode == 0
    (status,) = json.loads(kt("status", "--json", store=store).stdout)["collections"]
    assert (status["state"], status["unmapped"]) == ("current", 0)


def test_a_section_taken_out_shifts_back_and_an_edited_text_is_unread_again(tmp_path: Path) -> None:
    docs = tmp_path / "docs"
    docs.mkdir()
    (docs / "port.md").write_text(page([TOPICS[0], "fog signals", *TOPICS[1:]]))
    kb = KnowledgeBase.open(tmp_path / "store")
    kb.ingest([str(docs)], embedder="hash")
    kb.build(builder="cluster")
    places = {m.chunk_id: m.path for m in kb.tree.mappings("default")}
    kb.read(["docs/port.md#3", "docs/port.md#5"], session="agent")

    (docs / "port.md").write_text(page(TOPICS))  # the second section goes: the rest move up one
    report = kb.ingest([str(docs)])
    assert (report.embedded, report.reused, report.deleted) == (0, len(TOPICS) - 1, 1)
    assert pending_work(kb, "default")[:2] == ([], [])
    moved = {m.chunk_id: m.path for m in kb.tree.mappings("default")}
    assert all(moved[f"docs/port.md#{n}"] == places[f"docs/port.md#{n + 1}"] for n in range(1, len(TOPICS)))
    assert sorted(kb.read_history(session="agent")) == ["docs/port.md#2", "docs/port.md#4"]

    # a text edited in place: the agent has not read the new words, so they are not skipped
    (docs / "port.md").write_text(page(TOPICS).replace("pilot boarding rule number 3 says", "pilot boarding rule number 3 now says"))
    kb.ingest([str(docs)])
    again = {c.chunk_id: c for c in kb.read(["docs/port.md#2", "docs/port.md#4"], session="agent").chunks}
    assert again["docs/port.md#4"].already_read
    assert not again["docs/port.md#2"].already_read and "now says" in (again["docs/port.md#2"].text or "")
    # a new page title changes every chunk's title, not its text: what was read stays read
    (docs / "port.md").write_text(page(TOPICS).replace("# Port handbook", "# Harbour handbook"))
    kb.ingest([str(docs)])
    (retitled,) = kb.read(["docs/port.md#4"], session="agent").chunks
    assert retitled.already_read and retitled.title.startswith("Harbour handbook")
    kb.close()


def test_the_ingest_summary_says_what_was_reused_without_contradicting_the_embedded_count(tmp_path: Path) -> None:
    """Shifted chunks of an edited page reuse their vectors while the new section is embedded: the
    summary must not call them renamed files nor claim that nothing was embedded."""
    docs, store = tmp_path / "docs", tmp_path / "store"
    docs.mkdir()
    (docs / "port.md").write_text(page(TOPICS))
    assert kt("ingest", str(docs), "--embedder", "hash", store=store).returncode == 0
    (docs / "port.md").write_text(page([TOPICS[0], "fog signals", *TOPICS[1:]]))
    again = kt("ingest", str(docs), store=store)
    assert again.returncode == 0, again.stderr
    assert "(1 embedded with" in again.stdout
    (line,) = [x for x in again.stdout.splitlines() if "hold the title and text" in x]
    assert line == (f"{len(TOPICS) - 1} chunk(s) hold the title and text of another chunk, stored or new (moved "
                    "within their file, or a renamed, moved or copied file): each such text was embedded once at most")
