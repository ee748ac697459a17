"""The four agent tools, defined once: :class:`KnowledgeMapTools` wraps a ``KnowledgeBase``.

MCP, LangChain, FastAPI, the REPL and ``kt ask`` all call it; the specs live in :mod:`.tool_specs`.
"""

from __future__ import annotations

import asyncio
import threading
from collections.abc import Sequence
from dataclasses import dataclass
from typing import TYPE_CHECKING, Any

from . import render
from .errors import ConfigError
from .integrations.fastapi import create_router
from .integrations.langchain import langchain_tools
from .kb import KnowledgeBase
from .models import MISSING_HINT, ROOT, BrowseResult, ReadResult, SearchResult
from .stores.base import TextStore, VectorStore
from .stores.routing import KeywordRoutedStore
from .tool_specs import (
    DEFAULT_TOP_K,
    MAX_CONTEXT,
    MAX_TOP_K,
    TOOLS,
    TOOLS_BY_NAME,
    TOOLS_BY_ROUTE,
    BrowseArgs,
    KeywordArgs,
    ReadArgs,
    SearchArgs,
    ToolArgs,
    ToolDef,
    error_text,
    tool_def,
    tool_hint,
    validate_args,
)

__all__ = [  # the tool specs live in tool_specs (the integrations import them from there); re-exported
    "DEFAULT_TOP_K", "MAX_CONTEXT", "MAX_TOP_K", "TOOLS", "TOOLS_BY_NAME", "TOOLS_BY_ROUTE", "BrowseArgs",
    "KeywordArgs", "KnowledgeMapTools", "ReadArgs", "SearchArgs", "ToolArgs", "ToolDef", "ToolOutput",
    "error_text", "tool_def", "validate_args",
]

if TYPE_CHECKING:

    from .embedders.base import Embedder
    from .stores.base import TreeStore

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
        text_store: TextStore | None = None,
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
            if tree_store is None:
                raise ConfigError("KnowledgeMapTools needs a tree_store (or kb=)",
                                  hint="pass the tree store your TreeBuilder built into")
            if text_store is not None and not isinstance(text_store, TextStore):
                raise ConfigError(f"text_store must be a TextStore, got {type(text_store).__name__}",
                                  hint="subclass knowtology_cli.adapters.base.TextStore (one method: keyword_search)")
            if vector_store is None and isinstance(text_store, TextStore):
                vector_store = text_store.row_store()  # the in-memory adapters' text store reads its rows
            vectors = vector_store
            if vectors is None:
                raise ConfigError("KnowledgeMapTools needs a vector_store (or kb=)",
                                  hint="pass the vector store that holds the chunk text")
            if isinstance(text_store, TextStore) and text_store is not vectors:
                vectors = KeywordRoutedStore(vectors, text_store)
            kb = KnowledgeBase(tree_store=tree_store, vector_store=vectors, embedder=embedder)
        if top_k < 1:
            raise ConfigError(f"top_k must be at least 1, got {top_k}")
        self.kb = kb
        self.collection = kb.collection_name(collection_id)
        self.session = kb.session_name(session)
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
            KnowtologyError: bad arguments (``ArgumentError``), unknown paths or ids, store errors.
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
            text = render.read_text(result, missing_hint=tool_hint(MISSING_HINT))
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
        return langchain_tools(self)

    def get_fastapi_router(self, *, token: str | None = None, prefix: str = "/km") -> Any:
        """A FastAPI router with ``/km/browse``, ``/km/search``, ``/km/keyword``, ``/km/read``."""
        return create_router(self, token=token, prefix=prefix)

    def close(self) -> None:
        """Release the knowledge base's store handles."""
        self.kb.close()
