"""Ask an OpenAI-compatible server what context window it runs the model with."""

from __future__ import annotations

import json
import re
from collections.abc import Callable
from typing import Any
from urllib.parse import urlsplit, urlunsplit

from .base import LLMClient, ServerLimits

#: Seconds per discovery request: the server is local or at least already configured; a slow
#: answer is not worth delaying the build for.
DISCOVERY_TIMEOUT = 3.0

Fetch = Callable[[str, str, "dict[str, Any] | None"], "Any | None"]
_NUM_CTX = re.compile(r"(?m)^\s*num_ctx\s+(\d+)\s*$")


def _root(base_url: str) -> str:
    """``http://host:port/v1`` → ``http://host:port`` (the server root the native routes hang off)."""
    parts = urlsplit(base_url.rstrip("/"))
    path = re.sub(r"/v1$", "", parts.path.rstrip("/"))
    return urlunsplit((parts.scheme, parts.netloc, path, "", ""))


def _positive(value: Any) -> int | None:
    return value if isinstance(value, int) and not isinstance(value, bool) and value > 0 else None


def http_fetch(api_key: str | None, timeout: float = DISCOVERY_TIMEOUT) -> Fetch:
    """A ``fetch(method, url, json_body) -> decoded JSON or None`` over httpx (no retries, no raise)."""

    def fetch(method: str, url: str, body: dict[str, Any] | None) -> Any | None:
        import httpx  # deferred: heavy

        headers = {"authorization": f"Bearer {api_key}"} if api_key else {}
        try:
            resp = httpx.request(method, url, json=body, headers=headers, timeout=timeout)
        except (httpx.HTTPError, OSError, ValueError):
            return None
        if resp.status_code != 200:
            return None
        try:
            return resp.json()
        except (json.JSONDecodeError, ValueError):
            return None

    return fetch


def _model_entry(listing: Any, model: str) -> dict[str, Any] | None:
    rows = listing.get("data") if isinstance(listing, dict) else None
    if not isinstance(rows, list):
        return None
    dicts = [r for r in rows if isinstance(r, dict)]
    for row in dicts:
        if row.get("id") == model:
            return row
    return dicts[0] if len(dicts) == 1 else None  # a one-model server answers to any name


def discover(base_url: str, model: str, fetch: Fetch) -> ServerLimits | None:
    """The context window the server at ``base_url`` states for ``model``, or None (see the module).

    Local and self-hosted servers publish it in different places; each is tried once, with a short
    timeout, and the first answer wins:

    * llama.cpp ``llama-server``: ``GET /props`` → ``default_generation_settings.n_ctx`` (the context
      the server was started with; ``/v1/models``' ``meta.n_ctx_train`` is only the training length);
    * vLLM: ``GET /v1/models`` → ``data[].max_model_len``; LM Studio ``GET /api/v0/models`` →
      ``loaded_context_length``; routers that list ``context_length`` / ``context_window``;
    * Ollama: ``GET /api/ps`` → ``context_length`` of the loaded model, else ``POST /api/show`` →
      ``num_ctx`` in its ``parameters`` (Ollama's OpenAI endpoint cuts longer prompts silently, so
      without either the model's trained length is *not* used: the profile stands).

    Nothing here raises: a server that says nothing (or is down) gives None, and the caller keeps the
    profile's figures and says so.
    """
    root = _root(base_url)
    props = fetch("GET", f"{root}/props", None)
    if isinstance(props, dict):
        settings = props.get("default_generation_settings")
        n_ctx = _positive(settings.get("n_ctx")) if isinstance(settings, dict) else None
        n_ctx = n_ctx or _positive(props.get("n_ctx"))
        if n_ctx:
            return ServerLimits(context_window=n_ctx, source="llama.cpp /props")
    entry = _model_entry(fetch("GET", f"{base_url.rstrip('/')}/models", None), model)
    if entry is not None:
        for key, label in (("max_model_len", "vLLM /v1/models max_model_len"),
                           ("loaded_context_length", "/v1/models loaded_context_length"),
                           ("context_length", "/v1/models context_length"),
                           ("context_window", "/v1/models context_window")):
            value = _positive(entry.get(key))
            if value:
                return ServerLimits(context_window=value, source=label)
    studio = _model_entry(fetch("GET", f"{root}/api/v0/models", None), model)
    if studio is not None and _positive(studio.get("loaded_context_length")):
        return ServerLimits(context_window=studio["loaded_context_length"],
                            source="LM Studio /api/v0/models loaded_context_length")
    running = fetch("GET", f"{root}/api/ps", None)
    if isinstance(running, dict) and isinstance(running.get("models"), list):
        for row in running["models"]:
            if isinstance(row, dict) and model in (row.get("name"), row.get("model")):
                value = _positive(row.get("context_length"))
                if value:
                    return ServerLimits(context_window=value, source="Ollama /api/ps context_length")
    show = fetch("POST", f"{root}/api/show", {"model": model})
    if isinstance(show, dict) and isinstance(show.get("parameters"), str):
        m = _NUM_CTX.search(show["parameters"])
        if m and int(m.group(1)) > 0:
            return ServerLimits(context_window=int(m.group(1)), source="Ollama /api/show num_ctx")
    return None


def fit_limits(client: LLMClient) -> str:
    """Adopt the server's published context window unless the user set one; say which limits are used.

    Order: ``--context-window``/``--max-output`` and ``config.toml`` profile overrides (the user's
    word) > what the server publishes > the built-in profile > the conservative default. Returns
    one line for the build's notes, e.g. ``limits: context 8,192 tokens (llama.cpp /props), output
    2,048 (default profile)``.
    """
    profile = client.profile
    source = client.limits_source or (
        f"profile {profile.name}" if profile.known else "default profile, model unknown")
    ctx_from, out_from = source, client.output_source or source
    if not client.limits_pinned:
        found = client.discover_limits()
        if found is not None and found.context_window:
            changes: dict[str, int] = {"context_window": found.context_window}
            if profile.max_output_tokens > found.context_window // 2:
                changes["max_output_tokens"] = max(256, found.context_window // 2)
                out_from = f"half the context {found.source} states"
            client.profile = profile.with_overrides(**changes)
            ctx_from = found.source
            client.limits_source = found.source
        elif not profile.known:
            ctx_from = out_from = "default profile: the server did not say; set --context-window/--max-output"
    p = client.profile
    return (f"limits: context {p.context_window:,} tokens ({ctx_from}), "
            f"output {p.max_output_tokens:,} ({out_from})")


def adopt_context_limit(client: LLMClient, limit: int | None) -> bool:
    """Lower the client's context window to ``limit`` (from an overflow error); True if it changed."""
    if not limit or limit >= client.profile.context_window:
        return False
    changes: dict[str, int] = {"context_window": limit}
    if client.profile.max_output_tokens > limit // 2:
        changes["max_output_tokens"] = max(256, limit // 2)
    client.profile = client.profile.with_overrides(**changes)
    client.limits_source = "the server's overflow error"
    return True
