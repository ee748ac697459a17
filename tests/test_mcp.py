"""MCP: the SDK's real stdio client launches ``kt mcp`` and calls the four tools."""

from __future__ import annotations

# ruff: noqa: F811
import asyncio
import os

import pytest

pytest.importorskip("mcp")

from _agent_fixtures import KT, agent_store, env, leaf_with_chunks  # noqa: E402,F401
from mcp import ClientSession, StdioServerParameters  # noqa: E402
from mcp.client.stdio import stdio_client  # noqa: E402

from knowtology_cli.render import ALREADY_READ  # noqa: E402

NAMES = {"km_browse_tree", "km_search_chunks", "km_search_keyword", "km_read_chunks"}


def _params(store, *extra: str, environment: dict | None = None) -> StdioServerParameters:
    return StdioServerParameters(command=KT, args=["mcp", "--store", str(store), *extra],
                                 env=environment or env(), cwd=os.getcwd())


async def _session_run(params: StdioServerParameters, body):
    with open(os.devnull, "w") as errlog:
        async with stdio_client(params, errlog=errlog) as (read, write):
            async with ClientSession(read, write) as session:
                await session.initialize()
                return await body(session)


def _text(result) -> str:
    return "\n".join(c.text for c in result.content if c.type == "text")


def test_lists_exactly_four_tools_and_calls_each(agent_store) -> None:
    leaf, ids = leaf_with_chunks(agent_store)

    async def body(session: ClientSession):
        listed = await session.list_tools()
        tools = {t.name: t for t in listed.tools}
        assert set(tools) == NAMES
        assert "km_read_chunks" in tools["km_search_chunks"].description
        assert tools["km_search_chunks"].input_schema["required"] == ["query"]
        assert tools["km_read_chunks"].input_schema["properties"]["chunk_ids"]["type"] == "array"

        root = await session.call_tool("km_browse_tree", {"path": "root"})
        assert not root.is_error and _text(root).startswith("root (") and "[Category]" in _text(root)
        at_leaf = await session.call_tool("km_browse_tree", {"path": leaf})
        assert f"[{ids[0]}]" in _text(at_leaf)

        search = await session.call_tool("km_search_chunks", {"query": "refund within 7 days", "top_k": 2})
        assert not search.is_error and len([x for x in _text(search).splitlines() if x.startswith(" [")]) == 2

        keyword = await session.call_tool("km_search_keyword", {"keywords": "7 days, refund"})
        first_line = _text(keyword).splitlines()[1].lstrip()  # hits are listed under their path
        assert first_line.startswith("[ret-1]")
        chunk_id = first_line[1:first_line.index("]")]

        read = await session.call_tool("km_read_chunks", {"chunk_ids": [chunk_id]})
        assert not read.is_error and "within 7 days of purchase" in _text(read)
        again = await session.call_tool("km_read_chunks", {"chunk_ids": [chunk_id]})
        assert _text(again) == f"[{chunk_id}] {ALREADY_READ}"

        bad = await session.call_tool("km_browse_tree", {"path": "Zzzz/Qqqq"})
        assert bad.is_error and _text(bad) == ("Error executing tool km_browse_tree: no category 'Zzzz/Qqqq' in "
                                               "collection 'default' — hint: km_browse_tree with path='root' lists "
                                               "the top categories")  # "Error" once, the hint names a tool
        unknown = await session.call_tool("km_read_chunks", {"chunk_ids": ["nope-404"]})
        assert unknown.is_error and _text(unknown).startswith(
            "Error executing tool km_read_chunks: no chunk 'nope-404' in collection 'default' — hint: ")
        assert "km_search_keyword" in _text(unknown) and "kt " not in _text(unknown)
        wrong_args = await session.call_tool("km_search_chunks", {"top_k": 3})
        assert wrong_args.is_error
        assert _text(wrong_args) == ("Error executing tool km_search_chunks: bad arguments for km_search_chunks: "
                                     "query: Field required — hint: query (required): What you are looking for, "
                                     "as a short question or phrase.")
        empty_ids = await session.call_tool("km_read_chunks", {"chunk_ids": []})
        assert empty_ids.is_error and "\n" not in _text(empty_ids) and "pydantic" not in _text(empty_ids)
        assert _text(empty_ids).startswith("Error executing tool km_read_chunks: bad arguments for km_read_chunks: "
                                           "chunk_ids: List should have at least 1 item")
        extra = await session.call_tool("km_search_keyword", {"keywords": "7 days, refund", "k": 2})
        assert not extra.is_error  # a key the tool does not take is ignored, as the SDK always did
        # the server is still alive and answering
        still = await session.call_tool("km_browse_tree", {})
        assert not still.is_error and _text(still) == _text(root)
        return chunk_id

    chunk_id = asyncio.run(_session_run(_params(agent_store), body))

    # a new connection has its own read history; nothing was written to the store's sessions
    async def second(session: ClientSession):
        return _text(await session.call_tool("km_read_chunks", {"chunk_ids": [chunk_id]}))

    assert "within 7 days of purchase" in asyncio.run(_session_run(_params(agent_store), second))
    assert not (agent_store / "sessions").exists() or not any((agent_store / "sessions").glob("*.json"))


def test_named_session_is_shared_and_persisted(tmp_path, agent_store) -> None:
    import shutil

    store = tmp_path / "store"
    shutil.copytree(agent_store, store)
    _, ids = leaf_with_chunks(store)

    async def read(session: ClientSession):
        return _text(await session.call_tool("km_read_chunks", {"chunk_ids": ids[:1]}))

    params = _params(store, "--session", "team")
    assert ALREADY_READ not in asyncio.run(_session_run(params, read))
    assert asyncio.run(_session_run(params, read)) == f"[{ids[0]}] {ALREADY_READ}"
    assert (store / "sessions" / "team.json").is_file()


def test_high_level_client_over_stdio_keeps_one_read_history_per_connection(agent_store) -> None:
    """``mcp.Client`` negotiates the 2026 per-request protocol (a fresh connection object per
    request on the server); a repeat read within one ``async with Client(...)`` is still skipped."""
    from mcp import Client

    _, ids = leaf_with_chunks(agent_store)

    async def run() -> tuple[str, list[str]]:
        async with Client(_params(agent_store)) as client:
            texts = [_text(await client.call_tool("km_read_chunks", {"chunk_ids": ids[:1]})) for _ in range(2)]
            return client.session.protocol_version, texts

    version, (first, second) = asyncio.run(run())
    assert ALREADY_READ not in first and first.startswith(f"[{ids[0]}]")
    assert second == f"[{ids[0]}] {ALREADY_READ}", (version, second)
    _, (fresh, _) = asyncio.run(run())  # a new connection starts with an empty history
    assert ALREADY_READ not in fresh


def test_read_takes_one_id_as_a_string_and_ids_copied_with_brackets(agent_store) -> None:
    """Models send ``chunk_ids="x"`` and ``"[x]"`` as the text shows ids; the SDK's own argument check
    must not refuse what the tool's model accepts."""
    from mcp import Client

    _, ids = leaf_with_chunks(agent_store)

    async def run() -> list[tuple[bool, str]]:
        async with Client(_params(agent_store)) as client:
            calls = [{"chunk_ids": ids[0]}, {"chunk_ids": [f"[{ids[1]}]"]}, {"chunk_ids": f"{ids[0]}, [{ids[1]}]"}]
            results = [await client.call_tool("km_read_chunks", args) for args in calls]
            return [(r.is_error, _text(r)) for r in results]

    (err1, one), (err2, bracketed), (err3, both) = asyncio.run(run())
    assert not err1 and one.startswith(f"[{ids[0]}]") and ALREADY_READ not in one, one
    assert not err2 and bracketed.startswith(f"[{ids[1]}]") and ALREADY_READ not in bracketed, bracketed
    assert not err3 and both == f"[{ids[0]}] {ALREADY_READ}\n\n[{ids[1]}] {ALREADY_READ}", both
