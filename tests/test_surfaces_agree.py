"""The compact text is the same on every surface; ``--format context`` and ``--min-score`` work."""

from __future__ import annotations

# ruff: noqa: F811
import pytest
from _agent_fixtures import agent_store, agent_store_copy, kt  # noqa: F401

from knowtology_cli import KnowledgeMapTools


@pytest.fixture()
def tools(agent_store_copy):
    t = KnowledgeMapTools.open(str(agent_store_copy), session="lib")
    yield t
    t.close()


def test_cli_prints_the_agent_text(agent_store_copy, tools) -> None:
    store = str(agent_store_copy)
    assert kt("search", "refund window", "-k", "3", "--store", store).stdout.strip() == \
        tools.call("km_search_chunks", {"query": "refund window", "top_k": 3})
    assert kt("grep", "7 days, refund", "--store", store).stdout.strip() == \
        tools.call("km_search_keyword", {"keywords": "7 days, refund"})
    assert kt("read", "ret-2", "--session", "cli", "--store", store).stdout.strip() == \
        tools.call("km_read_chunks", {"chunk_ids": ["ret-2"]})


def test_format_context(agent_store_copy) -> None:
    store = str(agent_store_copy)
    hits = kt("search", "refund window", "-k", "2", "--format", "context", "--store", store).stdout.splitlines()
    assert len(hits) == 2 and all(line.startswith("- [") for line in hits)
    assert hits[0].startswith("- [ret-1] (")
    grep = kt("grep", "password manager", "-k", "1", "--format", "context", "--store", store).stdout.strip()
    assert grep.startswith("- [sec-1] (")
    read = kt("read", "sec-1", "--format", "context", "--session", "ctx", "--store", store).stdout.strip()
    assert read.startswith('<chunk id="sec-1" source="security.md#1" path="') and read.endswith("</chunk>")
    assert "at least 14 characters" in read


def test_min_score_filters_hits(agent_store_copy, tools) -> None:
    store = str(agent_store_copy)
    scores = [h.score for h in tools.keyword("refund", top_k=10).hits]
    assert len(scores) >= 3
    distinct = sorted(set(scores), reverse=True)
    cut = (distinct[0] + distinct[1]) / 2  # between two shown scores: no rounding edge
    out = kt("grep", "refund", "-k", "10", "--min-score", str(cut), "--store", store).stdout.splitlines()
    hit_lines = [line for line in out if line.startswith(" [")]  # hits are listed under their path
    assert len(hit_lines) == sum(1 for s in scores if s >= cut) < len(scores)
    none = kt("search", "refund", "--min-score", "5", "--store", store).stdout.strip()
    assert none == "No results for 'refund'."


def test_missing_extra_names_the_install_command() -> None:
    from knowtology_cli.errors import ConfigError
    from knowtology_cli.integrations import require

    with pytest.raises(ConfigError) as info:
        require("no_such_package_for_knowtology", "mcp", "the MCP server")
    assert info.value.hint == 'pip install "knowtology-cli[mcp]"'


def test_one_spec_list_feeds_every_surface(tools) -> None:
    from knowtology_cli.tools import TOOLS

    assert [t.name for t in TOOLS] == ["km_browse_tree", "km_search_chunks", "km_search_keyword", "km_read_chunks"]
    assert [t.route for t in TOOLS] == ["browse", "search", "keyword", "read"]
    assert [t.name for t in tools.get_langchain_tools()] == [t.name for t in TOOLS]
    assert TOOLS[3].parameters()["required"] == ["chunk_ids"]
    with pytest.raises(Exception, match="bad arguments for km_search_chunks: query: Field required"):
        tools.run("km_search_chunks", {"top_k": 2})


def test_hints_name_the_tools_on_agent_surfaces_and_commands_on_the_cli(agent_store_copy, tools) -> None:
    """One mapping words CLI advice for agents; the CLI keeps its own."""
    from knowtology_cli.errors import ConfigError, NotFoundError
    from knowtology_cli.tool_specs import error_text, tool_error

    store = str(agent_store_copy)
    with pytest.raises(NotFoundError) as browse:
        tools.run("km_browse_tree", {"path": "Zzzz/Qqqq"})
    assert error_text(browse.value) == ("Error: no category 'Zzzz/Qqqq' in collection 'default' — hint: "
                                        "km_browse_tree with path='root' lists the top categories")
    cli = kt("browse", "Zzzz/Qqqq", "--store", store, check=False)
    assert cli.returncode == 1 and f"Hint: `kt --store {store} browse` lists the top categories" in cli.stderr
    with pytest.raises(NotFoundError) as read:
        tools.run("km_read_chunks", {"chunk_ids": ["nope-404"]})
    assert tool_error(read.value) == {
        "code": "not_found", "message": "no chunk 'nope-404' in collection 'default'",
        "hint": "its document was renamed or removed, or the id is mistyped: km_search_keyword or "
                "km_search_chunks finds the text; copy ids from their output"}
    assert f"kt --store {store} grep or kt --store {store} search finds the text" in kt("read", "nope-404", "--store", store, check=False).stderr
    partly = tools.call("km_read_chunks", {"chunk_ids": ["ret-2", "nope-404"]})
    assert partly.endswith("(not found: nope-404 — its document was renamed or removed, or the id is mistyped: "
                           "km_search_keyword or km_search_chunks finds the text; copy ids from their output)")
    with pytest.raises(ConfigError) as keywords:
        tools.run("km_search_keyword", {"keywords": " , "})
    assert error_text(keywords.value) == "Error: no keywords given — hint: e.g. keywords='7 days, refund'"
