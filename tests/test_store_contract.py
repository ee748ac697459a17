"""One contract for every store backend: tree stores (SQLite, in-memory, PostgreSQL), vector stores
(Lance local, in-memory, Qdrant local mode, Lance on moto S3, an attached read-only Lance table, the
routing store in front of a default and of an attached table, keyword search routed to a text store)
and session stores (file, in-memory, PostgreSQL)."""

from __future__ import annotations

from collections.abc import Callable, Sequence
from pathlib import Path

import numpy as np
import pytest

from knowtology_cli.errors import EmbeddingError, NotFoundError, StoreError
from knowtology_cli.models import Category, Chunk, ChunkMapping
from knowtology_cli.stores.base import CollectionInfo, SessionStore, TreeStore, VectorStore, staging_name

pytest_plugins = ("scale_fixtures",)

# --------------------------------------------------------------------------------------------
# tree stores
# --------------------------------------------------------------------------------------------


def _m(chunk_id: str, path: str, file_name: str = "a.md", index: int = 0) -> tuple[ChunkMapping, str]:
    return (ChunkMapping(collection="c", chunk_id=chunk_id, tree_node_id=0, snippet=f"snippet {chunk_id}",
                         doc_id="d", file_name=file_name, chunk_index=index, path=path), f"h-{chunk_id}")


def _seed(tree: TreeStore) -> None:
    tree.ensure_collection(CollectionInfo(name="c", embedder="hash", dimension=8))
    tree.apply(
        "c",
        [Category(path="Policies", description="Customer policies"),
         Category(path="Policies/Refunds", description="Money back"),
         Category(path="Engineering/Oncall", description="Paging")],
        [_m("r1", "Policies/Refunds", "refunds.md", 0), _m("r2", "Policies/Refunds", "refunds.md", 1),
         _m("s1", "Policies/Shipping", "shipping.md", 0), _m("o1", "Engineering/Oncall", "oncall.md", 0)],
    )


def test_reads_on_an_empty_store_answer_empty(tree: TreeStore) -> None:
    assert tree.get_collection("c") is None
    assert tree.list_collections() == []
    assert tree.children("c", None) == []
    assert tree.nodes("c") == []
    assert tree.mappings("c") == []
    assert tree.mapping_hashes("c") == {}
    assert tree.get_node("c", "A") is None
    assert tree.cached_response("nope") is None
    assert tree.call_stats()["calls"] == 0


def test_successors_say_where_a_gone_ids_text_went_through_every_move(tree: TreeStore) -> None:
    """A renamed file's old ids lead to the new ones; a second move leads the first ids on too; a
    dropped collection forgets them."""
    _seed(tree)
    assert tree.successors("c", ["a.md#0"]) == {}
    tree.record_successors("c", {"a.md#0": "b.md#0", "a.md#1": "b.md#1"})
    tree.record_successors("c", {"b.md#0": "sub/b.md#0"})
    assert tree.successors("c", ["a.md#0", "a.md#1", "b.md#0", "zzz"]) == {
        "a.md#0": "sub/b.md#0", "a.md#1": "b.md#1", "b.md#0": "sub/b.md#0"}
    assert tree.successors("other", ["a.md#0"]) == {}
    tree.drop_collection("c")
    assert tree.successors("c", ["a.md#0"]) == {}


def test_collections_record_embedder_builder_and_source(tree: TreeStore) -> None:
    info = tree.ensure_collection(CollectionInfo(name="c", embedder="hash", dimension=8,
                                                 source={"kind": "lance", "columns": {"id": "pk"}}))
    assert info == CollectionInfo(name="c", embedder="hash", dimension=8, builder=None,
                                  source={"kind": "lance", "columns": {"id": "pk"}})
    again = tree.ensure_collection(CollectionInfo(name="c", embedder="other", dimension=3))
    assert again.embedder == "hash"  # first record wins
    tree.ensure_collection(CollectionInfo(name="b", embedder="local", dimension=384))
    assert [c.name for c in tree.list_collections()] == ["b", "c"]
    tree.set_builder("c", "cluster")
    assert tree.get_collection("c").builder == "cluster"


def test_apply_builds_tree_with_counts_and_order(tree: TreeStore) -> None:
    _seed(tree)
    top = tree.children("c", None)
    assert [(n.path, n.level, n.chunk_count) for n in top] == [("Engineering", 1, 1), ("Policies", 1, 3)]
    kids = tree.children("c", "Policies")
    assert [(n.name, n.chunk_count, n.description) for n in kids] == [
        ("Refunds", 2, "Money back"), ("Shipping", 1, "")]
    assert tree.get_node("c", "/Policies/Refunds/").description == "Money back"
    assert tree.get_node("c", "Policies").description == "Customer policies"
    assert [n.path for n in tree.nodes("c")] == [
        "Engineering", "Engineering/Oncall", "Policies", "Policies/Refunds", "Policies/Shipping"]
    refunds = tree.get_node("c", "Policies/Refunds")
    assert refunds.parent_id == tree.get_node("c", "Policies").id


def test_mappings_filter_by_subtree_and_ids(tree: TreeStore) -> None:
    _seed(tree)
    assert [m.chunk_id for m in tree.mappings("c")] == ["o1", "r1", "r2", "s1"]
    assert [m.chunk_id for m in tree.mappings("c", under="Policies")] == ["r1", "r2", "s1"]
    assert [m.chunk_id for m in tree.mappings("c", under="Policies/Refunds")] == ["r1", "r2"]
    assert tree.mappings("c", under="Polic") == []  # a prefix of a name is not a subtree
    got = tree.mappings("c", chunk_ids=["s1", "r2", "missing", "s1"])
    assert [(m.chunk_id, m.path, m.snippet) for m in got] == [
        ("r2", "Policies/Refunds", "snippet r2"), ("s1", "Policies/Shipping", "snippet s1")]
    assert tree.mapping_hashes("c") == {"r1": "h-r1", "r2": "h-r2", "s1": "h-s1", "o1": "h-o1"}


def test_mappings_keep_section_and_source_range(tree: TreeStore) -> None:
    tree.ensure_collection(CollectionInfo(name="c", embedder="hash", dimension=8))
    lines = ChunkMapping(collection="c", chunk_id="a#0", tree_node_id=0, snippet="s", file_name="a.md",
                         path="Docs", section="Billing › Refunds", lines=(12, 30))
    pages = lines.model_copy(update={"chunk_id": "b#0", "file_name": "b.pdf", "lines": None, "pages": (3, 4),
                                     "section": ""})
    plain = lines.model_copy(update={"chunk_id": "c#0", "section": "", "lines": None})
    tree.apply("c", [], [(lines, "h1"), (pages, "h2"), (plain, "h3")])
    got = {m.chunk_id: (m.section, m.lines, m.pages) for m in tree.mappings("c")}
    assert got == {"a#0": ("Billing › Refunds", (12, 30), None), "b#0": ("", None, (3, 4)), "c#0": ("", None, None)}


def test_remap_remove_and_empty_categories_disappear(tree: TreeStore) -> None:
    _seed(tree)
    tree.apply("c", [], [_m("s1", "Policies/Refunds", "shipping.md", 0)])
    assert tree.get_node("c", "Policies/Shipping") is None
    assert tree.get_node("c", "Policies/Refunds").chunk_count == 3
    tree.apply("c", [], [], remove=["o1"])
    assert tree.get_node("c", "Engineering") is None
    assert [n.path for n in tree.children("c", None)] == ["Policies"]


def test_replace_wipes_the_tree_first(tree: TreeStore) -> None:
    _seed(tree)
    tree.apply("c", [Category(path="All", description="everything")], [_m("r1", "All/Things")], replace=True)
    assert [(n.path, n.chunk_count) for n in tree.nodes("c")] == [("All", 1), ("All/Things", 1)]
    assert list(tree.mapping_hashes("c")) == ["r1"]


def test_fallback_marks_are_set_kept_and_cleared_by_apply(tree: TreeStore) -> None:
    _seed(tree)

    def marks() -> dict[str, str]:
        return {n.path: n.name_fallback for n in tree.nodes("c") if n.name_fallback is not None}

    assert marks() == {}
    tree.apply("c", [], [], fallbacks={"Policies/Refunds": "the call failed", "/Engineering/": "'12' has no letters"})
    assert marks() == {"Policies/Refunds": "the call failed", "Engineering": "'12' has no letters"}
    tree.apply("c", [], [_m("n1", "Policies/Refunds")])  # None: the marks stay, and follow a rename
    tree.rename_nodes("c", {"Policies": ("Rules", None)})
    assert marks() == {"Rules/Refunds": "the call failed", "Engineering": "'12' has no letters"}
    tree.apply("c", [], [], fallbacks={"Engineering": "the call failed"})  # the given set replaces the others
    assert marks() == {"Engineering": "the call failed"}
    tree.apply("c", [], [], fallbacks={})
    assert marks() == {}
    tree.apply("c", [Category(path="All", description="")], [_m("r1", "All")], replace=True, fallbacks={"All": "x"})
    assert marks() == {"All": "x"}


def test_replace_tree_swaps_a_staged_tree_in_whole(tree: TreeStore) -> None:
    _seed(tree)
    staged = staging_name("c")
    tree.apply("c", [], [_m("n1", "Policies/Refunds")])  # placed since the full build: drift
    assert tree.tree_state("c").placed > 0
    tree.apply(staged, [Category(path="All", description="everything")], [_m("r1", "All/Things"), _m("o1", "All")])
    assert [n.path for n in tree.nodes("c")][:1] == ["Engineering"]  # the staged tree is not the collection's
    tree.replace_tree("c", staged, builder="llm")
    assert [(n.path, n.chunk_count, n.named_count, n.churn) for n in tree.nodes("c")] == [
        ("All", 2, 2, 0), ("All/Things", 1, 1, 0)]
    assert tree.mapping_hashes("c") == {"r1": "h-r1", "o1": "h-o1"}
    assert tree.nodes(staged) == [] and tree.mappings(staged) == []
    assert tree.get_collection("c").builder == "llm" and tree.tree_state("c").placed == 0
    assert tree.tree_state("c").built == 2
    tree.apply(staged, [], [_m("r2", "Left/Over")])
    tree.drop_collection("c")  # a rebuild's staged tree goes with its collection
    assert tree.nodes(staged) == [] and tree.mappings(staged) == []


def test_collections_are_isolated_and_drop_forgets_everything(tree: TreeStore) -> None:
    _seed(tree)
    tree.ensure_collection(CollectionInfo(name="other", embedder="hash", dimension=8))
    tree.apply("other", [], [(_m("x", "Policies/Refunds")[0].model_copy(update={"collection": "other"}), "h")])
    assert tree.get_node("other", "Policies/Refunds").chunk_count == 1
    assert tree.get_node("c", "Policies/Refunds").chunk_count == 2
    tree.drop_collection("c")
    assert tree.get_collection("c") is None and tree.nodes("c") == [] and tree.mappings("c") == []
    assert [m.chunk_id for m in tree.mappings("other")] == ["x"]


def test_llm_log_caches_and_totals(tree: TreeStore) -> None:
    tree.log_call({"collection": "c", "model": "m", "prompt_hash": "p1", "input_tokens": 10, "output_tokens": 5,
                   "cost_usd": 0.5, "status": "ok", "response": {"categories": ["A"]}})
    tree.log_call({"collection": "c", "model": "m", "prompt_hash": "p2", "input_tokens": 3, "status": "error",
                   "error": "boom"})
    tree.log_call({"collection": "d", "model": "m", "prompt_hash": "p1", "input_tokens": 1, "status": "ok",
                   "response": {"categories": ["B"]}})
    assert tree.cached_response("p1")["response"] == {"categories": ["B"]}
    assert tree.cached_response("p2") is None
    assert tree.call_stats("c") == {"calls": 2, "input_tokens": 13, "output_tokens": 5, "cost_usd": 0.5, "failed": 1}
    assert tree.call_stats()["calls"] == 3


def test_schema_is_migrated_once(tree: TreeStore) -> None:
    version = tree.schema_version()
    assert version >= 1
    tree.close()
    assert tree.schema_version() == version


def test_postgres_store_survives_reconnect_and_parameterises_values(pg_dsn: str) -> None:
    from knowtology_cli.stores.pg import PostgresTreeStore

    first = PostgresTreeStore(pg_dsn)
    evil = "x'); DROP TABLE kt_tree_nodes; --"
    first.ensure_collection(CollectionInfo(name="c", embedder=evil, dimension=8))
    first.apply("c", [Category(path=f"{evil}/B", description=evil)], [_m("r1", f"{evil}/B")])
    first.close()
    second = PostgresTreeStore(pg_dsn)
    assert second.get_collection("c").embedder == evil
    assert second.get_node("c", f"{evil}/B").chunk_count == 1
    second.close()


def test_postgres_text_store_ranks_with_full_text_search(pg_dsn: str) -> None:
    from knowtology_cli.stores.pg import PostgresTextStore

    text = PostgresTextStore(pg_dsn)
    text.upsert("c", CHUNKS)
    text.upsert("other", CHUNKS[:1])
    assert text.count("c") == len(CHUNKS)
    hits = text.keyword_search("c", "refund", 10)
    assert hits[0].chunk_id == "refund" and {h.chunk_id for h in hits} <= {"refund", "perishable"}
    assert [h.chunk_id for h in text.keyword_search("c", "PostgreSQL failover", 2)] == ["failover"]
    assert text.keyword_search("c", "refund", 5, within=["perishable"])[0].chunk_id == "perishable"
    assert text.keyword_search("c", "'); --", 5) == []
    text.delete("c", ["refund"])
    assert "refund" not in {h.chunk_id for h in text.keyword_search("c", "refund", 5)}
    text.close()


def test_postgres_sessions_remember_reads(pg_dsn: str) -> None:
    from knowtology_cli.stores.pg import PostgresSessionStore

    sessions = PostgresSessionStore(pg_dsn)
    sessions.mark_read("s", "c", ["a", "b", "a"])
    sessions.mark_read("s", "c", ["c", "b"])
    sessions.mark_read("s", "d", ["z"])
    assert sessions.read_ids("s", "c") == ["a", "b", "c"]
    assert sessions.names() == ["s"]
    assert sessions.reset("s", "c") is True
    assert sessions.read_ids("s", "c") == [] and sessions.read_ids("s", "d") == ["z"]
    sessions.close()


# --------------------------------------------------------------------------------------------
# vector stores
# --------------------------------------------------------------------------------------------

DIM = 8


def _vec(*hot: int) -> np.ndarray:
    v = np.full(DIM, 0.05, dtype=np.float32)
    for h in hot:
        v[h] = 1.0
    return v / np.linalg.norm(v)


CHUNKS = [
    Chunk(chunk_id="refund", text="Refunds are paid within 7 days of the return.", doc_id="d1",
          file_name="refunds.md", chunk_index=0, title="Refund policy", content_hash="h1"),
    Chunk(chunk_id="perishable", text="Opened perishable food cannot be returned for a refund.", doc_id="d1",
          file_name="refunds.md", chunk_index=1, title="Perishables", content_hash="h2"),
    Chunk(chunk_id="failover", text="Fail over the PostgreSQL primary when replication lag is high.", doc_id="d2",
          file_name="failover.md", chunk_index=0, title="Failover", content_hash="h3"),
    Chunk(chunk_id="oncall", text="The on-call engineer acknowledges pages within 5 minutes.", doc_id="d3",
          file_name="oncall.md", chunk_index=0, title="Paging", content_hash="h4"),
]
VECTORS = np.stack([_vec(0), _vec(0, 1), _vec(4), _vec(5, 6)])


class Harness:
    """A vector store under test; ``load`` puts rows in (upsert for writable stores, a new table
    for the attached one) and returns the store to query."""

    def __init__(self, kind: str, make: Callable[[], VectorStore], load: Callable[..., VectorStore] | None = None):
        self.kind = kind
        self.store = make()
        self._load = load
        self.writable = load is None

    def load(self, collection: str, chunks: Sequence[Chunk], vectors: np.ndarray) -> VectorStore:
        if self._load is not None:
            self.store = self._load(collection, chunks, vectors)
            return self.store
        self.store.upsert(collection, chunks, vectors)
        self.store.refresh_indexes(collection)
        return self.store


def write_foreign_table(path: Path, chunks: Sequence[Chunk], vectors: np.ndarray, *, fts: bool = True) -> str:
    """A Lance table someone else made: their own column names, an FTS index on their text column."""
    import lancedb
    import pyarrow as pa

    db = lancedb.connect(path)
    data = pa.table({
        "pk": [c.chunk_id for c in chunks],
        "body": [c.text for c in chunks],
        "heading": [c.title for c in chunks],
        "source": [c.file_name for c in chunks],
        "doc": [c.doc_id for c in chunks],
        "pos": pa.array([c.chunk_index for c in chunks], pa.int64()),
        "emb": pa.FixedSizeListArray.from_arrays(pa.array(vectors.astype(np.float32).ravel()), vectors.shape[1]),
        "extra": ["kept"] * len(chunks),
    })
    table = db.create_table("theirs", data=data, mode="overwrite")
    if fts:
        table.create_fts_index("body", use_tantivy=False)
        table.create_fts_index("heading", use_tantivy=False)
    return str(path / "theirs.lance")


FOREIGN_COLUMNS = dict(id="pk", text="body", vector="emb", doc="doc", file="source", index="pos", title="heading")


@pytest.fixture(params=["lance", "memory", "qdrant", "lance-s3", "attached", "routing", "routing-attached",
                        "keyword-routed"])
def harness(request: pytest.FixtureRequest, tmp_path: Path) -> Harness:
    kind = request.param
    if kind == "lance":
        from knowtology_cli.stores.lance import LanceVectorStore

        h = Harness(kind, lambda: LanceVectorStore(tmp_path / "lance"))
    elif kind == "memory":
        from knowtology_cli.stores.memory import InMemoryVectorStore

        h = Harness(kind, InMemoryVectorStore)
    elif kind == "qdrant":
        from knowtology_cli.stores.qdrant import QdrantVectorStore

        h = Harness(kind, lambda: QdrantVectorStore(path=str(tmp_path / "qdrant")))
    elif kind == "lance-s3":
        from knowtology_cli.stores.lance import LanceVectorStore

        uri = request.getfixturevalue("s3_uri")
        h = Harness(kind, lambda: LanceVectorStore(uri))
    elif kind == "attached":
        from knowtology_cli.stores.attached import AttachedLanceStore, ColumnMap

        def load(collection: str, chunks: Sequence[Chunk], vectors: np.ndarray) -> VectorStore:
            uri = write_foreign_table(tmp_path / f"foreign-{collection}", chunks, vectors)
            return AttachedLanceStore(uri, ColumnMap(**FOREIGN_COLUMNS))

        h = Harness(kind, lambda: AttachedLanceStore(str(tmp_path / "none.lance"), ColumnMap(**FOREIGN_COLUMNS)),
                    load)
    elif kind == "routing":  # collections without an attachment record go to the default store
        from knowtology_cli.stores.lance import LanceVectorStore
        from knowtology_cli.stores.memory import InMemoryTreeStore
        from knowtology_cli.stores.routing import RoutingVectorStore

        h = Harness(kind, lambda: RoutingVectorStore(LanceVectorStore(tmp_path / "lance"), InMemoryTreeStore()))
    elif kind == "routing-attached":  # a collection recorded as attached goes to its own read-only store
        from knowtology_cli.stores.memory import InMemoryTreeStore, InMemoryVectorStore
        from knowtology_cli.stores.routing import RoutingVectorStore

        tree = InMemoryTreeStore()
        routing = RoutingVectorStore(InMemoryVectorStore(), tree)

        def load(collection: str, chunks: Sequence[Chunk], vectors: np.ndarray) -> VectorStore:
            uri = write_foreign_table(tmp_path / f"foreign-{collection}", chunks, vectors)
            tree.ensure_collection(CollectionInfo(name=collection, embedder="hash", dimension=DIM, source={
                "kind": "lance", "table": uri, "columns": FOREIGN_COLUMNS, "attached": True}))
            routing.forget(collection)
            return routing

        h = Harness(kind, lambda: routing, load)
    else:  # keyword-routed: the seed adapters' text store answers keywords, the vector store the rest
        from knowtology_cli.adapters.memory import InMemoryDatabase, InMemoryTextStore, InMemoryVectorStore
        from knowtology_cli.stores.routing import KeywordRoutedStore

        database = InMemoryDatabase()
        h = Harness(kind, lambda: KeywordRoutedStore(InMemoryVectorStore(database), InMemoryTextStore(database)))
    yield h
    h.store.close()


def writable_only(h: Harness) -> None:
    if not h.writable:
        pytest.skip("read-only store: the write half of the contract does not apply")


def test_rows_round_trip(harness: Harness) -> None:
    store = harness.load("c", CHUNKS, VECTORS)
    assert store.count("c") == 4
    got = store.get("c", ["oncall", "missing", "refund"])
    assert [c.chunk_id for c in got] == ["oncall", "refund"]
    refund = got[1]
    expected = CHUNKS[0]
    assert (refund.text, refund.title, refund.doc_id, refund.file_name, refund.chunk_index) == (
        expected.text, expected.title, expected.doc_id, expected.file_name, expected.chunk_index)
    bare = store.get("c", ["refund"], with_text=False)[0]
    assert bare.chunk_id == "refund" and bare.file_name == "refunds.md"
    prints = store.fingerprints("c")
    assert set(prints) == {c.chunk_id for c in CHUNKS}
    assert prints["failover"][1] == "failover.md"
    rows = [(c.chunk_id, v) for chunks, vecs in store.iter_rows("c", batch_size=3) for c, v in zip(chunks, vecs)]
    assert sorted(r[0] for r in rows) == sorted(c.chunk_id for c in CHUNKS)
    for chunk_id, vector in rows:
        np.testing.assert_allclose(vector, VECTORS[[c.chunk_id for c in CHUNKS].index(chunk_id)], rtol=1e-5)
    vecs = store.vectors("c", ["failover", "nope"])
    assert list(vecs) == ["failover"]
    np.testing.assert_allclose(vecs["failover"], VECTORS[2], rtol=1e-5)


def test_vector_search_orders_by_cosine_and_honours_within(harness: Harness) -> None:
    store = harness.load("c", CHUNKS, VECTORS)
    hits = store.vector_search("c", _vec(0), 2)
    assert [h.chunk_id for h in hits] == ["refund", "perishable"]
    assert hits[0].score == pytest.approx(1.0, abs=1e-4) and hits[0].score > hits[1].score
    assert [h.chunk_id for h in store.vector_search("c", _vec(0), 5, within=["oncall", "failover"])] in (
        ["failover", "oncall"], ["oncall", "failover"])
    assert store.vector_search("c", _vec(0), 3, within=[]) == []
    with pytest.raises(EmbeddingError):
        store.vector_search("c", np.ones(DIM + 1, dtype=np.float32), 2)


def test_keyword_search_ranks_title_and_text(harness: Harness) -> None:
    store = harness.load("c", CHUNKS, VECTORS)
    hits = store.keyword_search("c", "refund", 10)
    assert hits and hits[0].chunk_id in {"refund", "perishable"}
    assert {h.chunk_id for h in hits} <= {"refund", "perishable"}
    assert [h.chunk_id for h in store.keyword_search("c", "replication", 5)] == ["failover"]
    assert [h.chunk_id for h in store.keyword_search("c", "paging", 5)] == ["oncall"]  # title only
    assert [h.chunk_id for h in store.keyword_search("c", "refund", 5, within=["perishable", "oncall"])] == [
        "perishable"]
    assert store.keyword_search("c", "zebra", 5) == []


def test_regex_search_counts_matches(harness: Harness) -> None:
    store = harness.load("c", CHUNKS, VECTORS)
    hits = store.regex_search("c", r"\b\d+ (days|minutes)\b", 5)
    assert sorted(h.chunk_id for h in hits) == ["oncall", "refund"]


def test_missing_collection_reads_empty(harness: Harness) -> None:
    writable_only(harness)
    store = harness.store
    assert store.count("nope") == 0
    assert store.fingerprints("nope") == {}
    assert store.get("nope", ["a"]) == []
    assert list(store.iter_rows("nope")) == []
    assert store.vector_search("nope", _vec(0), 3) == []
    assert store.keyword_search("nope", "refund", 3) == []


def test_upsert_replaces_by_chunk_id_and_delete_removes(harness: Harness) -> None:
    writable_only(harness)
    store = harness.load("c", CHUNKS, VECTORS)
    changed = CHUNKS[3].model_copy(update={"text": "Escalate to the zebra team.", "content_hash": "h9"})
    harness.load("c", [changed], VECTORS[3:4])
    assert store.count("c") == 4
    assert store.get("c", ["oncall"])[0].text == "Escalate to the zebra team."
    assert store.fingerprints("c")["oncall"] == ("h9", "oncall.md")
    assert [h.chunk_id for h in store.keyword_search("c", "zebra", 3)] == ["oncall"]
    store.delete("c", ["oncall", "refund"])
    assert store.count("c") == 2
    assert store.get("c", ["oncall", "refund"]) == []
    assert [h.chunk_id for h in store.vector_search("c", _vec(0), 1)] == ["perishable"]


def test_collections_are_separate_and_dimension_is_enforced(harness: Harness) -> None:
    writable_only(harness)
    store = harness.load("c", CHUNKS, VECTORS)
    harness.load("d", CHUNKS[:1], VECTORS[:1])
    assert (store.count("c"), store.count("d")) == (4, 1)
    with pytest.raises(EmbeddingError):
        store.upsert("c", CHUNKS[:1], np.ones((1, DIM + 2), dtype=np.float32))
    store.drop("d")
    assert store.count("d") == 0 and store.count("c") == 4


def test_read_only_store_refuses_every_write(harness: Harness) -> None:
    if harness.writable:
        pytest.skip("writable store")
    store = harness.load("c", CHUNKS, VECTORS)
    assert store.is_read_only("c") is True
    if harness.kind != "routing-attached":  # a routing store answers per collection
        assert store.read_only is True
    for call in (lambda: store.upsert("c", CHUNKS[:1], VECTORS[:1]), lambda: store.delete("c", ["refund"]),
                 lambda: store.drop("c")):
        with pytest.raises(StoreError, match="read-only"):
            call()
    assert store.count("c") == 4


def test_optional_capabilities_answer_on_every_store(harness: Harness) -> None:
    """Capabilities with defaults in ``VectorStore`` are callable on every store, through routing too."""
    store = harness.load("c", CHUNKS, VECTORS)
    assert isinstance(store, VectorStore)
    assert store.indexes_stale("c") is False  # the harness refreshed the indexes after writing
    backend = store.backend_for("c")
    assert isinstance(backend, VectorStore) and backend.backend_for("c") is backend
    assert backend.count("c") == 4
    assert store.row_store() is store
    store.forget("c")  # drops caches, never rows
    assert store.count("c") == 4
    refund = store.get("c", ["refund"])[0]
    assert [c.chunk_id for c in store.neighbours("c", refund, 0, 1)] == ["perishable"]
    assert [h.chunk_id for h in store.weighted_keyword_search("c", {"replication": 2.0}, 3)] == ["failover"]
    assert store.is_read_only("c") is not harness.writable


def test_routing_store_sends_attached_and_own_collections_to_their_stores(tmp_path: Path) -> None:
    from knowtology_cli.stores.attached import AttachedLanceStore
    from knowtology_cli.stores.memory import InMemoryTreeStore, InMemoryVectorStore
    from knowtology_cli.stores.routing import RoutingVectorStore

    tree, default = InMemoryTreeStore(), InMemoryVectorStore()
    routing = RoutingVectorStore(default, tree)
    routing.upsert("own", CHUNKS[:2], VECTORS[:2])
    uri = write_foreign_table(tmp_path / "foreign", CHUNKS, VECTORS)
    tree.ensure_collection(CollectionInfo(name="theirs", embedder="hash", dimension=DIM, source={
        "kind": "lance", "table": uri, "columns": FOREIGN_COLUMNS, "attached": True}))
    assert isinstance(routing.backend_for("theirs"), AttachedLanceStore)
    assert routing.backend_for("own") is default
    assert (routing.count("own"), routing.count("theirs"), default.count("theirs")) == (2, 4, 0)
    assert routing.is_read_only("theirs") and not routing.is_read_only("own")
    with pytest.raises(StoreError, match="read-only"):
        routing.upsert("theirs", CHUNKS[:1], VECTORS[:1])
    tree.drop_collection("theirs")
    routing.forget("theirs")  # detached: the collection is the default store's again
    assert routing.backend_for("theirs") is default and routing.count("theirs") == 0
    routing.close()


# --------------------------------------------------------------------------------------------
# session stores
# --------------------------------------------------------------------------------------------


@pytest.fixture(params=["file", "memory", "postgres"])
def sessions(request: pytest.FixtureRequest, tmp_path: Path) -> SessionStore:
    if request.param == "file":
        from knowtology_cli.sessions import FileSessionStore

        store: SessionStore = FileSessionStore(tmp_path / "sessions")
    elif request.param == "memory":
        from knowtology_cli.sessions import InMemorySessionStore

        store = InMemorySessionStore()
    else:
        from knowtology_cli.stores.pg import PostgresSessionStore

        store = PostgresSessionStore(request.getfixturevalue("pg_dsn"))
    yield store
    store.close()


def test_session_store_starts_empty(sessions: SessionStore) -> None:
    assert sessions.names() == []
    assert sessions.read_ids("s", "c") == []
    assert sessions.load("s")["collections"] == {}
    assert sessions.reset("s") is False
    with pytest.raises(NotFoundError, match="'s'"):
        sessions.require("s")


def test_session_store_keeps_reads_in_order_once_per_collection(sessions: SessionStore) -> None:
    sessions.mark_read("s", "c", ["a", "b", "a"])
    sessions.mark_read("s", "c", ["c", "b"])
    sessions.mark_read("s", "d", ["z"])
    sessions.mark_read("t", "c", ["b"])
    sessions.mark_read("t", "c", [])
    assert sessions.read_ids("s", "c") == ["a", "b", "c"]
    assert sessions.read_ids("t", "c") == ["b"]
    assert sessions.names() == ["s", "t"]
    assert sessions.load("s")["collections"] == {"c": {"read": ["a", "b", "c"]}, "d": {"read": ["z"]}}
    assert sessions.require("t")["collections"] == {"c": {"read": ["b"]}}


def test_session_store_resets_one_collection_or_all(sessions: SessionStore) -> None:
    sessions.mark_read("s", "c", ["a"])
    sessions.mark_read("s", "d", ["z"])
    assert sessions.reset("s", "c") is True
    assert sessions.read_ids("s", "c") == [] and sessions.read_ids("s", "d") == ["z"]
    assert sessions.reset("s") is True
    assert sessions.read_ids("s", "d") == []
    assert sessions.reset("s") is False


def test_session_store_forgets_removed_chunks_in_every_session(sessions: SessionStore) -> None:
    sessions.mark_read("s", "c", ["a", "b", "c"])
    sessions.mark_read("t", "c", ["b"])
    sessions.mark_read("t", "d", ["b"])
    sessions.forget_chunks("c", ["b", "missing"])
    assert (sessions.read_ids("s", "c"), sessions.read_ids("t", "c")) == (["a", "c"], [])
    assert sessions.read_ids("t", "d") == ["b"]  # another collection's chunk of the same id stays
    sessions.forget_chunks("c")
    assert sessions.read_ids("s", "c") == [] and sessions.read_ids("t", "d") == ["b"]


def test_attached_table_without_fts_index_says_so(tmp_path: Path) -> None:
    from knowtology_cli.stores.attached import AttachedLanceStore, ColumnMap

    uri = write_foreign_table(tmp_path, CHUNKS, VECTORS, fts=False)
    store = AttachedLanceStore(uri, ColumnMap(**FOREIGN_COLUMNS))
    with pytest.raises(StoreError, match="no full-text index"):
        store.keyword_search("c", "refund", 3)
    assert [h.chunk_id for h in store.regex_search("c", "refund", 3)] == ["perishable"]


def test_attached_mapping_errors_name_the_missing_column(tmp_path: Path) -> None:
    from knowtology_cli.stores.attached import AttachedLanceStore, ColumnMap

    uri = write_foreign_table(tmp_path, CHUNKS, VECTORS)
    store = AttachedLanceStore(uri, ColumnMap(id="pk", text="content", vector="emb"))
    with pytest.raises(StoreError, match="content"):
        store.count("c")


def test_qdrant_read_only_over_an_existing_collection(tmp_path: Path) -> None:
    """Someone else's Qdrant collection: integer point ids, their payload keys, a named vector."""
    from qdrant_client import QdrantClient, models

    from knowtology_cli.stores.qdrant import QdrantVectorStore

    client = QdrantClient(path=str(tmp_path / "q"))
    client.create_collection("docs", vectors_config={"dense": models.VectorParams(size=DIM,
                                                                                  distance=models.Distance.COSINE)})
    client.create_payload_index("docs", "content", models.TextIndexParams(type=models.TextIndexType.TEXT,
                                                                            scoring=True))
    client.upsert("docs", points=[
        models.PointStruct(id=i + 1, vector={"dense": VECTORS[i].tolist()},
                           payload={"content": c.text, "src": c.file_name}) for i, c in enumerate(CHUNKS)])
    store = QdrantVectorStore(client=client, collections={"kb": "docs"}, read_only=True, vector_name="dense",
                              fields={"chunk_id": None, "text": "content", "file_name": "src", "title": None})
    assert store.count("kb") == 4
    assert [h.chunk_id for h in store.vector_search("kb", _vec(4), 1)] == ["3"]
    assert store.get("kb", ["3"])[0].file_name == "failover.md"
    assert [h.chunk_id for h in store.keyword_search("kb", "replication", 3)] == ["3"]
    with pytest.raises(StoreError, match="read-only"):
        store.upsert("kb", CHUNKS[:1], VECTORS[:1])
    store.close()


def test_qdrant_delegates_keyword_search_to_a_text_store(tmp_path: Path, pg_dsn: str) -> None:
    from knowtology_cli.stores.pg import PostgresTextStore
    from knowtology_cli.stores.qdrant import QdrantVectorStore

    store = QdrantVectorStore(path=str(tmp_path / "q"), text_store=PostgresTextStore(pg_dsn))
    store.upsert("c", CHUNKS, VECTORS)
    assert [h.chunk_id for h in store.keyword_search("c", "replication", 3)] == ["failover"]
    store.delete("c", ["failover"])
    assert store.keyword_search("c", "replication", 3) == []
    store.close()

