"""FakeLLMServer: a loopback HTTP server speaking the OpenAI and Anthropic APIs to the real SDKs."""

from __future__ import annotations

import argparse
import hashlib
import json
import re
import signal
import sys
import threading
import time
from collections import Counter
from collections.abc import Callable, Mapping, Sequence
from dataclasses import asdict, dataclass, field
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from typing import Any

FAULTS = (
    "malformed", "truncated", "drop_ids", "unknown_ids", "deep_paths", "rate_limit", "server_error", "hang",
    "auth", "overflow", "no_usage", "junk",
)
ALIASES = {"429": "rate_limit", "500": "server_error", "401": "auth", "timeout": "hang", "bad_json": "malformed"}
#: kinds drawn by ``fail_rate`` unless told otherwise (hang and auth only when asked for)
RATE_FAULTS = ("malformed", "drop_ids", "unknown_ids", "deep_paths", "rate_limit", "server_error")

Brain = Callable[[list[tuple[str, str]], list[str]], dict[str, Any]]

_CHUNK = re.compile(r'<chunk id=("(?:[^"\\]|\\.)*")>\n(.*?)\n</chunk>', re.DOTALL)
_TREE = re.compile(r"<tree>\n(.*?)\n</tree>", re.DOTALL)
_CATEGORY = re.compile(r'<category id=("(?:[^"\\]|\\.)*") draft=("(?:[^"\\]|\\.)*")')
NAMES_SCHEMA = "name_categories"
_WORD = re.compile(r"[a-z][a-z]{3,}")
_STOP = frozenset(
    """about above after again against also among another because been before being below between both
    could does doing down during each either even every from further have having here into itself just
    many more most much must never none other others over same should since some such than that their
    them then there these they this those through under until upon very were what when where which
    while will with within without would your yours shows showed study studies result results using
    used based found however including include data analysis effect effects patients patient level
    levels high higher role associated compared increased reduced significant significantly well
    among three first second also only into cells cell human chunk text""".split()
)


def canonical_fault(name: str | None) -> str | None:
    """``name`` as one of :data:`FAULTS` (aliases like ``"429"`` accepted); None stays None."""
    if name is None:
        return None
    name = ALIASES.get(str(name).lower(), str(name).lower())
    if name not in FAULTS:
        raise ValueError(f"unknown fault {name!r}; choose from {', '.join(FAULTS)}")
    return name


# ----------------------------------------------------------------------------- the brain
def parse_chunks(user: str) -> list[tuple[str, str]]:
    """``(chunk_id, text)`` of every ``<chunk>`` block in a user message from ``render_user``."""
    return [(json.loads(m.group(1)), m.group(2)) for m in _CHUNK.finditer(user)]


def parse_tree(user: str) -> list[str]:
    """Leaf paths of the ``<tree>`` listing (folded ``A/…`` lines lose their ``/…``)."""
    m = _TREE.search(user)
    if not m:
        return []
    lines = [ln.strip() for ln in m.group(1).splitlines()]
    return [ln.removesuffix("/…") for ln in lines if ln and not ln.startswith("(")]


def _words(text: str) -> list[str]:
    return [w for w in _WORD.findall(text.lower()) if w not in _STOP]


def _snippet(text: str, limit: int = 100) -> str:
    flat = " ".join(text.split())
    if len(flat) <= limit:
        return flat or "(empty chunk)"
    cut = flat[:limit].rsplit(" ", 1)[0]
    return cut + "…"


def _label(word: str) -> str:
    return word.capitalize()


def keyword_brain(chunks: list[tuple[str, str]], tree: list[str]) -> dict[str, Any]:
    """A deterministic tree by keywords: reuse an existing leaf sharing a word with the chunk,
    else top level = the most widespread batch keyword the chunk has, second level = its most
    frequent other group keyword, third level when a group is large."""
    leaf_words = [(leaf, set(_words(leaf.replace("/", " ")))) for leaf in tree]
    assignments: list[dict[str, str]] = []
    fresh: list[tuple[str, str, list[str]]] = []
    for chunk_id, text in chunks:
        words = _words(text)
        best, score = None, 0
        counts = Counter(words)
        for leaf, lw in leaf_words:
            s = sum(counts[w] for w in lw)
            if s > score:
                best, score = leaf, s
        if best is not None:
            assignments.append({"chunk_id": chunk_id, "path": best, "snippet": _snippet(text)})
        else:
            fresh.append((chunk_id, text, words))

    def top_words(docs: list[list[str]], k: int, exclude: set[str]) -> list[str]:
        df = Counter(w for ws in docs for w in set(ws) if w not in exclude)
        ranked = sorted(df.items(), key=lambda kv: (-kv[1], kv[0]))
        return [w for w, c in ranked[:k] if c >= 2] or [w for w, _ in ranked[:1]]

    paths: dict[str, str] = {}
    topics = top_words([w for _, _, w in fresh], min(6, max(2, len(fresh) // 4)), set())
    groups: dict[str, list[tuple[str, str, list[str]]]] = {}
    for item in fresh:
        l1 = next((t for t in topics if t in item[2]), None)
        groups.setdefault(_label(l1) if l1 else "Miscellaneous", []).append(item)
    for l1, members in groups.items():
        sub = top_words([w for _, _, w in members], 4, {l1.lower()})
        l2_groups: dict[str, list[tuple[str, str, list[str]]]] = {}
        for item in members:
            counts = Counter(item[2])
            l2 = max(sub, key=lambda w: (counts[w], -sub.index(w))) if sub else None
            l2_groups.setdefault(_label(l2) if l2 and counts[l2] else "Other Topics", []).append(item)
        for l2, items in l2_groups.items():
            if len(items) >= 4:
                third = top_words([w for _, _, w in items], 3, {l1.lower(), l2.lower()})
                for chunk_id, _text, words in items:
                    counts = Counter(words)
                    l3 = max(third, key=lambda w: (counts[w], -third.index(w))) if third else None
                    paths[chunk_id] = f"{l1}/{l2}/{_label(l3) if l3 and counts[l3] else 'Other'}"
            else:
                for chunk_id, _text, _unused in items:
                    paths[chunk_id] = f"{l1}/{l2}"
    for chunk_id, text, _w in fresh:
        assignments.append({"chunk_id": chunk_id, "path": paths[chunk_id], "snippet": _snippet(text)})
    order = {cid: i for i, (cid, _) in enumerate(chunks)}
    assignments.sort(key=lambda a: order[a["chunk_id"]])
    existing: set[str] = set()
    for leaf in tree:
        parts = leaf.split("/")
        existing.update("/".join(parts[: i + 1]) for i in range(len(parts)))
    categories, seen = [], set()
    for a in assignments:
        parts = a["path"].split("/")
        for i in range(1, len(parts) + 1):
            p = "/".join(parts[:i])
            if p not in seen and p not in existing:
                seen.add(p)
                categories.append({"path": p, "description": f"Chunks about {parts[i - 1].lower()}"})
    return {"categories": categories, "assignments": assignments}


def parse_categories(user: str) -> list[tuple[str, str]]:
    """``(id, draft name)`` of every ``<category>`` block of a naming call."""
    return [(json.loads(m.group(1)), json.loads(m.group(2))) for m in _CATEGORY.finditer(user)]


def sample_lines(user: str) -> dict[str, list[str]]:
    """The sample passages (``- ...`` lines) shown for each category id of a naming call."""
    out: dict[str, list[str]] = {}
    current = None
    for line in user.splitlines():
        m = _CATEGORY.match(line)
        if m:
            current = json.loads(m.group(1))
            out[current] = []
        elif current is not None and line.startswith("- "):
            out[current].append(line[2:])
    return out


def naming_brain(categories: list[tuple[str, str]], samples: dict[str, list[str]] | None = None) -> dict[str, Any]:
    """Keep each draft name; describe it with the most frequent words of its sample passages."""
    names = []
    for cid, draft in categories:
        words = Counter(_words(" ".join((samples or {}).get(cid, []))))
        top = ", ".join(w for w, _ in words.most_common(6))
        names.append({"id": cid, "name": draft,
                      "description": f"Passages about {draft.lower()}" + (f": {top}." if top else ".")})
    return {"names": names}


def _apply_fault(reply: dict[str, Any], fault: str) -> dict[str, Any]:
    reply = json.loads(json.dumps(reply))
    if "names" in reply:
        if fault == "junk":
            junk = ("12", "notes.md", "---", "#3")
            for k, item in enumerate(reply["names"]):
                item["name"] = junk[k % len(junk)]
        return reply
    items = reply["assignments"]
    if fault == "drop_ids":
        reply["assignments"] = [a for i, a in enumerate(items) if i % 3 != 1] if len(items) > 1 else []
    elif fault == "unknown_ids":
        items.extend({"chunk_id": f"unknown-{k}", "path": items[0]["path"] if items else "Unknown",
                      "snippet": "An id that was never sent"} for k in range(2))
    elif fault == "deep_paths":
        for i, a in enumerate(items):
            if i % 2 == 0:
                a["path"] += "/Deeper/Deepest"
        reply["categories"].append({"path": "A/B/C/D/E", "description": "too deep"})
    elif fault == "junk":
        for a in items:
            a["path"] = a["chunk_id"]
        reply["categories"] = [{"path": a["path"], "description": "one line"} for a in items]
    return reply


# ----------------------------------------------------------------------------- the server
@dataclass
class CallRecord:
    """One request as the server saw it."""

    index: int
    endpoint: str  # "openai" or "anthropic"
    kind: str  # "tree" or "chat"
    model: str
    n_chunks: int
    chunk_ids: tuple[str, ...]
    status: int
    fault: str | None
    at: float
    body: dict[str, Any] | None = field(default=None, repr=False)
    prompt_tokens: int = 0  # the usage this call reported (0: none reported)
    completion_tokens: int = 0


class FakeLLMServer:
    """Loopback OpenAI + Anthropic server (context manager).

    It answers ``POST /v1/chat/completions`` (OpenAI shape, ``usage`` included) and
    ``POST /v1/messages`` (Anthropic shape, forced ``tool_use`` block, ``usage`` included). Tree
    calls — a ``json_schema`` response format, or a forced tool — are answered by a deterministic
    keyword "brain" that reads the ``<chunk id="...">`` blocks and ``<tree>`` listing written by
    ``knowtology_cli.builders.prompts.render_user`` and returns a plausible 2-3 level tree. Other calls
    are chat turns, answered from a script of tool calls and final texts (for ``kt ask`` tests).

    Faults can be injected per call (``faults=["rate_limit", None, "malformed"]``, by arrival order)
    or by rate (``fail_rate=0.3, seed=7``: decided from a hash of the request and how often it was
    seen, so retries of one request get fresh draws and the outcome doesn't depend on thread timing):

    ====================  ===================================================================
    ``malformed``         reply text is cut mid-JSON (Anthropic: a text block, no tool call)
    ``truncated``         stopped at max tokens: content cut mid-JSON, ``finish_reason="length"``
                          (Anthropic: ``stop_reason="max_tokens"``, tool input ``{}``)
    ``drop_ids``          a third of the assignments are left out
    ``unknown_ids``       two assignments for chunk ids that were never sent are added
    ``deep_paths``        half of the paths get two extra levels (4-5 segments)
    ``rate_limit``        HTTP 429 with ``retry-after`` (``retry_after`` seconds)
    ``server_error``      HTTP 500
    ``hang``              no answer for ``hang_seconds`` (longer than the client timeout)
    ``auth``              HTTP 401 whose message echoes the key sent (tests check it never leaks)
    ``overflow``          HTTP 400 ``context_length_exceeded`` (llama.cpp's wording, stating ``n_ctx``)
    ``no_usage``          a normal answer without a ``usage`` block (the client must estimate)
    ``junk``              tree replies use chunk ids and file paths as category paths; naming
                          replies use ids, digits and file names as names
    ====================  ===================================================================

    Naming calls (``json_schema`` / tool named ``name_categories``, from the hybrid builder) are
    answered from the ``<category id=... draft=...>`` blocks: each node keeps its draft name and is
    described with the most frequent words of its sample passages. ``context_window=N`` makes the
    server refuse prompts of N tokens or more
    (HTTP 400 like llama.cpp) and, with ``publish_limits=True``, publish N at ``GET /props``
    (llama.cpp) and as ``max_model_len`` in ``GET /v1/models`` (vLLM). ``prefill_tps``/``gen_tps``
    add a local model's time per prompt and reply token, ``serial=True`` answers one request at a
    time (like a one-slot llama.cpp server). Every call records the usage it reported
    (``CallRecord.prompt_tokens``/``completion_tokens``; 0 when none was sent).

    Standalone: ``python -m knowtology_cli.testing.fake_llm --port 0 --latency 2 --fail-rate 0.3``
    prints its root URL (``http://127.0.0.1:PORT``) on the first line of stdout; point
    ``OPENAI_BASE_URL`` at ``URL/v1`` and ``ANTHROPIC_BASE_URL`` at ``URL``. ``GET /_calls``
    returns the call log as JSON.

    Args:
        faults: a fault name (or None) per request in arrival order, or ``{index: fault}``.
        fail_rate: probability of a fault per request when ``faults`` is not given.
        fail_kinds: faults drawn by ``fail_rate`` (default :data:`RATE_FAULTS`).
        seed: seeds the ``fail_rate`` draws.
        latency: seconds before every answer (for concurrency benchmarks).
        retry_after: value of the ``retry-after`` header on 429 (seconds).
        hang_seconds: how long a ``hang`` lasts (cut short by :meth:`stop`).
        api_key: when set, requests with another key get 401.
        brain: ``brain(chunks, tree_leaves) -> reply dict`` for tree calls.
        chat_script: chat turns, in order: ``{"text": ...}`` or ``{"tool_calls": [{"name",
            "arguments"}]}``, or a callable(body) returning one; "done." when exhausted. ``kt ask``'s
            last answer (``json_schema``/forced tool ``final_answer``) is a turn too: ``{"answer",
            "sources"}`` as given, or a ``{"text"}`` turn whose ``[id]`` citations become the sources.
        keep_bodies: keep request bodies in the call log.
        context_window: refuse prompts of this many tokens or more (HTTP 400, llama.cpp's message).
        publish_limits: publish ``context_window`` at ``/props`` and in ``/v1/models``.
        prefill_tps / gen_tps: seconds per prompt / reply token added to each answer (0: none).
        serial: answer one request at a time.
    """

    def __init__(
        self,
        *,
        host: str = "127.0.0.1",
        port: int = 0,
        faults: Sequence[str | None] | Mapping[int, str | None] = (),
        fail_rate: float = 0.0,
        fail_kinds: Sequence[str] = RATE_FAULTS,
        seed: int = 0,
        latency: float = 0.0,
        retry_after: float = 1.0,
        hang_seconds: float = 30.0,
        api_key: str | None = None,
        brain: Brain = keyword_brain,
        chat_script: Sequence[Mapping[str, Any]] | Callable[[dict[str, Any]], Mapping[str, Any]] = (),
        keep_bodies: bool = True,
        context_window: int | None = None,
        publish_limits: bool = False,
        prefill_tps: float = 0.0,
        gen_tps: float = 0.0,
        serial: bool = False,
    ) -> None:
        self.host, self.port = host, port
        self.set_faults(faults)
        self.fail_rate = float(fail_rate)
        self.fail_kinds = tuple(canonical_fault(k) for k in fail_kinds)
        self.seed = seed
        self.latency = float(latency)
        self.retry_after = retry_after
        self.hang_seconds = float(hang_seconds)
        self.api_key = api_key
        self.brain = brain
        self.chat_script = chat_script if callable(chat_script) else list(chat_script)
        self.keep_bodies = keep_bodies
        self.context_window = context_window
        self.publish_limits = publish_limits
        self.prefill_tps = float(prefill_tps)
        self.gen_tps = float(gen_tps)
        self._serial = threading.Lock() if serial else None
        self._lock = threading.Lock()
        self._calls: list[CallRecord] = []
        self._seen: Counter[str] = Counter()
        self._stop = threading.Event()
        self._httpd: ThreadingHTTPServer | None = None
        self._thread: threading.Thread | None = None

    # -- lifecycle
    def start(self) -> FakeLLMServer:
        server = self

        class Handler(_Handler):
            fake = server

        self._httpd = ThreadingHTTPServer((self.host, self.port), Handler)
        self._httpd.daemon_threads = True
        self.port = self._httpd.server_address[1]
        self._stop.clear()
        self._thread = threading.Thread(target=self._httpd.serve_forever, name="fake-llm", daemon=True)
        self._thread.start()
        return self

    def stop(self) -> None:
        self._stop.set()
        if self._httpd is not None:
            self._httpd.shutdown()
            self._httpd.server_close()
            self._httpd = None
        if self._thread is not None:
            self._thread.join(timeout=5)
            self._thread = None

    def __enter__(self) -> FakeLLMServer:
        return self.start()

    def __exit__(self, *exc: object) -> None:
        self.stop()

    @property
    def url(self) -> str:
        """Root URL, ``http://127.0.0.1:PORT``."""
        return f"http://{self.host}:{self.port}"

    @property
    def openai_base_url(self) -> str:
        """For ``OPENAI_BASE_URL`` / ``OpenAIClient(base_url=...)``: the root plus ``/v1``."""
        return self.url + "/v1"

    @property
    def anthropic_base_url(self) -> str:
        """For ``ANTHROPIC_BASE_URL`` / ``AnthropicClient(base_url=...)``: the root."""
        return self.url

    # -- configuration and log
    def set_faults(self, faults: Sequence[str | None] | Mapping[int, str | None]) -> None:
        """Replace the per-call fault plan (indexes count from the next :meth:`reset`)."""
        if isinstance(faults, Mapping):
            self._plan = {int(k): canonical_fault(v) for k, v in faults.items()}
        else:
            self._plan = {i: canonical_fault(f) for i, f in enumerate(faults)}

    @property
    def calls(self) -> list[CallRecord]:
        """A copy of the call log, in arrival order."""
        with self._lock:
            return list(self._calls)

    def tree_calls(self, status: int | None = 200) -> list[CallRecord]:
        """Tree calls (optionally only those answered with ``status``)."""
        return [c for c in self.calls if c.kind == "tree" and (status is None or c.status == status)]

    def naming_calls(self, status: int | None = 200) -> list[CallRecord]:
        """Naming calls of the hybrid builder (optionally only those answered with ``status``)."""
        return [c for c in self.calls if c.kind == "names" and (status is None or c.status == status)]

    def reported_usage(self) -> tuple[int, int]:
        """(prompt tokens, completion tokens) the server reported, summed over every call."""
        calls = self.calls
        return sum(c.prompt_tokens for c in calls), sum(c.completion_tokens for c in calls)

    def reset(self) -> None:
        """Forget the call log and the request counts."""
        with self._lock:
            self._calls.clear()
            self._seen.clear()

    # -- request handling (called from handler threads)
    def _decide(self, body_bytes: bytes, key_ok: bool) -> tuple[int, str | None]:
        digest = hashlib.sha256(body_bytes).hexdigest()
        with self._lock:
            index = len(self._calls)
            seen = self._seen[digest]
            self._seen[digest] += 1
            self._calls.append(CallRecord(index, "", "", "", 0, (), 0, None, time.time()))
        if not key_ok:
            return index, "auth"
        if self._plan:
            return index, self._plan.get(index)
        if self.fail_rate > 0 and self.fail_kinds:
            h = hashlib.sha256(f"{self.seed}:{digest}:{seen}".encode()).digest()
            draw = int.from_bytes(h[:8], "big") / 2**64
            if draw < self.fail_rate:
                return index, self.fail_kinds[int.from_bytes(h[8:12], "big") % len(self.fail_kinds)]
        return index, None

    def _record(self, index: int, **fields: Any) -> None:
        with self._lock:
            record = self._calls[index]
            for k, v in fields.items():
                setattr(record, k, v)

    def _next_turn(self, body: dict[str, Any]) -> Mapping[str, Any]:
        if callable(self.chat_script):
            return self.chat_script(body)
        with self._lock:
            return self.chat_script.pop(0) if self.chat_script else {"text": "done."}

    def _wait(self, seconds: float) -> None:
        if seconds > 0:
            self._stop.wait(seconds)


class _NoLock:
    def __enter__(self) -> None:
        return None

    def __exit__(self, *exc: object) -> None:
        return None


RERANK_SCHEMA = "rank_candidates"  # knowtology_cli.retrieval.rerank.RERANK_SCHEMA_NAME
ANSWER_SCHEMA = "final_answer"  # knowtology_cli.agent.ANSWER_SCHEMA_NAME


def answer_reply(turn: Mapping[str, Any]) -> dict[str, Any]:
    """A chat-script turn as ``kt ask``'s last answer: ``{"answer", "sources"}`` as given, or built
    from ``{"text": ...}`` with the ids cited in square brackets as the sources."""
    if "answer" in turn:
        return dict(turn)
    text = str(turn.get("text", ""))
    return {"answer": text, "sources": re.findall(r"\[([^\[\]\s]+)\]", text)}


_CANDIDATE = re.compile(r'<candidate n="(\d+)">(.*?)</candidate>')
_QUERY = re.compile(r"<query>(.*?)</query>")


def _structured_name(body: dict[str, Any], endpoint: str) -> str:
    """The schema (OpenAI) or forced tool (Anthropic) name of a structured call."""
    if endpoint == "openai":
        return str(((body.get("response_format") or {}).get("json_schema") or {}).get("name", ""))
    return str((body.get("tool_choice") or {}).get("name", ""))


def rerank_brain(user: str) -> dict[str, Any]:
    """Grades for an LLM-rerank call: per candidate, how many distinct query words (3+ letters) its
    summary contains, capped at 3 — deterministic, so tests can predict the new order."""
    found = _QUERY.search(user)
    words = {w for w in re.findall(r"[a-z0-9]{3,}", (found.group(1) if found else "").lower())}
    grades = []
    for number, text in _CANDIDATE.findall(user):
        present = set(re.findall(r"[a-z0-9]{3,}", text.lower())) & words
        grades.append({"n": int(number), "grade": min(3, len(present))})
    return {"grades": grades}


def _user_text(content: Any) -> str:
    if isinstance(content, str):
        return content
    if isinstance(content, list):
        return "\n".join(str(p.get("text", "")) for p in content if isinstance(p, dict))
    return ""


class _Handler(BaseHTTPRequestHandler):
    fake: FakeLLMServer
    protocol_version = "HTTP/1.0"
    server_version = "FakeLLM/1.0"

    def log_message(self, format: str, *args: Any) -> None:  # noqa: A002 - quiet by default
        pass

    def _send(self, status: int, payload: Any, headers: Mapping[str, str] | None = None) -> None:
        data = json.dumps(payload).encode()
        try:
            self.send_response(status)
            self.send_header("content-type", "application/json")
            self.send_header("content-length", str(len(data)))
            for k, v in (headers or {}).items():
                self.send_header(k, v)
            self.end_headers()
            self.wfile.write(data)
        except (BrokenPipeError, ConnectionResetError):  # the client gave up (timeout)
            pass

    def do_GET(self) -> None:  # noqa: N802
        fake = self.fake
        published = fake.context_window if fake.publish_limits else None
        if self.path == "/_calls":
            self._send(200, [{k: v for k, v in asdict(c).items() if k != "body"} for c in self.fake.calls])
        elif self.path in ("/", "/health"):
            self._send(200, {"ok": True})
        elif self.path == "/props" and published:
            self._send(200, {"default_generation_settings": {"n_ctx": published}, "total_slots": 1})
        elif self.path.rstrip("/") == "/v1/models":
            row: dict[str, Any] = {"id": "fake", "object": "model", "created": 0, "owned_by": "fake"}
            if published:
                row["max_model_len"] = published
            self._send(200, {"object": "list", "data": [row]})
        else:
            self._send(404, {"error": {"message": "not found", "type": "not_found"}})

    def do_POST(self) -> None:  # noqa: N802
        length = int(self.headers.get("content-length") or 0)
        raw = self.rfile.read(length)
        if self.path.rstrip("/").endswith("/chat/completions"):
            endpoint = "openai"
            key = (self.headers.get("authorization") or "").removeprefix("Bearer ").strip()
        elif self.path.rstrip("/").endswith("/messages"):
            endpoint = "anthropic"
            key = (self.headers.get("x-api-key") or self.headers.get("authorization") or "")
            key = key.removeprefix("Bearer ").strip()
        else:
            self._send(404, {"error": {"message": f"no route {self.path}", "type": "not_found"}})
            return
        try:
            body = json.loads(raw or b"{}")
        except json.JSONDecodeError:
            self._send(400, {"error": {"message": "body is not JSON", "type": "invalid_request_error"}})
            return
        fake = self.fake
        index, fault = fake._decide(raw, fake.api_key is None or key == fake.api_key)
        model = str(body.get("model", ""))
        if endpoint == "openai":
            tree = (body.get("response_format") or {}).get("type") == "json_schema"
        else:
            tree = (body.get("tool_choice") or {}).get("type") == "tool"
        user = next((_user_text(m.get("content")) for m in reversed(body.get("messages", []))
                     if m.get("role") == "user"), "")
        schema_name = _structured_name(body, endpoint) if tree else ""
        naming = schema_name == NAMES_SCHEMA
        rerank = schema_name == RERANK_SCHEMA
        answer = schema_name == ANSWER_SCHEMA
        chunks = parse_chunks(user) if tree and not naming and not rerank and not answer else []
        kind = "names" if naming else "rerank" if rerank else "answer" if answer else "tree" if tree else "chat"
        fake._record(index, endpoint=endpoint, kind=kind, model=model,
                     n_chunks=len(chunks), chunk_ids=tuple(c for c, _ in chunks), fault=fault,
                     body=body if fake.keep_bodies else None)
        prompt_tokens = max(1, len(raw) // 4)
        if fake.context_window and prompt_tokens >= fake.context_window:
            fault = "overflow"
        with fake._serial or _NoLock():
            fake._wait(fake.latency + (prompt_tokens / fake.prefill_tps if fake.prefill_tps else 0.0))
            if fault == "hang":
                fake._wait(fake.hang_seconds)
            if fault in ("auth", "rate_limit", "server_error", "overflow"):
                status = {"auth": 401, "rate_limit": 429, "server_error": 500, "overflow": 400}[fault]
                fake._record(index, status=status, fault=fault)
                self._error(endpoint, status, key, prompt_tokens=prompt_tokens)
                return
            if rerank or answer:
                reply = rerank_brain(user) if rerank else answer_reply(fake._next_turn(body))
                self._tree_reply(index, endpoint, body, reply, prompt_tokens, fault=fault)
                return
            if naming:
                reply = naming_brain(parse_categories(user), sample_lines(user))
            elif tree:
                reply = fake.brain(chunks, parse_tree(user))
            if tree and fault in ("drop_ids", "unknown_ids", "deep_paths", "junk"):
                reply = _apply_fault(reply, fault)
            if tree:
                self._tree_reply(index, endpoint, body, reply, prompt_tokens, fault=fault)
            else:
                self._chat_reply(index, endpoint, body, fake._next_turn(body), prompt_tokens, fault=fault)

    def _answered(self, index: int, prompt_tokens: int, completion: int, fault: str | None) -> None:
        """Record the usage a 200 reports, then wait out the reply's generation time (before sending it)."""
        reported = (0, 0) if fault == "no_usage" else (prompt_tokens, completion)
        self.fake._record(index, status=200, prompt_tokens=reported[0], completion_tokens=reported[1])
        if self.fake.gen_tps:
            self.fake._wait(completion / self.fake.gen_tps)

    def _error(self, endpoint: str, status: int, key: str, *, prompt_tokens: int = 0) -> None:
        code = None
        if status == 400:
            n_ctx = self.fake.context_window or max(1, prompt_tokens - 1)
            message = (f"the request exceeds the available context size: {prompt_tokens} prompt tokens, "
                       f"n_ctx={n_ctx}")
            etype, code = "invalid_request_error", "context_length_exceeded"
        elif status == 401:
            message, etype = f"Incorrect API key provided: {key}.", "authentication_error"
        elif status == 429:
            message, etype = "Rate limit reached; please retry later.", "rate_limit_error"
        else:
            message, etype = "The server had an error while processing your request.", "api_error"
        headers = {"retry-after": f"{self.fake.retry_after:g}"} if status == 429 else {}
        if endpoint == "openai":
            payload: dict[str, Any] = {"error": {"message": message, "type": etype, "param": None, "code": code}}
        else:
            payload = {"type": "error", "error": {"type": etype, "message": message}}
        self._send(status, payload, headers)

    def _tree_reply(self, n: int, endpoint: str, body: dict[str, Any], reply: dict[str, Any], prompt_tokens: int,
                    *, fault: str | None) -> None:
        text = json.dumps(reply)
        malformed = fault == "malformed"
        truncated = fault == "truncated"
        if malformed or truncated:
            text = text[: max(1, len(text) // 2)]
        completion = max(1, len(text) // 4)
        model = body.get("model", "")
        usage = fault != "no_usage"
        self._answered(n, prompt_tokens, completion, fault)
        if endpoint == "openai":
            self._send(200, {
                "id": f"chatcmpl-fake-{n}", "object": "chat.completion", "created": int(time.time()),
                "model": model,
                "choices": [{"index": 0, "finish_reason": "length" if truncated else "stop", "logprobs": None,
                             "message": {"role": "assistant", "content": text, "refusal": None}}],
                **({"usage": {"prompt_tokens": prompt_tokens, "completion_tokens": completion,
                              "total_tokens": prompt_tokens + completion}} if usage else {}),
            })
            return
        name = (body.get("tool_choice") or {}).get("name", "record_tree")
        if malformed:
            content: list[dict[str, Any]] = [{"type": "text", "text": text}]
        else:
            content = [{"type": "tool_use", "id": f"toolu_fake_{n}", "name": name, "input": {} if truncated else reply}]
        stop = "end_turn" if malformed else "max_tokens" if truncated else "tool_use"
        self._send(200, {
            "id": f"msg_fake_{n}", "type": "message", "role": "assistant", "model": model,
            "content": content, "stop_reason": stop, "stop_sequence": None,
            "usage": {"input_tokens": prompt_tokens if usage else 0, "output_tokens": completion if usage else 0},
        })

    def _chat_reply(self, n: int, endpoint: str, body: dict[str, Any], turn: Mapping[str, Any], prompt_tokens: int,
                    *, fault: str | None = None) -> None:
        text = str(turn.get("text", ""))
        calls = list(turn.get("tool_calls", []))
        completion = max(1, len(text) // 4 + 10 * len(calls))
        self._answered(n, prompt_tokens, completion, fault)
        model = body.get("model", "")
        if endpoint == "openai":
            message: dict[str, Any] = {"role": "assistant", "content": text or None, "refusal": None}
            if calls:
                message["tool_calls"] = [
                    {"id": c.get("id", f"call_{n}_{i}"), "type": "function",
                     "function": {"name": c["name"], "arguments": json.dumps(c.get("arguments", {}))}}
                    for i, c in enumerate(calls)
                ]
            self._send(200, {
                "id": f"chatcmpl-fake-{n}", "object": "chat.completion", "created": int(time.time()),
                "model": model,
                "choices": [{"index": 0, "message": message, "logprobs": None,
                             "finish_reason": "tool_calls" if calls else "stop"}],
                **({"usage": {"prompt_tokens": prompt_tokens, "completion_tokens": completion,
                              "total_tokens": prompt_tokens + completion}} if fault != "no_usage" else {}),
            })
            return
        content: list[dict[str, Any]] = [{"type": "text", "text": text}] if text else []
        content += [{"type": "tool_use", "id": c.get("id", f"toolu_{n}_{i}"), "name": c["name"],
                     "input": c.get("arguments", {})} for i, c in enumerate(calls)]
        self._send(200, {
            "id": f"msg_fake_{n}", "type": "message", "role": "assistant", "model": model,
            "content": content, "stop_reason": "tool_use" if calls else "end_turn", "stop_sequence": None,
            "usage": {"input_tokens": prompt_tokens if fault != "no_usage" else 0,
                      "output_tokens": completion if fault != "no_usage" else 0},
        })


# ----------------------------------------------------------------------------- standalone
def main(argv: Sequence[str] | None = None) -> int:
    """Run the server until SIGINT/SIGTERM; print the root URL first."""
    ap = argparse.ArgumentParser(prog="python -m knowtology_cli.testing.fake_llm", description=__doc__.split("\n")[0])
    ap.add_argument("--host", default="127.0.0.1")
    ap.add_argument("--port", type=int, default=0, help="0 picks a free port")
    ap.add_argument("--latency", type=float, default=0.0, help="seconds before every answer")
    ap.add_argument("--fail-rate", type=float, default=0.0, help="probability of a fault per request")
    ap.add_argument("--fail-kinds", default=",".join(RATE_FAULTS), help="comma-separated fault names")
    ap.add_argument("--faults", default="", help="per-call plan, e.g. '429,,malformed' (empty = none)")
    ap.add_argument("--seed", type=int, default=0)
    ap.add_argument("--retry-after", type=float, default=1.0)
    ap.add_argument("--hang-seconds", type=float, default=30.0)
    ap.add_argument("--api-key", default=None, help="require this key (else any key is accepted)")
    ap.add_argument("--context-window", type=int, default=None, help="refuse prompts of this many tokens or more")
    ap.add_argument("--publish-limits", action="store_true", help="publish --context-window at /props, /v1/models")
    ap.add_argument("--prefill-tps", type=float, default=0.0, help="prompt tokens per second (0: instant)")
    ap.add_argument("--gen-tps", type=float, default=0.0, help="reply tokens per second (0: instant)")
    ap.add_argument("--serial", action="store_true", help="answer one request at a time")
    args = ap.parse_args(argv)
    plan = [f or None for f in args.faults.split(",")] if args.faults else []
    server = FakeLLMServer(
        host=args.host, port=args.port, faults=plan, fail_rate=args.fail_rate,
        fail_kinds=[k for k in args.fail_kinds.split(",") if k], seed=args.seed, latency=args.latency,
        retry_after=args.retry_after, hang_seconds=args.hang_seconds, api_key=args.api_key,
        keep_bodies=False, context_window=args.context_window, publish_limits=args.publish_limits,
        prefill_tps=args.prefill_tps, gen_tps=args.gen_tps, serial=args.serial,
    ).start()
    print(server.url, flush=True)
    print(f"OPENAI_BASE_URL={server.openai_base_url}\nANTHROPIC_BASE_URL={server.anthropic_base_url}",
          file=sys.stderr, flush=True)
    done = threading.Event()
    for sig in (signal.SIGINT, signal.SIGTERM):
        signal.signal(sig, lambda *_: done.set())
    done.wait()
    server.stop()
    return 0


if __name__ == "__main__":
    sys.exit(main())
