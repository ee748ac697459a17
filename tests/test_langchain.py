"""LangChain: four typed StructuredTools driven the way a tool-calling agent drives them."""
# ruff: noqa: F811

from __future__ import annotations

import asyncio

import pytest

pytest.importorskip("langchain_core")

from _agent_fixtures import agent_store, agent_store_copy, leaf_with_chunks  # noqa: E402,F401
from langchain_core.messages import AIMessage, ToolMessage  # noqa: E402

from knowtology_cli import KnowledgeMapTools  # noqa: E402
from knowtology_cli.render import ALREADY_READ  # noqa: E402

NAMES = ["km_browse_tree", "km_search_chunks", "km_search_keyword", "km_read_chunks"]


@pytest.fixture()
def lc_tools(agent_store_copy):
    tools = KnowledgeMapTools.open(str(agent_store_copy), session="lc")
    yield {t.name: t for t in tools.get_langchain_tools()}
    tools.close()


def _run_calls(tools: dict, message: AIMessage) -> list[ToolMessage]:
    """What an agent executor does with a model's tool-calling message."""
    return [tools[call["name"]].invoke(call) for call in message.tool_calls]


def test_names_descriptions_and_typed_arguments(lc_tools) -> None:
    assert list(lc_tools) == NAMES
    search = lc_tools["km_search_chunks"]
    assert "km_read_chunks" in search.description
    props = search.tool_call_schema.model_json_schema()["properties"]
    assert set(props) == {"query", "top_k", "under", "preset"}
    assert lc_tools["km_read_chunks"].tool_call_schema.model_json_schema()["properties"]["chunk_ids"]["type"] == "array"


def test_agent_style_exploration(lc_tools, agent_store_copy) -> None:
    leaf, ids = leaf_with_chunks(agent_store_copy)
    step1 = AIMessage(content="", tool_calls=[
        {"name": "km_browse_tree", "args": {"path": "root"}, "id": "c1"},
        {"name": "km_browse_tree", "args": {"path": leaf}, "id": "c2"},
        {"name": "km_search_chunks", "args": {"query": "refund within 7 days", "top_k": 3}, "id": "c3"},
        {"name": "km_search_keyword", "args": {"keywords": "password, characters"}, "id": "c4"},
    ])
    browse_root, browse_leaf, search, keyword = _run_calls(lc_tools, step1)
    assert all(isinstance(m, ToolMessage) and m.status == "success" for m in (browse_root, browse_leaf, search, keyword))
    assert browse_root.content.startswith("root (") and "[Category]" in browse_root.content
    assert f"[{ids[0]}]" in browse_leaf.content
    assert search.tool_call_id == "c3" and search.content.count("\n [") == 3  # 3 hit lines under paths
    assert search.artifact["hits"][0]["chunk_id"] in search.content
    assert keyword.content.splitlines()[1].lstrip().startswith("[sec-1]")  # under its path heading
    first = keyword.artifact["hits"][0]["chunk_id"]
    step2 = AIMessage(content="", tool_calls=[
        {"name": "km_read_chunks", "args": {"chunk_ids": [first]}, "id": "r1"},
        {"name": "km_read_chunks", "args": {"chunk_ids": [first]}, "id": "r2"},
    ])
    read, again = _run_calls(lc_tools, step2)
    assert "14 characters" in read.content
    assert read.artifact["chunks"][0]["text"]
    assert again.content == f"[{first}] {ALREADY_READ}"


def test_errors_come_back_as_tool_messages(lc_tools) -> None:
    call = {"name": "km_browse_tree", "args": {"path": "No/Such/Place"}, "id": "e1", "type": "tool_call"}
    msg = lc_tools["km_browse_tree"].invoke(call)
    assert msg.status == "error" and msg.content.startswith("Error: no category 'No/Such/Place'")
    unknown = lc_tools["km_read_chunks"].invoke(
        {"name": "km_read_chunks", "args": {"chunk_ids": ["nope-404"]}, "id": "e2", "type": "tool_call"})
    assert unknown.status == "error" and unknown.content.count("Error") == 1
    assert "km_search_keyword or km_search_chunks finds the text" in unknown.content and "kt " not in unknown.content
    # the tool keeps working afterwards
    assert lc_tools["km_browse_tree"].invoke({"path": "root"}).startswith("root (")


def test_refused_arguments_come_back_as_tool_messages(lc_tools) -> None:
    """LangChain checks arguments against the schema before the tool runs; a refusal is an error
    tool message, worded like every other tool error, not a ValidationError ending the run."""
    calls = [
        ({"name": "km_read_chunks", "args": {"chunk_ids": []}, "id": "v1", "type": "tool_call"},
         "Error: bad arguments for km_read_chunks: chunk_ids: List should have at least 1 item after validation, "
         "not 0 — hint: chunk_ids (required, at least 1 item): Chunk ids to read in full"),
        ({"name": "km_search_chunks", "args": {"query": "refund", "top_k": -3}, "id": "v2", "type": "tool_call"},
         "Error: bad arguments for km_search_chunks: top_k: Input should be greater than or equal to 1 — hint: "
         "top_k (1 to 50): Number of hits (default 5)."),
    ]
    for call, text in calls:
        msg = lc_tools[call["name"]].invoke(call)
        assert isinstance(msg, ToolMessage) and msg.status == "error" and msg.tool_call_id == call["id"]
        assert msg.content.startswith(text) and "\n" not in msg.content and "pydantic" not in msg.content
    plain = lc_tools["km_read_chunks"].invoke({"chunk_ids": []})  # no tool call: the text alone
    assert plain.startswith("Error: bad arguments for km_read_chunks: chunk_ids:")
    empty = lc_tools["km_search_chunks"].invoke({"name": "km_search_chunks", "args": {"query": ""}, "id": "v3",
                                                 "type": "tool_call"})
    assert empty.status == "error" and empty.content.startswith("Error: empty query")
    assert asyncio.run(lc_tools["km_read_chunks"].ainvoke({"chunk_ids": []})).startswith("Error: bad arguments")


def test_async_invocation(lc_tools) -> None:
    out = asyncio.run(lc_tools["km_search_keyword"].ainvoke({"keywords": "sick leave"}))
    assert out.splitlines()[1].startswith(" [hr-2]")  # first hit, under its path heading
