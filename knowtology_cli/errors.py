"""The one error tree (drawn in :class:`KnowtologyError`); every surface translates it once."""

from __future__ import annotations

from typing import Any


class KnowtologyError(Exception):
    """Base of every error this package raises on purpose.

        KnowtologyError                 code "error"
        ├── ConfigError                 code "config"        bad flag, env, config.toml or name
        │   └── ArgumentError           code "invalid_argument"  bad tool argument or request field
        ├── NotFoundError               code "not_found"     collection, path, chunk or session missing
        ├── InputError                  code "input"         bad ingest input (file:line: problem)
        ├── ConflictError               code "conflict"      a source name or chunk id another source owns
        ├── StoreError                  code "store"         LanceDB / SQLite / remote store failure
        │   └── LockedError             code "locked"        another process holds the store lock
        ├── EmbeddingError              code "embedding"     embedder failed or mismatched
        ├── LLMError                    code "llm"           provider call failed after retries
        │   └── LLMOutputError          code "llm_output"    reply failed validation
        └── BuildError                  code "build"         build ended with unmapped chunks

    The CLI prints ``Error: <message>`` plus the hint and exits 1; HTTP maps codes to status codes;
    MCP returns an error result. Messages never contain secrets.
    """

    code = "error"
    http_status = 500

    def __init__(self, message: str, *, hint: str | None = None) -> None:
        super().__init__(message)
        self.message = message
        self.hint = hint

    def __str__(self) -> str:
        return self.message

    def to_dict(self) -> dict[str, Any]:
        """A JSON-ready description: ``{"code", "message", "hint"}``."""
        return {"code": self.code, "message": self.message, "hint": self.hint}


class ConfigError(KnowtologyError):
    """A flag, env variable, config file value or name is invalid."""

    code = "config"
    http_status = 400


class ArgumentError(ConfigError):
    """A tool argument or request field is missing, empty or out of range (``top_k=-1``, no chunk ids).

    A ``ConfigError`` too (``except ConfigError`` still catches it), with its own code so an HTTP or
    agent client can tell a bad request from a bad server setting.
    """

    code = "invalid_argument"


class NotFoundError(KnowtologyError):
    """A collection, tree path, chunk id or session does not exist."""

    code = "not_found"
    http_status = 404


class InputError(KnowtologyError):
    """Ingest input is malformed; the message reads ``file:line: problem``."""

    code = "input"
    http_status = 400

    def __init__(self, message: str, *, hint: str | None = None, problems: list[str] | None = None):
        super().__init__(message, hint=hint)
        self.problems = problems or [message]

    def to_dict(self) -> dict[str, Any]:
        """``{"code", "message", "hint", "problems"}``: every problem, one line each."""
        return {**super().to_dict(), "problems": self.problems}


class ConflictError(KnowtologyError):
    """Input would take over what another source owns (its name or its chunk ids); nothing was written."""

    code = "conflict"
    http_status = 409


class StoreError(KnowtologyError):
    """A storage backend failed."""

    code = "store"


class LockedError(StoreError):
    """Another process holds the store's write lock past the timeout."""

    code = "locked"
    http_status = 409


class EmbeddingError(KnowtologyError):
    """The embedder failed, is unavailable, or does not match the collection."""

    code = "embedding"


class LLMError(KnowtologyError):
    """An LLM provider call failed after its retries."""

    code = "llm"
    http_status = 502
    #: what the failed call spent (an ``llm.base.CallUsage``, set by the client; None before any attempt)
    usage: Any = None


class LLMOutputError(LLMError):
    """An LLM reply did not validate against the wire contract."""

    code = "llm_output"


class BuildError(KnowtologyError):
    """A tree build ended with chunks left unmapped."""

    code = "build"
