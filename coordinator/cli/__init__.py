"""The meshcast command line: run, sweep, show, replay, load, reproduce, bench, demo, compose, ...

The only layer that knows argparse, rich and exit statuses. Every bad argument ends in one
line naming the cause and exit status 2, a run that did not complete in status 1, an
interrupted one in 128 + the signal number; never a traceback.
"""

from __future__ import annotations

import argparse
import importlib
import sys
from collections.abc import Callable, Sequence
from functools import partial
from typing import Any

from coordinator.cli import config
from coordinator.errors import Interrupted, RunFailed, UsageError
from node.routing import PlanError
from node.topology import TopologyError

__all__ = [
    "add_run_options",
    "build_parser",
    "execute",
    "exit_status",
    "main",
    "plan_from",
    "print_summary",
    "progress_runner",
    "settings_from",
    "timing_from",
]

_LAZY = {
    "add_run_options": "coordinator.cli.options",
    "parse_params": "coordinator.cli.options",
    "_params": "coordinator.cli.options",
    "settings_from": "coordinator.cli.options",
    "timing_from": "coordinator.cli.options",
    "execute": "coordinator.cli.run_command",
    "plan_from": "coordinator.cli.run_command",
    "print_summary": "coordinator.cli.run_command",
    "progress_runner": "coordinator.cli.ui",
}
"""Names this package re-exports, imported on first use (a command imports only what it runs)."""


def __getattr__(name: str) -> Any:
    """The re-exported helpers and the command modules, imported when first asked for."""
    if name in _LAZY:
        module = importlib.import_module(_LAZY[name])
        return getattr(module, "parse_params" if name == "_params" else name)
    if name in _MODULES:
        return importlib.import_module(f"coordinator.cli.{name}")
    raise AttributeError(f"module {__name__!r} has no attribute {name!r}")


DESCRIPTION = """\
meshcast: a networked emulator of multicast routing on 2D mesh and torus networks.
Every node is a trio actor forwarding msgpack packets; 'meshcast run' injects multicasts
and reports time, traffic and arrival variation. 'meshcast algorithms' lists the rules
and their parameters; 'meshcast COMMAND --help' explains each command."""

_MODULES: dict[str, tuple[str, ...]] = {
    "run_command": ("run", "algorithms", "demo"),
    "sweep_command": ("sweep",),
    "show_command": ("show",),
    "replay_command": ("replay",),
    "load_command": ("load",),
    "plot_command": ("plot",),
    "check_command": ("check-algorithm",),
    "reproduce_command": ("reproduce",),
    "bench_command": ("bench",),
    "deploy_command": ("deploy", "deployments", "destroy", "node", "compose", "coordinate"),
}
"""Each command module (``add_command(subparsers)`` and ``COMMANDS``: name -> handler) and the
commands it adds, in the order of ``meshcast --help``. A command line imports only its command's
module (start-up is most of a short command's CPU time); ``tests/test_cli_lazy.py`` checks this
table against the modules' own ``COMMANDS``."""

COMMANDS: dict[str, Callable[[argparse.Namespace], int]] = {}
"""Handlers by command name, filled as their modules are imported (tests may put one in)."""


def _module_of(command: str | None) -> str | None:
    """The command module that adds ``command``, or None for no known command."""
    return next((m for m, names in _MODULES.items() if command in names), None)


def _import_commands(module: str) -> Any:
    """Import one command module and record its handlers."""
    mod = importlib.import_module(f"coordinator.cli.{module}")
    for name, handler in mod.COMMANDS.items():
        COMMANDS.setdefault(name, handler)
    return mod


class _Parser(argparse.ArgumentParser):
    """meshcast's parsers: no abbreviated options (``--algorithm`` is not ``--algorithms``)."""

    def __init__(self, *args: Any, **kwargs: Any) -> None:
        kwargs.setdefault("allow_abbrev", False)
        super().__init__(*args, **kwargs)

    def error(self, message: str) -> Any:  # argparse's own errors: one line, exit 2
        raise UsageError(f"{self.prog}: {message}")


class HelpFormatter(argparse.RawDescriptionHelpFormatter):
    """Descriptions as written; every option's help ends with its default when it has one."""

    def _get_help_string(self, action: argparse.Action) -> str | None:
        text = action.help or ""
        default = action.default
        if (
            "%(default)" in text
            or "default" in text.lower()
            or default in (None, False, argparse.SUPPRESS, [])
            or not action.option_strings
        ):
            return text
        return f"{text} (default: %(default)s)" if text else "(default: %(default)s)"


def build_parser(command: str | None = None) -> argparse.ArgumentParser:
    """The command line: one subparser per command of the command modules.

    ``command``: build only that command's module in full (the others' commands are bare
    parsers, so the names still parse and a wrong one is still named); None builds them all.
    """
    parser = _Parser(prog="meshcast", description=DESCRIPTION, formatter_class=HelpFormatter)
    sub = parser.add_subparsers(dest="command", required=True, parser_class=_Parser)
    only = _module_of(command)
    for module, names in _MODULES.items():
        if only is None or module == only:
            _import_commands(module).add_command(sub)
        else:
            for name in names:
                sub.add_parser(name)
    for name in config.COMMANDS:
        if only is None or _module_of(name) == only:
            config.add_config_options(sub.choices[name])
    for p in _subparsers(parser):
        p.formatter_class = HelpFormatter
    return parser


def _subparsers(parser: argparse.ArgumentParser) -> list[argparse.ArgumentParser]:
    """Every parser below ``parser`` (commands and their own subcommands)."""
    found: list[argparse.ArgumentParser] = []
    for action in parser._actions:
        if isinstance(action, argparse._SubParsersAction):
            for p in dict.fromkeys(action.choices.values()):
                found.append(p)
                found.extend(_subparsers(p))
    return found


def _command_parser(parser: argparse.ArgumentParser, command: str | None) -> argparse.ArgumentParser | None:
    """The sub-parser of ``command``, if there is one."""
    for action in parser._actions:
        if isinstance(action, argparse._SubParsersAction) and command in action.choices:
            sub: argparse.ArgumentParser = action.choices[command]
            return sub
    return None


def _only_interrupts(exc: BaseException) -> bool:
    """A KeyboardInterrupt, or an exception group holding nothing but KeyboardInterrupts."""
    if isinstance(exc, KeyboardInterrupt):
        return True
    if isinstance(exc, BaseExceptionGroup):
        return all(_only_interrupts(e) for e in exc.exceptions)
    return False


def exit_status(exc: BaseException) -> tuple[int, str] | None:
    """The exit status and one-line message for an exception meshcast expects, or None."""
    if isinstance(exc, UsageError):
        msg = str(exc)
        return 2, msg if msg.startswith("meshcast") else f"meshcast: error: {msg}"
    if isinstance(exc, (PlanError, TopologyError)):
        return 2, f"meshcast: error: {exc}"
    if isinstance(exc, Interrupted):
        return 128 + exc.signum, f"meshcast: {exc}"
    if isinstance(exc, RunFailed):
        return 1, f"meshcast: run failed: {exc}"
    if _only_interrupts(exc):
        return 130, "meshcast: interrupted"
    return None


def main(argv: Sequence[str] | None = None) -> int:
    """Parse ``argv``, run the command, map meshcast's errors to one line and an exit status."""
    try:
        argv = list(sys.argv[1:] if argv is None else argv)
        command = next((a for a in argv if not a.startswith("-")), None)
        parser = build_parser(command)
        sub = _command_parser(parser, command) if command in config.COMMANDS else None
        if sub is not None and command is not None:
            config.apply_config(command, sub, argv)
        args = parser.parse_args(argv)
        if isinstance(getattr(args, "out", None), str) and not args.out.strip():
            raise UsageError("--out: the path is empty: give a directory (or a file) to write to")
        if sub is not None and command is not None:
            args.experiment_file = config.config_toml(command, sub, args)
            args.experiment_file_of = partial(config.config_toml, command, sub, args)
            if args.print_config:
                sys.stdout.write(args.experiment_file)
                return 0
        handler = COMMANDS.get(args.command)
        if handler is None:
            handler = _import_commands(_module_of(args.command) or "").COMMANDS[args.command]
        return handler(args)
    except BaseException as exc:
        known = exit_status(exc)
        if known is None:
            raise
        status, message = known
        print(message, file=sys.stderr)
        return status


if __name__ == "__main__":
    sys.exit(main())
