"""ScriptedLLM: an in-process LLM client that replies from a script, for unit tests (no HTTP)."""

from __future__ import annotations

import json
import threading
from collections.abc import Callable, Sequence
from dataclasses import dataclass, field
from typing import Any

from knowtology_cli.errors import LLMError

from .base import ChatMessage, ChatTurn, LLMClient, ProviderReply, ToolCall, ToolSpec

Reply = dict[str, Any] | str | ProviderReply | BaseException
Brain = Callable[[str, str], Reply]


@dataclass
class ScriptedCall:
    """One recorded call: what the code under test sent."""

    kind: str  # "json" or "chat"
    system: str | None
    user: str = ""
    schema_name: str = ""
    max_output_tokens: int = 0
    messages: list[ChatMessage] = field(default_factory=list)
    tools: list[ToolSpec] = field(default_factory=list)


class ScriptedLLM(LLMClient):
    """Replies from a list (in order) or a ``callable(system, user)``; records every call.

    A reply is a dict (the JSON object), a str (raw text: use it to script malformed JSON), a
    ``ProviderReply`` (exact usage, ``finish_reason``, truncation) or an exception instance to raise — e.g. ``ProviderFailure("429", retryable=True)`` exercises the
    retry path. ``chat_turns`` scripts :meth:`chat` the same way (``ChatTurn``, a dict of
    ``ChatTurn`` fields, a plain str for a final answer, or a callable(messages) → one of those).
    Retries do not sleep by default.
    """

    provider = "scripted"

    def __init__(
        self,
        replies: Sequence[Reply] | Brain = (),
        *,
        model: str = "scripted",
        chat_turns: Sequence[Any] | Callable[[list[ChatMessage]], Any] = (),
        **kwargs: Any,
    ) -> None:
        kwargs.setdefault("sleep", lambda _s: None)
        kwargs.setdefault("backoff_base", 0.0)
        super().__init__(model, **kwargs)
        self._replies = replies if callable(replies) else list(replies)
        self._turns = chat_turns if callable(chat_turns) else list(chat_turns)
        self.calls: list[ScriptedCall] = []
        self._calls_lock = threading.Lock()

    def _next(self, script: Any, *args: Any) -> Any:
        if callable(script):
            return script(*args)
        with self._calls_lock:
            if not script:
                raise LLMError(f"{self.spec}: the script has no reply left")
            return script.pop(0)

    def _request_json(
        self, system: str, user: str, schema: dict[str, Any], *, schema_name: str,
        max_output_tokens: int, timeout: float,
    ) -> ProviderReply:
        with self._calls_lock:
            self.calls.append(ScriptedCall("json", system, user, schema_name, max_output_tokens))
        reply = self._next(self._replies, system, user)
        if isinstance(reply, BaseException):
            raise reply
        if isinstance(reply, ProviderReply):  # scripted usage, finish_reason, truncation
            return reply
        in_tok = (len(system) + len(user)) // 4
        if isinstance(reply, str):
            return ProviderReply(text=reply, input_tokens=in_tok, output_tokens=len(reply) // 4,
                                 model=self.model, finish_reason="stop")
        text = json.dumps(reply)
        return ProviderReply(text=text, data=reply, input_tokens=in_tok, output_tokens=len(text) // 4,
                             model=self.model, finish_reason="stop")

    def _request_chat(
        self, system: str | None, messages: Sequence[ChatMessage], tools: Sequence[ToolSpec], *,
        max_output_tokens: int, timeout: float,
    ) -> ChatTurn:
        with self._calls_lock:
            self.calls.append(ScriptedCall("chat", system, max_output_tokens=max_output_tokens,
                                           messages=list(messages), tools=list(tools)))
        turn = self._next(self._turns, list(messages))
        if isinstance(turn, BaseException):
            raise turn
        if isinstance(turn, str):
            turn = ChatTurn(text=turn, stop_reason="end_turn")
        elif isinstance(turn, dict):
            calls = [c if isinstance(c, ToolCall) else ToolCall(
                id=c.get("id", f"call_{i}"), name=c["name"], arguments=c.get("arguments", {}))
                for i, c in enumerate(turn.get("tool_calls", []))]
            turn = ChatTurn(text=turn.get("text", ""), tool_calls=calls,
                            stop_reason="tool_use" if calls else "end_turn")
        prompt = sum(len(m.content) for m in messages) + len(system or "")
        return turn.model_copy(update={
            "input_tokens": turn.input_tokens or prompt // 4,
            "output_tokens": turn.output_tokens or len(turn.text) // 4 + 10 * len(turn.tool_calls),
            "model": self.model,
        })
