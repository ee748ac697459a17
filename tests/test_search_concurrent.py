"""Hybrid search with the keyword list fetched on a worker thread (issue 15, item 7): the same ranking
as one retriever after the other, errors from either branch raised as usual, and snippets read by row id."""

from __future__ import annotations

# ruff: noqa: F811
import json
import random
import threading
from pathlib import Path

import lance
import pytest
from _agent_fixtures import CHUNKS, agent_store, agent_store_copy, kt, write_corpus  # noqa: F401

from knowtology_cli.errors import EmbeddingError, StoreError
from knowtology_cli.kb import KnowledgeBase
from knowtology_cli.retrieval import pipeline
from knowtology_cli.retrieval.fusion import fuse_lists, normalise
from knowtology_cli.retrieval.presets import PRESETS
from knowtology_cli.stores import heavy_imports
from knowtology_cli.stores.base import ScoredId
from knowtology_cli.stores.lance import LanceVectorStore
from knowtology_cli.stores.routing import ForwardingVectorStore

QUERIES = ["refund within 7 days", "frozen groceries delivery", "password manager for admin accounts",
           "incident postmortem", "parental leave weeks", "how do I report phishing"]


class Recording(ForwardingVectorStore):
    """Forwards every call; notes which thread ran each search and can make one branch fail."""

    def __init__(self, inner, *, concurrent: bool, fail: str | None = None) -> None:
        super().__init__(inner)
        self.concurrent, self.fail = concurrent, fail
        self.threads: dict[str, str] = {}
        self.finished: list[str] = []

    def concurrent_reads(self, collection: str) -> bool:
        return self.concurrent

    def _run(self, name: str, call):
        self.threads[name] = threading.current_thread().name
        try:
            if self.fail == name:
                raise StoreError(f"{name} failed on purpose")
            return call()
        finally:
            self.finished.append(name)

    def vector_search(self, collection, vector, k, *, within=None):
        return self._run("vector", lambda: super(Recording, self).vector_search(collection, vector, k, within=within))

    def keyword_search(self, collection, query, k, *, within=None):
        return self._run("keyword", lambda: super(Recording, self).keyword_search(collection, query, k, within=within))

    def weighted_keyword_search(self, collection, terms, k, *, within=None):
        return self._run("weighted", lambda: super(Recording, self).weighted_keyword_search(collection, terms, k,
                                                                                            within=within))


@pytest.fixture()
def kb(agent_store_copy):
    k = KnowledgeBase.open(agent_store_copy)
    yield k
    k.close()


def _retrieve(kb: KnowledgeBase, store, query: str, preset: str, mode: str | None = None):
    chosen = PRESETS[preset]
    embedder = kb.embedder_for("default")
    return pipeline.retrieve(store, "default", query, mode=mode or chosen.mode, preset=chosen, k=5,
                             embed_query=embedder.embed_query)


@pytest.mark.parametrize("preset", ["default", "thorough"])
def test_concurrent_hybrid_gives_exactly_the_sequential_ranking(kb, preset) -> None:
    assert kb.vectors.concurrent_reads("default")  # a Lance store lets the two searches overlap
    for query in QUERIES:
        serial = Recording(kb.vectors, concurrent=False)
        overlapped = Recording(kb.vectors, concurrent=True)
        a = _retrieve(kb, serial, query, preset)
        b = _retrieve(kb, overlapped, query, preset)
        assert [(s.chunk_id, s.score) for s in a.ranking] == [(s.chunk_id, s.score) for s in b.ranking], query
        assert a.stages == b.stages and a.expansion == b.expansion
        assert a.ranking and len(a.ranking) == len(CHUNKS)  # every chunk is a candidate at depth 300
        main = threading.current_thread().name
        assert set(serial.threads.values()) == {main}
        assert overlapped.threads["vector"] == main
        assert overlapped.threads["keyword"].startswith("kt-search")  # it did run on the worker
        if preset == "thorough":
            assert overlapped.threads["weighted"].startswith("kt-search")


def test_search_results_do_not_depend_on_the_overlap(kb, monkeypatch) -> None:
    for preset in PRESETS:
        overlapped = [kb.search(q, k=5, preset=preset, explain=True).model_dump() for q in QUERIES]
        with monkeypatch.context() as m:
            m.setattr(LanceVectorStore, "concurrent_reads", lambda self, collection: False)
            serial = [kb.search(q, k=5, preset=preset, explain=True).model_dump() for q in QUERIES]
        assert overlapped == serial, preset


@pytest.mark.parametrize("fail", ["keyword", "vector", "embed"])
def test_an_error_in_either_branch_is_raised_after_both_end(kb, fail) -> None:
    store = Recording(kb.vectors, concurrent=True, fail=fail if fail != "embed" else None)
    chosen = PRESETS["default"]

    def embed(text: str):
        if fail == "embed":
            raise EmbeddingError("the embedder is down")
        return kb.embedder_for("default").embed_query(text)

    expected = (EmbeddingError, "embedder is down") if fail == "embed" else (StoreError, f"{fail} failed on purpose")
    with pytest.raises(expected[0], match=expected[1]):
        pipeline.retrieve(store, "default", "refund within 7 days", mode="hybrid", preset=chosen, k=5,
                          embed_query=embed)
    # the keyword search on the worker has ended (or never started) by the time the error arrives
    assert "keyword" in store.finished or "keyword" not in store.threads
    # and the next search is unaffected
    ok = pipeline.retrieve(Recording(kb.vectors, concurrent=True), "default", "refund", mode="hybrid", preset=chosen,
                           k=5, embed_query=kb.embedder_for("default").embed_query)
    assert ok.ranking


def test_a_keyword_failure_surfaces_from_the_facade_as_the_usual_error(kb, monkeypatch) -> None:
    def broken(self, collection, query, k, *, within=None):
        raise StoreError(f"keyword search failed for {query!r}: index gone", hint="simplify the query")

    monkeypatch.setattr(LanceVectorStore, "keyword_search", broken)
    with pytest.raises(StoreError, match="keyword search failed for 'refund'") as info:
        kb.search("refund", preset="default")
    assert info.value.hint == "simplify the query"


def test_fusion_adds_the_lists_exactly_as_a_plain_sum() -> None:
    rng = random.Random(5)
    for rule in ("minmax", "zscore", "rrf"):
        for _ in range(20):
            lists = {name: [ScoredId(f"c{rng.randrange(60)}", rng.uniform(-3, 3)) for _ in range(rng.randrange(1, 40))]
                     for name in ("dense", "keyword", "prf")[: rng.randrange(1, 4)]}
            lists = {n: list({s.chunk_id: s for s in items}.values()) for n, items in lists.items()}
            weights = {n: rng.uniform(0.2, 2) for n in lists} if rng.random() < 0.5 else None
            normed = {n: normalise(items, rule) for n, items in lists.items()}
            floor = {n: 0.0 if rule == "rrf" else min(v.values()) for n, v in normed.items()}
            total = sum((weights or {}).get(n, 1.0) for n in lists)
            ids = {i for v in normed.values() for i in v}
            want = {i: sum((weights or {}).get(n, 1.0) / total * v.get(i, floor[n]) for n, v in normed.items())
                    for i in ids}
            got = fuse_lists(lists, rule=rule, weights=weights)
            assert [(s.chunk_id, s.score) for s in got] == sorted(want.items(), key=lambda kv: (-kv[1], kv[0]))


@pytest.fixture()
def loose_store(tmp_path: Path) -> Path:
    """The corpus ingested through the CLI with no tree: every hit's snippet comes from the Lance table."""
    store = tmp_path / "loose"
    kt("ingest", str(write_corpus(tmp_path / "input")), "--embedder", "hash", "--store", str(store))
    return store


def test_snippets_of_unmapped_hits_are_read_by_row_id_and_never_stale(loose_store, monkeypatch) -> None:
    taken: list[int] = []
    original = lance.LanceDataset._take_rows

    def spy(self, row_ids, *args, **kwargs):
        taken.append(len(row_ids))
        return original(self, row_ids, *args, **kwargs)

    monkeypatch.setattr(lance.LanceDataset, "_take_rows", spy)
    kb = KnowledgeBase.open(loose_store)
    try:
        hits = kb.search("refund within 7 days", k=4).hits
        assert taken == [4] and all(h.path == "" and h.snippet for h in hits)  # four rows read, no scan
        store = kb.vectors
        ids = [h.chunk_id for h in hits] + ["not-a-chunk"]
        by_row = [c.model_dump() for c in store.get("default", ids)]
        store.backend_for("default")._rows.clear()
        by_filter = [c.model_dump() for c in store.get("default", ids)]
        assert by_row == by_filter and [c["chunk_id"] for c in by_row] == ids[:4]
        kb.search("refund within 7 days", k=4)
        before = len(taken)
        vecs = store.vectors("default", ids)  # thorough's Rocchio step reads them the same way
        assert len(taken) == before + 1 and set(vecs) == set(ids[:4])
        backend = store.backend_for("default")
        memo = backend._rows["default"][1]
        assert all(i in memo for i in ids[:4])
        # a remembered row id that names another row is caught by its chunk id (that row is not returned for it)
        other = next(i for i in memo if i not in ids)
        memo[ids[0]] = memo[other]
        assert [c.model_dump() for c in store.get("default", ids)] == by_filter
        backend._rows.clear()
        assert {i: v.tolist() for i, v in store.vectors("default", ids).items()} == {i: v.tolist() for i, v in vecs.items()}
        # a write gives the table a new version: remembered row ids are no longer trusted
        kb.search("refund within 7 days", k=4)
        store.delete("default", [ids[0]])
        assert [c.chunk_id for c in store.get("default", ids)] == ids[1:4]
    finally:
        kb.close()
    # the CLI (one process, the overlapped path) prints the same hits as the library one after the other
    with monkeypatch.context() as m:
        m.setattr(LanceVectorStore, "concurrent_reads", lambda self, collection: False)
        m.setattr(heavy_imports, "ONE_SHOT", True)  # vectors searched through Lance, as the one-shot CLI does
        kb = KnowledgeBase.open(loose_store)
        try:
            serial = kb.search("frozen groceries delivery", k=5).model_dump(mode="json")
        finally:
            kb.close()
    data = json.loads(kt("search", "frozen groceries delivery", "-k", "5", "--json", "--store", str(loose_store)).stdout)
    assert [(h["chunk_id"], h["score"], h["snippet"]) for h in data["hits"]] == [
        (h["chunk_id"], h["score"], h["snippet"]) for h in serial["hits"]]


def test_overlapped_searches_leave_the_warning_filters_alone(agent_store_copy) -> None:
    """Listing Lance indexes silences a deprecation warning with ``catch_warnings``, which two threads
    must not do at once (one would restore the other's filters): the store lists them once per handle,
    under its lock."""
    import warnings

    before = list(warnings.filters)
    for _ in range(3):  # a fresh handle each time: the listing runs again, from both threads
        kb = KnowledgeBase.open(agent_store_copy)
        try:
            for query in QUERIES:
                kb.search(query, k=3)
        finally:
            kb.close()
    assert warnings.filters == before
