"""``meshcast reproduce NAME --out DIR``: re-run a seed paper's experiment and report ours beside theirs.

Each reproduction is one module of this package, found by name; adding one is adding a module
that defines

* ``NAME: str`` — the command-line name (``meshcast reproduce NAME``);
* ``SUMMARY: str`` — one line for ``--help`` (default: the module docstring's first line);
* ``DEFAULT_REPEAT: int`` — optional, the paper's number of runs per point (default 100);
* ``add_arguments(parser)`` — its own options, beyond the common ``--out``, ``--repeat``, ``--seed``;
* ``run(args) -> int`` — do it and return the exit status (0 done, 1 incomplete, 2 bad input).

Modules whose names start with ``_`` are helpers, not reproductions. A module that fails to
import is reported when ``reproduce`` runs; it does not break the rest of the command line.
"""

from __future__ import annotations

import argparse
import importlib
import pkgutil
import sys
from collections.abc import Callable
from dataclasses import dataclass
from types import ModuleType
from typing import Any

__all__ = ["COMMANDS", "Reproduction", "add_command", "load_errors", "reproductions"]


@dataclass(frozen=True, slots=True)
class Reproduction:
    """A registered reproduction: its name, one-line summary and module."""

    name: str
    summary: str
    default_repeat: int
    module: ModuleType

    def add_arguments(self, parser: argparse.ArgumentParser) -> None:
        self.module.add_arguments(parser)

    def run(self, args: argparse.Namespace) -> int:
        return int(self.module.run(args))


#: Modules that could not be loaded, as "module: cause" lines.
load_errors: list[str] = []
_registry: dict[str, Reproduction] | None = None


def _load(mod: ModuleType) -> Reproduction:
    for attr in ("NAME", "add_arguments", "run"):
        if not hasattr(mod, attr):
            raise TypeError(f"defines no {attr}")
    name = mod.NAME
    if not isinstance(name, str) or not name:
        raise TypeError(f"NAME must be a non-empty string, got {name!r}")
    doc = (mod.__doc__ or "").strip().splitlines()
    summary = getattr(mod, "SUMMARY", None) or (doc[0] if doc else name)
    return Reproduction(name, str(summary), int(getattr(mod, "DEFAULT_REPEAT", 100)), mod)


def reproductions() -> dict[str, Reproduction]:
    """Every reproduction of this package by name (loaded once; duplicate names refused)."""
    global _registry
    if _registry is None:
        found: dict[str, Reproduction] = {}
        for info in sorted(pkgutil.iter_modules(__path__), key=lambda i: i.name):
            if info.name.startswith("_"):
                continue
            modname = f"{__name__}.{info.name}"
            try:
                rep = _load(importlib.import_module(modname))
            except Exception as exc:  # a broken contribution must not take the CLI down
                load_errors.append(f"{modname}: {type(exc).__name__}: {exc}")
                continue
            if rep.name in found:
                load_errors.append(
                    f"{modname}: reproduction name {rep.name!r} is already taken by "
                    f"{found[rep.name].module.__name__}"
                )
                continue
            found[rep.name] = rep
        _registry = found
    return _registry


def add_command(sub: Any) -> None:
    """Register ``meshcast reproduce`` with one sub-command per reproduction."""
    p = sub.add_parser(
        "reproduce",
        help="re-run a seed paper's experiment; write report.md and plots (ours vs the paper's)",
        description=__doc__.split("\n\n")[0] if __doc__ else None,
    )
    names = p.add_subparsers(dest="reproduction", required=True, metavar="NAME")
    for name, rep in reproductions().items():
        q = names.add_parser(
            name,
            help=rep.summary,
            description=rep.module.__doc__,
            formatter_class=argparse.RawDescriptionHelpFormatter,
        )
        q.add_argument("--out", required=True, help="directory for report.md, plots and CSVs")
        q.add_argument(
            "--repeat",
            type=int,
            default=rep.default_repeat,
            help=f"random destination sets per point (default {rep.default_repeat}, as the paper)",
        )
        q.add_argument("--seed", type=int, default=1, help="seed of the random destination sets")
        rep.add_arguments(q)


def cmd_reproduce(args: argparse.Namespace) -> int:
    from coordinator.errors import UsageError

    for e in load_errors:
        print(f"warning: reproduction not loaded: {e}", file=sys.stderr)
    rep = reproductions().get(args.reproduction)
    if rep is None:  # argparse has already refused unknown names; kept for direct callers
        raise UsageError(f"unknown reproduction {args.reproduction!r}; known: {', '.join(reproductions())}")
    if args.repeat < 1:
        raise UsageError(f"--repeat must be at least 1, got {args.repeat}")
    return rep.run(args)


COMMANDS: dict[str, Callable[[argparse.Namespace], int]] = {"reproduce": cmd_reproduce}
