"""One logged LLM call of a tree builder: the cache lookup, the call, and a log row with what it cost.

The call log is the one record of spend; build summaries, ``--dry-run`` and ``kt bench`` total its rows.
"""

from __future__ import annotations

import hashlib
import json
import queue
import threading
import time
from collections.abc import Callable, Iterable
from concurrent.futures import Future
from dataclasses import dataclass, field
from typing import TYPE_CHECKING, Any, TypeVar

from ..errors import LLMError
from ..llm.base import (
    CallUsage,
    LLMCancelledError,
    LLMContextOverflowError,
    LLMTruncatedError,
    LLMUnreachableError,
    usage_of,
)

if TYPE_CHECKING:
    from ..llm.base import LLMClient
    from ..stores.base import TreeStore

T = TypeVar("T")


def prompt_digest(version: str, spec: str, schema_name: str, system: str, user: str) -> str:
    """Cache key of one call: prompt version, provider:model, reply schema and both messages."""
    blob = json.dumps([version, spec, schema_name, system, user], ensure_ascii=False)
    return hashlib.sha256(blob.encode()).hexdigest()


def check_server(llm: LLMClient, tree: TreeStore, collection: str, *, use_cache: bool,
                 message: Callable[[str], None]) -> None:
    """Stop at once when the model's server does not answer (:meth:`LLMClient.check_reachable`),
    unless the call log holds replies for ``collection`` that may answer every prompt of this build
    (a rebuild of an unchanged corpus): then say so and go on; the first prompt the log has not
    answered stops the build with the same one-line error, before anything is written."""
    try:
        llm.check_reachable()
    except LLMUnreachableError as exc:
        stats = tree.call_stats(collection)
        answered = int(stats["calls"]) - int(stats["failed"])
        if not use_cache or answered <= 0:
            raise
        message(f"note: {exc}; going on with the {answered} replies the call log holds: a prompt it "
                "has not answered will stop the build")


class CallPool:
    """Runs up to ``workers`` LLM calls at once on daemon threads.

    ``concurrent.futures.ThreadPoolExecutor`` joins its threads when the interpreter exits, so after
    Ctrl-C ``kt build`` would sit until every call in flight came back (up to the call timeout, ten
    minutes by default). Calls only talk HTTP (every write happens on the calling thread), so an
    interrupted build may simply abandon them: the process exits at once.
    """

    def __init__(self, workers: int, name: str) -> None:
        self.workers = max(1, workers)
        self.name = name
        self._jobs: queue.SimpleQueue[tuple[Future[Any], Callable[[], Any]] | None] = queue.SimpleQueue()
        self._threads: list[threading.Thread] = []

    def submit(self, fn: Callable[..., T], /, *args: Any, **kwargs: Any) -> Future[T]:
        """Queue ``fn(*args, **kwargs)``; its future completes on a worker thread."""
        future: Future[T] = Future()
        self._jobs.put((future, lambda: fn(*args, **kwargs)))
        if len(self._threads) < self.workers:
            thread = threading.Thread(target=self._work, name=f"{self.name}-{len(self._threads)}", daemon=True)
            thread.start()
            self._threads.append(thread)
        return future

    def _work(self) -> None:
        while (job := self._jobs.get()) is not None:
            future, call = job
            if not future.set_running_or_notify_cancel():
                continue
            try:
                result = call()
            except BaseException as exc:  # handed to the caller through the future
                future.set_exception(exc)
            else:
                future.set_result(result)

    def shutdown(self, *, wait: bool = True) -> None:
        """Stop the workers once the queue is done; without ``wait``, cancel what is queued and return."""
        if not wait:
            while True:
                try:
                    job = self._jobs.get_nowait()
                except queue.Empty:
                    break
                if job is not None:
                    job[0].cancel()
        for _ in self._threads:
            self._jobs.put(None)
        if wait:
            for thread in self._threads:
                thread.join()

    def __enter__(self) -> CallPool:
        return self

    def __exit__(self, exc_type: object, *rest: object) -> None:
        self.shutdown(wait=exc_type is None)  # interrupted: calls in flight are abandoned


def answered(futures: Iterable[Future[T]]) -> list[T]:
    """The results of the calls that came back without an error (the rest are still in flight,
    cancelled or failed): after an interrupt, what to log so a re-run is not charged again."""
    return [f.result() for f in futures if f.done() and not f.cancelled() and f.exception() is None]


@dataclass
class CallOutcome:
    """What one call came to. ``status``: ok, truncated, overflow, error or cancelled (the log's status)."""

    kind: str
    prompt_hash: str
    chunk_count: int
    status: str
    data: dict[str, Any] | None = None
    usage: CallUsage = field(default_factory=CallUsage)
    model: str = ""
    error: LLMError | None = None
    seconds: float = 0.0
    finish_reason: str | None = None

    @property
    def ok(self) -> bool:
        return self.status == "ok"


def run_call(
    llm: LLMClient,
    *,
    kind: str,
    prompt_hash: str,
    system: str,
    user: str,
    schema: dict[str, Any],
    schema_name: str,
    max_output_tokens: int,
    chunk_count: int = 0,
    validate: Callable[[dict[str, Any]], Any] | None = None,
    cancel: threading.Event | None = None,
) -> CallOutcome:
    """Make one call (any thread) and describe how it went; LLM errors become outcomes, not raises."""
    started = time.perf_counter()
    try:
        resp = llm.complete_json(system, user, schema, max_output_tokens=max_output_tokens, schema_name=schema_name,
                                 validate=validate, cancel=cancel)
    except LLMError as exc:
        status = ("cancelled" if isinstance(exc, LLMCancelledError) else
                  "truncated" if isinstance(exc, LLMTruncatedError) else
                  "overflow" if isinstance(exc, LLMContextOverflowError) else "error")
        return CallOutcome(kind, prompt_hash, chunk_count, status, usage=usage_of(exc), model=llm.spec, error=exc,
                           seconds=time.perf_counter() - started)
    usage = CallUsage(resp.input_tokens, resp.output_tokens, resp.cost_usd, resp.attempts, resp.usage_estimated)
    return CallOutcome(kind, prompt_hash, chunk_count, "ok", data=resp.data, usage=usage, model=resp.model or llm.spec,
                       seconds=time.perf_counter() - started, finish_reason=resp.finish_reason)


class CallLog:
    """Writes outcomes into the tree store's call log and serves identical prompts from it.

    Every call that was sent gets a row with the usage the server reported for all its attempts,
    including calls cut at the output limit, refused as too long or failed after retries, and
    ``usage_estimated`` when a server reported none and the tokenizer counted. Calls run on worker
    threads; rows are written on the calling thread (:meth:`record`).
    """

    def __init__(self, tree: TreeStore, collection: str, build_id: str, *, use_cache: bool = True) -> None:
        self.tree = tree
        self.collection = collection
        self.build_id = build_id
        self.use_cache = use_cache

    def cached(self, prompt_hash: str) -> dict[str, Any] | None:
        """The logged reply of an identical earlier prompt (None without cache or when there is none)."""
        if not self.use_cache:
            return None
        row = self.tree.cached_response(prompt_hash)
        return row["response"] if row is not None else None

    def record(self, outcome: CallOutcome) -> None:
        """Log one sent call (a cancelled call that never reached the model leaves no row)."""
        if outcome.status == "cancelled" and outcome.usage.attempts == 0:
            return
        self.tree.log_call({
            "collection": self.collection, "build_id": self.build_id, "kind": outcome.kind,
            "model": outcome.model, "prompt_hash": outcome.prompt_hash, "chunk_count": outcome.chunk_count,
            "input_tokens": outcome.usage.input_tokens, "output_tokens": outcome.usage.output_tokens,
            "cost_usd": outcome.usage.cost_usd, "status": outcome.status,
            "error": str(outcome.error)[:500] if outcome.error is not None else None,
            "response": outcome.data if outcome.ok else None, "seconds": round(outcome.seconds, 3),
            "attempts": max(1, outcome.usage.attempts), "usage_estimated": outcome.usage.estimated,
        })


@dataclass(frozen=True)
class LogTotals:
    """Totals of the call-log rows of one build (or of a whole collection)."""

    calls: int = 0
    failed: int = 0
    input_tokens: int = 0
    output_tokens: int = 0
    cost_usd: float = 0.0
    estimated: int = 0
    attempts: int = 0
    seconds: float = 0.0


def log_totals(tree: TreeStore, collection: str | None = None, build_id: str | None = None) -> LogTotals:
    """Sum the call-log rows of ``build_id`` (or of ``collection``): the figures every summary reports."""
    rows = tree.calls(collection=collection, build_id=build_id)
    return LogTotals(
        calls=len(rows),
        failed=sum(1 for r in rows if r["status"] != "ok"),
        input_tokens=sum(int(r["input_tokens"] or 0) for r in rows),
        output_tokens=sum(int(r["output_tokens"] or 0) for r in rows),
        cost_usd=sum(float(r["cost_usd"] or 0) for r in rows),
        estimated=sum(1 for r in rows if r.get("usage_estimated")),
        attempts=sum(int(r.get("attempts") or 1) for r in rows),
        seconds=sum(float(r.get("seconds") or 0) for r in rows),
    )
