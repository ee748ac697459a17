"""``kt ask``: the agent loop against the loopback fake provider, which scripts the tool calls."""

from __future__ import annotations

# ruff: noqa: F811
import json
import subprocess

import pytest
from _agent_fixtures import KT, agent_store, agent_store_copy, env  # noqa: F401

fake_llm = pytest.importorskip("knowtology_cli.testing.fake_llm")

SCRIPT = [
    {"tool_calls": [{"name": "km_browse_tree", "arguments": {"path": "root"}}]},
    {"tool_calls": [{"name": "km_search_chunks", "arguments": {"query": "refund window days", "top_k": 3}},
                    {"name": "km_search_keyword", "arguments": {"keywords": "7 days, refund"}}]},
    {"tool_calls": [{"name": "km_read_chunks", "arguments": {"chunk_ids": ["ret-1", "ret-2"]}}]},
    {"tool_calls": [{"name": "km_read_chunks", "arguments": {"chunk_ids": ["ret-1"]}}]},
    {"text": "Refunds can be requested within 7 days of purchase [ret-1]; they are paid back to the "
             "original payment method within 5 business days [ret-2]."},
]


def _ask(store, provider: str, server, *args: str) -> subprocess.CompletedProcess:
    environment = env()
    if provider == "openai":
        environment.update(OPENAI_API_KEY="sk-test-key", OPENAI_BASE_URL=server.openai_base_url)
        model = "openai:gpt-4o-mini"
    else:
        environment.update(ANTHROPIC_API_KEY="sk-ant-test-key", ANTHROPIC_BASE_URL=server.anthropic_base_url)
        model = "anthropic:claude-sonnet-4-6"
    return subprocess.run([KT, "ask", "How long do customers have to ask for a refund?", "--llm", model,
                           "--store", str(store), *args], capture_output=True, text=True, env=environment,
                          timeout=180)


@pytest.mark.parametrize("provider", ["openai", "anthropic"])
def test_scripted_exploration_answers_with_citations(agent_store_copy, provider) -> None:
    with fake_llm.FakeLLMServer(chat_script=[dict(t) for t in SCRIPT]) as server:
        proc = _ask(agent_store_copy, provider, server)
        calls = [c for c in server.calls if c.kind == "chat"]
    assert proc.returncode == 0, proc.stderr
    # each tool call is shown as it happens, with its token cost
    lines = [line for line in proc.stderr.splitlines() if line.startswith("→ ")]
    assert [line.split("(")[0] for line in lines] == [
        "→ km_browse_tree", "→ km_search_chunks", "→ km_search_keyword", "→ km_read_chunks", "→ km_read_chunks"]
    assert "tokens in" in lines[0] and "tokens back" in lines[0]
    assert "read 2" in lines[3] and "1 already read" in lines[4]
    assert "within 7 days of purchase [ret-1]" in proc.stdout
    assert "Sources: ret-1, ret-2" in proc.stdout
    # the model saw the tool specs and got the tool results back
    assert len(calls) == 5
    first = calls[0].body
    names = ([t["function"]["name"] for t in first["tools"]] if provider == "openai"
             else [t["name"] for t in first["tools"]])
    assert names == ["km_browse_tree", "km_search_chunks", "km_search_keyword", "km_read_chunks"]
    last = json.dumps(calls[-1].body, ensure_ascii=False)
    assert "within 7 days of purchase" in last and "(already read — skip)" in last


def test_max_steps_stops_the_loop(agent_store_copy) -> None:
    def forever(_body):
        return {"tool_calls": [{"name": "km_browse_tree", "arguments": {"path": "root"}}]}

    with fake_llm.FakeLLMServer(chat_script=forever) as server:
        proc = _ask(agent_store_copy, "openai", server, "--max-steps", "3")
        chat_calls = [c for c in server.calls if c.kind == "chat"]
    assert proc.returncode == 1
    assert len(chat_calls) == 3
    assert "Error: stopped after 3 steps without a final answer" in proc.stderr
    assert proc.stderr.count("→ km_browse_tree") == 3


def _reads_then(then: dict, final: dict):
    """A model that reads ret-1, then answers every later chat turn with ``then``; ``final`` is its
    reply to the last JSON answer call."""
    def script(body):
        if "final_answer" in json.dumps([body.get("response_format"), body.get("tool_choice")]):
            return final
        turns = sum(1 for m in body["messages"] if m["role"] == "assistant")
        if turns == 0:
            return {"tool_calls": [{"name": "km_read_chunks", "arguments": {"chunk_ids": ["ret-1"]}}]}
        return then
    return script


def _reads_then_browses(final: dict):
    """Reads ret-1, then browses until its turns run out."""
    return _reads_then({"tool_calls": [{"name": "km_browse_tree", "arguments": {"path": "root"}}]}, final)


@pytest.mark.parametrize("provider", ["openai", "anthropic"])
def test_out_of_steps_after_reading_asks_for_the_answer_once_as_json(agent_store_copy, provider) -> None:
    # Seen with Qwen2.5-Coder-0.5B: it read the right chunk, then kept calling tools until the step
    # budget ran out; asked for the answer as free text, it wrote a tool call as text. The last call
    # asks for JSON whose sources can only be the chunks it read, and cites them.
    reader = _reads_then_browses({"answer": "Refunds are accepted within 7 days.", "sources": ["ret-1"]})
    with fake_llm.FakeLLMServer(chat_script=reader, keep_bodies=True) as server:
        proc = _ask(agent_store_copy, provider, server, "--max-steps", "3", "--json")
        chat_calls = [c for c in server.calls if c.kind == "chat"]
        last = [c for c in server.calls if c.kind == "answer"]
    assert proc.returncode == 0, proc.stderr
    assert len(chat_calls) == 3 and len(last) == 1
    body = json.dumps(last[0].body)
    assert "tools" not in last[0].body or provider == "anthropic"  # Anthropic: the one forced answer tool
    assert '"enum": ["ret-1"]' in body and "within 7 days of purchase" in body  # sources limited to the read chunk, text sent
    out = json.loads(proc.stdout)
    assert out["cited"] == ["ret-1"] and out["answer"] == "Refunds are accepted within 7 days. [ret-1]"
    assert out["steps_taken"] == 4 and out["input_tokens"] >= last[0].prompt_tokens > 0


def test_out_of_steps_last_answer_with_no_source_read_is_retried_then_stops(agent_store_copy) -> None:
    # A server that does not enforce the schema: the sources name no chunk read; the client retries
    # the unusable reply, then kt ask has no answer (exit 1), and nothing uncited is passed off.
    reader = _reads_then_browses({"answer": "About a week, I think.", "sources": ["made-up"]})
    with fake_llm.FakeLLMServer(chat_script=reader) as server:
        proc = _ask(agent_store_copy, "openai", server, "--max-steps", "2")
        last = [c for c in server.calls if c.kind == "answer"]
    assert proc.returncode == 1, proc.stderr
    assert len(last) >= 2  # retried as an unusable reply
    assert "without a final answer" in proc.stderr and "About a week" not in proc.stdout


def test_json_output_and_tool_errors_go_back_to_the_model(agent_store_copy) -> None:
    script = [
        {"tool_calls": [{"name": "km_browse_tree", "arguments": {"path": "No/Such"}}]},
        {"tool_calls": [{"name": "km_read_chunks", "arguments": {"chunk_ids": ["hr-2"]}}]},
        {"text": "A doctor's note is needed after three days off [hr-2]."},
    ]
    with fake_llm.FakeLLMServer(chat_script=script) as server:
        proc = _ask(agent_store_copy, "openai", server, "--json")
        second = json.dumps([c for c in server.calls if c.kind == "chat"][1].body, ensure_ascii=False)
    assert proc.returncode == 0, proc.stderr
    result = json.loads(proc.stdout)
    assert result["cited"] == ["hr-2"] and result["read_ids"] == ["hr-2"] and not result["stopped"]
    assert result["steps"][0]["error"] and result["steps"][0]["output"].startswith("Error: no category 'No/Such'")
    assert "Error: no category" in second


def test_ask_without_a_model_is_a_clear_error(agent_store) -> None:
    proc = subprocess.run([KT, "ask", "anything", "--store", str(agent_store)], capture_output=True, text=True,
                          env=env(), timeout=120)
    assert proc.returncode == 1 and "Error: kt ask needs a model" in proc.stderr


def test_library_loop_with_scripted_llm(agent_store_copy) -> None:
    from knowtology_cli import KnowledgeMapTools
    from knowtology_cli.agent import ask
    from knowtology_cli.llm.scripted import ScriptedLLM

    llm = ScriptedLLM(chat_turns=[dict(t) for t in SCRIPT])
    tools = KnowledgeMapTools.open(str(agent_store_copy), session="lib-ask")
    steps = []
    result = ask("refund window?", tools, llm, on_step=steps.append)
    tools.close()
    assert [s.tool for s in steps] == ["km_browse_tree", "km_search_chunks", "km_search_keyword",
                                       "km_read_chunks", "km_read_chunks"]
    assert result.cited == ["ret-1", "ret-2"] and result.steps_taken == 5
    assert result.input_tokens > 0 and not result.stopped


def test_an_uncited_answer_is_asked_again_and_a_cited_one_exits_0(agent_store_copy) -> None:
    script = [
        {"tool_calls": [{"name": "km_read_chunks", "arguments": {"chunk_ids": ["ret-1"]}}]},
        {"text": "Refunds: 7 days."},  # no citation
        {"text": "Refunds can be asked for within 7 days [ret-1]."},
    ]
    with fake_llm.FakeLLMServer(chat_script=script) as server:
        proc = _ask(agent_store_copy, "openai", server, "--json")
        bodies = [c.body for c in server.calls if c.kind == "chat"]
    assert proc.returncode == 0, proc.stderr
    result = json.loads(proc.stdout)
    assert result["reasked"] and not result["uncited"] and result["cited"] == ["ret-1"]
    reask = bodies[2]["messages"][-1]["content"]
    assert reask.startswith("Your answer does not cite a chunk you read") and "ret-1" in reask


def _reads_then_answers_uncited(final: dict):
    """Reads ret-1, answers without a citation, and again after the re-ask."""
    # Seen with Qwen2.5-Coder-0.5B after the re-ask: a tool call written as the answer's text
    return _reads_then({"text": '{ "tool_call" : { "name" : "km_search_keyword", "arguments" : {} } }'}, final)


def test_uncited_again_after_the_re_ask_gets_one_json_answer_from_the_chunks_read(agent_store_copy) -> None:
    good = _reads_then_answers_uncited({"answer": "Within 7 days of purchase.", "sources": ["ret-1"]})
    with fake_llm.FakeLLMServer(chat_script=good) as server:
        proc = _ask(agent_store_copy, "openai", server, "--json")
        kinds = [c.kind for c in server.calls]
    assert proc.returncode == 0, proc.stderr
    assert kinds == ["chat", "chat", "chat", "answer"]  # read, uncited, re-asked: uncited, the JSON answer
    result = json.loads(proc.stdout)
    assert result["cited"] == ["ret-1"] and result["reasked"] and not result["uncited"]
    assert result["answer"] == "Within 7 days of purchase. [ret-1]" and result["steps_taken"] == 4

    bad = _reads_then_answers_uncited({"answer": "", "sources": []})  # unusable: the earlier answer stands
    with fake_llm.FakeLLMServer(chat_script=bad) as server:
        proc = _ask(agent_store_copy, "openai", server)
    assert proc.returncode == 3 and "tool_call" in proc.stdout and "Warning" in proc.stderr


def test_an_unread_id_in_the_json_answer_text_is_not_counted_as_cited(agent_store_copy) -> None:
    final = {"answer": "Within 7 days [hr-2].", "sources": ["ret-1"]}  # hr-2 was never read
    with fake_llm.FakeLLMServer(chat_script=_reads_then_browses(final)) as server:
        proc = _ask(agent_store_copy, "openai", server, "--max-steps", "2", "--json")
    assert proc.returncode == 0, proc.stderr
    result = json.loads(proc.stdout)
    assert result["cited"] == ["ret-1"] and result["cited_unread"] == ["hr-2"]


def test_an_answer_citing_only_chunks_it_did_not_read_exits_3_with_a_warning(agent_store_copy) -> None:
    script = [
        {"tool_calls": [{"name": "km_search_chunks", "arguments": {"query": "refund window days", "top_k": 3}}]},
        {"text": "Refunds within 7 days [ret-1]."},  # seen in search, never read
        {"text": "Refunds within 7 days [ret-1]."},  # the same again after the re-ask
    ]
    with fake_llm.FakeLLMServer(chat_script=script) as server:
        human = _ask(agent_store_copy, "openai", server)
    assert human.returncode == 3, human.stderr
    assert "Refunds within 7 days [ret-1]." in human.stdout  # the answer is still shown
    assert "Warning: the answer cites no chunk the agent read" in human.stderr and "ret-1" in human.stderr
    assert "Traceback" not in human.stderr
    with fake_llm.FakeLLMServer(chat_script=[dict(t) for t in script]) as server:
        proc = _ask(agent_store_copy, "openai", server, "--json")
    result = json.loads(proc.stdout)  # still exactly one JSON document
    assert proc.returncode == 3 and result["uncited"] and result["reasked"]
    assert result["cited"] == [] and result["cited_unread"] == ["ret-1"] and result["read_ids"] == []


def test_invented_ids_get_the_real_ones_to_copy(agent_store_copy) -> None:
    from knowtology_cli import KnowledgeMapTools
    from knowtology_cli.agent import ask
    from knowtology_cli.llm.scripted import ScriptedLLM

    llm = ScriptedLLM(chat_turns=[
        {"tool_calls": [{"name": "km_search_chunks", "arguments": {"query": "refund window days", "top_k": 3}}]},
        {"tool_calls": [{"name": "km_read_chunks", "arguments": {"chunk_ids": ["2"]}}]},  # a rank, not an id
        {"tool_calls": [{"name": "km_read_chunks", "arguments": {"chunk_ids": ["ret-1"]}}]},
        {"text": "Within 7 days [ret-1]."},
    ])
    tools = KnowledgeMapTools.open(str(agent_store_copy), session="ids-hint")
    result = ask("refund window?", tools, llm)
    tools.close()
    assert result.steps[1].error and "ids from your searches, to copy exactly: " in result.steps[1].output
    assert "ret-1" in result.steps[1].output.split("to copy exactly: ")[1]
    assert result.cited == ["ret-1"] and not result.reasked


def test_a_search_under_a_category_that_is_not_a_path_searches_everywhere_with_a_note(agent_store_copy) -> None:
    # Recorded from Qwen2.5-Coder-0.5B on sample_corpus: its first search was scoped under a category
    # name that is not a path; it answered with the error text and repeated the same call after the re-ask.
    script = [
        {"tool_calls": [{"name": "km_search_keyword",
                         "arguments": {"keywords": "refund, days", "top_k": 3, "under": "Returns"}}]},
        {"tool_calls": [{"name": "km_read_chunks", "arguments": {"chunk_ids": ["ret-1"]}}]},
        {"text": "Within 7 days of purchase [ret-1]."},
    ]
    with fake_llm.FakeLLMServer(chat_script=script) as server:
        proc = _ask(agent_store_copy, "openai", server, "--json")
        bodies = [c.body for c in server.calls if c.kind == "chat"]
    assert proc.returncode == 0, proc.stderr
    result = json.loads(proc.stdout)
    first = result["steps"][0]
    assert not first["error"] and "scope not found" in first["summary"]
    assert first["output"].startswith("Note: no category 'Returns'") and "[ret-1]" in first["output"]
    tool_result = bodies[1]["messages"][-1]["content"]
    assert "searched the whole collection instead" in tool_result and "ret-1" in tool_result
    assert result["cited"] == ["ret-1"] and not result["reasked"]


def test_other_tool_errors_still_go_back_as_errors(agent_store_copy) -> None:
    from knowtology_cli import KnowledgeMapTools
    from knowtology_cli.agent import ask
    from knowtology_cli.llm.scripted import ScriptedLLM

    llm = ScriptedLLM(chat_turns=[
        {"tool_calls": [{"name": "km_browse_tree", "arguments": {"path": "Returns"}}]},
        {"tool_calls": [{"name": "km_read_chunks", "arguments": {"chunk_ids": ["ret-1"]}}]},
        {"text": "Within 7 days [ret-1]."},
    ])
    tools = KnowledgeMapTools.open(str(agent_store_copy), session="browse-error")
    result = ask("refund window?", tools, llm)
    tools.close()
    assert result.steps[0].error and result.steps[0].output.startswith("Error: no category 'Returns'")


def test_with_no_chunk_id_found_the_reask_lists_a_search_for_the_question(agent_store_copy) -> None:
    # The weak model's other dead end: an answer before any search, then nothing to read at the re-ask.
    script = [
        {"text": "Customers have a few days."},
        {"tool_calls": [{"name": "km_read_chunks", "arguments": {"chunk_ids": ["ret-1"]}}]},
        {"text": "Within 7 days of purchase [ret-1]."},
    ]
    with fake_llm.FakeLLMServer(chat_script=script) as server:
        proc = _ask(agent_store_copy, "openai", server, "--json")
        bodies = [c.body for c in server.calls if c.kind == "chat"]
    assert proc.returncode == 0, proc.stderr
    result = json.loads(proc.stdout)
    assert [s["tool"] for s in result["steps"]] == ["km_search_chunks", "km_read_chunks"]
    search = result["steps"][0]
    assert "kt searched the question" in search["summary"] and search["input_tokens"] == 0
    assert search["arguments"] == {"query": "How long do customers have to ask for a refund?"}
    reask = bodies[1]["messages"][-1]["content"]
    assert "A search for the question found these" in reask and "ret-1" in reask
    assert result["reasked"] and result["cited"] == ["ret-1"] and not result["uncited"]


def test_the_question_is_not_searched_for_the_model_once_it_has_ids(agent_store_copy) -> None:
    from knowtology_cli import KnowledgeMapTools
    from knowtology_cli.agent import ask
    from knowtology_cli.llm.scripted import ScriptedLLM

    llm = ScriptedLLM(chat_turns=[
        {"tool_calls": [{"name": "km_search_chunks", "arguments": {"query": "password length", "top_k": 2}}]},
        {"text": "Passwords need 14 characters."},  # uncited, but it has ids to read
        {"text": "Passwords need 14 characters."},
    ])
    tools = KnowledgeMapTools.open(str(agent_store_copy), session="no-extra-search")
    result = ask("How long must passwords be?", tools, llm)
    tools.close()
    assert [s.tool for s in result.steps] == ["km_search_chunks"] and result.uncited
    assert "ids from your searches" in llm.calls[-1].messages[-1].content


def test_a_repeated_search_is_not_run_again_and_the_model_is_told_to_answer(agent_store_copy) -> None:
    # Recorded from Qwen2.5-Coder-0.5B: after reading the right chunk it sent the same keyword search
    # three times in a row until the step budget ran out (exit 1, no answer).
    search = {"name": "km_search_keyword", "arguments": {"keywords": "refund, days", "top_k": 1}}
    script = [
        {"tool_calls": [search]},
        {"tool_calls": [{"name": "km_read_chunks", "arguments": {"chunk_ids": ["ret-1"]}}]},
        {"tool_calls": [search]},
        {"text": "Within 7 days of purchase [ret-1]."},
    ]
    with fake_llm.FakeLLMServer(chat_script=script) as server:
        proc = _ask(agent_store_copy, "openai", server, "--json")
        bodies = [c.body for c in server.calls if c.kind == "chat"]
    assert proc.returncode == 0, proc.stderr
    result = json.loads(proc.stdout)
    again = result["steps"][2]
    assert again["error"] and again["summary"] == "repeats turn 1: not run"
    told = bodies[3]["messages"][-1]["content"]
    assert "already made this exact call at turn 1" in told and "[ret-1]" in told
    assert result["cited"] == ["ret-1"]


def test_a_repeated_read_still_counts_as_a_read(agent_store_copy) -> None:
    from knowtology_cli import KnowledgeMapTools
    from knowtology_cli.agent import ask
    from knowtology_cli.llm.scripted import ScriptedLLM

    read = {"name": "km_read_chunks", "arguments": {"chunk_ids": ["hr-2"]}}
    llm = ScriptedLLM(chat_turns=[{"tool_calls": [read]}, {"tool_calls": [read]}, {"text": "A note [hr-2]."}])
    tools = KnowledgeMapTools.open(str(agent_store_copy), session="repeat-read")
    result = ask("sick leave?", tools, llm)
    tools.close()
    assert [s.error for s in result.steps] == [False, False] and result.cited == ["hr-2"]


def test_the_re_ask_shows_no_placeholder_a_model_could_print_as_its_answer() -> None:
    # Seen with Qwen2.5-Coder-0.5B: asked again before reading anything, it answered "[the chunk id]"
    import re

    from knowtology_cli.agent import reask_prompt

    nothing_read = reask_prompt([], ["ret-1", "ret-2"])
    assert not re.search(r"\[[^\]]*\]", nothing_read) and "ret-1" in nothing_read
    assert "e.g. [ret-2]" in reask_prompt(["ret-2"])
