"""The four agent tools, defined once: names, descriptions, argument schemas and their runner.

MCP, LangChain, FastAPI, the REPL, ``kt ask`` and the seed-style Python API all call
:class:`KnowledgeMapTools`, which wraps one :class:`~knowtology_cli.kb.KnowledgeBase` and answers
with the compact agent text of :mod:`knowtology_cli.render`. :data:`TOOLS` is the single list of
tool specs every surface derives its own tool definitions from.
"""

from __future__ import annotations

import asyncio
import threading
from collections.abc import Iterator, Sequence
from dataclasses import dataclass
from typing import TYPE_CHECKING, Any, Literal

from pydantic import BaseModel, ConfigDict, Field, ValidationError, field_validator

from . import render
from .errors import ConfigError, KnowtologyError, NotFoundError
from .models import ROOT, BrowseResult, Chunk, ReadResult, SearchResult
from .stores.base import ScoredId, VectorStore

if TYPE_CHECKING:
    import numpy as np

    from .embedders.base import Embedder
    from .kb import KnowledgeBase
    from .stores.base import TreeStore

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
    """Validate raw arguments against the tool's model; problems become a ``ConfigError``."""
    try:
        return tool.args.model_validate(arguments or {})
    except ValidationError as exc:
        problems = "; ".join(
            f"{'.'.join(str(p) for p in err['loc']) or 'arguments'}: {err['msg']}" for err in exc.errors()
        )
        raise ConfigError(f"bad arguments for {tool.name}: {problems}",
                          hint=f"arguments: {', '.join(tool.args.model_fields)}") from None


def error_text(exc: KnowtologyError) -> str:
    """The one-line error a model sees: ``Error: message (hint)``."""
    return f"Error: {exc.message}" + (f" — hint: {exc.hint}" if exc.hint else "")


@dataclass(frozen=True)
class ToolOutput:
    """What one tool call produced: the compact text and the typed record behind it."""

    tool: str
    text: str
    result: BrowseResult | SearchResult | ReadResult


# --------------------------------------------------------------------------- the tools
class KnowledgeMapTools:
    """The four exploration tools over one collection (seed-compatible constructor).

    Either give a ready :class:`~knowtology_cli.kb.KnowledgeBase` (``kb=``), or stores seed-style::

        tools = KnowledgeMapTools(collection_id="company_docs", tree_store=tree_store,
                                  vector_store=InMemoryVectorStore(), text_store=InMemoryTextStore())
        await tools.browse_tree("root")

    Args:
        collection_id: the collection explored (default: the knowledge base's configured one).
        tree_store / vector_store: the stores (ignored when ``kb`` is given).
        text_store: optional keyword-search backend; when it differs from ``vector_store`` it
            answers keyword searches (and the keyword half of hybrid search).
        top_k: default number of hits for the two search tools.
        kb: an existing knowledge base to wrap.
        embedder: query embedder; default: the one recorded for the collection.
        session: read-history session name (default: the knowledge base's configured one).
        search_mode: ``hybrid``, ``semantic`` or ``keyword`` for ``km_search_chunks`` (default:
            the preset's, hybrid unless ``preset='fast'``).
        preset: default search preset (``fast``, ``default``, ``thorough``).
        min_score: drop search hits scoring below this.
    """

    def __init__(
        self,
        collection_id: str | None = None,
        tree_store: TreeStore | None = None,
        vector_store: VectorStore | None = None,
        text_store: Any = None,
        top_k: int = DEFAULT_TOP_K,
        *,
        kb: KnowledgeBase | None = None,
        embedder: Embedder | None = None,
        session: str | None = None,
        search_mode: str | None = None,
        min_score: float | None = None,
        preset: str | None = None,
    ) -> None:
        if kb is None:
            from .kb import KnowledgeBase

            if tree_store is None:
                raise ConfigError("KnowledgeMapTools needs a tree_store (or kb=)",
                                  hint="pass the tree store your TreeBuilder built into")
            vectors = vector_store if vector_store is not None else _as_vector_store(text_store)
            if vectors is None:
                raise ConfigError("KnowledgeMapTools needs a vector_store (or kb=)",
                                  hint="pass the vector store that holds the chunk text")
            if text_store is not None and text_store is not vectors and hasattr(text_store, "keyword_search"):
                vectors = KeywordRoutedStore(vectors, text_store)
            kb = KnowledgeBase(tree_store=tree_store, vector_store=vectors, embedder=embedder)
        if top_k < 1:
            raise ConfigError(f"top_k must be at least 1, got {top_k}")
        self.kb = kb
        self.collection = kb._collection(collection_id)
        self.session = kb._session(session)
        self.top_k = top_k
        self.search_mode = search_mode
        self.preset = preset
        self.min_score = min_score
        self._lock = threading.RLock()

    @classmethod
    def open(
        cls,
        store_dir: str | None = None,
        *,
        collection: str | None = None,
        session: str | None = None,
        top_k: int = DEFAULT_TOP_K,
        **kb_overrides: Any,
    ) -> KnowledgeMapTools:
        """Tools over the store at ``store_dir`` (the embedded SQLite + LanceDB default)."""
        from .kb import KnowledgeBase

        kb = KnowledgeBase.open(store_dir, **kb_overrides)
        return cls(collection, top_k=top_k, kb=kb, session=session)

    # typed operations ---------------------------------------------------------------------
    def browse(self, path: str = ROOT, *, depth: int = 1) -> BrowseResult:
        """Children of ``path`` with counts; at a leaf its chunks' snippets."""
        with self._lock:
            return self.kb.browse(path or ROOT, collection=self.collection, depth=depth)

    def search(self, query: str, top_k: int | None = None, under: str | None = None,
               preset: str | None = None) -> SearchResult:
        """Hybrid search (or the configured mode) with the preset's stages; snippets only."""
        with self._lock:
            return self.kb.search(query, collection=self.collection, k=top_k or self.top_k, under=under or None,
                                  mode=self.search_mode, preset=preset or self.preset, min_score=self.min_score)

    def keyword(self, keywords: str | Sequence[str], top_k: int | None = None,
                under: str | None = None) -> SearchResult:
        """Keyword (BM25) search; snippets only."""
        with self._lock:
            return self.kb.grep(keywords, collection=self.collection, k=top_k or self.top_k, under=under or None,
                                min_score=self.min_score)

    def read(self, chunk_ids: str | Sequence[str], *, session: str | None = None,
             force: bool = False, context: int = 0) -> ReadResult:
        """Full text (plus ``context`` neighbours each side); repeats in the session come back ``already_read``."""
        ids = ReadArgs.model_validate({"chunk_ids": chunk_ids}).chunk_ids if isinstance(chunk_ids, str) \
            else list(chunk_ids)
        with self._lock:
            return self.kb.read(ids, collection=self.collection, session=session or self.session, force=force,
                                context=context)

    def history(self, *, session: str | None = None) -> list[str]:
        """Chunk ids the session has read, oldest first."""
        with self._lock:
            return self.kb.read_history(collection=self.collection, session=session or self.session)

    def reset_session(self, *, session: str | None = None) -> bool:
        """Forget what the session read in this collection."""
        with self._lock:
            return self.kb.reset_session(collection=self.collection, session=session or self.session)

    # one entry point for every surface ----------------------------------------------------
    def run(self, name: str, arguments: dict[str, Any] | None = None, *, session: str | None = None) -> ToolOutput:
        """Validate ``arguments`` for tool ``name`` (``km_*`` or route), run it, render the text.

        Raises:
            KnowtologyError: bad arguments (``ConfigError``), unknown paths or ids, store errors.
        """
        tool = tool_def(name)
        args = validate_args(tool, arguments)
        result: BrowseResult | SearchResult | ReadResult
        if isinstance(args, BrowseArgs):
            result = self.browse(args.path)
            text = render.browse_text(result)
        elif isinstance(args, SearchArgs):
            result = self.search(args.query, args.top_k, args.under, args.preset)
            text = render.search_text(result)
        elif isinstance(args, KeywordArgs):
            result = self.keyword(args.keywords, args.top_k, args.under)
            text = render.search_text(result)
        else:
            assert isinstance(args, ReadArgs)
            result = self.read(args.chunk_ids, session=session, context=args.context)
            text = render.read_text(result)
        return ToolOutput(tool=tool.name, text=text, result=result)

    def call(self, name: str, arguments: dict[str, Any] | None = None, *, session: str | None = None) -> str:
        """Like :meth:`run`, returning only the compact text."""
        return self.run(name, arguments, session=session).text

    # the seed's API: compact text, sync and async --------------------------------------------
    def browse_tree_sync(self, path: str = ROOT) -> str:
        """``km_browse_tree`` as text."""
        return self.call("km_browse_tree", {"path": path})

    def search_chunks_sync(self, query: str, top_k: int | None = None, under: str | None = None,
                           preset: str | None = None) -> str:
        """``km_search_chunks`` as text."""
        return self.call("km_search_chunks", {"query": query, "top_k": top_k, "under": under, "preset": preset})

    def search_keyword_sync(self, keywords: str, top_k: int | None = None, under: str | None = None) -> str:
        """``km_search_keyword`` as text."""
        return self.call("km_search_keyword", {"keywords": keywords, "top_k": top_k, "under": under})

    def read_chunks_sync(self, chunk_ids: str | Sequence[str], context: int = 0) -> str:
        """``km_read_chunks`` as text."""
        return self.call("km_read_chunks", {"chunk_ids": chunk_ids if isinstance(chunk_ids, str) else list(chunk_ids),
                                            "context": context})

    async def browse_tree(self, path: str = ROOT) -> str:
        """Async ``km_browse_tree`` (runs the synchronous core in a worker thread)."""
        return await asyncio.to_thread(self.browse_tree_sync, path)

    async def search_chunks(self, query: str, top_k: int | None = None, under: str | None = None,
                            preset: str | None = None) -> str:
        """Async ``km_search_chunks``."""
        return await asyncio.to_thread(self.search_chunks_sync, query, top_k, under, preset)

    async def search_keyword(self, keywords: str, top_k: int | None = None, under: str | None = None) -> str:
        """Async ``km_search_keyword``."""
        return await asyncio.to_thread(self.search_keyword_sync, keywords, top_k, under)

    async def read_chunks(self, chunk_ids: str | Sequence[str], context: int = 0) -> str:
        """Async ``km_read_chunks``."""
        return await asyncio.to_thread(self.read_chunks_sync, chunk_ids, context)

    # integrations ---------------------------------------------------------------------------
    def get_langchain_tools(self) -> list[Any]:
        """Four LangChain ``StructuredTool``s named ``km_*`` (needs the ``[langchain]`` extra)."""
        from .integrations.langchain import langchain_tools

        return langchain_tools(self)

    def get_fastapi_router(self, *, token: str | None = None, prefix: str = "/km") -> Any:
        """A FastAPI router with ``/km/browse``, ``/km/search``, ``/km/keyword``, ``/km/read``."""
        from .integrations.fastapi import create_router

        return create_router(self, token=token, prefix=prefix)

    def close(self) -> None:
        """Release the knowledge base's store handles."""
        self.kb.close()


def _as_vector_store(store: Any) -> VectorStore | None:
    """The vector store behind a text store that wraps one (the in-memory adapters do)."""
    if isinstance(store, VectorStore):
        return store
    inner = getattr(store, "vector_store", None)
    return inner if isinstance(inner, VectorStore) else None


class KeywordRoutedStore(VectorStore):
    """A vector store whose keyword searches are answered by a separate text store."""

    def __init__(self, vectors: VectorStore, text_store: Any) -> None:
        self.inner = vectors
        self.text_store = text_store
        self.read_only = vectors.read_only

    def keyword_search(self, collection: str, query: str, k: int, *,
                       within: Sequence[str] | None = None) -> list[ScoredId]:
        return self.text_store.keyword_search(collection, query, k, within=within)

    def upsert(self, collection: str, chunks: Sequence[Chunk], vectors: np.ndarray) -> None:
        self.inner.upsert(collection, chunks, vectors)

    def delete(self, collection: str, chunk_ids: Sequence[str]) -> None:
        self.inner.delete(collection, chunk_ids)

    def fingerprints(self, collection: str) -> dict[str, tuple[str, str]]:
        return self.inner.fingerprints(collection)

    def get(self, collection: str, chunk_ids: Sequence[str], *, with_text: bool = True) -> list[Chunk]:
        return self.inner.get(collection, chunk_ids, with_text=with_text)

    def iter_rows(self, collection: str, *, with_vectors: bool = True,
                  batch_size: int = 4096) -> Iterator[tuple[list[Chunk], np.ndarray | None]]:
        return self.inner.iter_rows(collection, with_vectors=with_vectors, batch_size=batch_size)

    def vectors(self, collection: str, chunk_ids: Sequence[str]) -> dict[str, np.ndarray]:
        return self.inner.vectors(collection, chunk_ids)

    def vector_search(self, collection: str, vector: np.ndarray, k: int, *,
                      within: Sequence[str] | None = None) -> list[ScoredId]:
        return self.inner.vector_search(collection, vector, k, within=within)

    def count(self, collection: str) -> int:
        return self.inner.count(collection)

    def regex_search(self, collection: str, pattern: str, k: int, *,
                     within: Sequence[str] | None = None) -> list[ScoredId]:
        return self.inner.regex_search(collection, pattern, k, within=within)

    def close(self) -> None:
        self.inner.close()

