"""Agent-facing commands: ``kt repl``, ``kt mcp``, ``kt serve`` and ``kt ask`` (thin shells over ``tools``)."""

from __future__ import annotations

import sys
from dataclasses import asdict
from typing import Annotated, Any

import typer

from knowtology_cli.errors import ConfigError, KnowtologyError
from knowtology_cli.stores import heavy_imports

from .common import CollectionOpt, JsonOpt, SessionOpt, StoreOpt, console, emit_json, handled, settings

TopKOpt = Annotated[int, typer.Option("-k", "--top-k", min=1, max=50, help="Default number of search hits.")]


def open_tools(store: str | None, collection: str | None, session: str | None, *, top_k: int = 5,
               private_prefix: str | None = None, **extra: Any) -> tuple[Any, bool]:
    """The shared tool layer for the resolved settings, and whether the session is a named one.

    The process then answers many queries, so the vector store may hold a collection's vectors in
    memory (``stores.ann.FlatVectors``).

    Without ``--session`` / ``KNOWTOLOGY_SESSION`` / a configured session and with a
    ``private_prefix``, read histories stay in memory (per connection or per run), so nothing is
    written to the store's sessions.
    """
    from knowtology_cli.config import DEFAULT_SESSION  # deferred: keeps kt --help fast
    from knowtology_cli.kb import KnowledgeBase  # deferred: keeps kt --help fast
    from knowtology_cli.tools import KnowledgeMapTools  # deferred: keeps kt --help fast

    heavy_imports.ONE_SHOT = False  # these commands answer many queries: vectors may stay in memory
    cfg = settings(store, collection, session, **{k: v for k, v in extra.items() if k in ("embedder", "llm")})
    named = session is not None or cfg.session != DEFAULT_SESSION or private_prefix is None
    overrides: dict[str, Any] = {} if named else {"sessions": None}
    kb = KnowledgeBase.from_settings(cfg, **overrides)
    if kb.lock is not None:
        kb.lock.on_wait = lambda text: print(text, file=sys.stderr, flush=True)
    import secrets  # deferred: keeps kt --help fast

    run_session = cfg.session if named else f"{private_prefix}-{secrets.token_hex(4)}"
    return KnowledgeMapTools(cfg.collection, top_k=top_k, kb=kb, session=run_session), named


def register(app: typer.Typer) -> None:
    """Add this module's commands to ``app``."""

    @app.command("mcp")
    def mcp_command(
        session: SessionOpt = None,
        top_k: TopKOpt = 5,
        store: StoreOpt = None,
        collection: CollectionOpt = None,
    ) -> None:
        """Serve the four tools (km_browse_tree, km_search_chunks, km_search_keyword, km_read_chunks) to MCP clients on stdio.

        Read history is per connection unless --session (or KNOWTOLOGY_SESSION) names a shared one.
        """
        from knowtology_cli.integrations.mcp import run_stdio  # deferred: keeps kt --help fast

        with handled():
            tools, named = open_tools(store, collection, session, top_k=top_k, private_prefix="mcp")
            run_stdio(tools, session=tools.session if named else None)

    @app.command("serve")
    def serve_command(
        host: Annotated[str, typer.Option(help="Interface to bind; anything but loopback needs KNOWTOLOGY_API_TOKEN.")] = "127.0.0.1",
        port: Annotated[int, typer.Option(min=0, max=65535, help="TCP port (0 picks a free one).")] = 8765,
        session: SessionOpt = None,
        top_k: TopKOpt = 5,
        store: StoreOpt = None,
        collection: CollectionOpt = None,
    ) -> None:
        """Serve the four tools over HTTP (FastAPI): /km/browse, /km/search, /km/keyword, /km/read; schema at /openapi.json.

        Each request's read history is the session named by its X-Knowtology-Session header (default: --session).
        """
        from knowtology_cli.integrations.fastapi import serve  # deferred: keeps kt --help fast

        with handled():
            tools, _ = open_tools(store, collection, session, top_k=top_k)
            serve(tools, host=host, port=port, token=tools.kb.settings.api_token,
                  announce=lambda text: console(stderr=True).print(text, markup=False))

    @app.command("repl")
    def repl_command(
        session: SessionOpt = None,
        top_k: TopKOpt = 5,
        keep_going: Annotated[bool, typer.Option("--keep-going", help="Reading a script from a pipe or file: run every line even after one fails (the exit status is still 1).")] = False,
        store: StoreOpt = None,
        collection: CollectionOpt = None,
    ) -> None:
        """Interactive shell over the map: ls, cd, search, grep, read, history (tab completes commands, paths, ids).

        Fed from a pipe or file (kt repl < script.kt), it runs the lines as a script: no prompts, and it
        stops with exit status 1 at the first failing line unless --keep-going.
        """
        from knowtology_cli.repl import Repl  # deferred: loads prompt_toolkit

        from .render import print_browse, print_hits, print_read  # deferred: keeps kt --help fast

        with handled():
            tools, _ = open_tools(store, collection, session, top_k=top_k)
            shell = Repl(tools, history_file=tools.kb.settings.store_dir / "repl_history",
                         show_browse=print_browse, show_hits=print_hits, show_read=print_read)
        raise typer.Exit(shell.run(keep_going=keep_going))

    @app.command("ask")
    def ask_command(
        question: Annotated[str, typer.Argument(help="The question to answer from the collection.")],
        llm: Annotated[str | None, typer.Option(help="Model as PROVIDER:MODEL, e.g. openai:gpt-4o-mini (env KNOWTOLOGY_LLM).")] = None,
        max_steps: Annotated[int, typer.Option(min=1, help="Stop after this many model turns.")] = 8,
        session: SessionOpt = None,
        top_k: TopKOpt = 5,
        store: StoreOpt = None,
        collection: CollectionOpt = None,
        as_json: JsonOpt = False,
    ) -> None:
        """Answer QUESTION with an agent that browses, searches and reads, citing the chunk ids it read.

        An answer that cites no chunk it read is asked for once more; if it still cites none, kt ask
        prints it with a warning and exits with code 3.
        """
        from knowtology_cli.agent import EXIT_UNCITED, ask  # deferred: keeps kt --help fast

        with handled(as_json):
            tools, _ = open_tools(store, collection, session, top_k=top_k, private_prefix="ask", llm=llm)
            client = _chat_client(tools.kb.settings)
            result = ask(question, tools, client, max_steps=max_steps,
                         on_step=(lambda _step: None) if as_json else _StepPrinter())
        if as_json:
            emit_json(asdict(result))
        else:
            out = console()
            out.print()
            out.print(result.answer or "(no answer)", markup=False)
            uncited = [i for i in result.read_ids if i not in result.cited]
            read_note = f" (also read: {', '.join(uncited)})" if uncited else ""
            out.print(f"\nSources: {', '.join(result.cited) or 'none cited'}{read_note} · {result.steps_taken} turns, "
                      f"{len(result.steps)} tool calls, {result.input_tokens:,} tokens in, "
                      f"{result.output_tokens:,} out, ${result.cost_usd:.4f}", markup=False, style="dim")
        if result.stopped:
            with handled():
                raise KnowtologyError(f"stopped after {result.steps_taken} steps without a final answer",
                                      hint="raise --max-steps or ask a narrower question")
        if result.uncited:
            unread = f" (it cited {', '.join(result.cited_unread)} without reading them)" if result.cited_unread else ""
            console(stderr=True).print(
                "Warning: the answer cites no chunk the agent read, even after it was asked again"
                f"{unread}; treat it as unsupported (exit code {EXIT_UNCITED}).", markup=False, style="yellow")
            raise typer.Exit(EXIT_UNCITED)


class _StepPrinter:
    """One stderr line per tool call as the agent goes; the model turn's cost on its first call."""

    def __init__(self) -> None:
        self.last_turn = 0

    def __call__(self, step: Any) -> None:
        from rich.markup import escape  # deferred: heavy

        args = ", ".join(f"{k}={v!r}" for k, v in step.arguments.items())
        cost = ""
        if step.step != self.last_turn:
            self.last_turn = step.step
            cost = (f" · turn {step.step}: {step.input_tokens:,} tokens in, {step.output_tokens:,} out,"
                    f" ${step.cost_usd:.4f}")
        style = "red" if step.error else "cyan"
        console(stderr=True).print(
            f"[{style}]→ {escape(step.tool)}[/]({escape(args)}) [dim]· {escape(step.summary)} · "
            f"{step.result_tokens:,} tokens back{cost}[/]", highlight=False)


def _chat_client(cfg: Any) -> Any:
    from knowtology_cli.kb import llm_from_settings  # deferred: keeps kt --help fast

    if not cfg.llm:
        raise ConfigError("kt ask needs a model", hint="pass --llm openai:MODEL or anthropic:MODEL (or set KNOWTOLOGY_LLM)")
    return llm_from_settings(cfg.llm, cfg)
