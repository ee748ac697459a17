"""LLM clients over the real OpenAI and Anthropic SDKs, talking to the loopback fake server."""

from __future__ import annotations

import json
import logging
import subprocess
import sys
import time
import traceback

import pytest

from knowtology_cli.builders.prompts import TREE_REPLY_SCHEMA, build_messages
from knowtology_cli.builders.validate import check_reply, parse_reply
from knowtology_cli.errors import ConfigError, LLMError, LLMOutputError
from knowtology_cli.llm import (
    ChatMessage,
    LLMTruncatedError,
    ProviderFailure,
    ToolSpec,
    get_llm,
    get_profile,
    parse_spec,
)
from knowtology_cli.llm.anthropic import AnthropicClient
from knowtology_cli.llm.base import parse_retry_after
from knowtology_cli.llm.openai import OpenAIClient
from knowtology_cli.llm.scripted import ScriptedLLM
from knowtology_cli.testing.fake_llm import FakeLLMServer, keyword_brain, parse_chunks

SENTINEL = "sk-SENTINEL-c0ffee-7d41e9b2a8"
PROVIDERS = ["openai", "anthropic"]
MODELS = {"openai": "gpt-4o-mini", "anthropic": "claude-haiku-4-5"}
CHUNKS = [
    ("refund-1", "Fresh food can be refunded within 48 hours of delivery; opened perishables are excluded."),
    ("refund-2", "Pantry goods can be returned within 30 days in their original packaging for a refund."),
    ("ship-1", "Standard shipping takes three to five business days; express shipping arrives next day."),
    ("ship-2", "Shipping to remote islands costs extra and may take two weeks; tracking is by email."),
    ("acct-1", "Reset your account password from the login page; the reset link expires after one hour."),
]
IDS = [c for c, _ in CHUNKS]


class SleepRecorder:
    def __init__(self) -> None:
        self.waits: list[float] = []

    def __call__(self, seconds: float) -> None:
        self.waits.append(seconds)


def client(provider: str, server: FakeLLMServer, *, key: str = SENTINEL, **kwargs):
    options = {"timeout": 2.0, "max_retries": 3, "backoff_base": 0.01, "seed": 1, "sleep": SleepRecorder()}
    options.update(kwargs)
    base = server.openai_base_url if provider == "openai" else server.anthropic_base_url
    return get_llm(f"{provider}:{MODELS[provider]}", api_key=key, base_url=base, **options)


def ask(llm, chunks=CHUNKS, **kwargs):
    system, user = build_messages(chunks)
    return llm.complete_json(system, user, TREE_REPLY_SCHEMA, max_output_tokens=2000, **kwargs)


@pytest.fixture
def server():
    with FakeLLMServer() as srv:
        yield srv


# ----------------------------------------------------------------------------- happy path
@pytest.mark.parametrize("provider", PROVIDERS)
def test_happy_path_returns_tree_usage_and_cost(provider, server):
    llm = client(provider, server)
    resp = ask(llm)
    reply = parse_reply(resp.data, IDS)
    assert reply.complete and not reply.unknown_ids
    assert sorted(a.chunk_id for a in reply.assignments) == sorted(IDS)
    assert resp.input_tokens > 0 and resp.output_tokens > 0 and resp.attempts == 1
    assert resp.cost_usd == pytest.approx(get_profile(MODELS[provider]).cost(resp.input_tokens, resp.output_tokens))
    assert resp.model == MODELS[provider]
    assert json.loads(resp.raw) == resp.data
    (call,) = server.calls
    assert (call.endpoint, call.kind, call.status, call.n_chunks) == (provider, "tree", 200, 5)
    assert llm.usage.calls == 1 and llm.usage.input_tokens == resp.input_tokens


def test_openai_request_uses_strict_json_schema(server):
    ask(client("openai", server))
    body = server.calls[0].body
    assert body["response_format"] == {
        "type": "json_schema",
        "json_schema": {"name": "record_tree", "strict": True, "schema": TREE_REPLY_SCHEMA},
    }
    assert [m["role"] for m in body["messages"]] == ["system", "user"]
    assert body["max_tokens"] == 2000  # a custom base URL gets the widely supported parameter
    assert body["temperature"] == 0


def test_anthropic_request_forces_the_record_tree_tool(server):
    ask(client("anthropic", server))
    body = server.calls[0].body
    assert body["tools"] == [{"name": "record_tree", "description": body["tools"][0]["description"],
                              "input_schema": TREE_REPLY_SCHEMA}]
    assert body["tool_choice"] == {"type": "tool", "name": "record_tree"}
    assert body["max_tokens"] == 2000
    assert isinstance(body["system"], str) and body["messages"][0]["role"] == "user"


# ----------------------------------------------------------------------------- faults
@pytest.mark.parametrize("provider", PROVIDERS)
def test_429_waits_the_retry_after_then_succeeds(provider, caplog):
    caplog.set_level(logging.DEBUG)
    with FakeLLMServer(faults=["rate_limit"], retry_after=7) as srv:
        llm = client(provider, srv)
        resp = ask(llm)
        assert [c.status for c in srv.calls] == [429, 200]
    assert len(llm._sleep.waits) == 1
    assert 7.0 <= llm._sleep.waits[0] <= 7.7  # honoured, plus at most 10 % jitter
    assert parse_reply(resp.data, IDS).complete
    assert SENTINEL not in caplog.text
    assert "rate limited (HTTP 429)" in caplog.text


def test_retry_after_header_forms():
    assert parse_retry_after({"Retry-After": "3"}) == 3.0
    assert parse_retry_after({"retry-after-ms": "250", "retry-after": "9"}) == 0.25
    assert parse_retry_after({"retry-after": "Wed, 21 Oct 2015 07:28:00 GMT"}, now=1445412470.0) == 10.0
    assert parse_retry_after({"retry-after": "soon"}) is None
    assert parse_retry_after({}) is None


@pytest.mark.parametrize("provider", PROVIDERS)
def test_500_then_success_with_exponential_backoff(provider):
    with FakeLLMServer(faults=["server_error", "500"]) as srv:
        llm = client(provider, srv, backoff_base=0.5)
        ask(llm)
        assert [c.status for c in srv.calls] == [500, 500, 200]
    first, second = llm._sleep.waits
    assert 0.25 <= first <= 0.5 and 0.5 <= second <= 1.0  # base * 2^(n-1), equal jitter


@pytest.mark.parametrize("provider", PROVIDERS)
def test_persistent_500_gives_up_with_llm_error(provider):
    with FakeLLMServer(faults=["server_error"] * 10) as srv:
        llm = client(provider, srv, max_retries=2)
        with pytest.raises(LLMError) as info:
            ask(llm)
        assert len(srv.calls) == 3
    assert "server error (HTTP 500)" in str(info.value) and "gave up after 3 attempts" in str(info.value)
    assert info.value.hint and not isinstance(info.value, LLMOutputError)


@pytest.mark.parametrize("provider", PROVIDERS)
def test_malformed_json_is_retried_and_paid_for(provider):
    with FakeLLMServer(faults=["malformed"]) as srv:
        llm = client(provider, srv)
        resp = ask(llm)
        assert [c.fault for c in srv.calls] == ["malformed", None]
    assert resp.attempts == 2
    assert parse_reply(resp.data, IDS).complete
    assert llm.usage.calls == 2 and resp.input_tokens == llm.usage.input_tokens
    assert llm._sleep.waits == []  # output retries don't back off


@pytest.mark.parametrize("provider", PROVIDERS)
def test_persistent_malformed_json_raises_output_error(provider):
    with FakeLLMServer(faults=["malformed"] * 5) as srv:
        llm = client(provider, srv, max_output_retries=1)
        with pytest.raises(LLMOutputError, match="no usable reply after 2 attempts"):
            ask(llm)
        assert len(srv.calls) == 2


@pytest.mark.parametrize("provider", PROVIDERS)
def test_truncated_reply_is_not_retried(provider):
    with FakeLLMServer(faults=["truncated"]) as srv:
        llm = client(provider, srv)
        with pytest.raises(LLMTruncatedError, match="max_output_tokens=2000"):
            ask(llm, validate=check_reply)
        assert len(srv.calls) == 1


@pytest.mark.parametrize("provider", PROVIDERS)
def test_hang_times_out_and_is_retried(provider):
    with FakeLLMServer(faults=["hang"], hang_seconds=10) as srv:
        llm = client(provider, srv, timeout=0.4)
        started = time.monotonic()
        resp = ask(llm)
        elapsed = time.monotonic() - started
        assert [c.fault for c in srv.calls] == ["hang", None]
    assert parse_reply(resp.data, IDS).complete
    assert elapsed < 5  # the client gave up on the hung call after its timeout


@pytest.mark.parametrize("provider", PROVIDERS)
def test_hang_every_time_raises_llm_error(provider):
    with FakeLLMServer(faults=["hang", "hang"], hang_seconds=10) as srv:
        llm = client(provider, srv, timeout=0.3, max_retries=1)
        with pytest.raises(LLMError, match="timed out"):
            ask(llm)
        assert len(srv.calls) == 2


@pytest.mark.parametrize("provider", PROVIDERS)
def test_validate_hook_retries_a_reply_without_assignments(provider):
    replies = iter([{"categories": []}])

    def brain(chunks, tree):
        return next(replies, None) or keyword_brain(chunks, tree)

    with FakeLLMServer(brain=brain) as srv:
        resp = ask(client(provider, srv), validate=check_reply)
        assert len(srv.calls) == 2
    assert "assignments" in resp.data


@pytest.mark.parametrize("provider", PROVIDERS)
def test_auth_error_never_shows_the_key(provider, caplog):
    caplog.set_level(logging.DEBUG)
    with FakeLLMServer(api_key="the-right-key") as srv:
        llm = client(provider, srv)
        with pytest.raises(LLMError) as info:
            ask(llm)
        assert [c.status for c in srv.calls] == [401]  # not retried
    err = info.value
    rendered = "".join(traceback.format_exception(err))
    for text in (str(err), repr(err), err.hint or "", json.dumps(err.to_dict()), rendered, caplog.text, repr(llm)):
        assert SENTINEL not in text
    assert "HTTP 401" in str(err)
    env = "OPENAI_API_KEY" if provider == "openai" else "ANTHROPIC_API_KEY"
    assert env in err.hint


def closed_port() -> int:
    """A loopback port nothing listens on (bound, then released)."""
    import socket

    with socket.socket() as sock:
        sock.bind(("127.0.0.1", 0))
        return sock.getsockname()[1]


@pytest.mark.parametrize("provider", PROVIDERS)
def test_a_refused_connection_fails_at_once_naming_the_base_url(provider):
    from knowtology_cli.llm import LLMUnreachableError

    base = f"http://127.0.0.1:{closed_port()}" + ("/v1" if provider == "openai" else "")
    waits = SleepRecorder()
    llm = get_llm(f"{provider}:{MODELS[provider]}", api_key=SENTINEL, base_url=base, max_retries=4, sleep=waits)
    with pytest.raises(LLMUnreachableError) as info:
        ask(llm)
    assert waits.waits == [] and llm.usage.failed_calls == 1  # no retry, no backoff
    text = str(info.value)
    assert f"cannot connect to {base} (connection refused): is the server running?" in text
    assert f"{provider.upper()}_BASE_URL" in text and SENTINEL not in text and info.value.hint is None
    with pytest.raises(LLMUnreachableError) as probed:
        llm.check_reachable()
    assert str(probed.value) == text


@pytest.mark.parametrize("provider", PROVIDERS)
def test_the_reachability_probe_passes_for_a_live_server_and_sends_no_key(provider, server):
    llm = client(provider, server)
    llm.check_reachable()  # the fake answers GET /v1/models
    assert server.calls == []  # a GET, not a model call
    get_llm(f"{provider}:{MODELS[provider]}", api_key=SENTINEL).check_reachable()  # the provider's own API: no probe


def test_a_base_url_with_credentials_is_shown_without_them():
    from knowtology_cli.llm.base import display_url

    assert display_url("http://user:pw@localhost:9/v1?api-key=k#x") == "http://localhost:9/v1"
    assert display_url("http://[::1]:8080/v1") == "http://[::1]:8080/v1"


def test_redact_hides_key_like_strings():
    llm = ScriptedLLM()
    llm._secrets.append("plain-secret-123")
    text = llm.redact("key plain-secret-123, sk-proj-abcdef123456 and Authorization: Bearer abc.def")
    assert "plain-secret-123" not in text and "sk-proj-abcdef123456" not in text and "abc.def" not in text


# ----------------------------------------------------------------------------- construction
def test_get_llm_without_a_key_names_the_variable():
    with pytest.raises(ConfigError) as info:
        get_llm("openai:gpt-4o")
    assert "OPENAI_API_KEY" in info.value.hint
    with pytest.raises(ConfigError) as info:
        get_llm("anthropic:claude-sonnet-4-6")
    assert "ANTHROPIC_API_KEY" in info.value.hint


@pytest.mark.parametrize("spec", ["gpt-4o", "mistral:large", "openai:", "", ":gpt-4o"])
def test_bad_specs_are_config_errors(spec):
    with pytest.raises(ConfigError):
        parse_spec(spec)


def test_parse_spec_keeps_colons_in_model_names():
    assert parse_spec("openai:llama3.1:8b") == ("openai", "llama3.1:8b")
    assert parse_spec(" Anthropic:claude-opus-4-6 ") == ("anthropic", "claude-opus-4-6")


def test_constructors_need_no_network():
    llm = OpenAIClient(api_key="sk-test-123456", model="gpt-4o-mini")
    assert (llm.provider, llm.model, llm.profile.name, llm.spec) == ("openai", "gpt-4o-mini", "gpt-4o-mini",
                                                                    "openai:gpt-4o-mini")
    assert "sk-test" not in repr(llm)
    claude = AnthropicClient(api_key="k", model="claude-haiku-4-5-20251001")
    assert claude.profile.name == "claude-haiku-4-5"


def test_env_base_url_for_a_local_server_needs_no_key(server, monkeypatch):
    monkeypatch.setenv("OPENAI_BASE_URL", server.openai_base_url)
    llm = get_llm("openai:llama3.1:8b", timeout=2)
    assert llm.profile.known is False and llm.profile.context_window == 8192
    resp = ask(llm)
    assert parse_reply(resp.data, IDS).complete
    assert resp.cost_usd == 0.0


def test_env_keys_and_profile_overrides(server, monkeypatch):
    monkeypatch.setenv("ANTHROPIC_API_KEY", SENTINEL)
    monkeypatch.setenv("ANTHROPIC_BASE_URL", server.anthropic_base_url)
    llm = get_llm("anthropic:claude-sonnet-4-6", profile_overrides={"claude-sonnet": {"context_window": 200_000}})
    assert llm.profile.context_window == 200_000 and llm.profile.input_usd_per_mtok == 3.0
    assert parse_reply(ask(llm).data, IDS).complete


# ----------------------------------------------------------------------------- chat
@pytest.mark.parametrize("provider", PROVIDERS)
def test_chat_tool_calls_round_trip(provider):
    script = [
        {"tool_calls": [{"name": "km_search_chunks", "arguments": {"query": "refund", "top_k": 3}}]},
        {"text": "Refunds are possible within 48 hours."},
    ]
    tools = [ToolSpec(name="km_search_chunks", description="Search",
                      parameters={"type": "object", "properties": {"query": {"type": "string"}}})]
    with FakeLLMServer(chat_script=script) as srv:
        llm = client(provider, srv)
        history = [ChatMessage.user("How do refunds work?")]
        turn = llm.chat(history, tools, system="You answer from the knowledge base.")
        (call,) = turn.tool_calls
        assert (call.name, call.arguments) == ("km_search_chunks", {"query": "refund", "top_k": 3})
        history += [turn.message, ChatMessage.tool_result(call.id, "[refund-1] Fresh food: 48 hours")]
        final = llm.chat(history, tools, system="You answer from the knowledge base.")
        assert final.text == "Refunds are possible within 48 hours." and not final.tool_calls
        assert final.input_tokens > 0 and final.cost_usd > 0
        sent = srv.calls[1].body
    assert [c.kind for c in srv.calls] == ["chat", "chat"]
    if provider == "openai":
        assert sent["tools"][0]["function"]["name"] == "km_search_chunks"
        assert sent["messages"][0] == {"role": "system", "content": "You answer from the knowledge base."}
        assert sent["messages"][2]["tool_calls"][0]["id"] == call.id
        assert sent["messages"][3] == {"role": "tool", "tool_call_id": call.id,
                                       "content": "[refund-1] Fresh food: 48 hours"}
    else:
        assert sent["tools"][0]["input_schema"]["properties"]["query"] == {"type": "string"}
        assert sent["messages"][1]["content"][0]["type"] == "tool_use"
        assert sent["messages"][2] == {"role": "user", "content": [
            {"type": "tool_result", "tool_use_id": call.id, "content": "[refund-1] Fresh food: 48 hours"}]}


@pytest.mark.parametrize("provider", PROVIDERS)
def test_chat_is_retried_on_429(provider):
    with FakeLLMServer(faults=["429"], retry_after=0.5, chat_script=[{"text": "ok"}]) as srv:
        llm = client(provider, srv)
        assert llm.chat([ChatMessage.user("hi")]).text == "ok"
        assert [c.status for c in srv.calls] == [429, 200]


# ----------------------------------------------------------------------------- scripted client
def test_scripted_llm_replays_and_records():
    good = {"categories": [], "assignments": [{"chunk_id": "a", "path": "X/Y", "snippet": "s"}]}
    llm = ScriptedLLM(["{not json", ProviderFailure("busy", retryable=True, status=503), good])
    resp = llm.complete_json("sys", "user", TREE_REPLY_SCHEMA, max_output_tokens=100)
    assert resp.data == good and resp.attempts == 2
    assert [c.user for c in llm.calls] == ["user"] * 3
    with pytest.raises(LLMError, match="no reply left"):
        llm.complete_json("sys", "user", TREE_REPLY_SCHEMA, max_output_tokens=100)


def test_scripted_llm_brain_and_chat():
    llm = ScriptedLLM(lambda system, user: keyword_brain(parse_chunks(user), []),
                      chat_turns=[{"tool_calls": [{"name": "t", "arguments": {"x": 1}}]}, "final"])
    system, user = build_messages(CHUNKS)
    assert parse_reply(llm.complete_json(system, user, TREE_REPLY_SCHEMA, max_output_tokens=100).data,
                       IDS).complete
    assert llm.chat([ChatMessage.user("q")]).tool_calls[0].arguments == {"x": 1}
    assert llm.chat([ChatMessage.user("q")]).text == "final"


def test_non_retryable_provider_failure_is_raised_once():
    llm = ScriptedLLM([ProviderFailure("bad request (HTTP 400)", retryable=False, status=400)])
    with pytest.raises(LLMError, match="HTTP 400"):
        llm.complete_json("s", "u", {}, max_output_tokens=10)
    assert len(llm.calls) == 1


def test_retry_after_beyond_the_limit_fails_fast():
    llm = ScriptedLLM([ProviderFailure("rate limited (HTTP 429)", retryable=True, retry_after=3600)])
    with pytest.raises(LLMError, match="wait 3600 s"):
        llm.complete_json("s", "u", {}, max_output_tokens=10)


# ----------------------------------------------------------------------------- the fake itself
def test_fail_rate_is_deterministic_and_retries_get_fresh_draws():
    def run() -> list[tuple[str | None, int]]:
        with FakeLLMServer(fail_rate=0.5, seed=3, fail_kinds=["500", "malformed"]) as srv:
            llm = client("openai", srv, max_retries=8, max_output_retries=8)
            for i in range(4):
                ask(llm, CHUNKS[i:i + 2])
            return [(c.fault, c.status) for c in srv.calls]

    first = run()
    assert first == run()
    assert any(f for f, _ in first) and first.count((None, 200)) == 4


def test_standalone_process_prints_its_url():
    proc = subprocess.Popen(
        [sys.executable, "-m", "knowtology_cli.testing.fake_llm", "--port", "0", "--faults", "429,"],
        stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True,
    )
    try:
        url = proc.stdout.readline().strip()
        assert url.startswith("http://127.0.0.1:")
        llm = get_llm("openai:gpt-4o", api_key="k", base_url=url + "/v1", timeout=5, backoff_base=0.01,
                      sleep=lambda s: None)
        assert parse_reply(ask(llm).data, IDS).complete
        import urllib.request

        with urllib.request.urlopen(url + "/_calls", timeout=5) as r:
            assert [c["status"] for c in json.load(r)] == [429, 200]
    finally:
        proc.terminate()
        proc.wait(timeout=10)
    assert proc.returncode == 0
