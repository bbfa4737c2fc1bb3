"""``meshcast check-algorithm NAME``: a rule (built-in or plug-in) against the project's properties."""

from __future__ import annotations

import argparse
import sys
from collections.abc import Callable
from typing import Any

from coordinator.cli.options import in_range
from coordinator.cli.ui import console, plain, progress
from coordinator.errors import UsageError
from coordinator.experiments import check as check_mod
from node.routing import UnknownAlgorithm, plugin_errors, registry

__all__ = ["COMMANDS", "add_command"]


def cmd_check(args: argparse.Namespace) -> int:
    """Run the instances; 0 when every property held, 1 naming each failing instance."""
    in_range("--instances", args.instances, 1, 100_000)
    in_range("--seed", args.seed, 0, 2**63 - 1)
    for e in plugin_errors:
        print(f"warning: {e}", file=sys.stderr)
    try:
        registry.get(args.name)
    except UnknownAlgorithm as exc:
        raise UsageError(str(exc)) from None
    with progress(f"checking {args.name}") as update:
        try:
            insts, failures = check_mod.check_algorithm(args.name, args.instances, args.seed, update)
        except ValueError as exc:
            raise UsageError(str(exc)) from None
    con = console()
    props = "; ".join(check_mod.PROPERTIES)
    if not failures:
        con.print(
            f"[green]ok[/]: {args.name} passed {len(insts)} random instances (seed {args.seed}): {props}"
        )
        return 0
    for f in failures:
        print(f"meshcast: check-algorithm {args.name}: {f}", file=sys.stderr)
    bad = len({f.instance.index for f in failures})
    con.print(
        f"[red]FAILED[/]: {args.name} broke a property on {bad} of {len(insts)} instances (seed {args.seed})"
    )
    return 1


def add_command(sub: Any) -> None:
    """Register ``meshcast check-algorithm``."""
    p = sub.add_parser(
        "check-algorithm",
        help="check a rule (e.g. a plug-in) on random instances: exactly-once, no strays, lockstep = model",
        description=plain(check_mod.__doc__),
    )
    p.add_argument("name", help="an algorithm name from 'meshcast algorithms'")
    p.add_argument(
        "--instances", type=int, default=20, help="random instances (topology, source, destinations)"
    )
    p.add_argument("--seed", type=int, default=1, help="seed of the random instances")


COMMANDS: dict[str, Callable[[argparse.Namespace], int]] = {"check-algorithm": cmd_check}
