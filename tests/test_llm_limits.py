"""Fitting the model: what servers say about their context, overflow errors, loopback detection."""

from __future__ import annotations

import pytest

from knowtology_cli.llm import get_llm
from knowtology_cli.llm.base import context_overflow, is_loopback_url
from knowtology_cli.llm.limits import adopt_context_limit, discover, fit_limits
from knowtology_cli.testing.fake_llm import FakeLLMServer


def fetcher(routes: dict[str, object]):
    seen = []

    def fetch(method, url, body):
        seen.append((method, url))
        return routes.get(url.split("://", 1)[1].split("/", 1)[1] if "/" in url.split("://", 1)[1] else "")

    fetch.seen = seen
    return fetch


BASE = "http://127.0.0.1:8080/v1"


@pytest.mark.parametrize(("routes", "expected"), [
    ({"props": {"default_generation_settings": {"n_ctx": 4096}}}, (4096, "llama.cpp /props")),
    ({"v1/models": {"data": [{"id": "other", "max_model_len": 1}, {"id": "m", "max_model_len": 32768}]}},
     (32768, "vLLM /v1/models max_model_len")),
    ({"api/v0/models": {"data": [{"id": "m", "loaded_context_length": 16384, "max_context_length": 131072}]}},
     (16384, "LM Studio /api/v0/models loaded_context_length")),
    ({"api/ps": {"models": [{"name": "m", "context_length": 8192}]}}, (8192, "Ollama /api/ps context_length")),
    ({"api/show": {"parameters": "stop \"<|im_end|>\"\nnum_ctx 6144\ntemperature 0.2",
                   "model_info": {"qwen2.context_length": 32768}}}, (6144, "Ollama /api/show num_ctx")),
])
def test_each_server_flavour_is_read_where_it_publishes_the_context(routes, expected):
    found = discover(BASE, "m", fetcher(routes))
    assert (found.context_window, found.source) == expected


def test_a_server_that_says_nothing_gives_none_and_trained_lengths_are_not_taken():
    # Ollama's model_info holds the trained length, not what the server runs with: not used
    quiet = fetcher({"v1/models": {"data": [{"id": "m", "object": "model"}]},
                     "api/show": {"model_info": {"llama.context_length": 131072}, "parameters": "temperature 0"}})
    assert discover(BASE, "m", quiet) is None
    assert [u.rsplit(":8080", 1)[1] for _, u in quiet.seen] == [
        "/props", "/v1/models", "/api/v0/models", "/api/ps", "/api/show"]


def test_fit_limits_adopts_what_the_fake_server_publishes_and_says_so():
    with FakeLLMServer(context_window=3000, publish_limits=True) as srv:
        llm = get_llm("openai:some-local-model", base_url=srv.openai_base_url)
        note = fit_limits(llm)
    assert llm.profile.context_window == 3000 and llm.profile.max_output_tokens == 1500
    assert note.startswith("limits: context 3,000 tokens (llama.cpp /props)")


def test_flags_pin_the_limits_and_the_server_is_not_asked(monkeypatch):
    from knowtology_cli.config import load_settings
    from knowtology_cli.kb import llm_from_settings

    with FakeLLMServer(context_window=3000, publish_limits=True) as srv:
        monkeypatch.setenv("OPENAI_BASE_URL", srv.openai_base_url)
        llm = llm_from_settings("openai:some-local-model", load_settings(store="x"), context_window=20000,
                                max_output=900)
        note = fit_limits(llm)
    assert (llm.profile.context_window, llm.profile.max_output_tokens) == (20000, 900)  # not the server's 3,000
    assert "(--context-window)" in note and "(--max-output)" in note


def test_unknown_model_without_published_limits_says_the_default_and_the_flags():
    with FakeLLMServer() as srv:
        llm = get_llm("openai:some-local-model", base_url=srv.openai_base_url)
        note = fit_limits(llm)
    assert "context 8,192 tokens (default profile: the server did not say; set --context-window" in note


def test_official_apis_are_not_probed():
    llm = get_llm("openai:gpt-4o-mini", api_key="sk-x")
    assert llm.discover_limits() is None and "profile gpt-4o-mini" in fit_limits(llm)


@pytest.mark.parametrize(("status", "body", "message", "expected"), [
    (400, {"error": {"code": "context_length_exceeded"}},
     "the request exceeds the available context size: 4291 prompt tokens, n_ctx=4096", (True, 4096)),
    (400, {"error": {"type": "exceed_context_size_error", "n_ctx": 8192}}, "request too large", (True, 8192)),
    (400, {"object": "error"}, "This model's maximum context length is 4,096 tokens. However, you requested 4348 "
     "tokens (4332 in the messages, 16 in the completion).", (True, 4096)),
    (400, {"type": "error"}, "prompt is too long: 205000 tokens > 200000 maximum", (True, 200000)),
    (400, {"error": {"code": "invalid_value"}}, "temperature must be between 0 and 2", (False, None)),
    (500, {}, "maximum context length is 10", (False, None)),
])
def test_context_overflow_is_recognised_in_each_providers_wording(status, body, message, expected):
    assert context_overflow(status, body, message) == expected


def test_adopting_a_smaller_context_also_caps_the_reply():
    llm = get_llm("openai:some-local-model", base_url="http://127.0.0.1:1/v1")
    assert adopt_context_limit(llm, 3000)
    assert (llm.profile.context_window, llm.profile.max_output_tokens) == (3000, 1500)
    assert not adopt_context_limit(llm, 9000) and not adopt_context_limit(llm, None)


@pytest.mark.parametrize(("url", "local"), [
    ("http://localhost:11434/v1", True), ("http://127.0.0.1:8080/v1", True), ("http://127.5.0.1/v1", True),
    ("http://[::1]:8000/v1", True), ("https://api.openai.com/v1", False), ("http://10.0.0.5:8000/v1", False),
    ("http://gpu-box.internal/v1", False), (None, False),
])
def test_loopback_urls(url, local):
    assert is_loopback_url(url) is local
