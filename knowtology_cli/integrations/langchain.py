"""LangChain: the four tools as ``StructuredTool``s named ``km_*`` with typed arguments."""

from __future__ import annotations

import asyncio
from typing import TYPE_CHECKING, Any

from knowtology_cli.errors import KnowtologyError
from knowtology_cli.tool_specs import TOOLS, ToolDef, arguments_error, error_text

from . import require

if TYPE_CHECKING:
    from knowtology_cli.tools import KnowledgeMapTools


def langchain_tools(tools: KnowledgeMapTools, *, session: str | None = None) -> list[Any]:
    """``StructuredTool``s for ``km_browse_tree``, ``km_search_chunks``, ``km_search_keyword``, ``km_read_chunks``.

    Each tool returns the compact agent text as its content and the typed record
    (``BrowseResult``/``SearchResult``/``ReadResult`` as a dict) as its artifact. Library errors, and
    arguments LangChain's own check refuses (``chunk_ids=[]``, ``top_k=-3``), come back to the agent
    as ``Error: ...`` tool messages (status ``error``) instead of ending the run.

    Args:
        tools: the shared tool layer.
        session: read-history session for ``km_read_chunks`` (default: the tools' session).
    """
    require("langchain_core", "langchain", "the LangChain integration")
    return [_structured_tool(tools, spec, session) for spec in TOOLS]


def _structured_tool(tools: KnowledgeMapTools, spec: ToolDef, session: str | None) -> Any:
    from langchain_core.tools import StructuredTool, ToolException  # deferred: optional extra

    def run(**kwargs: Any) -> tuple[str, dict[str, Any]]:
        try:
            out = tools.run(spec.name, kwargs, session=session)
        except KnowtologyError as exc:
            raise ToolException(error_text(exc)) from exc
        return out.text, out.result.model_dump(mode="json")

    async def arun(**kwargs: Any) -> tuple[str, dict[str, Any]]:
        return await asyncio.to_thread(run, **kwargs)

    return StructuredTool.from_function(
        func=run,
        coroutine=arun,
        name=spec.name,
        description=spec.description,
        args_schema=spec.args,
        response_format="content_and_artifact",
        handle_tool_error=True,
        # LangChain validates against args_schema before `run`: word its refusal as the tools do
        handle_validation_error=lambda exc: error_text(arguments_error(spec, exc.errors())),
    )
