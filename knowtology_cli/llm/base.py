"""The LLMClient ABC: one abstract provider call; retries, backoff, JSON parsing and errors live here."""

from __future__ import annotations

import email.utils
import ipaddress
import json
import logging
import random
import re
import socket
import threading
import time
from abc import ABC, abstractmethod
from collections.abc import Callable, Mapping, Sequence
from dataclasses import dataclass
from typing import Any, Literal, TypeVar
from urllib.parse import urlsplit

from pydantic import BaseModel, ConfigDict, Field

from knowtology_cli.errors import ConfigError, LLMError, LLMOutputError
from knowtology_cli.tokens import count_tokens

from .profiles import ModelProfile, get_profile

log = logging.getLogger("knowtology_cli.llm")
T = TypeVar("T")

#: Seconds per attempt when no timeout is configured (``--timeout`` / ``KNOWTOLOGY_LLM_TIMEOUT``).
DEFAULT_TIMEOUT = 600.0
#: Seconds :meth:`LLMClient.check_reachable` waits for a server to accept a connection and answer.
PROBE_TIMEOUT = 5.0

_KEYLIKE = re.compile(r"(sk-[A-Za-z0-9_\-]{6,}|(?i:bearer)\s+\S+|(?i:x-api-key)\W+\S+)")


class _Frozen(BaseModel):
    model_config = ConfigDict(frozen=True, extra="forbid")


class LLMResponse(_Frozen):
    """One structured reply: the parsed JSON object plus usage and cost.

    ``input_tokens``/``output_tokens``/``cost_usd`` add up every attempt that reached the model
    (a malformed reply that was retried is still paid for); ``attempts`` counts them.
    ``truncated`` is True when the model stopped at ``max_output_tokens``.
    """

    data: dict[str, Any]
    raw: str
    input_tokens: int = 0
    output_tokens: int = 0
    model: str = ""
    cost_usd: float = 0.0
    attempts: int = 1
    finish_reason: str | None = None
    truncated: bool = False
    usage_estimated: bool = False


class ToolSpec(_Frozen):
    """A tool offered to the model in :meth:`LLMClient.chat`; ``parameters`` is a JSON schema."""

    name: str
    description: str = ""
    parameters: dict[str, Any] = Field(default_factory=lambda: {"type": "object", "properties": {}})


class ToolCall(_Frozen):
    """A tool call the model made; ``arguments`` is already decoded."""

    id: str
    name: str
    arguments: dict[str, Any] = Field(default_factory=dict)


class ChatMessage(_Frozen):
    """One message of a provider-neutral conversation.

    ``role="tool"`` carries a tool result (``tool_call_id`` + ``content``); an assistant message
    may carry ``tool_calls``. The system prompt is passed to :meth:`LLMClient.chat` separately.
    """

    role: Literal["user", "assistant", "tool"]
    content: str = ""
    tool_calls: list[ToolCall] = Field(default_factory=list)
    tool_call_id: str | None = None

    @classmethod
    def user(cls, text: str) -> ChatMessage:
        return cls(role="user", content=text)

    @classmethod
    def tool_result(cls, tool_call_id: str, content: str) -> ChatMessage:
        return cls(role="tool", tool_call_id=tool_call_id, content=content)


class ChatTurn(_Frozen):
    """The model's answer to one :meth:`LLMClient.chat` call: text and/or tool calls."""

    text: str = ""
    tool_calls: list[ToolCall] = Field(default_factory=list)
    stop_reason: str | None = None
    input_tokens: int = 0
    output_tokens: int = 0
    model: str = ""
    cost_usd: float = 0.0
    usage_estimated: bool = False

    @property
    def message(self) -> ChatMessage:
        """This turn as the assistant message to append to the conversation."""
        return ChatMessage(role="assistant", content=self.text, tool_calls=list(self.tool_calls))


@dataclass
class ProviderReply:
    """What a subclass's ``_request_json`` returns: reply text and/or an already-decoded object."""

    text: str | None
    data: dict[str, Any] | None = None
    input_tokens: int = 0
    output_tokens: int = 0
    model: str = ""
    finish_reason: str | None = None
    truncated: bool = False
    usage_estimated: bool = False


class ProviderFailure(Exception):
    """A provider call failed; ``retryable`` and ``retry_after`` tell the base class what to do.

    ``message`` must already be safe to show (no key, no auth header).
    """

    def __init__(
        self,
        message: str,
        *,
        retryable: bool,
        status: int | None = None,
        retry_after: float | None = None,
        auth: bool = False,
        hint: str | None = None,
        timed_out: bool = False,
        overflow: bool = False,
        context_limit: int | None = None,
        unreachable: bool = False,
    ) -> None:
        super().__init__(message)
        self.message = message
        self.unreachable = unreachable
        self.retryable = retryable
        self.status = status
        self.retry_after = retry_after
        self.auth = auth
        self.hint = hint
        self.timed_out = timed_out
        self.overflow = overflow
        self.context_limit = context_limit


class MalformedReply(Exception):
    """The model answered, but not with something usable; retried as an output error.

    Carries the usage of the failed attempt so it is still accounted for.
    """

    def __init__(self, message: str, *, reply: ProviderReply | None = None) -> None:
        super().__init__(message)
        self.reply = reply


class LLMTruncatedError(LLMOutputError):
    """The reply was cut at ``max_output_tokens`` and is unusable as a whole; split the batch, don't retry.

    ``partial`` is the text the model wrote before the cut (None when the provider sent none): a
    caller may keep its complete parts (``builders.validate.salvage_cut_reply``).
    """

    partial: str | None = None


class LLMTimeoutError(LLMError):
    """Every attempt of a call ran out of its per-attempt ``timeout`` (seconds)."""

    def __init__(self, message: str, *, timeout: float, hint: str | None = None) -> None:
        super().__init__(message, hint=hint)
        self.timeout = timeout


class LLMContextOverflowError(LLMError):
    """The server refused the prompt as longer than its context (HTTP 400); send less, don't retry.

    ``context_limit`` is the context size the server stated in its message, when it stated one.
    """

    def __init__(self, message: str, *, context_limit: int | None = None, hint: str | None = None) -> None:
        super().__init__(message, hint=hint)
        self.context_limit = context_limit


class LLMCancelledError(LLMError):
    """The caller's cancel event was set, so the call was not (or no longer) sent."""


class LLMUnreachableError(LLMError):
    """Nothing answers at the server's address (connection refused, host not found): the call is not
    retried, and a build stops at once; the message names the address and what to do."""


def unreachable_reason(exc: BaseException | None) -> str | None:
    """``"connection refused"`` or ``"host not found"`` when ``exc`` or what caused it says nothing
    listens at the address (a stopped server, a wrong port or host name); None for other failures
    (resets, timeouts), which may pass and are retried."""
    seen: set[int] = set()
    while exc is not None and id(exc) not in seen:
        seen.add(id(exc))
        if isinstance(exc, ConnectionRefusedError):
            return "connection refused"
        if isinstance(exc, socket.gaierror):
            return "host not found"
        exc = exc.__cause__ or exc.__context__
    return None


def display_url(url: str) -> str:
    """``url`` without user info, query or fragment, where a key could hide."""
    parts = urlsplit(url)
    return f"{parts.scheme}://{parts.netloc.rpartition('@')[2]}{parts.path}" if parts.scheme else url


def unreachable_message(provider: str, where: str, why: str, env_var: str, *, custom: bool) -> str:
    """One line: the address nothing answers at, and what to do about it."""
    if custom:
        return (f"cannot connect to {display_url(where)} ({why}): is the server running? Start it, or set "
                f"{env_var} (or providers.{provider}.base_url in config.toml) to its address")
    return (f"cannot connect to {where} ({why}): check the network connection (or set {env_var} for "
            "another server)")


@dataclass(frozen=True)
class CallUsage:
    """What one call (all its attempts) cost; errors raised after a paid attempt carry it as ``usage``."""

    input_tokens: int = 0
    output_tokens: int = 0
    cost_usd: float = 0.0
    attempts: int = 0
    estimated: bool = False


def usage_of(exc: BaseException) -> CallUsage:
    """The :class:`CallUsage` an LLM error carries (zero when no attempt reached the model)."""
    usage = exc.usage if isinstance(exc, LLMError) else None
    return usage if isinstance(usage, CallUsage) else CallUsage()


@dataclass
class _Spent:
    input_tokens: int = 0
    output_tokens: int = 0
    attempts: int = 0
    estimated: bool = False

    def add(self, reply: ProviderReply | None) -> None:
        if reply is None:
            return
        self.input_tokens += reply.input_tokens
        self.output_tokens += reply.output_tokens
        self.attempts += 1
        self.estimated = self.estimated or reply.usage_estimated


@dataclass
class UsageTotals:
    """Totals over the client's lifetime (every attempt that reached the model)."""

    calls: int = 0
    failed_calls: int = 0
    input_tokens: int = 0
    output_tokens: int = 0
    cost_usd: float = 0.0


def parse_retry_after(headers: Mapping[str, str] | None, now: float | None = None) -> float | None:
    """Seconds to wait from ``retry-after-ms`` or ``retry-after`` (seconds or an HTTP date)."""
    if not headers:
        return None
    lower = {str(k).lower(): v for k, v in headers.items()}
    value = lower.get("retry-after-ms")
    if value is not None:
        try:
            return max(0.0, float(value) / 1000.0)
        except ValueError:
            pass
    value = lower.get("retry-after")
    if value is None:
        return None
    try:
        return max(0.0, float(value))
    except ValueError:
        pass
    try:
        when = email.utils.parsedate_to_datetime(value)
    except (TypeError, ValueError):
        return None
    if when is None:
        return None
    return max(0.0, when.timestamp() - (time.time() if now is None else now))


@dataclass(frozen=True)
class ServerLimits:
    """Limits a server published for the model: ``source`` says where (e.g. ``llama.cpp /props``)."""

    context_window: int | None = None
    max_output_tokens: int | None = None
    source: str = ""


def is_loopback_url(url: str | None) -> bool:
    """True for ``http://localhost…``, ``127.x.x.x`` and ``[::1]`` URLs (a server on this machine)."""
    if not url:
        return False
    host = (urlsplit(url).hostname or "").lower()
    if host == "localhost" or host.endswith(".localhost"):
        return True
    try:
        return ipaddress.ip_address(host).is_loopback
    except ValueError:
        return False


def _loads_object(text: str) -> dict[str, Any]:
    """Decode a JSON object from model text, tolerating code fences and chatter around it."""
    stripped = text.strip()
    if stripped.startswith("```"):
        stripped = re.sub(r"^```[A-Za-z0-9_-]*\s*|\s*```$", "", stripped)
    try:
        value = json.loads(stripped)
    except json.JSONDecodeError:
        start, end = stripped.find("{"), stripped.rfind("}")
        if start < 0 or end <= start:
            raise
        value = json.loads(stripped[start : end + 1])
    if not isinstance(value, dict):
        raise ValueError(f"expected a JSON object, got {type(value).__name__}")
    return value


class LLMClient(ABC):
    """A chat model behind one provider, with retries and structured-JSON replies.

    Subclasses implement :meth:`LLMClient._request_json` (one structured-JSON call) and, for the
    ``kt ask`` agent loop, :meth:`LLMClient._request_chat` (one tool-calling chat turn). They raise
    the SDK's own exceptions, or :class:`MalformedReply` for a reply that cannot be used, and map SDK
    exceptions in :meth:`LLMClient._classify`. The base class turns that into:

    * transport retries (429, 408, 409, 5xx, timeouts, connection errors) with exponential backoff and
      jitter, honouring ``retry-after`` / ``retry-after-ms``;
    * output retries (reply not JSON, not an object, or rejected by the caller's ``validate``);
    * :class:`~knowtology_cli.errors.LLMError` / :class:`~knowtology_cli.errors.LLMOutputError` with
      messages that never contain the API key or auth headers (:class:`LLMTimeoutError` when every
      attempt ran out of time, naming the per-attempt timeout; :class:`LLMContextOverflowError` when
      the server refused the prompt as longer than its context; :class:`LLMCancelledError` when the
      caller's cancel event was set before an attempt).

    Every attempt that got a reply is paid for: its usage (``usage_estimated`` when the server sent
    none and the tokenizer counted) adds up in :attr:`LLMClient.usage`, in the returned
    :class:`LLMResponse`, and in the ``usage`` (:class:`CallUsage`) of any error raised after it.

    Args:
        model: the provider's model name.
        profile: limits and prices; looked up from ``model`` when omitted.
        timeout: seconds per HTTP attempt (a hung server counts as a retryable failure).
        max_retries: extra attempts after transport failures (429, 5xx, timeouts).
        max_output_retries: extra attempts after unusable replies (not JSON, rejected).
        backoff_base / backoff_max: exponential backoff in seconds, with jitter.
        max_retry_after: a ``retry-after`` longer than this fails the call at once (resume later).
        sleep: the sleeping function (tests inject a recorder).
        seed: seeds the jitter, for reproducible waits.
    """

    provider: str = "llm"
    key_env: str | None = None
    #: the API root of an HTTP provider (None: the provider's default, or no server at all)
    base_url: str | None = None

    def __init__(
        self,
        model: str,
        *,
        profile: ModelProfile | None = None,
        timeout: float = DEFAULT_TIMEOUT,
        max_retries: int = 4,
        max_output_retries: int = 2,
        backoff_base: float = 1.0,
        backoff_max: float = 60.0,
        max_retry_after: float = 300.0,
        sleep: Callable[[float], None] = time.sleep,
        seed: int | None = None,
    ) -> None:
        self.model = model
        self.profile = profile or get_profile(model)
        self.timeout = float(timeout)
        if not self.timeout > 0:  # also refuses NaN
            raise ConfigError(f"invalid LLM timeout {timeout!r}: expected a positive number of seconds")
        self.max_retries = max(0, int(max_retries))
        self.max_output_retries = max(0, int(max_output_retries))
        self.backoff_base = float(backoff_base)
        self.backoff_max = float(backoff_max)
        self.max_retry_after = float(max_retry_after)
        self._sleep = sleep
        self._rng = random.Random(seed)
        self._lock = threading.Lock()
        self._secrets: list[str] = []
        self.usage = UsageTotals()
        #: where the profile's limits come from (``llm.limits.fit_limits`` says it in the build notes)
        self.limits_source: str | None = None
        self.output_source: str | None = None
        #: True when the user set the limits (flags, config.toml): the server is not asked
        self.limits_pinned = False

    # ----------------------------------------------------------------- provider hooks
    @abstractmethod
    def _request_json(
        self, system: str, user: str, schema: dict[str, Any], *, schema_name: str,
        max_output_tokens: int, timeout: float,
    ) -> ProviderReply:
        """Make ONE provider call asking for a JSON object that matches ``schema``."""

    def _request_chat(
        self, system: str | None, messages: Sequence[ChatMessage], tools: Sequence[ToolSpec], *,
        max_output_tokens: int, timeout: float,
    ) -> ChatTurn:
        """Make ONE tool-calling chat call (usage filled in, cost left to the base class)."""
        raise LLMError(f"{self.spec} does not support tool-calling chat")

    def _classify(self, exc: Exception) -> ProviderFailure | None:
        """Map an SDK exception to a :class:`ProviderFailure`; None re-raises it unchanged."""
        return None

    # ----------------------------------------------------------------- public API
    @property
    def spec(self) -> str:
        """``provider:model``, as given to ``get_llm``."""
        return f"{self.provider}:{self.model}"

    def complete_json(
        self,
        system: str,
        user: str,
        schema: dict[str, Any],
        *,
        max_output_tokens: int,
        schema_name: str = "record_tree",
        validate: Callable[[dict[str, Any]], Any] | None = None,
        timeout: float | None = None,
        cancel: threading.Event | None = None,
    ) -> LLMResponse:
        """Ask for one JSON object matching ``schema``; retry until it parses (and validates).

        Args:
            system / user: the two prompt messages.
            schema: JSON schema of the reply (OpenAI ``json_schema`` / Anthropic tool input).
            max_output_tokens: the reply budget for this call.
            schema_name: the schema / forced tool name (``record_tree`` for tree building).
            validate: called with the decoded object; raising ``LLMOutputError`` (or
                ``ValueError``) makes the reply count as malformed and retried.
            timeout: seconds for each attempt, counted from when it is sent (default: the client's).
            cancel: when set, no further attempt is sent (:class:`LLMCancelledError`).

        Raises:
            LLMError: transport failures after the retries, auth and bad-request errors; every
                error carries the ``usage`` of the attempts that reached the model.
            LLMOutputError: no usable reply after ``max_output_retries`` extra attempts.
            LLMTruncatedError: the reply was cut at ``max_output_tokens`` and did not parse.
            LLMContextOverflowError: the server said the prompt does not fit its context.
        """
        spent = _Spent()
        per_attempt = timeout or self.timeout

        def attempt(seconds: float) -> LLMResponse:
            try:
                reply = self._request_json(
                    system, user, schema, schema_name=schema_name,
                    max_output_tokens=max_output_tokens, timeout=seconds,
                )
            except MalformedReply as exc:  # answered, but unusable: still paid for
                if exc.reply is not None:
                    self._account(exc.reply.input_tokens, exc.reply.output_tokens)
                    spent.add(exc.reply)
                raise
            self._account(reply.input_tokens, reply.output_tokens)
            spent.add(reply)
            data = reply.data
            raw = reply.text if reply.text is not None else json.dumps(data)
            try:
                if data is None:
                    data = _loads_object(reply.text or "")
                if validate is not None:
                    validate(data)
            except (LLMOutputError, ValueError) as exc:  # JSONDecodeError is a ValueError
                if reply.truncated:
                    cut = LLMTruncatedError(
                        f"{self.spec}: reply cut at max_output_tokens={max_output_tokens} "
                        "before it was complete",
                        hint="send fewer chunks per call",
                    )
                    cut.partial = reply.text
                    raise cut from exc
                raise MalformedReply(f"unusable reply ({self.redact(str(exc))[:200]})", reply=reply) from exc
            return LLMResponse(
                data=data,
                raw=raw,
                input_tokens=spent.input_tokens,
                output_tokens=spent.output_tokens,
                model=reply.model or self.model,
                cost_usd=self.profile.cost(spent.input_tokens, spent.output_tokens),
                attempts=spent.attempts,
                finish_reason=reply.finish_reason,
                truncated=reply.truncated,
                usage_estimated=spent.estimated,
            )

        try:
            return self._with_retries("JSON call", attempt, per_attempt, cancel)
        except LLMError as exc:
            exc.usage = CallUsage(spent.input_tokens, spent.output_tokens,
                                  self.profile.cost(spent.input_tokens, spent.output_tokens), spent.attempts,
                                  spent.estimated)
            raise

    def chat(
        self,
        messages: Sequence[ChatMessage],
        tools: Sequence[ToolSpec] = (),
        *,
        system: str | None = None,
        max_output_tokens: int = 1024,
        timeout: float | None = None,
    ) -> ChatTurn:
        """One tool-calling turn: the model answers with text and/or tool calls.

        The caller runs the tools, appends ``turn.message`` and one
        ``ChatMessage.tool_result(call.id, text)`` per call, and calls again.
        """
        per_attempt = timeout or self.timeout

        def attempt(seconds: float) -> ChatTurn:
            turn = self._request_chat(
                system, list(messages), list(tools),
                max_output_tokens=max_output_tokens, timeout=seconds,
            )
            self._account(turn.input_tokens, turn.output_tokens)
            return turn.model_copy(
                update={"cost_usd": self.profile.cost(turn.input_tokens, turn.output_tokens),
                        "model": turn.model or self.model}
            )

        return self._with_retries("chat call", attempt, per_attempt)

    @property
    def is_local(self) -> bool:
        """True when the client talks to a server on this machine (a loopback base URL)."""
        return is_loopback_url(self.base_url)

    def check_reachable(self) -> None:
        """Raise :class:`LLMUnreachableError` at once when nothing listens at a configured server.

        Builders call it before planning, so a stopped local server ends ``kt build`` with one line
        instead of a plan and a failed call. Only a custom base URL is probed (one GET without the
        key; any answer, even an error, counts as reachable); the default is to do nothing.
        """

    def _probe(self, path: str, *, env_var: str) -> None:
        """GET ``base_url + path``: :class:`LLMUnreachableError` naming the base URL if nothing listens."""
        import httpx  # deferred: heavy

        assert self.base_url is not None
        try:
            httpx.get(self.base_url + path, timeout=PROBE_TIMEOUT)
        except Exception as exc:  # a timeout or a reset may pass: the calls retry those
            why = unreachable_reason(exc)
            if why is not None:
                raise LLMUnreachableError(f"{self.spec}: " + unreachable_message(
                    self.provider, self.base_url, why, env_var, custom=True)) from None

    def discover_limits(self) -> ServerLimits | None:
        """What the server says about the model's limits (context window), or None.

        Only servers that publish it are asked (llama.cpp, vLLM, Ollama, LM Studio); providers'
        official APIs don't, so their clients return None and the profile stands.
        """
        return None

    def count_tokens(self, text: str) -> int:
        """Tokens of ``text`` by the profile's tokenizer, scaled to the provider's (an estimate)."""
        return self.profile.provider_tokens(count_tokens(text, self.profile.encoding))

    # ----------------------------------------------------------------- machinery
    def _account(self, input_tokens: int, output_tokens: int) -> None:
        with self._lock:
            self.usage.calls += 1
            self.usage.input_tokens += input_tokens
            self.usage.output_tokens += output_tokens
            self.usage.cost_usd += self.profile.cost(input_tokens, output_tokens)

    def _backoff(self, attempt: int, retry_after: float | None) -> float:
        with self._lock:
            jitter: float = self._rng.random()
        if retry_after is not None:
            return retry_after + jitter * min(1.0, 0.1 * retry_after)
        return min(self.backoff_max, self.backoff_base * 2.0 ** (attempt - 1)) * (0.5 + 0.5 * jitter)

    def redact(self, text: str) -> str:
        """``text`` with this client's key and anything key-like replaced by ``***``."""
        for secret in self._secrets:
            if secret:
                text = text.replace(secret, "***")
        return _KEYLIKE.sub("***", text)

    def _with_retries(self, what: str, attempt: Callable[[float], T], timeout: float | None = None,
                      cancel: threading.Event | None = None) -> T:
        timeout = self.timeout if timeout is None else timeout
        current = timeout  # this attempt's timeout, counted from when it is sent
        transport_failures = 0
        output_failures = 0
        failure: ProviderFailure
        cause: Exception
        while True:
            if cancel is not None and cancel.is_set():
                raise LLMCancelledError(f"{self.spec}: {what} not sent: the build is stopping")
            try:
                return attempt(current)
            except MalformedReply as exc:
                output_failures += 1
                with self._lock:
                    self.usage.failed_calls += 1
                if output_failures > self.max_output_retries:
                    raise LLMOutputError(
                        f"{self.spec}: no usable reply after {output_failures} attempts: "
                        f"{self.redact(str(exc))[:300]}",
                        hint="try another model, or fewer chunks per call",
                    ) from exc
                log.warning("%s: %s; retrying (%d/%d)", self.spec, self.redact(str(exc))[:200],
                            output_failures, self.max_output_retries)
                continue
            except LLMError:
                raise
            except ProviderFailure as exc:
                failure, cause = exc, exc
            except Exception as exc:  # SDK exceptions, mapped by the subclass
                classified = self._classify(exc)
                if classified is None:
                    raise
                failure, cause = classified, exc
            with self._lock:
                self.usage.failed_calls += 1
            transport_failures += 1
            message = f"{self.spec}: {self.redact(failure.message)}"
            if failure.timed_out:
                message += f" after {timeout:g} s" + (
                    f" (this attempt {current:g} s: a local server's retry waits for the request it is still on)"
                    if current != timeout else "")
            if failure.auth:
                # the provider's body can echo the key; nothing of the SDK error is kept
                raise LLMError(message, hint=failure.hint or self._key_hint()) from None
            if failure.unreachable:  # nothing listens there: waiting and trying again will not change that
                raise LLMUnreachableError(message) from None
            if failure.overflow:
                raise LLMContextOverflowError(message, context_limit=failure.context_limit,
                                              hint=failure.hint) from cause
            if not failure.retryable:
                raise LLMError(message, hint=failure.hint) from cause
            if failure.retry_after is not None and failure.retry_after > self.max_retry_after:
                raise LLMError(
                    f"{message} (provider asks to wait {failure.retry_after:.0f} s)",
                    hint="the rate limit resets later; run the same command again to resume",
                ) from cause
            if failure.timed_out and self.is_local:
                # a server on this machine answers one request at a time and keeps working on the one we
                # gave up on: the retry waits behind that one request, so it gets one more timeout's worth
                # (not compounding: at most one abandoned request is ever ahead of it)
                current = 2 * timeout
            if transport_failures > self.max_retries and failure.timed_out:
                raise LLMTimeoutError(
                    f"{message} (gave up after {transport_failures} attempts)", timeout=timeout,
                    hint=f"the model did not answer within {timeout:g} s per attempt; raise the timeout "
                         "(--timeout SECONDS or KNOWTOLOGY_LLM_TIMEOUT) and run again",
                ) from cause
            if transport_failures > self.max_retries:
                raise LLMError(
                    f"{message} (gave up after {transport_failures} attempts)",
                    hint=failure.hint or "the provider is unavailable or overloaded; run again to resume",
                ) from cause
            delay = self._backoff(transport_failures, failure.retry_after)
            log.warning("%s; retry %d/%d in %.1f s", message[:300], transport_failures, self.max_retries, delay)
            if cancel is not None and self._sleep is time.sleep:
                cancel.wait(delay)  # a stopping build does not sit out the backoff
            else:
                self._sleep(delay)

    def _key_hint(self) -> str:
        if self.key_env:
            return f"set {self.key_env} to a valid key (or the key in config.toml)"
        return "check the API key"


_RETRYABLE_STATUS = {408, 409, 425, 429}


_OVERFLOW_CODES = {"context_length_exceeded", "exceed_context_size_error", "context_window_exceeded"}
_OVERFLOW_TEXT = re.compile(
    r"(?i)context (?:length|size|window)|maximum context|prompt is too long|too many (?:input )?tokens|\bn_ctx\b")
_CONTEXT_LIMIT = (
    re.compile(r"(?i)\bn_ctx\b\D{0,3}(\d[\d,]*)"),
    re.compile(r"(?i)maximum context length is (\d[\d,]*)"),
    re.compile(r"(?i)context (?:length|size|window) (?:is |of )?(?:only )?(\d[\d,]*) tokens"),
    re.compile(r"(?i)>\s*(\d[\d,]*) maximum"),
)


def context_overflow(status: int, body: object, message: str | None) -> tuple[bool, int | None]:
    """(is this HTTP error a context overflow?, the context size the server stated, if any)."""
    if status not in (400, 413, 422):
        return False, None
    err = body.get("error", body) if isinstance(body, Mapping) else None
    fields = err if isinstance(err, Mapping) else {}
    codes = {str(fields.get(k)) for k in ("code", "type") if fields.get(k)}
    text = message or ""
    if not (codes & _OVERFLOW_CODES or _OVERFLOW_TEXT.search(text)):
        return False, None
    limit = fields.get("n_ctx")
    if not isinstance(limit, int):
        limit = None
        for pattern in _CONTEXT_LIMIT:
            m = pattern.search(text)
            if m:
                limit = int(m.group(1).replace(",", ""))
                break
    return True, limit


def failure_from_status(
    provider: str, status: int, headers: Mapping[str, str] | None, provider_message: str | None,
    body: object = None,
) -> ProviderFailure:
    """Classify an HTTP error reply of any provider (the message is redacted by the caller)."""
    detail = f": {provider_message.strip()[:300]}" if provider_message else ""
    overflow, limit = context_overflow(status, body, provider_message)
    if overflow:
        return ProviderFailure(
            f"{provider} refused the prompt as longer than the model's context (HTTP {status}){detail}",
            retryable=False, status=status, overflow=True, context_limit=limit,
            hint="send fewer chunks per call, or set the model's real context with --context-window N "
                 "(or context_window in [profiles.\"MODEL\"] of config.toml)")
    if status in (401, 403):
        what = "rejected the API key" if status == 401 else "refused the request (permission denied)"
        return ProviderFailure(f"{provider} {what} (HTTP {status})", retryable=False, status=status, auth=True)
    retry_after = parse_retry_after(headers)
    if status in _RETRYABLE_STATUS or status >= 500:
        label = "rate limited" if status == 429 else "server error" if status >= 500 else "busy"
        return ProviderFailure(
            f"{provider} {label} (HTTP {status}){detail}", retryable=True, status=status,
            retry_after=retry_after,
        )
    hint = "check the model name" if status == 404 else None
    return ProviderFailure(f"{provider} request failed (HTTP {status}){detail}", retryable=False,
                           status=status, hint=hint)


def error_message_from_body(body: object) -> str | None:
    """``error.message`` (OpenAI and Anthropic shape) or a short string body."""
    if isinstance(body, Mapping):
        err = body.get("error", body)
        message = err.get("message") if isinstance(err, Mapping) else None
        if isinstance(message, str):
            return message
        if isinstance(err, str):
            return err
    if isinstance(body, str):
        return body
    return None


def classify_sdk_error(
    exc: Exception, sdk: Any, *, provider: str, where: str, env_var: str, base_error: type[Exception],
    custom: bool = True,
) -> ProviderFailure | None:
    """Map an OpenAI or Anthropic SDK exception (their classes share names) to a ``ProviderFailure``.

    ``where`` is the base URL (``custom``) or the provider's own host.
    """
    if isinstance(exc, sdk.APIStatusError):
        return failure_from_status(provider, exc.status_code, exc.response.headers, error_message_from_body(exc.body),
                                   exc.body)
    if isinstance(exc, sdk.APITimeoutError):
        return ProviderFailure(f"{provider} request timed out", retryable=True, timed_out=True,
                               hint="the server did not answer in time; raise the timeout or retry")
    if isinstance(exc, sdk.APIConnectionError):
        why = unreachable_reason(exc)
        if why is not None:
            return ProviderFailure(unreachable_message(provider, where, why, env_var, custom=custom), retryable=False,
                                   unreachable=True)
        return ProviderFailure(f"cannot reach {display_url(where)}", retryable=True,
                               hint=f"check the network or {env_var}")
    if isinstance(exc, sdk.APIResponseValidationError):
        return ProviderFailure(f"{provider} returned an invalid response body", retryable=True)
    if isinstance(exc, base_error):
        return ProviderFailure(f"{provider} client error: {type(exc).__name__}", retryable=False)
    return None
