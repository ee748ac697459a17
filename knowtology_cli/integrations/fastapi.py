"""FastAPI: a router with ``POST /km/browse``, ``/km/search``, ``/km/keyword``, ``/km/read`` (``[api]``)."""

from __future__ import annotations

import inspect
import ipaddress
import secrets
from collections.abc import Callable
from typing import TYPE_CHECKING, Any

from pydantic import BaseModel, ConfigDict

from knowtology_cli import __version__
from knowtology_cli.config import validate_name
from knowtology_cli.errors import ConfigError, KnowtologyError
from knowtology_cli.export_page import CONTENT_SECURITY_POLICY
from knowtology_cli.models import BrowseResult, ReadResult, SearchResult
from knowtology_cli.tool_specs import TOOLS, ToolDef, arguments_error, tool_def, tool_error

from . import require

if TYPE_CHECKING:
    from knowtology_cli.tools import KnowledgeMapTools

SESSION_HEADER = "X-Knowtology-Session"


class _Response(BaseModel):
    model_config = ConfigDict(frozen=True)

    tool: str
    text: str


class BrowseResponse(_Response):
    """``/km/browse``: the map text and the typed result."""

    result: BrowseResult


class SearchResponse(_Response):
    """``/km/search`` and ``/km/keyword``: one line per hit, and the hits."""

    result: SearchResult


class ReadResponse(_Response):
    """``/km/read``: full text (or ``(already read — skip)``) and the chunks read."""

    result: ReadResult


class ErrorBody(BaseModel):
    """What went wrong: a stable code, a message and a hint."""

    code: str
    message: str
    hint: str | None = None


class ErrorResponse(BaseModel):
    """Every error response: ``{"detail": {"code", "message", "hint"}}``."""

    detail: ErrorBody


RESPONSES: dict[str, type[_Response]] = {
    "browse": BrowseResponse, "search": SearchResponse, "keyword": SearchResponse, "read": ReadResponse,
}


def is_loopback(host: str) -> bool:
    """True for ``localhost`` and loopback addresses (127.0.0.0/8, ::1)."""
    if host.strip().lower() == "localhost":
        return True
    try:
        return ipaddress.ip_address(host.strip("[]")).is_loopback
    except ValueError:
        return False


def check_bind(host: str, token: str | None) -> None:
    """Refuse a non-loopback bind without a bearer token (``ConfigError``)."""
    if not is_loopback(host) and not token:
        raise ConfigError(
            f"refusing to serve on {host} without an API token",
            hint="set KNOWTOLOGY_API_TOKEN (clients send Authorization: Bearer <token>), or bind 127.0.0.1",
        )


def create_router(tools: KnowledgeMapTools, *, token: str | None = None, prefix: str = "/km") -> Any:
    """An ``APIRouter`` with the four tool routes.

    Request bodies are the tools' argument models, responses carry the compact agent ``text`` plus the
    typed ``result`` record. The read-history session comes from the ``X-Knowtology-Session`` header.
    ``GET /`` serves the tree as the HTML page of ``kt export --format html``. With a token every
    route requires ``Authorization: Bearer <token>``; :func:`serve` refuses to bind
    anything but loopback without one. Library errors map to their HTTP status with
    ``{"detail": {"code", "message", "hint"}}``, the hint naming the tools rather than ``kt``
    commands; so does a body that fails the argument model (400, code ``invalid_argument``, as the
    tools report bad arguments), never FastAPI's 422 list.

    Args:
        tools: the shared tool layer.
        token: when set, every route requires ``Authorization: Bearer <token>``.
        prefix: the routes' prefix (default ``/km``).
    """
    require("fastapi", "api", "the FastAPI router")
    from fastapi import APIRouter, Depends  # deferred: optional extra

    dependencies = [Depends(_bearer_check(token))] if token else []
    errors: dict[int | str, dict[str, Any]] = {
        status: {"model": ErrorResponse, "description": text}
        for status, text in ((400, "Bad arguments: a missing, empty or out-of-range field, or a body that is "
                                   "not a JSON object of the arguments (code invalid_argument)"),
                             (404, "Unknown category, chunk or collection"),
                             ("default", "Any other error (store, lock), in the same shape"))
    }
    if token:
        errors[401] = {"model": ErrorResponse, "description": "Missing or wrong bearer token"}
    router = APIRouter(prefix=prefix, tags=["knowledge map"], dependencies=dependencies, responses=errors,
                       route_class=_tool_route_class())
    for spec in TOOLS:
        response_model = RESPONSES[spec.route]
        router.add_api_route(
            f"/{spec.route}",
            _endpoint(tools, spec, response_model),
            methods=["POST"],
            response_model=response_model,
            summary=spec.title,
            description=spec.description,
            name=spec.name,
            operation_id=spec.name,
        )
    return router


def create_app(tools: KnowledgeMapTools, *, token: str | None = None) -> Any:
    """A FastAPI app serving :func:`create_router`, the map page at ``/`` and the schema at ``/openapi.json``.

    No ``/docs`` or ``/redoc``: FastAPI's pages load Swagger UI and ReDoc from a CDN, so they fail
    offline and make the browser fetch from the network, while everything else here is local.
    """
    require("fastapi", "api", "the FastAPI app")
    from fastapi import FastAPI  # deferred: optional extra

    app = FastAPI(
        title="Knowtology",
        version=__version__,
        description="Browse, search, grep and read a knowledge map: the four agent tools over HTTP. "
        f"Send `{SESSION_HEADER}` to keep a read history per client.",
        docs_url=None,  # Swagger UI and ReDoc come from a CDN: no page that needs the network
        redoc_url=None,
    )
    app.include_router(create_router(tools, token=token))
    _add_map_page(app, tools, token)
    return app


def _add_map_page(app: Any, tools: KnowledgeMapTools, token: str | None) -> None:
    """``GET /``: the collection's tree as the self-contained HTML page of ``kt export --format html``."""
    from fastapi import Depends, HTTPException  # deferred: optional extra
    from fastapi.responses import HTMLResponse  # deferred: optional extra

    def map_page() -> HTMLResponse:
        try:
            page = tools.kb.export_tree(fmt="html", collection=tools.collection).text
        except KnowtologyError as exc:
            raise HTTPException(status_code=exc.http_status, detail=exc.to_dict()) from exc
        return HTMLResponse(page, headers={"Content-Security-Policy": CONTENT_SECURITY_POLICY})

    app.add_api_route("/", map_page, methods=["GET"], response_class=HTMLResponse, include_in_schema=False,
                      dependencies=[Depends(_bearer_check(token))] if token else [])


def serve(
    tools: KnowledgeMapTools,
    *,
    host: str = "127.0.0.1",
    port: int = 8765,
    token: str | None = None,
    announce: Callable[[str], None] = lambda _text: None,
) -> None:
    """Run the app with uvicorn until interrupted; refuses a public bind without ``token``."""
    check_bind(host, token)
    require("uvicorn", "api", "kt serve")
    import uvicorn  # deferred: optional extra

    app = create_app(tools, token=token)
    announce(f"serving the knowledge map of collection {tools.collection!r} on http://{host}:{port}/km "
             f"(map: /, schema: /openapi.json{', bearer token required' if token else ''})")
    uvicorn.run(app, host=host, port=port, log_level="warning")


def _bearer_check(token: str) -> Callable[..., None]:
    from fastapi import Depends, HTTPException  # deferred: optional extra
    from fastapi.security import HTTPAuthorizationCredentials, HTTPBearer  # deferred: optional extra

    scheme = HTTPBearer(auto_error=False, description="KNOWTOLOGY_API_TOKEN")
    expected = token.encode()

    def check(credentials: HTTPAuthorizationCredentials | None = Depends(scheme)) -> None:
        given = credentials.credentials.encode() if credentials and credentials.scheme.lower() == "bearer" else b""
        if not secrets.compare_digest(given, expected):
            raise HTTPException(
                status_code=401,
                detail={"code": "unauthorized", "message": "missing or wrong bearer token",
                        "hint": "send Authorization: Bearer <KNOWTOLOGY_API_TOKEN>"},
                headers={"WWW-Authenticate": "Bearer"},
            )

    return check


def _tool_route_class() -> type:
    """The tool routes' class: a body failing the argument model is answered as a bad argument.

    FastAPI validates the body before the endpoint runs and answers 422 with pydantic's error list;
    these routes catch that validation error and answer 400 with ``{"detail": {"code", "message",
    "hint"}}`` from :func:`~knowtology_cli.tool_specs.arguments_error`, as the tools word bad
    arguments. It lives on the routes (FastAPI's documented custom ``APIRoute``), so an app that
    mounts only the router answers the same.
    """
    from fastapi.exceptions import RequestValidationError  # deferred: optional extra
    from fastapi.responses import JSONResponse  # deferred: optional extra
    from fastapi.routing import APIRoute  # deferred: optional extra

    class ToolRoute(APIRoute):
        def get_route_handler(self) -> Callable[..., Any]:
            handler = super().get_route_handler()
            spec = tool_def(self.name)

            async def route_handler(request: Any) -> Any:
                try:
                    return await handler(request)
                except RequestValidationError as exc:
                    error = arguments_error(spec, exc.errors(), skip=1)  # each loc starts with "body"
                    return JSONResponse({"detail": tool_error(error)}, status_code=error.http_status)

            return route_handler

    return ToolRoute


def _endpoint(tools: KnowledgeMapTools, spec: ToolDef, response_model: type[_Response]) -> Callable[..., Any]:
    """A sync endpoint (FastAPI runs it in its thread pool) taking ``spec.args`` as the JSON body."""
    from fastapi import Header, HTTPException  # deferred: optional extra

    def endpoint(body: Any, session: Any = None) -> Any:
        try:
            name = validate_name("session", session) if session else None
            out = tools.run(spec.name, body.model_dump(exclude_none=True), session=name)
        except KnowtologyError as exc:
            raise HTTPException(status_code=exc.http_status, detail=tool_error(exc)) from exc
        return response_model.model_validate({"tool": out.tool, "text": out.text, "result": out.result})

    endpoint.__signature__ = inspect.Signature(  # type: ignore[attr-defined]
        [
            inspect.Parameter("body", inspect.Parameter.POSITIONAL_OR_KEYWORD, annotation=spec.args),
            inspect.Parameter("session", inspect.Parameter.POSITIONAL_OR_KEYWORD,
                              default=Header(None, alias=SESSION_HEADER,
                                             description="Read-history session (default: the server's)."),
                              annotation=str | None),
        ],
        return_annotation=response_model,
    )
    endpoint.__name__ = spec.name
    return endpoint
