"""AnthropicClient: Claude over the real SDK, structured replies through a forced tool call."""

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
    ToolCall,
    ToolSpec,
    classify_sdk_error,
)

TOOL_DESCRIPTION = "Record the reply. Call this tool exactly once with the complete JSON object."


class AnthropicClient(LLMClient):
    """Messages API client for ``anthropic:MODEL``.

    Structured replies use ``POST {base_url}/v1/messages`` with one tool (``record_tree`` for tree
    building) whose ``input_schema`` is the reply schema and ``tool_choice`` forcing it; the JSON
    object is the ``tool_use`` block's ``input``. The SDK is imported on first use and its own
    retries are off: :class:`~knowtology_cli.llm.base.LLMClient` retries.

    Args:
        api_key: the key; default ``ANTHROPIC_API_KEY``.
        require_key: False lets a client without a key plan (profile, token counts, cost) for a
            dry run; its first call raises the missing-key error.
        model: the model name (``claude-sonnet-4-6``, ...).
        base_url: API root without ``/v1``; default ``ANTHROPIC_BASE_URL``, else Anthropic's.
        **kwargs: retry and timeout settings of :class:`LLMClient`.
    """

    provider = "anthropic"
    key_env = "ANTHROPIC_API_KEY"

    def __init__(
        self,
        api_key: str | None = None,
        model: str = "claude-sonnet-4-6",
        base_url: str | None = None,
        require_key: bool = True,
        **kwargs: Any,
    ) -> None:
        super().__init__(model, **kwargs)
        key = api_key or os.environ.get("ANTHROPIC_API_KEY")
        self._api_key = key or None
        if key:
            self._secrets.append(key)
        elif require_key:
            self._missing_key()
        self.base_url = (base_url or os.environ.get("ANTHROPIC_BASE_URL") or "").rstrip("/") or None
        self._client: Any = None
        self._client_lock = threading.Lock()

    def __repr__(self) -> str:
        return f"AnthropicClient(model={self.model!r}, base_url={self.base_url!r})"

    @staticmethod
    def _missing_key() -> None:
        raise ConfigError(
            "no Anthropic API key",
            hint="set ANTHROPIC_API_KEY (or providers.anthropic.api_key in config.toml)",
        )

    def _sdk(self) -> Any:
        if self._api_key is None:  # made with require_key=False (a dry run): planning only
            self._missing_key()
        with self._client_lock:
            if self._client is None:
                import anthropic  # deferred: heavy

                self._client = anthropic.Anthropic(
                    api_key=self._api_key, base_url=self.base_url, timeout=self.timeout, max_retries=0
                )
            return self._client

    def _common(self, max_output_tokens: int, timeout: float) -> dict[str, Any]:
        # the 2.x SDK has no sampling parameters (temperature, top_p) on messages.create
        return {"model": self.model, "max_tokens": max_output_tokens, "timeout": timeout}

    def _request_json(
        self, system: str, user: str, schema: dict[str, Any], *, schema_name: str,
        max_output_tokens: int, timeout: float,
    ) -> ProviderReply:
        msg = self._sdk().messages.create(
            system=system,
            messages=[{"role": "user", "content": user}],
            tools=[{"name": schema_name, "description": TOOL_DESCRIPTION, "input_schema": schema}],
            tool_choice={"type": "tool", "name": schema_name},
            **self._common(max_output_tokens, timeout),
        )
        in_tok, out_tok, estimated = self._usage(msg, system + "\n" + user + json.dumps(schema))
        truncated = msg.stop_reason == "max_tokens"
        texts = []
        for block in msg.content or []:
            if block.type == "tool_use" and block.name == schema_name:
                data = block.input
                reply = ProviderReply(
                    text=None, data=data if isinstance(data, dict) else None, input_tokens=in_tok,
                    output_tokens=out_tok, model=msg.model or self.model,
                    finish_reason=msg.stop_reason, truncated=truncated, usage_estimated=estimated,
                )
                if reply.data is None:
                    raise MalformedReply("tool input is not an object", reply=reply)
                return reply
            if block.type == "text":
                texts.append(block.text)
        # no tool call: the text may still hold the object (the base class parses or retries)
        return ProviderReply(
            text="".join(texts), input_tokens=in_tok, output_tokens=out_tok,
            model=msg.model or self.model, finish_reason=msg.stop_reason, truncated=truncated,
            usage_estimated=estimated,
        )

    def _request_chat(
        self, system: str | None, messages: Sequence[ChatMessage], tools: Sequence[ToolSpec], *,
        max_output_tokens: int, timeout: float,
    ) -> ChatTurn:
        wire: list[dict[str, Any]] = []
        for m in messages:
            if m.role == "tool":
                role = "user"
                content: list[dict[str, Any]] = [
                    {"type": "tool_result", "tool_use_id": m.tool_call_id, "content": m.content}
                ]
            else:
                role = m.role
                content = [{"type": "text", "text": m.content}] if m.content else []
                content += [
                    {"type": "tool_use", "id": c.id, "name": c.name, "input": c.arguments}
                    for c in m.tool_calls
                ]
            if wire and wire[-1]["role"] == role:  # tool results of one turn go in one message
                wire[-1]["content"].extend(content)
            else:
                wire.append({"role": role, "content": content})
        kwargs = self._common(max_output_tokens, timeout)
        if system:
            kwargs["system"] = system
        if tools:
            kwargs["tools"] = [
                {"name": t.name, "description": t.description, "input_schema": t.parameters} for t in tools
            ]
        msg = self._sdk().messages.create(messages=wire, **kwargs)
        in_tok, out_tok, estimated = self._usage(msg, json.dumps(wire) + json.dumps(kwargs.get("tools") or []))
        texts, calls = [], []
        for block in msg.content or []:
            if block.type == "text":
                texts.append(block.text)
            elif block.type == "tool_use":
                if not isinstance(block.input, dict):
                    raise MalformedReply(f"tool call {block.name} has input that is not an object")
                calls.append(ToolCall(id=block.id, name=block.name, arguments=block.input))
        return ChatTurn(
            text="".join(texts), tool_calls=calls, stop_reason=msg.stop_reason,
            input_tokens=in_tok, output_tokens=out_tok, model=msg.model or self.model, usage_estimated=estimated,
        )

    def _usage(self, msg: Any, sent: str) -> tuple[int, int, bool]:
        """(input tokens, output tokens, estimated?): the reply's ``usage``, else the tokenizer's count."""
        usage = getattr(msg, "usage", None)
        inp = int(getattr(usage, "input_tokens", 0) or 0) if usage is not None else 0
        out = int(getattr(usage, "output_tokens", 0) or 0) if usage is not None else 0
        estimated = False
        if inp <= 0:
            inp, estimated = self.count_tokens(sent), True
        if out <= 0:
            answer = "".join(
                block.text if block.type == "text" else json.dumps(getattr(block, "input", None) or {})
                for block in (msg.content or []) if block.type in ("text", "tool_use"))
            if answer:
                out, estimated = self.count_tokens(answer), True
        return inp, out, estimated

    def _classify(self, exc: Exception) -> ProviderFailure | None:
        import anthropic  # deferred: heavy

        return classify_sdk_error(exc, anthropic, provider="anthropic", where=self.base_url or "api.anthropic.com",
                                  env_var="ANTHROPIC_BASE_URL", base_error=anthropic.AnthropicError,
                                  custom=self.base_url is not None)

    def check_reachable(self) -> None:
        """Probe a custom server (``GET {base_url}/v1/models``, no key sent); see :meth:`LLMClient.check_reachable`."""
        if self.base_url is not None:
            self._probe("/v1/models", env_var="ANTHROPIC_BASE_URL")

