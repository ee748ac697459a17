"""``KnowledgeBase.add_chunks``: chunks from Python objects are stored as the same lines read as JSONL."""

from __future__ import annotations

import io
import json

import pytest

from knowtology_cli.embedders.hash import HashEmbedder
from knowtology_cli.errors import ConflictError, InputError
from knowtology_cli.kb import KnowledgeBase
from knowtology_cli.models import Chunk
from knowtology_cli.stores.memory import InMemoryTreeStore, InMemoryVectorStore

ROWS = [
    {"chunk_id": "r1", "text": "Refunds are paid within 7 days.", "title": "Refunds", "doc_id": "policy",
     "chunk_index": 0, "file_name": "policy.md", "metadata": {"lang": "en"}},
    {"text": "Opened food cannot be returned.", "doc_id": "policy", "chunk_index": 1},
    {"text": "Page the on-call engineer."},
]


def fresh_kb() -> KnowledgeBase:
    return KnowledgeBase(tree_store=InMemoryTreeStore(), vector_store=InMemoryVectorStore(),
                         embedder=HashEmbedder(dimension=16))


def stored(kb: KnowledgeBase) -> dict[str, tuple]:
    rows = kb.vectors.get("default", sorted(kb.vectors.fingerprints("default")))
    return {c.chunk_id: (c.text, c.title, c.doc_id, c.file_name, c.chunk_index, c.content_hash, c.metadata)
            for c in rows}


def test_add_chunks_stores_what_the_same_jsonl_lines_store() -> None:
    by_objects, by_stdin = fresh_kb(), fresh_kb()
    report = by_objects.add_chunks(ROWS)
    feed = io.StringIO("\n".join(json.dumps(r) for r in ROWS))
    expected = by_stdin.ingest(["-"], stdin=feed)
    assert (report.added, report.total, report.sources) == (3, 3, ["stdin"])
    assert stored(by_objects) == stored(by_stdin)
    assert set(stored(by_objects)) == {"r1", "policy#1", *(i for i in stored(by_stdin) if i.startswith("h-"))}
    def sources(kb: KnowledgeBase) -> list[tuple]:
        return [(s.name, s.root, s.kind, s.files, s.chunks) for s in kb.tree.sources("default")]

    assert sources(by_objects) == sources(by_stdin) == [("stdin", "-", "stdin", 1, 3)]
    assert (report.added, report.embedded) == (expected.added, expected.embedded)


def test_add_chunks_takes_chunk_objects_and_embeds_only_changes() -> None:
    kb = fresh_kb()
    chunks = [Chunk(chunk_id=f"c{i}", text=f"chunk number {i} about topic {i}", doc_id="d", chunk_index=i,
                    file_name="d.md") for i in range(3)]
    assert kb.add_chunks(chunks, collection="notes").added == 3
    again = kb.add_chunks(chunks, collection="notes")
    assert (again.added, again.updated, again.unchanged, again.embedded) == (0, 0, 3, 0)
    changed = [chunks[0].model_copy(update={"text": "rewritten"}), chunks[1]]
    report = kb.add_chunks(changed, collection="notes", prune=True)
    assert (report.updated, report.unchanged, report.deleted, report.total) == (1, 1, 1, 2)
    assert kb.vectors.get("notes", ["c0"])[0].text == "rewritten"


def test_add_chunks_refuses_bad_rows_before_writing() -> None:
    kb = fresh_kb()
    with pytest.raises(InputError, match=r"<chunks>:2: 'text' is missing"):
        kb.add_chunks([{"text": "fine"}, {"title": "no text"}])
    assert kb.vectors.count("default") == 0 and kb.tree.get_collection("default") is None
    report = kb.add_chunks([{"text": "fine"}, {"title": "no text"}, "not an object"], skip_invalid=True)
    assert (report.added, report.skipped) == (1, 2)
    with pytest.raises(InputError, match="no chunks given"):
        kb.add_chunks([], collection="other")


def test_add_chunks_names_its_source_and_keeps_sources_apart() -> None:
    kb = fresh_kb()
    kb.add_chunks([{"chunk_id": "a", "text": "alpha"}], source="feed")
    with pytest.raises(ConflictError, match="'a'"):
        kb.add_chunks([{"chunk_id": "a", "text": "alpha again"}], source="other")
    assert kb.vectors.get("default", ["a"])[0].text == "alpha"
    assert [s.name for s in kb.tree.sources("default")] == ["feed"]
