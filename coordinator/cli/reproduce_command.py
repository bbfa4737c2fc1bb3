"""``meshcast reproduce NAME --out DIR``: the command line of the seed papers' reproductions.

Re-run a seed paper's experiment and report ours beside theirs. The reproductions themselves
(coordinator/reproduce/) declare their options as data; this module turns them into argparse
sub-commands and lends each run a rich progress bar and console.
"""

from __future__ import annotations

import argparse
import sys
from collections.abc import Callable, Iterator
from contextlib import contextmanager
from typing import Any

from coordinator.errors import UsageError
from coordinator.reproduce import load_errors, reproductions
from coordinator.reproduce.framework import Context, Option

__all__ = ["COMMANDS", "add_command"]


def _add(parser: argparse.ArgumentParser, opt: Option, default_repeat: int) -> None:
    if opt.flag:
        parser.add_argument(opt.name, action="store_true", help=opt.help)
        return
    if opt.negatable:
        parser.add_argument(
            opt.name, action=argparse.BooleanOptionalAction, default=opt.default, help=opt.help
        )
        return
    default = default_repeat if opt.dest == "repeat" else opt.default
    help_ = opt.help
    if opt.dest == "repeat":
        help_ = f"{opt.help} (default {default_repeat}, as the paper)"
    kw: dict[str, Any] = {"help": help_, "required": opt.required}
    if opt.type is not None:
        kw["type"] = opt.type
    if opt.choices is not None:
        kw["choices"] = opt.choices
    if not opt.required:
        kw["default"] = default
    parser.add_argument(opt.name, **kw)


def add_command(sub: Any) -> None:
    """Register ``meshcast reproduce`` with one sub-command per reproduction."""
    p = sub.add_parser(
        "reproduce",
        help="re-run a seed paper's experiment; write report.md and plots (ours vs the paper's)",
        description=(__doc__ or "").split("\n\n")[0] or None,
    )
    names = p.add_subparsers(dest="reproduction", required=True, metavar="NAME")
    for name, rep in reproductions().items():
        q = names.add_parser(
            name,
            help=rep.summary,
            description=rep.module.__doc__,
            formatter_class=argparse.RawDescriptionHelpFormatter,
        )
        for opt in rep.options:
            _add(q, opt, rep.default_repeat)


@contextmanager
def _progress(label: str) -> Iterator[Callable[[int, int], None] | None]:
    """A rich progress bar on a terminal (None elsewhere) while the reproduction runs."""
    if not sys.stderr.isatty():
        yield None
        return
    from rich.progress import BarColumn, MofNCompleteColumn, Progress, TextColumn, TimeElapsedColumn

    from coordinator.cli.ui import console

    prog = Progress(
        TextColumn(label),
        BarColumn(),
        MofNCompleteColumn(),
        TimeElapsedColumn(),
        transient=True,
        console=console(stderr=True),
    )
    task = prog.add_task(label, total=None)

    def update(done: int, total: int) -> None:
        prog.update(task, completed=done, total=total)

    with prog:
        yield update


def cmd_reproduce(args: argparse.Namespace) -> int:
    """Run the chosen reproduction with a progress bar and the console; its exit status."""
    from coordinator.cli.ui import console

    for e in load_errors:
        print(f"warning: reproduction not loaded: {e}", file=sys.stderr)
    rep = reproductions().get(args.reproduction)
    if rep is None:  # argparse has already refused unknown names; kept for direct callers
        raise UsageError(f"unknown reproduction {args.reproduction!r}; known: {', '.join(reproductions())}")
    if args.repeat < 1:
        raise UsageError(f"--repeat must be at least 1, got {args.repeat}")
    if getattr(args, "jobs", 1) < 1:
        raise UsageError(f"--jobs must be at least 1, got {args.jobs}")
    con = console()

    def say(line: str) -> None:
        con.print(line, markup=False, highlight=False)

    with _progress(rep.name) as update:
        return rep.run(args, Context(update, say))


COMMANDS: dict[str, Callable[[argparse.Namespace], int]] = {"reproduce": cmd_reproduce}
