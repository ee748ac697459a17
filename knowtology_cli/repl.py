"""``kt repl``: an interactive shell over the knowledge map (prompt_toolkit).

Commands mirror the CLI: ``ls``/``cd`` walk the category tree like directories, ``search`` and
``grep`` look under the current category, ``read`` prints full text (repeats in the session say
``(already read — skip)``), ``history`` lists what this session has read. Tab completes commands,
category paths and chunk ids; the line history persists in a file. Everything goes through the
shared :class:`~knowtology_cli.tools.KnowledgeMapTools`; the CLI passes its own printers so the
output matches ``kt browse/search/grep/read``.
"""

from __future__ import annotations

import shlex
import sys
from collections.abc import Callable, Iterable, Iterator
from dataclasses import dataclass
from pathlib import Path
from typing import TYPE_CHECKING, Any

from prompt_toolkit.completion import Completer, Completion

from . import render
from .errors import KnowtologyError
from .models import ROOT, BrowseResult, ReadResult, SearchResult

if TYPE_CHECKING:
    from .tools import KnowledgeMapTools

MAX_COMPLETION_IDS = 20_000


@dataclass(frozen=True)
class Command:
    """One REPL command: usage line and what it does."""

    name: str
    usage: str
    help: str


COMMANDS: tuple[Command, ...] = (
    Command("ls", "ls [PATH]", "list the categories under PATH (default: here); at a leaf, its chunks"),
    Command("cd", "cd PATH", "go to a category (.. up, / top); paths may contain spaces"),
    Command("pwd", "pwd", "print the current category"),
    Command("search", "search [-k N] QUERY", "search by meaning under the current category (snippets)"),
    Command("grep", "grep [-k N] TERMS", "keyword search under the current category; 'a, b' for several terms"),
    Command("read", "read CHUNK_ID...", "print chunks in full; repeats say (already read — skip)"),
    Command("history", "history", "the chunk ids this session has read, oldest first"),
    Command("reset", "reset", "forget this session's read history"),
    Command("help", "help", "this list"),
    Command("exit", "exit", "leave (also quit or Ctrl-D)"),
)
COMMAND_NAMES = tuple(c.name for c in COMMANDS) + ("quit",)


def _print_text(text: str) -> None:
    print(text, flush=True)


class Repl:
    """The shell's state and commands; :meth:`run` is the interactive loop.

    Args:
        tools: the shared tool layer (collection, session, stores).
        history_file: where the line history persists (None keeps it in memory).
        show_browse / show_hits / show_read: printers for results (default: the compact agent text).
        show_error: printer for errors (default: ``Error: ...`` and the hint on stderr).
    """

    def __init__(
        self,
        tools: KnowledgeMapTools,
        *,
        history_file: str | Path | None = None,
        show_browse: Callable[[BrowseResult], None] | None = None,
        show_hits: Callable[[SearchResult], None] | None = None,
        show_read: Callable[[ReadResult], None] | None = None,
        show_error: Callable[[KnowtologyError], None] | None = None,
        write: Callable[[str], None] = _print_text,
    ) -> None:
        self.tools = tools
        self.cwd = ROOT
        self.history_file = Path(history_file) if history_file else None
        self.write = write
        self.show_browse = show_browse or (lambda r: write(render.browse_text(r)))
        self.show_hits = show_hits or (lambda r: write(render.search_text(r)))
        self.show_read = show_read or (lambda r: write(render.read_text(r)))
        self.show_error = show_error or _print_error
        self.seen_ids: dict[str, None] = {}
        self._paths: list[str] | None = None
        self._mapped: list[str] | None = None

    # paths --------------------------------------------------------------------------------
    @property
    def prompt(self) -> str:
        return f"kt:{self.tools.collection}:/{'' if self.cwd == ROOT else self.cwd}> "

    def node_paths(self) -> list[str]:
        """Every category path of the collection (cached for completion)."""
        if self._paths is None:
            try:
                self._paths = [n.path for n in self.tools.kb.tree.nodes(self.tools.collection)]
            except KnowtologyError:
                self._paths = []
        return self._paths

    def resolve(self, arg: str) -> str:
        """A category path from ``arg`` relative to the current one (``..``, ``/`` and ``root`` work)."""
        arg = arg.strip()
        if arg in ("", "."):
            return self.cwd
        if arg in ("/", "~", ROOT):
            return ROOT
        parts = [] if arg.startswith("/") or self.cwd == ROOT else self.cwd.split("/")
        for segment in arg.strip("/").split("/"):
            segment = segment.strip()
            if segment in ("", "."):
                continue
            if segment == "..":
                if parts:
                    parts.pop()
            else:
                parts.append(segment)
        return "/".join(parts) or ROOT

    # commands -----------------------------------------------------------------------------
    def execute(self, line: str) -> bool:
        """Run one command line; False means leave the shell."""
        line = line.strip()
        if not line or line.startswith("#"):
            return True
        name, _, rest = line.partition(" ")
        rest = rest.strip()
        try:
            return self._dispatch(name.lower(), rest)
        except KnowtologyError as exc:
            self.show_error(exc)
        return True

    def _dispatch(self, name: str, rest: str) -> bool:
        if name in ("exit", "quit"):
            return False
        if name in ("help", "?"):
            width = max(len(c.usage) for c in COMMANDS)
            self.write("\n".join(f"  {c.usage.ljust(width)}  {c.help}" for c in COMMANDS))
        elif name == "pwd":
            self.write("/" + ("" if self.cwd == ROOT else self.cwd))
        elif name == "ls":
            result = self.tools.browse(self.resolve(rest))
            self._remember(lead.chunk_id for lead in result.chunks)
            self.show_browse(result)
        elif name == "cd":
            target = self.resolve(rest or "/")
            self.tools.browse(target)  # raises NotFoundError for an unknown path
            self.cwd = target
        elif name in ("search", "grep"):
            top_k, text = _take_k(rest)
            if not text:
                raise _usage(name)
            under = None if self.cwd == ROOT else self.cwd
            result = (self.tools.search(text, top_k, under) if name == "search"
                      else self.tools.keyword(text, top_k, under))
            self._remember(h.chunk_id for h in result.hits)
            self.show_hits(result)
        elif name == "read":
            ids = _split_ids(rest)
            if not ids:
                raise _usage(name)
            self.show_read(self.tools.read(ids))
        elif name == "history":
            read = self.tools.history()
            self.write("\n".join(read) if read else "(nothing read yet in this session)")
        elif name == "reset":
            self.tools.reset_session()
            self.write(f"session {self.tools.session}: read history cleared")
        else:
            from .errors import ConfigError

            raise ConfigError(f"unknown command {name!r}", hint="type help for the commands")
        return True

    def _remember(self, ids: Iterable[str]) -> None:
        for chunk_id in ids:
            self.seen_ids[chunk_id] = None

    def chunk_ids(self) -> list[str]:
        """Ids to complete: those shown in this shell first, then the collection's mapped ids."""
        if self._mapped is None:
            try:
                self._mapped = [m.chunk_id for m in self.tools.kb.tree.mappings(self.tools.collection)
                                ][:MAX_COMPLETION_IDS]
            except KnowtologyError:
                self._mapped = []
        return list(dict.fromkeys([*self.seen_ids, *self._mapped]))

    # the loop -----------------------------------------------------------------------------
    def run(self) -> None:
        """Read commands until ``exit`` or Ctrl-D (Ctrl-C clears the line)."""
        from prompt_toolkit import PromptSession
        from prompt_toolkit.history import FileHistory, InMemoryHistory

        history: Any = InMemoryHistory()
        if self.history_file is not None:
            try:
                self.history_file.parent.mkdir(parents=True, exist_ok=True)
                history = FileHistory(str(self.history_file))
            except OSError:
                pass
        session: Any = PromptSession(history=history, completer=ReplCompleter(self), complete_while_typing=False)
        self.write(f"Knowtology shell — collection {self.tools.collection!r}, session {self.tools.session!r}. "
                   "Type help for commands, Tab to complete.")
        while True:
            try:
                line = session.prompt(self.prompt)
            except KeyboardInterrupt:
                continue
            except EOFError:
                break
            if not self.execute(line):
                break


def _print_error(exc: KnowtologyError) -> None:
    print(f"Error: {exc.message}" + (f"\nHint: {exc.hint}" if exc.hint else ""), file=sys.stderr, flush=True)


def _usage(name: str) -> KnowtologyError:
    from .errors import ConfigError

    usage = next(c.usage for c in COMMANDS if c.name == name)
    return ConfigError(f"usage: {usage}")


def _take_k(rest: str) -> tuple[int | None, str]:
    """Split an optional leading ``-k N`` off the argument text."""
    parts = rest.split(None, 2)
    if len(parts) >= 2 and parts[0] in ("-k", "--top-k"):
        try:
            return int(parts[1]), parts[2] if len(parts) > 2 else ""
        except ValueError:
            pass
    return None, rest


def _split_ids(rest: str) -> list[str]:
    try:
        tokens = shlex.split(rest)
    except ValueError:
        tokens = rest.split()
    return [t for token in tokens for t in token.split(",") if t]


class ReplCompleter(Completer):
    """Completes command names, category paths (one segment at a time) and chunk ids."""

    def __init__(self, repl: Repl) -> None:
        self.repl = repl

    def get_completions(self, document: Any, complete_event: Any) -> Iterator[Completion]:
        text = document.text_before_cursor
        if " " not in text:
            for name in COMMAND_NAMES:
                if name.startswith(text.lower()):
                    yield Completion(name + " ", start_position=-len(text), display=name)
            return
        command, _, arg = text.partition(" ")
        command = command.lower()
        if command in ("cd", "ls"):
            typed = arg.lstrip()
            yield from (Completion(c, start_position=-len(typed)) for c in self._paths(typed))
        elif command == "read":
            word = arg.replace(",", " ").split(" ")[-1]
            for chunk_id in self.repl.chunk_ids():
                if chunk_id.startswith(word):
                    yield Completion(chunk_id, start_position=-len(word))

    def _paths(self, arg: str) -> list[str]:
        """Completions for a typed path: the children of its directory part matching the last segment."""
        directory, slash, partial = arg.rpartition("/")
        base = self.repl.resolve(directory + slash if slash else ".")
        if slash and not directory:
            base = ROOT
        prefix = directory + slash
        out = []
        for path in self.repl.node_paths():
            parent, _, name = path.rpartition("/")
            if (parent or ROOT) == base and name.lower().startswith(partial.lower()):
                out.append(prefix + name)
        return sorted(out)
