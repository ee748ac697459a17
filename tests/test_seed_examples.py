"""The seed README's Python examples, run as written with ``knowtology`` → ``knowtology_cli``.

Only the package name changes (and, for the LLM build, the API key plus a ``base_url`` pointing at
the loopback fake provider). The default in-memory database is cleared around each test.
"""

from __future__ import annotations

import asyncio
import importlib.util

import pytest

from knowtology_cli.adapters.memory import default_database

CHUNKS = [
    {"text": "Refunds within 7 days of purchase...", "chunk_id": "abc-123", "chunk_index": 0},
    {"text": "Shipping takes 2-3 business days...", "chunk_id": "def-456", "chunk_index": 1},
    {"text": "Exchanges within 14 days...", "chunk_id": "ghi-789", "chunk_index": 2},
]


@pytest.fixture(autouse=True)
def _clean_memory():
    default_database().clear()
    yield
    default_database().clear()


async def _explore(tree_store) -> dict[str, str]:
    # --- seed README, "Search" example, verbatim (package renamed) ---
    from knowtology_cli import KnowledgeMapTools
    from knowtology_cli.adapters.memory import InMemoryTextStore, InMemoryVectorStore

    tools = KnowledgeMapTools(
        collection_id="company_docs",
        tree_store=tree_store,  # from build step
        vector_store=InMemoryVectorStore(),
        text_store=InMemoryTextStore(),
        top_k=5,
    )
    out = {}
    # Step 1: Browse the tree structure
    out["browse"] = await tools.browse_tree("root")
    # Step 2: Semantic search → snippets only
    out["search"] = await tools.search_chunks("return policy")
    # Step 3: Exact keyword match
    out["keyword"] = await tools.search_keyword("7 days, refund")
    # Step 4: Read full original text
    out["read"] = await tools.read_chunks("abc-123")
    out["read_again"] = await tools.read_chunks("abc-123")
    return out


def _check_exploration(out: dict[str, str]) -> None:
    assert out["browse"].startswith("root (3 chunks)")
    assert "[Category]" in out["browse"]
    for hit_list in (out["search"], out["keyword"]):
        assert "[abc-123]" in hit_list
        assert "Refunds within 7 days of purchase..." in hit_list  # a snippet, never more
    assert out["keyword"].splitlines()[1].lstrip().startswith("[abc-123]")  # under its path heading
    assert out["read"].splitlines()[0].startswith("[abc-123]")
    assert out["read"].splitlines()[-1] == "Refunds within 7 days of purchase..."
    assert out["read_again"] == "[abc-123] (already read — skip)"


def test_build_then_explore_offline() -> None:
    async def main():
        from knowtology_cli import TreeBuilder
        from knowtology_cli.adapters.memory import InMemoryTreeStore

        tree_store = InMemoryTreeStore()
        builder = TreeBuilder(llm=None, tree_store=tree_store)  # offline: clustering, no LLM
        result = await builder.build(collection_id="company_docs", chunks=CHUNKS)
        print(f"Tree: {result['tree_count']} nodes, Mappings: {result['mapping_count']}")
        assert result["mapping_count"] == 3 and result["tree_count"] >= 1
        assert result["builder"] == "cluster" and result["added"] == 3
        return await _explore(tree_store)

    _check_exploration(asyncio.run(main()))


def test_rebuild_with_same_chunks_embeds_nothing() -> None:
    from knowtology_cli import TreeBuilder
    from knowtology_cli.adapters.memory import InMemoryTreeStore

    builder = TreeBuilder(tree_store=InMemoryTreeStore())
    asyncio.run(builder.build("company_docs", CHUNKS))
    again = asyncio.run(builder.build("company_docs", CHUNKS))
    assert (again["added"], again["updated"], again["unchanged"], again["mapping_count"]) == (0, 0, 3, 3)


def _fake_llm_available() -> str | None:
    missing = [m for m in ("knowtology_cli.testing.fake_llm", "knowtology_cli.builders.llm_builder")
               if importlib.util.find_spec(m) is None]
    return f"not written yet: {', '.join(missing)}" if missing else None


@pytest.mark.skipif(_fake_llm_available() is not None, reason=str(_fake_llm_available()))
def test_build_with_openai_client_then_explore() -> None:
    from knowtology_cli.testing.fake_llm import FakeLLMServer

    with FakeLLMServer() as server:
        async def main():
            # --- seed README, "Build" example, verbatim except the key and the base_url ---
            from knowtology_cli import TreeBuilder
            from knowtology_cli.adapters.memory import InMemoryTreeStore
            from knowtology_cli.llm.openai import OpenAIClient

            llm = OpenAIClient(api_key="sk-test", model="gpt-4o-mini", base_url=server.openai_base_url)
            tree_store = InMemoryTreeStore()
            builder = TreeBuilder(llm=llm, tree_store=tree_store)
            # chunks = already stored in your vector DB
            result = await builder.build(
                collection_id="company_docs",
                chunks=[
                    {"text": "Refunds within 7 days of purchase...", "chunk_id": "abc-123", "chunk_index": 0},
                    {"text": "Shipping takes 2-3 business days...", "chunk_id": "def-456", "chunk_index": 1},
                    {"text": "Exchanges within 14 days...", "chunk_id": "ghi-789", "chunk_index": 2},
                ],
            )
            print(f"Tree: {result['tree_count']} nodes, Mappings: {result['mapping_count']}")
            assert result["builder"] == "llm" and result["mapping_count"] == 3 and result["llm_calls"] >= 1
            return await _explore(tree_store)

        _check_exploration(asyncio.run(main()))


def test_langchain_example_gives_four_km_tools() -> None:
    from knowtology_cli import KnowledgeMapTools, TreeBuilder
    from knowtology_cli.adapters.memory import InMemoryTextStore, InMemoryTreeStore, InMemoryVectorStore

    tree_store, vector_store, text_store = InMemoryTreeStore(), InMemoryVectorStore(), InMemoryTextStore()
    asyncio.run(TreeBuilder(tree_store=tree_store, vector_store=vector_store).build("company_docs", CHUNKS))
    # --- seed README, LangChain example (the agent itself needs langchain + an OpenAI key) ---
    tools_instance = KnowledgeMapTools(
        collection_id="company_docs",
        tree_store=tree_store,
        vector_store=vector_store,
        text_store=text_store,
    )
    tools = tools_instance.get_langchain_tools()  # 4 tools: km_browse_tree, km_search_chunks, ...
    assert [t.name for t in tools] == ["km_browse_tree", "km_search_chunks", "km_search_keyword", "km_read_chunks"]
    assert "abc-123" in tools[3].invoke({"chunk_ids": ["abc-123"]})


def test_adapter_base_names() -> None:
    from knowtology_cli.adapters.base import TextStore, TreeStore, VectorStore
    from knowtology_cli.adapters.memory import InMemoryTextStore, InMemoryTreeStore, InMemoryVectorStore

    assert issubclass(InMemoryTreeStore, TreeStore)
    assert issubclass(InMemoryVectorStore, VectorStore)
    assert issubclass(InMemoryTextStore, TextStore)


def test_text_store_seed_search_by_keywords() -> None:
    from knowtology_cli import TreeBuilder
    from knowtology_cli.adapters.memory import InMemoryTextStore, InMemoryTreeStore

    asyncio.run(TreeBuilder(tree_store=InMemoryTreeStore()).build("company_docs", CHUNKS))
    hits = asyncio.run(InMemoryTextStore().search_by_keywords("company_docs", "7 days, refund", top_k=2))
    assert hits[0]["chunk_id"] == "abc-123" and len(hits) == 2


def test_scale_out_adapters_import_lazily() -> None:
    import knowtology_cli.adapters.pg as pg
    import knowtology_cli.adapters.qdrant as qdrant

    for module, names in ((pg, ("PostgresTreeStore", "PostgresTextStore")), (qdrant, ("QdrantVectorStore",))):
        for name in names:
            try:
                assert callable(getattr(module, name))
            except Exception as exc:  # missing client package: a clear install hint
                assert "pip install" in (getattr(exc, "hint", "") or "")


def test_import_is_cheap() -> None:
    import subprocess
    import sys

    code = ("import sys, knowtology_cli, knowtology_cli.adapters.memory, knowtology_cli.tools;"
            "heavy = [m for m in ('lancedb', 'openai', 'anthropic', 'onnxruntime', 'mcp', 'fastapi',"
            " 'langchain_core') if m in sys.modules]; print(heavy)")
    out = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, check=True)
    assert out.stdout.strip() == "[]"
