"""The root command group: subcommands built on first use, plain metavars, quiet exit on a closed pipe."""

from __future__ import annotations

import copy
import inspect
import json
import os
import sys
from collections.abc import Callable, Iterator, MutableMapping
from functools import partial
from pathlib import Path
from typing import Any, NoReturn

import typer
from typer import main as typer_main
from typer._click.exceptions import NoSuchOption, UsageError
from typer._click.utils import make_default_short_help
from typer.core import TyperArgument, TyperGroup, TyperOption

_TYPE_METAVARS: dict[Any, str] = {str: "TEXT", int: "INTEGER", float: "FLOAT", bool: "BOOLEAN", Path: "PATH"}


class _PlainArgument(TyperArgument):
    """An argument shown as ``NAME`` / ``NAMES...`` / ``[NAME]`` (not ``{NAME}`` or ``<list[str]>``)."""

    def make_metavar(self, ctx: Any = None, *, usage: bool = False) -> str:
        name = str(self.metavar) + ("..." if self.nargs != 1 else "")
        return f"[{name}]" if usage and not self.required else name

    # typer ≥ 0.29 draws help and usage through these instead
    def display_type_rich(self, ctx: Any) -> str | None:
        return None

    def _rich_display_name(self) -> str:
        return self.make_metavar()

    def _usage_display_name(self) -> str:
        return self.make_metavar(usage=True)


#: click parameter-type names -> the metavars click itself prints
_CLICK_TYPE_METAVARS = {"str": "TEXT", "text": "TEXT", "integer": "INTEGER", "int": "INTEGER", "float": "FLOAT",
                        "integer range": "INTEGER", "int range": "INTEGER", "float range": "FLOAT", "path": "PATH", "boolean": "BOOLEAN"}


def _option_metavar(param: TyperOption) -> str:
    desc = getattr(param, "type_descriptor", None)  # typer ≥ 0.29
    if desc is not None:
        if desc.is_choice and desc.choices:
            return "[" + "|".join(str(getattr(c, "value", c)) for c in desc.choices) + "]"
        annotation = desc.annotation
        if desc.is_list:
            annotation = (getattr(annotation, "__args__", None) or (str,))[0]
        return _TYPE_METAVARS.get(annotation, "VALUE")
    kind = getattr(param, "type", None)
    choices = getattr(kind, "choices", None)
    if choices:
        return "[" + "|".join(str(getattr(c, "value", c)) for c in choices) + "]"
    return _CLICK_TYPE_METAVARS.get(str(getattr(kind, "name", "")).lower(), "VALUE")


def tidy_params(command: Any) -> Any:
    """Give ``command``'s parameters (and its subcommands', recursively) conventional metavars (idempotent)."""
    for param in command.params:
        if isinstance(param, TyperArgument):
            if param.metavar is None:
                param.metavar = (param.name or "value").upper()
            if type(param) is TyperArgument:
                param.__class__ = _PlainArgument
        elif isinstance(param, TyperOption) and param.metavar is None and not (param.is_flag or param.count):
            param.metavar = _option_metavar(param)
    commands = getattr(command, "commands", None)
    if isinstance(commands, dict):  # built groups (``session``, ``bench``); lazy ones tidy on build
        for sub in commands.values():
            tidy_params(sub)
    return command


class LazyCommands(MutableMapping[str, Any]):
    """Subcommands by name, each built by its factory on first access (registration order kept)."""

    def __init__(self, factories: dict[str, Callable[[], Any]], summaries: dict[str, str]) -> None:
        self._factories = dict(factories)
        self._summaries = dict(summaries)
        self._built: dict[str, Any] = {}

    def __getitem__(self, name: str) -> Any:
        if name not in self._built:
            factory = self._factories[name]  # KeyError for unknown names, as a dict would
            self._built[name] = tidy_params(factory())
        return self._built[name]

    def __setitem__(self, name: str, command: Any) -> None:
        self._built[name] = tidy_params(command)
        self._factories.setdefault(name, lambda: command)

    def __delitem__(self, name: str) -> None:
        del self._factories[name]
        self._built.pop(name, None)
        self._summaries.pop(name, None)

    def __iter__(self) -> Iterator[str]:
        return iter(self._factories)

    def __len__(self) -> int:
        return len(self._factories)

    def summary(self, name: str, limit: int) -> str:
        """The first sentence of the command's help, as click shortens it, without building it."""
        if name in self._built:
            return self._built[name].get_short_help_str(limit)
        return make_default_short_help(self._summaries.get(name, ""), limit)


def quiet_exit_on_closed_pipe() -> NoReturn:
    """The reader went away: send further output to /dev/null (so the final flush cannot fail) and exit 0."""
    devnull = os.open(os.devnull, os.O_WRONLY)
    os.dup2(devnull, sys.stdout.fileno())
    raise typer.Exit(0)


class KtGroup(TyperGroup):
    """The root group.

    ``kt browse`` should not pay for turning 20 other commands' signatures into click objects, so the
    root group holds factories and builds only the command that runs (click's documented "lazily
    loading subcommands" pattern); ``kt --help`` lists names and one-line summaries without building
    any. Help shows click's conventional ``TEXT`` / ``INTEGER`` / ``PATHS...`` instead of Python types.
    A reader that closes the pipe early (``kt grep … | head -1``) ends the command quietly with exit 0,
    as ripgrep does.
    """

    def __init__(self, **attrs: Any) -> None:
        super().__init__(**attrs)
        tidy_params(self)

    def get_command(self, ctx: Any, cmd_name: str) -> Any:
        command = super().get_command(ctx, cmd_name)
        return tidy_params(command) if command is not None else None

    def format_commands(self, ctx: Any, formatter: Any) -> None:
        if not isinstance(self.commands, LazyCommands):
            return super().format_commands(ctx, formatter)
        names = list(self.commands)
        limit = formatter.width - 6 - max(len(n) for n in names)
        with formatter.section("Commands"):
            formatter.write_dl([(n, self.commands.summary(n, limit)) for n in names])
        return None

    def parse_args(self, ctx: Any, args: list[str]) -> list[str]:
        """Root options as given; ``--json`` before the command (``kt --json status``) becomes the
        command's own ``--json``, placed before any ``--`` so it is never read as text to find."""
        rest = super().parse_args(ctx, args)
        if ctx.params.get("as_json") and getattr(ctx, "_protected_args", None):  # a command follows
            ctx.args.insert(ctx.args.index("--") if "--" in ctx.args else len(ctx.args), "--json")
        return rest

    def make_context(self, *args: Any, **kwargs: Any) -> Any:
        try:
            return super().make_context(*args, **kwargs)  # prints --help / --version
        except BrokenPipeError:
            quiet_exit_on_closed_pipe()

    def invoke(self, ctx: Any) -> Any:
        try:
            result = super().invoke(ctx)
            sys.stdout.flush()  # a closed pipe shows here, not in the interpreter's final flush
            return result
        except BrokenPipeError:
            quiet_exit_on_closed_pipe()
        except UsageError as exc:  # a bad flag or value: --json still gets its one document
            command = exc.ctx.command.name if exc.ctx is not None else ""
            if isinstance(exc, NoSuchOption) and command in TEXT_COMMANDS and exc.option_name.startswith("--"):
                exc.message += (f" — to look for text that starts with '-', put -- before it: "
                                f"kt {command} -- {exc.option_name}")
            if "--json" in sys.argv[1:]:
                name = exc.ctx.command_path if exc.ctx is not None else "kt"
                sys.stdout.write(json.dumps({"error": {"code": "usage", "message": exc.format_message(),
                                                       "hint": f"{name} --help"}}, ensure_ascii=False, indent=2) + "\n")
                sys.stdout.flush()
            raise


#: Commands whose arguments are text to look for, which may start with ``-`` (``kt grep -- --force``).
TEXT_COMMANDS = frozenset({"grep", "search", "ask"})


def lazy_root(app: typer.Typer, *, completion: bool = True) -> KtGroup:
    """``app``'s root group with every subcommand built only when it is used or its help shown."""
    bare = copy.copy(app)
    bare.registered_commands, bare.registered_groups = [], []
    root = typer_main.get_group(bare)
    assert isinstance(root, KtGroup), "the app must be made with cls=KtGroup"
    factories: dict[str, Callable[[], Any]] = {}
    summaries: dict[str, str] = {}
    for info in app.registered_commands:
        name = info.name or typer_main.get_command_name(info.callback.__name__)  # type: ignore[union-attr]
        factories[name] = partial(typer_main.get_command_from_info, info,
                                  pretty_exceptions_short=app.pretty_exceptions_short,
                                  rich_markup_mode=app.rich_markup_mode)
        summaries[name] = info.short_help or info.help or inspect.getdoc(info.callback) or ""
    for group in app.registered_groups:
        solved = typer_main.solve_typer_info_defaults(group)
        factories[str(solved.name)] = partial(typer_main.get_group_from_info, group,
                                              pretty_exceptions_short=app.pretty_exceptions_short,
                                              rich_markup_mode=app.rich_markup_mode,
                                              suggest_commands=app.suggest_commands)
        summaries[str(solved.name)] = solved.short_help or typer_main.solve_typer_info_help(group) or ""
    root.commands = LazyCommands(factories, summaries)
    if completion:
        root.params.extend(typer_main.get_install_completion_arguments())
        tidy_params(root)
    return root
