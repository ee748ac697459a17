"""Shared CLI plumbing: common options, opening the knowledge base, output and error handling."""

from __future__ import annotations

import json
import sys
from collections.abc import Callable, Iterator
from contextlib import contextmanager
from typing import Annotated, Any

import typer

from ..errors import KnowtologyError

StoreOpt = Annotated[str | None, typer.Option("--store", help="Store directory (env KNOWTOLOGY_STORE; default: nearest .knowtology/).", show_default=False)]
CollectionOpt = Annotated[str | None, typer.Option("--collection", "-c", help="Collection name (env KNOWTOLOGY_COLLECTION; default: default).", show_default=False)]
JsonOpt = Annotated[bool, typer.Option("--json", help="Print exactly one JSON document on stdout.")]
SessionOpt = Annotated[str | None, typer.Option("--session", help="Read-history session (env KNOWTOLOGY_SESSION; default: default).", show_default=False)]


def console(stderr: bool = False) -> Any:
    from rich.console import Console

    stream = sys.stderr if stderr else sys.stdout
    # pipes and CI logs get wide lines instead of 80-column ellipses
    width = None if stream.isatty() else 200
    return Console(stderr=stderr, highlight=False, soft_wrap=True, width=width)


def settings(store: str | None, collection: str | None, session: str | None = None, **extra: Any) -> Any:
    from ..config import load_settings

    return load_settings(store=store, collection=collection, session=session, **extra)


def open_kb(store: str | None, collection: str | None, session: str | None = None, **extra: Any) -> Any:
    """A KnowledgeBase for the resolved settings; the write lock reports waits on stderr."""
    from ..kb import KnowledgeBase

    cfg = settings(store, collection, session, **{k: v for k, v in extra.items() if k in ("embedder", "llm")})
    kb = KnowledgeBase.from_settings(cfg)
    if kb.lock is not None:
        kb.lock.on_wait = lambda text: print(text, file=sys.stderr, flush=True)
    return kb


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
        err = console(stderr=True)
        err.print(f"[bold red]Error:[/] {exc.message}", markup=True, highlight=False)
        if exc.hint:
            err.print(f"[dim]Hint: {exc.hint}[/]", markup=True, highlight=False)
        raise typer.Exit(1) from None
    except KeyboardInterrupt:
        print("Interrupted — nothing half-written was kept; re-run the command to resume.", file=sys.stderr)
        raise typer.Exit(130) from None


class StderrProgress:
    """A rich progress bar on stderr when it is a terminal; silent otherwise."""

    def __init__(self, enabled: bool | None = None) -> None:
        self.enabled = sys.stderr.isatty() if enabled is None else enabled
        self._progress: Any = None
        self._tasks: dict[str, Any] = {}

    def __enter__(self) -> StderrProgress:
        if self.enabled:
            from rich.progress import BarColumn, MofNCompleteColumn, Progress, TextColumn, TimeElapsedColumn

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
