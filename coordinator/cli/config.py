"""Experiment files: a command's options as TOML, read with ``--config`` and written with ``--print-config``.

An experiment file names its command and holds the command's options by their long names::

    command = "run"

    [options]
    topology = "mesh:8x8"
    algorithm = "vh,dp"
    random-dests = 10
    clock = "free"
    link-delay = "1ms"

Options given on the command line override the file's. The file is checked against the command's
own options (an unknown key, a wrong type or a value outside its choices is one line and exit 2),
and every ``--out`` directory gets the complete file of the command line that made it, so that
``meshcast run --config DIR/config.toml`` runs it again.
"""

from __future__ import annotations

import argparse
import tomllib
from collections.abc import Sequence
from pathlib import Path
from typing import Any

import tomli_w

from coordinator.errors import UsageError

__all__ = ["COMMANDS", "add_config_options", "apply_config", "config_toml", "write_config"]

COMMANDS = ("run", "sweep", "load", "deploy")
"""The commands that take an experiment file."""
LEFT_OUT = frozenset({"help", "config", "print_config", "out", "force", "json", "command"})
"""What an experiment file does not hold: where results go and how they are shown, not what runs."""
CONFIG_NAME = "config.toml"


def add_config_options(p: argparse.ArgumentParser) -> None:
    g = p.add_argument_group("experiment file")
    g.add_argument(
        "--config",
        default=None,
        metavar="FILE.toml",
        help="take the options from this experiment file (e.g. an --out directory's config.toml); "
        "options on the command line override it",
    )
    g.add_argument(
        "--print-config",
        action="store_true",
        help="print the complete experiment file of this command line (TOML) and exit",
    )


def _actions(p: argparse.ArgumentParser) -> dict[str, argparse.Action]:
    """The options an experiment file may set, by long name without the dashes."""
    out = {}
    for a in p._actions:
        longs = [s for s in a.option_strings if s.startswith("--")]
        if longs and a.dest not in LEFT_OUT and a.help is not argparse.SUPPRESS:
            out[longs[0][2:]] = a
    return out


def _config_path(argv: Sequence[str]) -> str | None:
    """``--config``'s value in ``argv`` (before parsing: a file may supply required options)."""
    for i, arg in enumerate(argv):
        if arg == "--config" and i + 1 < len(argv):
            return argv[i + 1]
        if arg.startswith("--config="):
            return arg.split("=", 1)[1]
    return None


def apply_config(command: str, sub: argparse.ArgumentParser, argv: Sequence[str]) -> None:
    """Make the experiment file named in ``argv`` the defaults of ``sub`` (``command``'s parser)."""
    path = _config_path(argv)
    if path is None:
        return
    where = f"--config {path}"
    try:
        doc = tomllib.loads(Path(path).read_text())
    except OSError as exc:
        raise UsageError(f"{where}: {exc.strerror or exc}") from None
    except tomllib.TOMLDecodeError as exc:
        raise UsageError(f"{where}: not TOML ({exc})") from None
    if doc.get("command", command) != command:
        raise UsageError(
            f"{where} is an experiment file of 'meshcast {doc['command']}', not of 'meshcast {command}'"
        )
    extra = set(doc) - {"command", "options"}
    if extra:
        raise UsageError(
            f"{where}: unknown top-level key {sorted(extra)[0]!r} (expected command and [options])"
        )
    options = doc.get("options", {})
    if not isinstance(options, dict):
        raise UsageError(f"{where}: [options] must be a table")
    actions = _actions(sub)
    aliases = {s[2:]: k for k, a in actions.items() for s in a.option_strings if s.startswith("--")}
    defaults: dict[str, Any] = {}
    for key, value in options.items():
        action = actions.get(aliases.get(str(key), str(key)))
        if action is None:
            raise UsageError(f"{where}: 'meshcast {command}' has no option --{key}")
        defaults[action.dest] = _value(where, key, action, value)
        action.required = False  # the file gives it
    sub.set_defaults(**defaults)


def _value(where: str, key: str, action: argparse.Action, value: Any) -> Any:
    """``value`` as the command line would have made it (its type, within its choices)."""
    flags = argparse._StoreTrueAction | argparse._StoreFalseAction | argparse.BooleanOptionalAction
    if isinstance(action, flags):
        if not isinstance(value, bool):
            raise UsageError(f"{where}: {key} must be true or false, got {value!r}")
        return value
    convert = action.type if callable(action.type) else None
    many = isinstance(action, argparse._AppendAction) or action.nargs not in (None, "?")
    if many and not isinstance(value, list):
        raise UsageError(f"{where}: {key} takes a list, got {value!r}")
    items = value if many else None
    try:
        if items is not None:
            got: Any = [convert(str(v)) if convert is not None else v for v in items]
        elif isinstance(value, list | dict):
            raise UsageError(f"{where}: {key} takes one value, got {value!r}")
        else:
            got = convert(str(value)) if convert is not None and not isinstance(value, bool) else value
    except (TypeError, ValueError, argparse.ArgumentTypeError) as exc:
        raise UsageError(f"{where}: {key} = {value!r}: {exc}") from None
    if action.choices is not None and got not in action.choices:
        raise UsageError(f"{where}: {key} must be one of {', '.join(map(str, action.choices))}, got {got!r}")
    return got


def config_toml(
    command: str,
    sub: argparse.ArgumentParser,
    args: argparse.Namespace,
    resolved: Any = None,
) -> str:
    """The complete experiment file of ``args``: every option's value, and every option not given
    as a commented line (TOML has no null) with what it takes and what it does.

    ``resolved``: the settings the command ran with (a :class:`RunSettings`, or a mapping): an
    option not given whose setting the run resolved to a value (``port-model``, ``contention``,
    ``sync``, ``warmup-repeats``...) is written with that value, so that running the file again
    does not depend on a default that may change."""
    options: dict[str, Any] = {}
    unset: list[str] = []
    for key, action in _actions(sub).items():
        value = getattr(args, action.dest, None)
        if value is None:
            value = _resolved(resolved, action)
        if value is None:
            unset.append(_commented(key, action))
            continue
        options[key] = list(value) if isinstance(value, tuple) else value
    head = (
        f"# meshcast experiment file: meshcast {command} --config THIS.toml"
        " (options on the command line override it)\n"
    )
    tail = ""
    if unset:
        tail = (
            "\n# Not given (TOML has no null; a line left commented is an option not given):\n"
            + "\n".join(unset)
            + "\n"
        )
    return head + tomli_w.dumps({"command": command, "options": options}) + tail


def _resolved(resolved: Any, action: argparse.Action) -> Any:
    """``action``'s setting as the run resolved it, when it is a plain value its option takes."""
    if resolved is None:
        return None
    value = resolved.get(action.dest) if isinstance(resolved, dict) else getattr(resolved, action.dest, None)
    if isinstance(value, str):  # str enums too: their value is the option's spelling
        value = str(value)
        return value if action.choices is None or value in action.choices else None
    if isinstance(value, bool) or not isinstance(value, int | float):
        return None
    return value


def _commented(key: str, action: argparse.Action) -> str:
    """``# key = EXAMPLE  # help``: an option not given, as a line to uncomment."""
    if action.choices is not None:
        example = tomli_w.dumps({"x": next(iter(action.choices))})[4:].strip()
        takes = f"one of {', '.join(map(str, action.choices))}"
    else:
        example = str(action.metavar or key.upper().replace("-", "_"))
        takes = ""
    text = " ".join(str(action.help or "").split())
    text = text.replace("%(default)s", "none").replace("%%", "%")
    about = "; ".join(part for part in (takes, text) if part)
    return f"# {key} = {example}" + (f"  # {about}" if about else "")


def write_config(out: Path, command: str, sub: argparse.ArgumentParser, args: argparse.Namespace) -> Path:
    """Write ``out/config.toml``: what made this result directory, to run it again."""
    path = out / CONFIG_NAME
    path.write_text(config_toml(command, sub, args))
    return path
