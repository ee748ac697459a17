"""``kt repl``: an interactive shell over the knowledge map (prompt_toolkit)."""

from __future__ import annotations

import shlex
import sys
from collections.abc import Callable, Iterable, Iterator
from dataclasses import dataclass
from pathlib import Path
from typing import TYPE_CHECKING, Any

from prompt_toolkit import PromptSession
from prompt_toolkit.completion import Completer, Completion
from prompt_toolkit.history import FileHistory, InMemoryHistory

from . import render
from .errors import ConfigError, KnowtologyError
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
    Command("browse", "browse [PATH] [--depth N]", "as kt browse: PATH from the top (default: the top)"),
    Command("search", "search [-k N] QUERY", "search by meaning under the current category (snippets)"),
    Command("grep", "grep [-k N] TERMS", "keyword search under the current category; 'a, b' for several terms"),
    Command("read", "read CHUNK_ID... [--force]", "print chunks in full; repeats say (already read — skip)"),
    Command("history", "history", "the chunk ids this session has read, oldest first"),
    Command("reset", "reset", "forget this session's read history"),
    Command("help", "help", "this list (commands may start with kt, as the hints print them)"),
    Command("exit", "exit", "leave (also quit or Ctrl-D)"),
)
COMMAND_NAMES = tuple(c.name for c in COMMANDS) + ("quit",)
#: what each command accepts after its name: flag -> takes a value
FLAGS: dict[str, dict[str, bool]] = {
    "ls": {"--depth": True}, "browse": {"--depth": True},
    "search": {"-k": True, "--top-k": True, "--under": True},
    "grep": {"-k": True, "--top-k": True, "--under": True},
    "read": {"--force": False},
}
#: CLI commands the hints name that only the terminal runs (not the shell)
TERMINAL_ONLY = ("ingest", "build", "status", "session", "attach", "detach", "mcp", "serve", "ask", "bench", "repl")


def _print_text(text: str) -> None:
    print(text, flush=True)


class Repl:
    """The shell's state and commands; :meth:`run` is the interactive loop.

    Commands mirror the CLI: ``ls``/``cd`` walk the category tree like directories, ``search`` and
    ``grep`` look under the current category, ``read`` prints full text (repeats in the session say
    ``(already read — skip)``), ``history`` lists what this session has read. Tab completes commands,
    category paths and chunk ids; the line history persists in a file. Everything goes through the
    shared :class:`~knowtology_cli.tools.KnowledgeMapTools`; the CLI passes its own printers so the
    output matches ``kt browse/search/grep/read``. Commands may be typed as the CLI and its hints print
    them (``kt browse PATH``, ``search … -k 3``). Fed from a pipe or file, the shell runs the lines as a
    script: no prompt or banner, and it stops with exit status 1 at the first failing line (all lines
    are run with ``keep_going``).

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
        """Run one command line; False means leave the shell (errors are shown, not raised)."""
        try:
            return self.run_line(line)
        except KnowtologyError as exc:
            self.show_error(exc)
        return True

    def run_line(self, line: str) -> bool:
        """Run one command line; False means leave the shell.

        A leading ``kt`` / ``knowtology`` is dropped, so commands copied from hints and the CLI work.

        Raises:
            KnowtologyError: a failing or unknown command.
        """
        line = line.strip()
        if not line or line.startswith("#"):
            return True
        name, _, rest = line.partition(" ")
        if name.lower() in ("kt", "knowtology"):
            name, _, rest = rest.strip().partition(" ")
        return self._dispatch(name.lower(), rest.strip())

    def run_script(self, lines: Iterable[str], *, keep_going: bool = False) -> int:
        """Run commands line by line without prompts (``kt repl`` reading a pipe or file).

        Returns:
            0 when every line ran; 1 after the first failing line (after all lines with
            ``keep_going``). Errors name the line number.
        """
        failed = False
        for number, line in enumerate(lines, start=1):
            try:
                if not self.run_line(line):
                    break
            except KnowtologyError as exc:
                failed = True
                exc.message = f"line {number}: {exc.message}"
                self.show_error(exc)
                if not keep_going:
                    break
        return 1 if failed else 0

    def _dispatch(self, name: str, rest: str) -> bool:
        if name in ("exit", "quit"):
            return False
        if name in ("help", "?"):
            width = max(len(c.usage) for c in COMMANDS)
            self.write("\n".join(f"  {c.usage.ljust(width)}  {c.help}" for c in COMMANDS))
        elif name == "pwd":
            self.write("/" + ("" if self.cwd == ROOT else self.cwd))
        elif name in ("ls", "browse"):
            words, opts = _parse(name, rest)
            path = " ".join(words)
            target = self.resolve(path) if name == "ls" else self.resolve("/" + path)
            depth = _int(opts, "--depth", 1)
            listing = self.tools.browse(target, depth=1 if depth is None else depth)
            self._remember(lead.chunk_id for lead in listing.chunks)
            self.show_browse(listing)
        elif name == "cd":
            self.cwd = self.tools.browse(self.resolve(rest or "/")).path  # the path as stored (any case typed)
        elif name in ("search", "grep"):
            words, opts = _parse(name, rest)
            text = " ".join(words)
            if not text:
                raise _usage(name)
            top_k = _int(opts, "-k", None) or _int(opts, "--top-k", None)
            under = opts.get("--under") or (None if self.cwd == ROOT else self.cwd)
            result = (self.tools.search(text, top_k, under) if name == "search"
                      else self.tools.keyword(text, top_k, under))
            self._remember(h.chunk_id for h in result.hits)
            self.show_hits(result)
        elif name == "read":
            words, opts = _parse(name, rest)
            ids = [part for word in words for part in word.split(",") if part]
            if not ids:
                raise _usage(name)
            self.show_read(self.tools.read(ids, force="--force" in opts))
        elif name == "history":
            read = self.tools.history()
            self.write("\n".join(read) if read else "(nothing read yet in this session)")
        elif name == "reset":
            self.tools.reset_session()
            self.write(f"session {self.tools.session}: read history cleared")
        else:
            if name in TERMINAL_ONLY:
                raise ConfigError(f"`{name}` is not a shell command", hint=f"run it in your terminal: kt {name} {rest}".rstrip())
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
    def run(self, *, keep_going: bool = False, stdin: Any = None) -> int:
        """Read commands until ``exit`` or end of input; the exit status.

        On a terminal: prompts, completion and history (Ctrl-C clears the line, Ctrl-D leaves).
        From a pipe or file: a script run line by line with no prompt or banner (see
        :meth:`run_script`).
        """
        stream = stdin if stdin is not None else sys.stdin
        if not stream.isatty():
            return self.run_script(stream, keep_going=keep_going)
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
        return 0


def _print_error(exc: KnowtologyError) -> None:
    print(f"Error: {exc.message}" + (f"\nHint: {exc.hint}" if exc.hint else ""), file=sys.stderr, flush=True)


def _usage(name: str) -> KnowtologyError:
    usage = next(c.usage for c in COMMANDS if c.name == name)
    return ConfigError(f"usage: {usage}")


def _parse(name: str, rest: str) -> tuple[list[str], dict[str, str]]:
    """Words and the command's flags (``FLAGS``) from the argument text, CLI style (flags anywhere)."""
    try:
        tokens = shlex.split(rest)
    except ValueError:  # an apostrophe in a question: plain words
        tokens = rest.split()
    known = FLAGS.get(name, {})
    words: list[str] = []
    opts: dict[str, str] = {}
    i = 0
    while i < len(tokens):
        token = tokens[i]
        flag, eq, value = token.partition("=")
        if flag in known:
            if known[flag] and not eq:
                if i + 1 >= len(tokens):
                    raise ConfigError(f"{flag} needs a value", hint=f"usage: {_usage(name).message.removeprefix('usage: ')}")
                value, i = tokens[i + 1], i + 1
            opts[flag] = value if known[flag] else "1"
        elif token.startswith("--") and len(token) > 2:
            raise ConfigError(f"{name} has no option {flag}", hint=f"usage: {_usage(name).message.removeprefix('usage: ')}")
        else:
            words.append(token)
        i += 1
    return words, opts


def _int(opts: dict[str, str], flag: str, default: int | None) -> int | None:
    if flag not in opts:
        return default
    try:
        value = int(opts[flag])
    except ValueError:
        raise ConfigError(f"{flag} needs a whole number, got {opts[flag]!r}") from None
    if value < 1:
        raise ConfigError(f"{flag} must be at least 1, got {value}")
    return value


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
