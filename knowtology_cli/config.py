"""Configuration, resolved one way: flag > env (KNOWTOLOGY_*) > config.toml > default.

The only module that reads environment variables and config files; library constructors take explicit values.
"""

from __future__ import annotations

import math
import os
import re
import sys
from dataclasses import dataclass, field, replace
from pathlib import Path
from typing import Any

from .errors import ConfigError

STORE_DIRNAME = ".knowtology"
NAME_RE = re.compile(r"^[A-Za-z0-9_.-]{1,64}$")
DEFAULT_COLLECTION = "default"
DEFAULT_SESSION = "default"


def validate_name(kind: str, name: str) -> str:
    """Return ``name`` if it is a plain identifier, else raise ``ConfigError``.

    Collection and session names become file and table names, so ``..``, ``/`` and the like are
    refused outright, never interpreted as paths.
    """
    if not isinstance(name, str) or not NAME_RE.match(name) or name in {".", ".."}:
        raise ConfigError(
            f"invalid {kind} name {name!r}",
            hint=f"a {kind} name is 1-64 characters of letters, digits, '_', '.', '-'",
        )
    return name


def parse_timeout(value: Any, source: str = "--timeout") -> float | None:
    """``value`` as a positive number of seconds (None stays None = the client's default).

    Raises:
        ConfigError: not a number, not finite, or not positive; the message names ``value`` and ``source``.
    """
    if value is None:
        return None
    try:
        seconds = float(value.strip() if isinstance(value, str) else value)
    except (TypeError, ValueError):
        seconds = math.nan
    if isinstance(value, bool) or not math.isfinite(seconds) or seconds <= 0:
        raise ConfigError(f"invalid LLM timeout {value!r} ({source}): expected a positive number of seconds",
                          hint="e.g. --timeout 120 or KNOWTOLOGY_LLM_TIMEOUT=120")
    return seconds


def find_store_dir(start: Path | None = None) -> Path:
    """The nearest ``.knowtology/`` walking up from ``start``, else ``start/.knowtology``."""
    start = (start or Path.cwd()).resolve()
    for directory in (start, *start.parents):
        candidate = directory / STORE_DIRNAME
        if candidate.is_dir():
            return candidate
    return start / STORE_DIRNAME


def _read_toml(path: Path) -> dict[str, Any]:
    if not path.is_file():
        return {}
    if sys.version_info >= (3, 11):
        import tomllib  # deferred: keeps kt browse fast
    else:  # pragma: no cover - 3.10 only
        import tomli as tomllib  # deferred: keeps kt browse fast
    try:
        return tomllib.loads(path.read_text(encoding="utf-8"))
    except (OSError, ValueError) as exc:
        raise ConfigError(f"{path}: cannot read config: {exc}", hint="fix or remove the file") from exc


@dataclass(frozen=True)
class Settings:
    """Everything a command needs to open a knowledge base.

    Secrets (``openai_api_key``, ``anthropic_api_key``, ``api_token``) are carried for the
    clients only; ``__repr__`` hides them.
    """

    store_dir: Path
    collection: str = DEFAULT_COLLECTION
    session: str = DEFAULT_SESSION
    embedder: str | None = None
    llm: str | None = None
    openai_api_key: str | None = field(default=None, repr=False)
    openai_base_url: str | None = None
    anthropic_api_key: str | None = field(default=None, repr=False)
    anthropic_base_url: str | None = None
    api_token: str | None = field(default=None, repr=False)
    tree_dsn: str | None = None
    vector_uri: str | None = None
    lock_timeout: float = 60.0
    concurrency: int | None = None  # LLM calls in flight; None: 1 for a local server, 4 otherwise
    llm_timeout: float | None = None  # seconds per LLM call attempt; None = the client's default
    profiles: dict[str, dict[str, Any]] = field(default_factory=dict)
    raw: dict[str, Any] = field(default_factory=dict, repr=False)
    #: a flag or KNOWTOLOGY_COLLECTION named the collection (config.toml only sets the default), so a
    #: command that otherwise covers every collection (``kt status``, ``kt session reset``) covers it alone
    collection_named: bool = False

    def with_(self, **changes: Any) -> Settings:
        """A copy with ``changes`` applied (``None`` values ignored)."""
        return replace(self, **{k: v for k, v in changes.items() if v is not None})


def load_settings(
    *,
    store: str | Path | None = None,
    collection: str | None = None,
    session: str | None = None,
    embedder: str | None = None,
    llm: str | None = None,
    env: dict[str, str] | None = None,
    cwd: Path | None = None,
) -> Settings:
    """Resolve settings from flags (arguments), env, ``<store>/config.toml`` and defaults."""
    env = dict(os.environ if env is None else env)
    store_value = store or env.get("KNOWTOLOGY_STORE")
    store_dir = Path(store_value).expanduser() if store_value else find_store_dir(cwd)
    if store_dir.exists() and not store_dir.is_dir():
        raise ConfigError(f"store path {store_dir} is not a directory", hint="pass --store DIR")
    file_cfg = _read_toml(store_dir / "config.toml")
    user_cfg_path = env.get("KNOWTOLOGY_CONFIG")
    if user_cfg_path:
        file_cfg = {**_read_toml(Path(user_cfg_path)), **file_cfg}
    general = file_cfg.get("knowtology", file_cfg)

    def pick(flag: Any, env_key: str, cfg_key: str, default: Any = None) -> Any:
        if flag is not None:
            return flag
        if env.get(env_key):
            return env[env_key]
        value = general.get(cfg_key)
        return default if value in (None, "") else value

    collection_name = validate_name(
        "collection", pick(collection, "KNOWTOLOGY_COLLECTION", "collection", DEFAULT_COLLECTION)
    )
    session_name = validate_name("session", pick(session, "KNOWTOLOGY_SESSION", "session", DEFAULT_SESSION))
    try:
        lock_timeout = float(pick(None, "KNOWTOLOGY_LOCK_TIMEOUT", "lock_timeout", 60.0))
        concurrency_value = pick(None, "KNOWTOLOGY_CONCURRENCY", "concurrency")
        concurrency = None if concurrency_value is None else int(concurrency_value)
    except (TypeError, ValueError) as exc:
        raise ConfigError(f"bad numeric setting: {exc}", hint="check KNOWTOLOGY_* variables") from exc
    llm_timeout_source = "KNOWTOLOGY_LLM_TIMEOUT" if env.get("KNOWTOLOGY_LLM_TIMEOUT") else "llm_timeout in config.toml"
    llm_timeout = parse_timeout(pick(None, "KNOWTOLOGY_LLM_TIMEOUT", "llm_timeout"), llm_timeout_source)
    providers = file_cfg.get("providers", {})
    return Settings(
        store_dir=store_dir,
        collection=collection_name,
        session=session_name,
        embedder=pick(embedder, "KNOWTOLOGY_EMBEDDER", "embedder"),
        llm=pick(llm, "KNOWTOLOGY_LLM", "llm"),
        openai_api_key=env.get("OPENAI_API_KEY") or providers.get("openai", {}).get("api_key"),
        openai_base_url=env.get("OPENAI_BASE_URL") or providers.get("openai", {}).get("base_url"),
        anthropic_api_key=env.get("ANTHROPIC_API_KEY") or providers.get("anthropic", {}).get("api_key"),
        anthropic_base_url=env.get("ANTHROPIC_BASE_URL") or providers.get("anthropic", {}).get("base_url"),
        api_token=env.get("KNOWTOLOGY_API_TOKEN") or general.get("api_token"),
        tree_dsn=pick(None, "KNOWTOLOGY_TREE_DSN", "tree_dsn"),
        vector_uri=pick(None, "KNOWTOLOGY_VECTOR_URI", "vector_uri"),
        lock_timeout=lock_timeout,
        concurrency=concurrency,
        llm_timeout=llm_timeout,
        profiles=file_cfg.get("profiles", {}),
        raw=file_cfg,
        collection_named=collection is not None or bool(env.get("KNOWTOLOGY_COLLECTION")),
    )
