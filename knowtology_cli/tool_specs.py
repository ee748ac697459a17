"""The four agent tools as every surface publishes them: names, prompts, argument models, validation, errors."""

from __future__ import annotations

from collections.abc import Iterable, Mapping
from dataclasses import dataclass
from typing import Any, Literal, overload

from pydantic import BaseModel, ConfigDict, Field, ValidationError, field_validator

from .errors import ArgumentError, KnowtologyError, NotFoundError
from .models import MISSING_HINT, NO_IDS_HINT, NO_KEYWORDS_HINT, ROOT
from .paths import BROWSE_HINT, EMPTY_MAP_HINT

DEFAULT_TOP_K = 5
MAX_TOP_K = 50
MAX_CONTEXT = 10


# --------------------------------------------------------------------------- argument models
class ToolArgs(BaseModel):
    """Base of the tool argument models: unknown keys are refused (a typo is an error)."""

    model_config = ConfigDict(extra="forbid")


class BrowseArgs(ToolArgs):
    """Arguments of ``km_browse_tree``."""

    path: str = Field(
        default=ROOT,
        description="Category path to open, e.g. 'Returns' or 'Returns/Refunds'; 'root' (default) is the top.",
    )


class SearchArgs(ToolArgs):
    """Arguments of ``km_search_chunks``."""

    query: str = Field(description="What you are looking for, as a short question or phrase.")
    top_k: int | None = Field(
        default=None, ge=1, le=MAX_TOP_K, description="Number of hits (default 5)."
    )
    under: str | None = Field(
        default=None, description="Only search inside this category path (from km_browse_tree)."
    )
    preset: Literal["fast", "default", "thorough"] | None = Field(
        default=None,
        description="Speed/quality trade-off: 'fast' (keywords only), 'default' (meaning + keywords), "
                    "'thorough' (adds query expansion from the first results; slower, finds more).",
    )


class KeywordArgs(ToolArgs):
    """Arguments of ``km_search_keyword``."""

    keywords: str = Field(
        description="Exact words to match; separate several terms with commas, e.g. '7 days, refund'."
    )
    top_k: int | None = Field(
        default=None, ge=1, le=MAX_TOP_K, description="Number of hits (default 5)."
    )
    under: str | None = Field(
        default=None, description="Only search inside this category path (from km_browse_tree)."
    )


class ReadArgs(ToolArgs):
    """Arguments of ``km_read_chunks``."""

    chunk_ids: list[str] = Field(
        min_length=1,
        description="Chunk ids to read in full, exactly as shown in [brackets] by the other tools.",
    )
    context: int = Field(
        default=0, ge=0, le=MAX_CONTEXT,
        description="Also return this many neighbouring chunks before and after each one, from the same "
                    "document (to widen a hit without another search).",
    )

    @field_validator("chunk_ids", mode="before")
    @classmethod
    def _split(cls, value: Any) -> Any:
        # models (and the seed API) often pass one id, or "a, b", as a plain string
        if isinstance(value, str):
            return [part.strip() for part in value.split(",") if part.strip()]
        return value


@dataclass(frozen=True)
class ToolDef:
    """One tool as every surface publishes it.

    Attributes:
        name: the tool name (``km_*``), used by MCP, LangChain and ``kt ask``.
        route: the short name used by FastAPI (``/km/<route>``) and the REPL.
        args: the pydantic model of the arguments (its JSON schema is the tool's input schema).
        description: a prompt for the model: when to use the tool and what to call next.
        title: a short human title.
    """

    name: str
    route: str
    args: type[ToolArgs]
    description: str
    title: str

    def parameters(self) -> dict[str, Any]:
        """The JSON schema of the arguments (no pydantic titles, for model-facing specs)."""
        schema = self.args.model_json_schema()
        schema.pop("title", None)
        schema.pop("description", None)
        for prop in schema.get("properties", {}).values():
            prop.pop("title", None)
        return schema


TOOLS: tuple[ToolDef, ...] = (
    ToolDef(
        name="km_browse_tree",
        route="browse",
        args=BrowseArgs,
        title="Browse the knowledge map",
        description=(
            "See what the knowledge base contains: a map of up to 3 levels of categories with chunk "
            "counts. Start here with path='root' to get an overview, then open a category path to see "
            "its sub-categories; at a leaf category you get one '[chunk_id] snippet' line per chunk. "
            "Snippets are summaries, not the text: to answer, pass the ids you need to km_read_chunks. "
            "Use km_search_chunks or km_search_keyword when you already know what to look for."
        ),
    ),
    ToolDef(
        name="km_search_chunks",
        route="search",
        args=SearchArgs,
        title="Search by meaning",
        description=(
            "Search by meaning and wording together: finds chunks about a topic even when the words "
            "differ. Returns hits grouped under their category path, one line per hit — "
            "'[chunk_id] snippet score' — never the full text. Use 'under' to stay inside a category "
            "found with km_browse_tree; preset='thorough' when the first results miss. Next: read the "
            "most promising hits with km_read_chunks before answering; do not answer from snippets alone."
        ),
    ),
    ToolDef(
        name="km_search_keyword",
        route="keyword",
        args=KeywordArgs,
        title="Search by exact keywords",
        description=(
            "Keyword (BM25) search for exact terms: names, codes, numbers, error messages, phrases "
            "such as '7 days, refund' (comma-separated terms). Returns snippet lines like "
            "km_search_chunks, never the full text. Use it when meaning-based search misses an exact "
            "term. Next: read the matching chunks with km_read_chunks."
        ),
    ),
    ToolDef(
        name="km_read_chunks",
        route="read",
        args=ReadArgs,
        title="Read chunks in full",
        description=(
            "Read the full original text of chunks by id (ids come from the other three tools). "
            "This is the source to answer from and to cite. Read only the few chunks you need; "
            "context=1 adds the chunks just before and after each one in its document. "
            "A chunk already read in this session comes back as '(already read — skip)': its text "
            "is earlier in the conversation, so do not ask for it again."
        ),
    ),
)
TOOLS_BY_NAME: dict[str, ToolDef] = {t.name: t for t in TOOLS}
TOOLS_BY_ROUTE: dict[str, ToolDef] = {t.route: t for t in TOOLS}


def tool_def(name: str) -> ToolDef:
    """The tool named ``name`` (``km_read_chunks``) or routed as ``name`` (``read``)."""
    found = TOOLS_BY_NAME.get(name) or TOOLS_BY_ROUTE.get(name)
    if found is None:
        raise NotFoundError(f"no tool named {name!r}", hint="tools: " + ", ".join(TOOLS_BY_NAME))
    return found


def validate_args(tool: ToolDef, arguments: dict[str, Any] | None) -> ToolArgs:
    """Validate raw arguments against the tool's model; problems become an ``ArgumentError``."""
    try:
        return tool.args.model_validate(arguments or {})
    except ValidationError as exc:
        raise arguments_error(tool, exc.errors()) from None


def arguments_error(tool: ToolDef, errors: Iterable[Mapping[str, Any]], *, skip: int = 0) -> ArgumentError:
    """One ``ArgumentError`` for pydantic-style ``errors`` (``loc``, ``msg``, ``type``) of ``tool``'s arguments.

    The message names each field and its problem on one line; the hint says what to send. Every
    surface reports bad arguments through it: the tool layer, LangChain's argument check and
    FastAPI's request validation (whose ``loc`` starts with ``body``: ``skip=1``).
    """
    problems: list[str] = []
    fields: list[str] = []
    for err in errors:
        loc = [str(part) for part in err.get("loc", ())[skip:]]
        if err.get("type") == "json_invalid":
            problems.append(f"the body is not valid JSON ({(err.get('ctx') or {}).get('error', err['msg'])})")
            continue
        field = loc[0] if loc else ""
        problems.append(f"{'.'.join(loc) or 'arguments'}: {err['msg']}")
        if field in tool.args.model_fields and field not in fields:
            fields.append(field)
    wanted = "; ".join(_field_hint(tool.args, name) for name in fields)
    return ArgumentError(f"bad arguments for {tool.name}: {'; '.join(problems)}",
                         hint=wanted or f"{tool.name} takes: {', '.join(tool.args.model_fields)}")


def _field_hint(model: type[ToolArgs], name: str) -> str:
    """``name (limits): description`` of one argument, e.g. ``top_k (1 to 50): Number of hits (default 5).``"""
    field = model.model_fields[name]
    limits = {attr: getattr(rule, attr) for rule in field.metadata
              for attr in ("ge", "le", "min_length") if hasattr(rule, attr)}
    parts = ["required"] if field.is_required() else []
    if "ge" in limits and "le" in limits:
        parts.append(f"{limits['ge']} to {limits['le']}")
    elif "ge" in limits:
        parts.append(f"at least {limits['ge']}")
    if "min_length" in limits:
        parts.append(f"at least {limits['min_length']} item{'' if limits['min_length'] == 1 else 's'}")
    label = f" ({', '.join(parts)})" if parts else ""
    return f"{name}{label}: {field.description}"


#: Advice in library hints written for the CLI -> the same advice for an agent holding the km_* tools.
#: Every agent surface (MCP, LangChain, FastAPI, ``kt ask``) words hints through :func:`tool_hint`.
TOOL_ADVICE: dict[str, str] = {
    BROWSE_HINT: "km_browse_tree with path='root' lists the top categories",
    EMPTY_MAP_HINT: "the map is empty: km_search_chunks and km_search_keyword still find chunks",
    MISSING_HINT: "its document was renamed or removed, or the id is mistyped: km_search_keyword or "
                  "km_search_chunks finds the text; copy ids from their output",
    NO_IDS_HINT: "copy ids from the output of km_search_chunks, km_search_keyword or km_browse_tree",
    NO_KEYWORDS_HINT: "e.g. keywords='7 days, refund'",
}


@overload
def tool_hint(hint: str) -> str: ...


@overload
def tool_hint(hint: None) -> None: ...


def tool_hint(hint: str | None) -> str | None:
    """``hint`` as an agent should read it: CLI advice becomes advice naming the km_* tools."""
    return TOOL_ADVICE.get(hint, hint) if hint else hint


def tool_error(exc: KnowtologyError) -> dict[str, Any]:
    """``exc.to_dict()`` with the hint worded for an agent (the body of an HTTP error)."""
    return {**exc.to_dict(), "hint": tool_hint(exc.hint)}


def error_message(exc: KnowtologyError) -> str:
    """``message — hint: …`` on one line, hint worded for an agent (MCP adds its own ``Error …:``)."""
    hint = tool_hint(exc.hint)
    return exc.message + (f" — hint: {hint}" if hint else "")


def error_text(exc: KnowtologyError) -> str:
    """The one-line error a model sees as a tool result: ``Error: message — hint: …``."""
    return f"Error: {error_message(exc)}"
