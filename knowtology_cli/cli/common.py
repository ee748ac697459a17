"""Shared CLI plumbing: common options, opening the knowledge base, output and error handling."""

from __future__ import annotations

import functools
import json
import os
import re
import shlex
import sys
import traceback
from collections.abc import Callable, Iterator
from contextlib import contextmanager
from typing import Annotated, Any

import click
import typer

from ..errors import InputError, KnowtologyError
from .group import quiet_exit_on_closed_pipe

#: console width when output is not a terminal and COLUMNS is unset: lines are never cut
UNLIMITED = 1_000_000
#: most input problems listed under an ingest error (the rest are counted)
MAX_PROBLEMS_SHOWN = 20
#: The --store and -c this command line gave (root or command options): a command a hint names gets
#: them, so the line to copy acts on the same store and collection. Environment settings are not
#: repeated: they hold in the shell the hint is copied into.
_NAMED: dict[str, str] = {}
#: ``kt`` followed by a command word, in prose or backticks ("run `kt build`", "kt ingest PATH").
_KT_COMMAND = re.compile(r"(?<![\w./-])kt (?=[a-z])")

StoreOpt = Annotated[str | None, typer.Option("--store", help="Store directory (env KNOWTOLOGY_STORE; default: nearest .knowtology/).", show_default=False)]
CollectionOpt = Annotated[str | None, typer.Option("--collection", "-c", help="Collection name (env KNOWTOLOGY_COLLECTION; default: default).", show_default=False)]
JsonOpt = Annotated[bool, typer.Option("--json", help="Print exactly one JSON document on stdout.")]
SessionOpt = Annotated[str | None, typer.Option("--session", help="Read-history session (env KNOWTOLOGY_SESSION; default: default).", show_default=False)]


def output_width(stream: Any = None) -> int | None:
    """Columns to fit human output into: ``COLUMNS`` when set, else the terminal's width; None for
    a pipe or file (no truncation: scripts and agents get whole lines)."""
    columns = os.environ.get("COLUMNS", "").strip()
    if columns.isdigit() and int(columns) > 0:
        return int(columns)
    stream = stream or sys.stdout
    try:
        if stream.isatty():
            return os.get_terminal_size(stream.fileno()).columns
    except (OSError, ValueError):
        pass
    return None


def console(stderr: bool = False) -> Any:
    """A rich console on stdout (or stderr) following NO_COLOR / FORCE_COLOR and the output width.

    Per no-color.org a non-empty ``NO_COLOR`` turns off every ANSI style (bold and dim too, not
    just colours); a non-empty ``FORCE_COLOR`` styles output even into a pipe (rich reads it);
    ``NO_COLOR`` wins when both are set.
    """
    stream = sys.stderr if stderr else sys.stdout
    plain = os.environ.get("NO_COLOR", "") != ""
    return _console_class()(stderr=stderr, highlight=False, soft_wrap=True, width=output_width(stream) or UNLIMITED,
                   color_system=None if plain else "auto", no_color=plain or None)


def styled_output(stream: Any = None) -> bool:
    """Whether styles can show on ``stream`` (stdout): a terminal or FORCE_COLOR, and no NO_COLOR —
    the same decision rich makes, taken without importing rich."""
    if os.environ.get("NO_COLOR", "") != "":
        return False
    if os.environ.get("FORCE_COLOR", "") != "" or os.environ.get("TTY_COMPATIBLE") == "1":
        return True
    stream = stream or sys.stdout
    try:
        return bool(stream.isatty()) and os.environ.get("TTY_COMPATIBLE") != "0"
    except ValueError:
        return False


@functools.cache
def _console_class() -> Any:
    from rich.console import Console  # deferred: heavy

    class QuietPipeConsole(Console):
        """rich exits 1 when the reader closes the pipe; ``kt … | head`` should end quietly with 0."""

        def on_broken_pipe(self) -> None:
            quiet_exit_on_closed_pipe()

    return QuietPipeConsole


def hint(text: str) -> None:
    """One dim ``Hint: …`` line on stderr (what to run next); stdout stays the command's output."""
    from rich.markup import escape  # deferred: heavy

    console(stderr=True).print(f"[dim]Hint: {escape(with_named_options(text))}[/]")


def name_options(store: str | None, collection: str | None) -> None:
    """Remember the ``--store`` / ``-c`` given on the command line, for :func:`with_named_options`."""
    if store:
        _NAMED["--store"] = store
    if collection:
        _NAMED["-c"] = collection


def with_named_options(text: str, collection: str | None = None) -> str:
    """``text`` with the named ``--store`` / ``-c`` (``collection`` instead of the named one, when
    given) after each ``kt`` that starts a command, so a command a hint names can be copied as is."""
    named = {**_NAMED, **({"-c": collection} if collection else {})}
    if not named or "kt " not in text:
        return text
    flags = " ".join(f"{flag} {shlex.quote(value)}" for flag, value in named.items())
    return _KT_COMMAND.sub(lambda m: f"kt {flags} ", text)


def command_line(*words: str, store: str | None = None, collection: str | None = None) -> str:
    """``kt [--store S] [-c C] WORDS…`` with the store and collection the user gave, shell-quoted: a
    command to copy (root options, so :func:`with_named_options` leaves it as it is)."""
    named = {"--store": store or _NAMED.get("--store"), "-c": collection or _NAMED.get("-c")}
    parts = ["kt", *(part for flag, value in named.items() if value for part in (flag, value)), *words]
    return " ".join(shlex.quote(p) for p in parts)


def settings(store: str | None, collection: str | None, session: str | None = None, **extra: Any) -> Any:
    from ..config import load_settings  # deferred: keeps kt --help fast

    name_options(store, collection)
    return load_settings(store=store, collection=collection, session=session, **extra)


def open_kb(store: str | None, collection: str | None, session: str | None = None, **extra: Any) -> Any:
    """A KnowledgeBase for the resolved settings; the write lock reports waits on stderr."""
    from ..kb import KnowledgeBase  # deferred: keeps kt --help fast

    cfg = settings(store, collection, session, **{k: v for k, v in extra.items() if k in ("embedder", "llm")})
    kb = KnowledgeBase.from_settings(cfg)
    if kb.lock is not None:
        kb.lock.on_wait = lambda text: print(text, file=sys.stderr, flush=True)
    return kb


def named_collection(kb: Any) -> str | None:
    """The collection a flag (the command's -c or the root's) or KNOWTOLOGY_COLLECTION named, else None
    (for commands covering every collection unless one is named)."""
    return kb.settings.collection if kb.settings is not None and kb.settings.collection_named else None


def emit_json(payload: Any) -> None:
    """Write one JSON document to stdout (pydantic records are dumped by field)."""
    if hasattr(payload, "model_dump"):
        payload = payload.model_dump(mode="json")
    sys.stdout.write(json.dumps(payload, ensure_ascii=False, indent=2) + "\n")
    sys.stdout.flush()


@contextmanager
def handled(as_json: bool = False) -> Iterator[None]:
    """Translate library errors to ``Error: …`` on stderr (+ hint) and exit 1; Ctrl-C to exit 130."""
    try:
        yield
    except KnowtologyError as exc:
        if as_json:
            emit_json({"error": exc.to_dict()})
        from rich.markup import escape  # deferred: heavy

        err = console(stderr=True)
        err.print(f"[bold red]Error:[/] {escape(exc.message)}", markup=True, highlight=False)
        if isinstance(exc, InputError):  # each problem once, one line each
            rest = exc.problems[1:]
            for problem in rest[:MAX_PROBLEMS_SHOWN]:
                err.print(f"  {problem}", markup=False)
            if len(rest) > MAX_PROBLEMS_SHOWN:
                err.print(f"  … and {len(rest) - MAX_PROBLEMS_SHOWN} more", markup=False)
        if exc.hint:
            err.print(f"[dim]Hint: {escape(with_named_options(exc.hint))}[/]", markup=True, highlight=False)
        raise typer.Exit(1) from None
    except KeyboardInterrupt:
        message = "Interrupted — nothing half-written was kept; re-run the command to resume."
        if as_json:
            emit_json({"error": {"code": "interrupted", "message": message, "hint": "re-run the command"}})
        print(message, file=sys.stderr)
        raise typer.Exit(130) from None
    except (typer.Exit, typer.Abort, click.ClickException):
        raise
    except Exception as exc:  # a bug: the traceback goes to stderr, and --json still gets its one document
        if not as_json:
            raise
        emit_json({"error": {"code": "internal", "message": f"{type(exc).__name__}: {exc}",
                             "hint": "this is a bug in knowtology; the traceback is on stderr"}})
        traceback.print_exc()
        raise typer.Exit(1) from None


class StderrProgress:
    """A rich progress bar on stderr when it is a terminal; silent otherwise."""

    def __init__(self, enabled: bool | None = None) -> None:
        self.enabled = sys.stderr.isatty() if enabled is None else enabled
        self._progress: Any = None
        self._tasks: dict[str, Any] = {}

    def __enter__(self) -> StderrProgress:
        if self.enabled:
            from rich.progress import (  # deferred: heavy
                BarColumn,
                MofNCompleteColumn,
                Progress,
                TextColumn,
                TimeElapsedColumn,
            )

            self._progress = Progress(TextColumn("{task.description}"), BarColumn(), MofNCompleteColumn(),
                                      TimeElapsedColumn(), console=console(stderr=True), transient=True)
            self._progress.start()
        return self

    def __exit__(self, *exc: object) -> None:
        if self._progress is not None:
            self._progress.stop()

    def update(self, stage: str, done: int, total: int) -> None:
        if self._progress is None:
            return
        if stage not in self._tasks:
            self._tasks[stage] = self._progress.add_task(stage, total=total or None)
        self._progress.update(self._tasks[stage], completed=done, total=total or None)

    def message(self, text: str) -> None:
        if self._progress is not None:
            self._progress.console.print(f"[dim]{text}[/]")
        else:
            print(text, file=sys.stderr)


def run(as_json: bool, fn: Callable[[], Any], render: Callable[[Any], None]) -> None:
    """Call ``fn`` under error handling, then print its result as JSON or through ``render``."""
    with handled(as_json):
        result = fn()
    if as_json:
        emit_json(result)
    else:
        render(result)
