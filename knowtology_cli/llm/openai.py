"""OpenAIClient: OpenAI and OpenAI-compatible servers (Ollama, vLLM, llama.cpp) over the real SDK."""

from __future__ import annotations

import json
import os
import threading
from collections.abc import Sequence
from typing import Any

from knowtology_cli.errors import ConfigError

from .base import (
    ChatMessage,
    ChatTurn,
    LLMClient,
    MalformedReply,
    ProviderFailure,
    ProviderReply,
    ServerLimits,
    ToolCall,
    ToolSpec,
    classify_sdk_error,
)
from .limits import discover, http_fetch

OFFICIAL_HOSTS = ("api.openai.com",)
PLACEHOLDER_KEY = "not-needed"  # local OpenAI-compatible servers accept any key


class OpenAIClient(LLMClient):
    """Chat Completions client for ``openai:MODEL``.

    Structured replies use ``POST {base_url}/chat/completions`` with
    ``response_format = {"type": "json_schema", "json_schema": {"name", "strict": true, "schema"}}``;
    the JSON object is the message content. The SDK is imported on first use and its own retries are
    off: :class:`~knowtology_cli.llm.base.LLMClient` retries.

    Args:
        api_key: the key; default ``OPENAI_API_KEY``. A custom ``base_url`` (a local server) works
            without one.
        model: the model name sent as is (``gpt-4o-mini``, ``llama3.1:8b`` on Ollama, ...).
        base_url: API root including ``/v1``; default ``OPENAI_BASE_URL``, else OpenAI's.
        temperature: sent when not None (0 keeps tree building reproducible).
        require_key: False lets a client without a key plan (profile, token counts, cost) for a
            dry run; its first call raises the missing-key error.
        **kwargs: retry and timeout settings of :class:`LLMClient`.
    """

    provider = "openai"
    key_env = "OPENAI_API_KEY"

    def __init__(
        self,
        api_key: str | None = None,
        model: str = "gpt-4o-mini",
        base_url: str | None = None,
        *,
        temperature: float | None = 0.0,
        require_key: bool = True,
        **kwargs: Any,
    ) -> None:
        super().__init__(model, **kwargs)
        self.base_url = (base_url or os.environ.get("OPENAI_BASE_URL") or "").rstrip("/") or None
        key = api_key or os.environ.get("OPENAI_API_KEY")
        if not key and not (self.base_url is None or self._official):
            key = PLACEHOLDER_KEY
        self._api_key = key or None
        if key:
            self._secrets.append(key)
        elif require_key:
            self._missing_key()
        self.temperature = temperature
        self._client: Any = None
        self._client_lock = threading.Lock()

    def __repr__(self) -> str:
        return f"OpenAIClient(model={self.model!r}, base_url={self.base_url!r})"

    @property
    def _official(self) -> bool:
        return self.base_url is None or any(h in self.base_url for h in OFFICIAL_HOSTS)

    def _missing_key(self) -> None:
        raise ConfigError(
            "no OpenAI API key",
            hint="set OPENAI_API_KEY (or providers.openai.api_key in config.toml), "
            "or OPENAI_BASE_URL for a local OpenAI-compatible server",
        )

    def _sdk(self) -> Any:
        if self._api_key is None:  # made with require_key=False (a dry run): planning only
            self._missing_key()
        with self._client_lock:
            if self._client is None:
                import openai  # deferred: heavy

                self._client = openai.OpenAI(
                    api_key=self._api_key, base_url=self.base_url, timeout=self.timeout, max_retries=0
                )
            return self._client

    def _common(self, max_output_tokens: int, timeout: float) -> dict[str, Any]:
        # api.openai.com wants max_completion_tokens (newer models refuse max_tokens); local
        # servers mostly know only max_tokens
        key = "max_completion_tokens" if self._official else "max_tokens"
        kwargs: dict[str, Any] = {"model": self.model, key: max_output_tokens, "timeout": timeout}
        if self.temperature is not None:
            kwargs["temperature"] = self.temperature
        return kwargs

    def _request_json(
        self, system: str, user: str, schema: dict[str, Any], *, schema_name: str,
        max_output_tokens: int, timeout: float,
    ) -> ProviderReply:
        resp = self._sdk().chat.completions.create(
            messages=[{"role": "system", "content": system}, {"role": "user", "content": user}],
            response_format={
                "type": "json_schema",
                "json_schema": {"name": schema_name, "strict": True, "schema": schema},
            },
            **self._common(max_output_tokens, timeout),
        )
        choice = resp.choices[0] if resp.choices else None
        content = choice.message.content if choice is not None else None
        in_tok, out_tok, estimated = self._usage(resp, system + "\n" + user + json.dumps(schema), content)
        if choice is None:
            raise MalformedReply("reply has no choices",
                                 reply=ProviderReply(None, None, in_tok, out_tok, usage_estimated=estimated))
        reply = ProviderReply(
            text=content, input_tokens=in_tok, output_tokens=out_tok, model=resp.model or self.model,
            finish_reason=choice.finish_reason, truncated=choice.finish_reason == "length",
            usage_estimated=estimated,
        )
        if content is None:
            refusal = getattr(choice.message, "refusal", None)
            raise MalformedReply(f"model refused: {refusal}" if refusal else "reply has no content",
                                 reply=reply)
        return reply

    def _request_chat(
        self, system: str | None, messages: Sequence[ChatMessage], tools: Sequence[ToolSpec], *,
        max_output_tokens: int, timeout: float,
    ) -> ChatTurn:
        wire: list[dict[str, Any]] = [{"role": "system", "content": system}] if system else []
        for m in messages:
            if m.role == "tool":
                wire.append({"role": "tool", "tool_call_id": m.tool_call_id, "content": m.content})
            elif m.role == "assistant" and m.tool_calls:
                wire.append({
                    "role": "assistant",
                    "content": m.content or None,
                    "tool_calls": [
                        {"id": c.id, "type": "function",
                         "function": {"name": c.name, "arguments": json.dumps(c.arguments)}}
                        for c in m.tool_calls
                    ],
                })
            else:
                wire.append({"role": m.role, "content": m.content})
        kwargs = self._common(max_output_tokens, timeout)
        if tools:
            kwargs["tools"] = [
                {"type": "function",
                 "function": {"name": t.name, "description": t.description, "parameters": t.parameters}}
                for t in tools
            ]
        resp = self._sdk().chat.completions.create(messages=wire, **kwargs)
        if not resp.choices:
            raise MalformedReply("reply has no choices")
        choice = resp.choices[0]
        sent = json.dumps(wire) + json.dumps(kwargs.get("tools") or [])
        answer = (choice.message.content or "") + "".join(
            (c.function.arguments or "") for c in (choice.message.tool_calls or []) if getattr(c, "function", None))
        in_tok, out_tok, estimated = self._usage(resp, sent, answer)
        calls = []
        for call in choice.message.tool_calls or []:
            fn = getattr(call, "function", None)
            if fn is None:
                continue
            try:
                args = json.loads(fn.arguments or "{}")
            except json.JSONDecodeError as exc:
                raise MalformedReply(f"tool call {fn.name} has arguments that are not JSON") from exc
            if not isinstance(args, dict):
                raise MalformedReply(f"tool call {fn.name} has arguments that are not an object")
            calls.append(ToolCall(id=call.id, name=fn.name, arguments=args))
        return ChatTurn(
            text=choice.message.content or "", tool_calls=calls, stop_reason=choice.finish_reason,
            input_tokens=in_tok, output_tokens=out_tok, model=resp.model or self.model, usage_estimated=estimated,
        )

    def discover_limits(self) -> ServerLimits | None:
        """The context window an OpenAI-compatible server publishes (see ``llm.limits``); None for OpenAI's API."""
        if self._official or self.base_url is None:
            return None

        key = None if self._api_key == PLACEHOLDER_KEY else self._api_key
        return discover(self.base_url, self.model, http_fetch(key))

    def _usage(self, resp: Any, sent: str, answer: str | None) -> tuple[int, int, bool]:
        """(prompt tokens, completion tokens, estimated?): the server's ``usage``, else the tokenizer's count."""
        usage = getattr(resp, "usage", None)
        prompt = int(getattr(usage, "prompt_tokens", 0) or 0) if usage is not None else 0
        completion = int(getattr(usage, "completion_tokens", 0) or 0) if usage is not None else 0
        estimated = False
        if prompt <= 0:
            prompt, estimated = self.count_tokens(sent), True
        if completion <= 0 and answer:
            completion, estimated = self.count_tokens(answer), True
        return prompt, completion, estimated

    def _classify(self, exc: Exception) -> ProviderFailure | None:
        import openai  # deferred: heavy

        return classify_sdk_error(exc, openai, provider="openai", where=self.base_url or "api.openai.com",
                                  env_var="OPENAI_BASE_URL", base_error=openai.OpenAIError, custom=not self._official)

    def check_reachable(self) -> None:
        """Probe a custom server (``GET {base_url}/models``, no key sent); see :meth:`LLMClient.check_reachable`."""
        if not self._official and self.base_url is not None:
            self._probe("/models", env_var="OPENAI_BASE_URL")

