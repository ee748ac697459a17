"""The ``kt`` / ``knowtology`` command line: thin commands over ``KnowledgeBase``."""

from __future__ import annotations

import os
import sys
from enum import Enum
from typing import Annotated, Any

import typer

from .. import __version__
from ..stores import heavy_imports
from ..textutil import counted, first_few
from . import agents, bench, export, scale, sources
from .common import (
    CollectionOpt,
    JsonOpt,
    SessionOpt,
    StderrProgress,
    StoreOpt,
    console,
    emit_json,
    handled,
    name_options,
    named_collection,
    open_kb,
    run,
)
from .group import KtGroup, lazy_root


class OutputFormat(str, Enum):
    """How search, grep and read print for people (``--json`` is separate)."""

    text = "text"
    context = "context"


def _builder_name(value: str) -> str:
    """A known builder name, else a usage error (exit 2) naming the choices."""
    from ..kb import BUILDERS  # deferred: only `kt build` reads it

    if value not in BUILDERS:
        raise typer.BadParameter(f"unknown builder {value!r}; use one of {', '.join(BUILDERS)}")
    return value


EPILOG = (
    "Shell completion: `kt --install-completion` adds it to your shell's startup file (bash, zsh, fish, "
    "PowerShell); `kt --show-completion` prints the script to install yourself.\n\n"
    "Output: NO_COLOR=1 turns styles off, FORCE_COLOR=1 keeps them in pipes, COLUMNS=N sets the width "
    "lines are fitted to. --json (before or after the command) prints one JSON document on stdout. "
    "Exit codes: 0 ok, 1 error, 2 usage."
)


class Preset(str, Enum):
    """Search presets (``knowtology_cli.retrieval.presets``)."""

    fast = "fast"
    default = "default"
    thorough = "thorough"


class Reranker(str, Enum):
    """Rerankers for ``kt search --rerank``."""

    none = "none"
    llm = "llm"


app = typer.Typer(
    name="kt",
    cls=KtGroup,
    help="Knowtology: a navigable map of your documents for agents and people — browse, search, grep, read.",
    epilog=EPILOG,
    no_args_is_help=True,
    add_completion=True,
    context_settings={"help_option_names": ["-h", "--help"]},
    rich_markup_mode=None,
    pretty_exceptions_enable=False,
)


def _print_version(value: bool) -> None:
    if value:
        print(f"kt {__version__}")
        raise typer.Exit(0)


@app.callback()
def _root(
    version: Annotated[bool, typer.Option("--version", "-V", is_eager=True, callback=_print_version,
                                          help="Print the version and exit.")] = False,
    store: Annotated[str | None, typer.Option("--store", help="Store directory for the command (as its own "
                                              "--store; env KNOWTOLOGY_STORE).", show_default=False)] = None,
    collection: Annotated[str | None, typer.Option("--collection", "-c", help="Collection for the command (as its "
                                                   "own -c; env KNOWTOLOGY_COLLECTION).", show_default=False)] = None,
    as_json: Annotated[bool, typer.Option("--json", help="One JSON document on stdout (as the command's own "
                                          "--json).")] = False,
) -> None:
    """Knowtology: a navigable map of your documents for agents and people — browse, search, grep, read."""
    # `kt --json status`: KtGroup.parse_args hands --json to the command, which prints the JSON
    # `kt --store DIR ingest …` as well as `kt ingest … --store DIR`: the command's own flag still wins
    if store is not None:
        os.environ["KNOWTOLOGY_STORE"] = store
    if collection is not None:
        os.environ["KNOWTOLOGY_COLLECTION"] = collection
    name_options(store, collection)


session_app = typer.Typer(help="Manage read histories (what a session has already read).", no_args_is_help=True)
app.add_typer(session_app, name="session")


@app.command()
def ingest(
    paths: Annotated[list[str] | None, typer.Argument(help="Files, directories or - (JSONL on stdin); none with --source re-scans that source.", show_default=False)] = None,
    embedder: Annotated[str | None, typer.Option(help="Embedder: local (default), openai:MODEL, hash.")] = None,
    skip_invalid: Annotated[bool, typer.Option("--skip-invalid", help="Ingest valid rows; list and count bad ones.")] = False,
    prune: Annotated[bool, typer.Option("--prune", help="Also delete chunks of files gone from an ingested folder.")] = False,
    source: Annotated[str | None, typer.Option("--source", help="Source name for PATH (default: its folder's name); alone, re-scan that registered source.", show_default=False)] = None,
    replace: Annotated[bool, typer.Option("--replace", help="Let this input take over a source name or chunk ids another source holds.")] = False,
    store: StoreOpt = None,
    collection: CollectionOpt = None,
    as_json: JsonOpt = False,
) -> None:
    """Add or update chunks from documents or JSONL chunk files (unchanged chunks are not re-embedded)."""
    with handled(as_json):
        kb = open_kb(store, collection, embedder=embedder)
        with StderrProgress() as bar:
            report = kb.ingest(paths or [], embedder=embedder, skip_invalid=skip_invalid, prune=prune, stdin=sys.stdin,
                               source=source, replace=replace, progress=bar.update, message=bar.message)
    if as_json:
        return emit_json(report)
    out = console()
    out.print(f"{report.collection}: {report.added} added, {report.updated} updated, {report.unchanged} unchanged, "
              f"{report.deleted} deleted — {counted(report.total, 'chunk')} ({report.embedded} embedded with {report.embedder}, "
              f"{report.seconds:.1f}s)")
    if report.reused:
        # shifted chunks of an edited page count here too, and other chunks of the run may be embedded
        out.print(f"{report.reused} chunk(s) hold the title and text of another chunk, stored or new (moved within "
                  "their file, or a renamed, moved or copied file): each such text was embedded once at most")
    for gone, count in report.moved_sources.items():
        out.print(f"note: source {gone!r} is gone from disk and {count} chunk(s) of its text came in again here; "
                  f"if its folder moved, `kt rm --source {gone}` drops the old copy (next time: "
                  f"`kt ingest NEW/PATH --source {gone} --replace` keeps the ids)", markup=False)
    if report.gone:
        out.print(f"note: {len(report.gone)} indexed file(s) gone from disk are still searchable (e.g. "
                  f"{report.gone[0]}): add --prune to remove them", markup=False)
    if report.junk_merged or report.junk_dropped:
        out.print(f"no-prose pieces: {report.junk_merged} heading-only merged into a neighbour, "
                  f"{report.junk_dropped} dropped (comments, directives, navigation, rules, page furniture)")
    if report.no_text:
        out.print(f"{len(report.no_text)} document(s) empty or with only markup or headings, nothing to index: "
                  f"{first_few(report.no_text, 5)}",
                  markup=False)
    if report.not_documents:
        kinds = [f"{kind} ({count})" for kind, count in report.not_documents.items()]
        out.print(f"note: {sum(report.not_documents.values())} file(s) in the ingested folder(s) are not documents "
                  f"kt reads and were left out: {first_few(kinds, 5)}", markup=False)
    if report.excluded:
        out.print(f"note: {len(report.excluded)} file(s) left out by .ktignore: {first_few(report.excluded, 3)}",
                  markup=False)
    if report.excluded_indexed:
        out.print(f"note: {len(report.excluded_indexed)} indexed file(s) that .ktignore now leaves out are still "
                  f"searchable (e.g. {report.excluded_indexed[0]}): add --prune to remove them", markup=False)
    if report.hidden_folders:
        out.print(f"note: {len(report.hidden_folders)} hidden folder(s) skipped: {first_few(report.hidden_folders, 3)}"
                  " — kt reads a hidden folder only when it is named: kt ingest FOLDER/.NAME", markup=False)
    if report.broken_links:
        out.print(f"{len(report.broken_links)} broken link(s) skipped (they point at nothing): "
                  f"{first_few(report.broken_links, 3)}", markup=False)
    if report.included:
        parts = [f"{fragment} (in {page})" for fragment, page in report.included.items()]
        out.print(f"{len(parts)} included file(s) read as part of the pages that include them, not indexed alone: "
                  f"{first_few(parts, 3)}", markup=False)
    if report.linked:
        parts = [f"{link} → {target}" for link, target in report.linked.items()]
        out.print(f"{len(parts)} link(s) to a file already read, not read twice: {first_few(parts, 3)}", markup=False)
    for page, notes in list(report.unread_includes.items())[:5]:
        out.print(f"note: {page}: include not read, its text is not indexed: {'; '.join(notes)}", markup=False)
    if len(report.unread_includes) > 5:
        out.print(f"note: {len(report.unread_includes) - 5} more document(s) with includes not read "
                  "(--json lists them)", markup=False)
    if report.unread_docstrings:
        pages = [f"{page} ({count})" for page, count in report.unread_docstrings.items()]
        out.print(f"note: {sum(report.unread_docstrings.values())} autodoc directive(s) not read: their text comes "
                  "from docstrings of the code, which Knowtology does not import (the page's own signatures and "
                  f"prose are kept): {first_few(pages, 3)}", markup=False)
    if report.redirects:
        pages = [f"{page} → {target}" for page, target in report.redirects.items()]
        out.print(f"{len(pages)} redirect page(s), nothing to index (they only send the reader on): {first_few(pages, 3)}",
                  markup=False)
    if report.skipped:
        out.print(f"skipped {report.skipped} invalid input(s):")
        for problem in report.problems:
            out.print(f"  {problem}", markup=False)


@app.command()
def build(
    builder: Annotated[str, typer.Option(callback=_builder_name, help="auto (hybrid if a model is configured, else cluster), hybrid (offline structure, LLM names), llm (LLM places every chunk) or cluster (offline).")] = "auto",
    llm: Annotated[str | None, typer.Option(help="LLM as PROVIDER:MODEL, e.g. openai:gpt-4o-mini (env KNOWTOLOGY_LLM).")] = None,
    dry_run: Annotated[bool, typer.Option("--dry-run", help="Print the plan (batches, calls, tokens, cost); call nothing.")] = False,
    rebuild: Annotated[bool, typer.Option("--rebuild", help="Start the tree over instead of extending it.")] = False,
    concurrency: Annotated[int | None, typer.Option(min=1, help="Parallel LLM calls (default 1 for a server on this machine, else 4; env KNOWTOLOGY_CONCURRENCY).")] = None,
    no_cache: Annotated[bool, typer.Option("--no-cache", help="Call the model even for prompts the call log has answered (new calls are still logged).")] = False,
    timeout: Annotated[str | None, typer.Option(metavar="SECONDS", help="Seconds per LLM call attempt, counted from when it is sent, before it is retried (env KNOWTOLOGY_LLM_TIMEOUT; default 600).")] = None,
    context_window: Annotated[int | None, typer.Option(min=256, help="The model's context in tokens (default: what the server says, else the profile).")] = None,
    max_output: Annotated[int | None, typer.Option(min=16, help="The model's largest reply in tokens (default: the profile).")] = None,
    store: StoreOpt = None,
    collection: CollectionOpt = None,
    as_json: JsonOpt = False,
) -> None:
    """Build or extend the category tree (new and changed chunks only, unless --rebuild)."""
    with handled(as_json):
        from ..config import parse_timeout  # deferred: keeps kt --help fast

        seconds = parse_timeout(timeout, "--timeout")
        kb = open_kb(store, collection, llm=llm)
        with StderrProgress() as bar:
            report = kb.build(builder=builder, llm=llm, rebuild=rebuild, dry_run=dry_run, concurrency=concurrency,
                              use_cache=not no_cache, timeout=seconds, context_window=context_window,
                              max_output=max_output, progress=bar.update, message=bar.message)
    if as_json:
        return emit_json(report)
    out = console()
    verb = "plan" if report.dry_run else "built"
    out.print(f"{report.collection}: {verb} with {report.builder}"
              + (f" ({report.model})" if report.model else "")
              + f" — {report.nodes} categories, {report.mapped} mapped, {report.unmapped} unmapped")
    if report.builder in ("llm", "hybrid") or report.llm_calls:
        out.print(f"LLM: {report.batches} batches, {report.llm_calls} calls ({report.cached_calls} cached), "
                  f"{report.input_tokens:,} tokens in, {report.output_tokens:,} out, ${report.cost_usd:.4f}"
                  + (f" ({report.estimated_calls} calls estimated)" if report.estimated_calls else ""))
    for note in report.notes:
        out.print(f"  {note}", markup=False)


@app.command()
def browse(
    path: Annotated[str, typer.Argument(help="Category path, e.g. Returns/Refunds (default: root).")] = "root",
    depth: Annotated[int, typer.Option(min=1, max=3, help="Levels of children to show.")] = 1,
    store: StoreOpt = None,
    collection: CollectionOpt = None,
    as_json: JsonOpt = False,
) -> None:
    """Show the map: categories under PATH with counts; at a leaf, its chunks' snippets."""
    from .render import print_browse  # deferred: keeps kt --help fast

    run(as_json, lambda: open_kb(store, collection).browse(path, depth=depth),
        lambda r: print_browse(r, store=store, collection=collection))


@app.command()
def search(
    query: Annotated[str, typer.Argument(help="What you are looking for, in words.")],
    k: Annotated[int, typer.Option("-k", "--top-k", min=1, help="Number of hits.")] = 5,
    under: Annotated[str | None, typer.Option(help="Only chunks under this category path.")] = None,
    preset: Annotated[Preset, typer.Option(help="fast (BM25 only), default (hybrid), thorough (hybrid + query "
                                                "expansion from the first results).")] = Preset.default,
    mode: Annotated[str | None, typer.Option(help="hybrid, semantic or keyword (default: the preset's).")] = None,
    rerank: Annotated[Reranker, typer.Option(help="none, or llm: the model from --llm / KNOWTOLOGY_LLM grades "
                                                  "the top snippets in one call.")] = Reranker.none,
    llm: Annotated[str | None, typer.Option(help="PROVIDER:MODEL for --rerank llm.")] = None,
    explain: Annotated[bool, typer.Option("--explain", help="Show the score each stage gave every hit.")] = False,
    min_score: Annotated[float | None, typer.Option(help="Drop hits scoring below this.")] = None,
    fmt: Annotated[OutputFormat, typer.Option("--format", help="text or context (compact block for prompts).")] = OutputFormat.text,
    store: StoreOpt = None,
    collection: CollectionOpt = None,
    as_json: JsonOpt = False,
) -> None:
    """Search by meaning and keywords (hybrid); returns snippets and chunk ids, never full text."""
    from .render import print_hits  # deferred: keeps kt --help fast

    def warn(text: str) -> None:
        print(f"Warning: {text}", file=sys.stderr, flush=True)

    run(as_json, lambda: open_kb(store, collection, llm=llm).search(
        query, k=k, under=under, mode=mode, preset=preset.value, rerank=rerank.value, explain=explain,
        min_score=min_score, warn=warn), lambda r: print_hits(r, fmt.value))


@app.command()
def grep(
    terms: Annotated[list[str], typer.Argument(help='Keywords; comma-separated terms work ("7 days, refund").')],
    k: Annotated[int, typer.Option("-k", "--top-k", min=1, help="Number of hits.")] = 5,
    under: Annotated[str | None, typer.Option(help="Only chunks under this category path.")] = None,
    regex: Annotated[bool, typer.Option("--regex", help="Treat TERMS as a regular expression (exact match).")] = False,
    min_score: Annotated[float | None, typer.Option(help="Drop hits scoring below this.")] = None,
    fmt: Annotated[OutputFormat, typer.Option("--format", help="text or context (compact block for prompts).")] = OutputFormat.text,
    store: StoreOpt = None,
    collection: CollectionOpt = None,
    as_json: JsonOpt = False,
) -> None:
    """Keyword search (BM25) or exact --regex match; returns snippets and chunk ids, never full text."""
    from .render import print_hits  # deferred: keeps kt --help fast

    run(as_json, lambda: open_kb(store, collection).grep(terms, k=k, under=under, regex=regex, min_score=min_score),
        lambda r: print_hits(r, fmt.value))


@app.command()
def read(
    chunk_ids: Annotated[list[str], typer.Argument(help="Chunk ids from search, grep or browse.")],
    session: SessionOpt = None,
    force: Annotated[bool, typer.Option("--force", help="Return text even if already read in this session.")] = False,
    context: Annotated[int, typer.Option("--context", "-C", min=0, help="Also N neighbouring chunks before and after "
                                                                        "each, from the same document.")] = 0,
    fmt: Annotated[OutputFormat, typer.Option("--format", help="text or context (tagged blocks for prompts).")] = OutputFormat.text,
    store: StoreOpt = None,
    collection: CollectionOpt = None,
    as_json: JsonOpt = False,
) -> None:
    """Full text of chunks; a repeat read in the same session answers (already read — skip)."""
    from .render import print_read  # deferred: keeps kt --help fast

    run(as_json, lambda: open_kb(store, collection, session).read(chunk_ids, force=force, context=context),
        lambda r: print_read(r, fmt.value))


@app.command()
def status(store: StoreOpt = None, collection: CollectionOpt = None, as_json: JsonOpt = False) -> None:
    """Collections with chunk counts, tree coverage, embedder and staleness (one with -c or KNOWTOLOGY_COLLECTION)."""
    from .render import print_status  # deferred: keeps kt --help fast

    def fn() -> Any:
        kb = open_kb(store, collection)
        return kb.status(collection=named_collection(kb))

    run(as_json, fn, print_status)


@session_app.command("list")
def session_list(store: StoreOpt = None, as_json: JsonOpt = False) -> None:
    """List sessions and how many chunks each has read."""
    from .render import print_sessions  # deferred: keeps kt --help fast

    def fn() -> dict:
        kb = open_kb(store, None)
        rows = []
        for name in kb.sessions.names():
            data = kb.sessions.load(name)
            rows.append({"name": name, "reads": {c: len(v.get("read", [])) for c, v in data["collections"].items()}})
        return {"sessions": rows}

    run(as_json, fn, print_sessions)


@session_app.command("show")
def session_show(name: Annotated[str | None, typer.Argument(help="Session name (default: current).")] = None,
                 store: StoreOpt = None, collection: CollectionOpt = None, as_json: JsonOpt = False) -> None:
    """Show the chunk ids a session has read, oldest first."""

    def fn() -> dict:
        kb = open_kb(store, collection, name)
        kb.sessions.require(kb.settings.session)
        return {"session": kb.settings.session, "collection": kb.settings.collection,
                "read": kb.read_history()}

    run(as_json, fn, lambda r: console().print("\n".join(r["read"]) or "(nothing read yet)", markup=False))


@session_app.command("reset")
def session_reset(name: Annotated[str | None, typer.Argument(help="Session name (default: current).")] = None,
                  store: StoreOpt = None, collection: CollectionOpt = None, as_json: JsonOpt = False) -> None:
    """Forget what a session has read (in one collection with -c or KNOWTOLOGY_COLLECTION, else all)."""

    def fn() -> dict:
        kb = open_kb(store, collection, name)
        done = kb.reset_session(collection=named_collection(kb), session=kb.settings.session)
        return {"session": kb.settings.session, "reset": done}

    run(as_json, fn, lambda r: console().print(f"session {r['session']}: " + ("reset" if r["reset"] else "nothing to reset")))


def _register_extensions() -> None:
    """Commands that live in their own modules (agents, integrations, benchmarks, scale-out)."""
    agents.register(app)
    export.register(app)
    bench.register(app)
    scale.register(app)
    sources.register(app)


_register_extensions()


#: shells Typer writes completion scripts for
COMPLETION_SHELLS = ("bash", "zsh", "fish", "powershell", "pwsh")


def _print_named_completion(args: list[str]) -> bool:
    """``kt --show-completion bash``: print the script for the shell named, and say so (True).

    Typer's ``--show-completion`` flag takes no value: it asks the parent process which shell runs,
    so under ``sh -c`` (a Dockerfile's ``RUN``, a Makefile) or from no shell at all it answers
    "Shell sh not supported" whatever shell was named after it.
    """
    if len(args) != 2 or args[0] != "--show-completion" or args[1] not in COMPLETION_SHELLS:
        return False
    from typer._completion_shared import get_completion_script  # deferred: only this flag needs it

    script = get_completion_script(prog_name="kt", complete_var="_KT_COMPLETE", shell=args[1])
    try:
        sys.stdout.write(script + "\n")
        sys.stdout.flush()
    except BrokenPipeError:  # `| head`: the reader has what it wanted
        os.dup2(os.open(os.devnull, os.O_WRONLY), sys.stdout.fileno())
    return True


def main() -> None:
    """Console-script entry point."""
    heavy_imports.SKIP_PANDAS_PROBE = True  # this process only lives for one command (or a REPL/server)
    heavy_imports.ONE_SHOT = True  # cleared by the commands that answer many queries (agents.open_tools)
    # pydantic scans every installed distribution's entry points for plugins when the first model is
    # defined (~10% of `kt browse`); kt uses none. An explicit PYDANTIC_DISABLE_PLUGINS is honoured.
    os.environ.setdefault("PYDANTIC_DISABLE_PLUGINS", "__all__")
    if _print_named_completion(sys.argv[1:]):
        return
    try:
        lazy_root(app)(prog_name="kt")
    except KeyboardInterrupt:  # Ctrl-C before a command's own handler is in place (startup, parsing)
        print("Interrupted — nothing was written.", file=sys.stderr)
        sys.exit(130)


if __name__ == "__main__":
    main()
