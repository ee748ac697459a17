"""The LLM reranker against the shipped fake server, through the real openai / anthropic SDKs."""

from __future__ import annotations

# ruff: noqa: F811
import json

import pytest
from _agent_fixtures import CHUNKS, agent_store, agent_store_copy, env, kt  # noqa: F401

from knowtology_cli.kb import KnowledgeBase
from knowtology_cli.llm import get_llm
from knowtology_cli.retrieval.rerank import RERANK_TOP, Candidate, parse_grades, render_candidates
from knowtology_cli.testing.fake_llm import FakeLLMServer

QUERY = "express delivery fee"
MODELS = {"openai": "gpt-4o-mini", "anthropic": "claude-3-5-haiku-latest"}


def client(provider: str, server: FakeLLMServer):
    base = server.openai_base_url if provider == "openai" else server.anthropic_base_url
    return get_llm(f"{provider}:{MODELS[provider]}", api_key="sk-test-rerank", base_url=base, timeout=5.0,
                   max_retries=0, max_output_retries=1, backoff_base=0.01, sleep=lambda _s: None)


def rerank_calls(server: FakeLLMServer):
    return [c for c in server.calls if c.kind == "rerank"]


@pytest.mark.parametrize("provider", ["openai", "anthropic"])
def test_one_batched_call_grades_snippets_and_reorders(provider, agent_store_copy) -> None:
    with FakeLLMServer() as server:
        kb = KnowledgeBase.open(agent_store_copy, llm=client(provider, server))
        plain = kb.search(QUERY, k=8)
        reranked = kb.search(QUERY, k=8, rerank="llm", explain=True)
        (call,) = rerank_calls(server)
        # the query and the top-N snippets only, nothing else of the chunks
        head = kb.search(QUERY, k=RERANK_TOP).hits
        expected = render_candidates(QUERY, [Candidate(h.chunk_id, h.snippet) for h in head])
        (user,) = [m for m in call.body["messages"] if m["role"] == "user"]
        content = user["content"] if isinstance(user["content"], str) else user["content"][0]["text"]
        assert content == expected and f'<candidate n="{len(head)}">' in content
        assert all(h.chunk_id not in content for h in head)  # numbered, ids never leave the process
        # llama.cpp-based servers refuse numeric bounds in a schema: enums say the same
        assert "minimum" not in json.dumps(call.body) and "maximum" not in json.dumps(call.body)
        assert sorted(h.chunk_id for h in reranked.hits) == sorted(h.chunk_id for h in plain.hits)
        grades = {h.chunk_id: h.explain["rerank"] for h in reranked.hits}
        assert list(grades.values()) == sorted(grades.values(), reverse=True)
        assert reranked.hits[0].chunk_id == "shp-2" and reranked.reranker == "llm"
        kb.close()


def test_replies_are_cached_in_the_call_log(agent_store_copy) -> None:
    with FakeLLMServer() as server:
        kb = KnowledgeBase.open(agent_store_copy, llm=client("openai", server))
        first = kb.search(QUERY, rerank="llm")
        kb.search(QUERY, rerank="llm")
        assert len(rerank_calls(server)) == 1
        kb.close()
        again = KnowledgeBase.open(agent_store_copy, llm=client("openai", server))  # a new process, same store
        assert [h.chunk_id for h in again.search(QUERY, rerank="llm").hits] == [h.chunk_id for h in first.hits]
        assert len(rerank_calls(server)) == 1
        again.search("password manager rules", rerank="llm")
        assert len(rerank_calls(server)) == 2
        again.close()


@pytest.mark.parametrize("fault", ["malformed", "server_error"])
def test_a_bad_reply_keeps_the_order_with_a_warning(fault, agent_store_copy) -> None:
    with FakeLLMServer(faults=[fault] * 5) as server:
        warnings: list[str] = []
        kb = KnowledgeBase.open(agent_store_copy, llm=client("openai", server))
        plain = kb.search(QUERY, k=6)
        fallback = kb.search(QUERY, k=6, rerank="llm", warn=warnings.append)
        assert [h.chunk_id for h in fallback.hits] == [h.chunk_id for h in plain.hits]
        assert len(warnings) == 1 and "keep their order" in warnings[0]
        assert "sk-test-rerank" not in warnings[0]
        kb.close()


def test_untrusted_grades_are_validated() -> None:
    assert parse_grades({"grades": [{"n": 2, "grade": 1}, {"n": 1, "grade": 3}]}, 2) == [3.0, 1.0]
    for bad in ({"grades": [{"n": 1, "grade": 3}]}, {"grades": [{"n": 1, "grade": 9}, {"n": 2, "grade": 0}]},
                {"grades": [{"n": 1, "grade": 1}, {"n": 1, "grade": 1}]}, {"grades": "3,1"},
                {"grades": [{"n": 3, "grade": 1}, {"n": 1, "grade": 1}]}, []):
        with pytest.raises(ValueError):
            parse_grades(bad, 2)
    assert RERANK_TOP == 20


def test_rerank_llm_through_the_cli(agent_store_copy) -> None:
    import subprocess

    from _agent_fixtures import KT

    with FakeLLMServer() as server:
        variables = env() | {"OPENAI_BASE_URL": server.openai_base_url, "OPENAI_API_KEY": "sk-test-rerank"}
        proc = subprocess.run([KT, "search", QUERY, "--rerank", "llm", "--llm", "openai:gpt-4o-mini", "--json",
                               "--store", str(agent_store_copy)], capture_output=True, text=True, env=variables,
                              timeout=120)
        assert proc.returncode == 0, proc.stderr
        data = json.loads(proc.stdout)
        assert data["reranker"] == "llm" and data["hits"][0]["chunk_id"] == "shp-2"
        assert data["reranked"] is True and data["warnings"] == []
        assert len(rerank_calls(server)) == 1
    with FakeLLMServer(faults=["malformed"] * 20) as server:  # every reply of both runs is unusable
        variables = env() | {"OPENAI_BASE_URL": server.openai_base_url, "OPENAI_API_KEY": "sk-test-rerank"}
        proc = subprocess.run([KT, "search", "password manager", "--rerank", "llm", "--llm", "openai:gpt-4o-mini",
                               "--store", str(agent_store_copy)], capture_output=True, text=True, env=variables,
                              timeout=120)
        assert proc.returncode == 0 and "Warning: LLM rerank skipped" in proc.stderr
        assert "sk-test-rerank" not in proc.stderr + proc.stdout
        # a script reading --json learns that the order was kept, and why
        proc = subprocess.run([KT, "search", "password manager", "--rerank", "llm", "--llm", "openai:gpt-4o-mini",
                               "--json", "--store", str(agent_store_copy)], capture_output=True, text=True,
                              env=variables, timeout=120)
        data = json.loads(proc.stdout)
        assert data["reranked"] is False and "LLM rerank skipped" in data["warnings"][0]
