"""MCP: the four tools as an MCP server (``kt mcp`` runs it on stdio; extra ``[mcp]``)."""

from __future__ import annotations

import inspect
import secrets
import threading
from typing import TYPE_CHECKING, Annotated, Any

import anyio
from pydantic import Field

from knowtology_cli import __version__
from knowtology_cli.errors import KnowtologyError
from knowtology_cli.tool_specs import TOOLS, TOOLS_BY_NAME, ToolDef, error_message, validate_args

from . import require

if TYPE_CHECKING:
    from knowtology_cli.tools import KnowledgeMapTools

SERVER_NAME = "knowtology"
INSTRUCTIONS = (
    "A knowledge map over a document collection. Explore it like a codebase: km_browse_tree "
    "('root', then a category path) shows what is where; km_search_chunks (meaning) and "
    "km_search_keyword (exact terms) find chunks and return snippets only; km_read_chunks returns "
    "the full text to answer from and cite by chunk id. Chunks already read in this session come "
    "back as '(already read — skip)'."
)


class ConnectionSessions:
    """Session names per MCP connection: a generated ``mcp-XXXXXXXX`` each, or one fixed name."""

    STATE_KEY = "knowtology_session"

    def __init__(self, fixed: str | None = None) -> None:
        self.fixed = fixed
        self._lock = threading.Lock()
        self._fallback: str | None = None

    def name_for(self, request_session: Any) -> str:
        """The session name for the connection a request arrived on.

        The SDK builds a ``ServerSession`` per request around the connection-scoped
        ``Connection``, whose ``state`` dict lives as long as the connection; the name is kept
        there. A transport without one (stdio is one connection per process) shares one name.
        """
        if self.fixed:
            return self.fixed
        connection = getattr(request_session, "_connection", None)
        state = getattr(connection, "state", None)
        with self._lock:
            if isinstance(state, dict):
                return state.setdefault(self.STATE_KEY, _new_name())
            if self._fallback is None:
                self._fallback = _new_name()
            return self._fallback


def _new_name() -> str:
    return f"mcp-{secrets.token_hex(4)}"


def create_mcp_server(tools: KnowledgeMapTools, *, session: str | None = None, name: str = SERVER_NAME) -> Any:
    """An ``MCPServer`` exposing ``km_browse_tree``, ``km_search_chunks``, ``km_search_keyword``, ``km_read_chunks``.

    Every tool answers with the compact agent text. Read history is kept per MCP connection (each
    connection gets its own generated session) unless a named session is configured, in which case
    all connections share it. Over stdio a process serves exactly one client, so ``kt mcp`` keeps one
    session for the life of the process: that holds for the handshake-era session
    (``stdio_client`` + ``ClientSession``) and for the high-level ``mcp.Client``, which negotiates the
    2026 per-request protocol where every request arrives on a fresh ``Connection`` and connection
    state cannot carry a session. Library errors come back as MCP error results (``is_error``), so a
    bad path or id never ends the server; their text is the SDK's ``Error executing tool NAME:`` and
    then the message and hint once. Arguments are checked against the tool's model before the SDK's
    own check, so a refused argument reads as one line like every other error, and what it accepts
    (one chunk id as a string) reaches the SDK's check in the form the model gave it.

    Args:
        tools: the shared tool layer.
        session: a named read-history session shared by every connection; None gives each
            connection its own.
        name: the server name announced to clients.
    """
    require("mcp.server.mcpserver", "mcp", "the MCP server")
    from mcp.types import ToolAnnotations  # deferred: optional extra

    server = _server_class()(name=name, instructions=INSTRUCTIONS, version=_version(), log_level="WARNING")
    sessions = ConnectionSessions(session)
    for spec in TOOLS:
        server.add_tool(
            _tool_function(tools, spec, sessions),
            name=spec.name,
            title=spec.title,
            description=spec.description,
            annotations=ToolAnnotations(title=spec.title, read_only_hint=spec.route != "read",
                                        open_world_hint=False),
            structured_output=False,
        )
    return server


def run_stdio(tools: KnowledgeMapTools, *, session: str | None = None) -> None:
    """Serve the tools over stdio until the client disconnects.

    The process's one client keeps one read history: ``session`` when named, else a generated
    ``mcp-XXXXXXXX`` (in memory when the tools hold no session store).
    """
    create_mcp_server(tools, session=session or _new_name()).run("stdio")


def _server_class() -> type:
    """``MCPServer`` checking a call's arguments against the tool's model first.

    The SDK validates arguments with a model it derives from the tool function and answers a refusal
    with pydantic's multi-line report (and a documentation URL); this checks them first with
    :func:`~knowtology_cli.tool_specs.validate_args` and answers as every other tool error does.
    Keys the tool does not take are left to the SDK, which ignores them, as before.
    """
    from mcp.server.mcpserver import MCPServer  # deferred: optional extra
    from mcp.server.mcpserver.exceptions import ToolError  # deferred: optional extra

    class KnowtologyMCPServer(MCPServer):
        async def call_tool(self, name: str, arguments: dict[str, Any], context: Any = None) -> Any:
            spec = TOOLS_BY_NAME.get(name)
            if spec is not None:
                given = {k: v for k, v in arguments.items() if k in spec.args.model_fields and v is not None}
                try:
                    checked = validate_args(spec, given)
                except KnowtologyError as exc:
                    raise ToolError(f"Error executing tool {name}: {error_message(exc)}") from exc  # as the SDK words it
                # the values as the model reads them (one id as a string becomes a list), so the SDK's
                # own stricter check of the same arguments accepts what this one did
                arguments = {**arguments, **{k: getattr(checked, k) for k in given}}
            return await super().call_tool(name, arguments, context)

    return KnowtologyMCPServer


def _tool_function(tools: KnowledgeMapTools, spec: ToolDef, sessions: ConnectionSessions) -> Any:
    """An async function whose signature is the tool's argument model (MCP derives its schema)."""
    from mcp.server.mcpserver import Context  # deferred: optional extra
    from mcp.server.mcpserver.exceptions import ToolError  # deferred: optional extra

    async def tool(ctx: Context, **arguments: Any) -> str:
        session = sessions.name_for(ctx.session)
        try:
            return await anyio.to_thread.run_sync(
                lambda: tools.call(spec.name, {k: v for k, v in arguments.items() if v is not None}, session=session)
            )
        except KnowtologyError as exc:
            raise ToolError(error_message(exc)) from exc  # the SDK puts "Error executing tool NAME: " first

    params = [inspect.Parameter("ctx", inspect.Parameter.KEYWORD_ONLY, annotation=Context)]
    annotations: dict[str, Any] = {"ctx": Context, "return": str}
    for field_name, field in spec.args.model_fields.items():
        annotation = Annotated[(field.annotation, *field.metadata, Field(description=field.description))]  # type: ignore[name-defined]  # a type built at run time
        default = inspect.Parameter.empty if field.is_required() else field.default
        params.append(inspect.Parameter(field_name, inspect.Parameter.KEYWORD_ONLY, default=default,
                                        annotation=annotation))
        annotations[field_name] = annotation
    tool.__signature__ = inspect.Signature(params, return_annotation=str)  # type: ignore[attr-defined]
    tool.__annotations__ = annotations
    tool.__name__ = spec.name
    tool.__doc__ = spec.description
    return tool


def _version() -> str:
    return __version__
