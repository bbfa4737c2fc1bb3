"""``meshcast show``: the options of the picture command, validated, and its one-line report."""

from __future__ import annotations

import argparse
import sys
from collections.abc import Callable
from typing import Any

from coordinator.cli.options import (
    MAX_COUNT,
    add_run_options,
    check_params,
    in_range,
    parse_params,
    settings_from,
    topology_from,
)
from coordinator.cli.ui import plain
from coordinator.errors import UsageError
from coordinator.experiments import show as show_mod
from coordinator.experiments.show import FORMATS, draw_multicast, show
from coordinator.output.paths import prepare_out_file
from coordinator.runtimes.records import LINKS
from coordinator.wording import plural
from coordinator.workloads.plan import PlanError
from node.settings import FREE_CLOCK
from node.topology import TopologyError, parse_coord, parse_coords

__all__ = ["COMMANDS", "add_command"]


def add_command(sub: Any) -> None:
    """Register ``meshcast show``."""
    p = sub.add_parser(
        "show",
        help="draw one multicast on its grid (PNG or SVG)",
        description=plain(show_mod.__doc__),
        formatter_class=argparse.RawDescriptionHelpFormatter,
    )
    p.add_argument("--topology", required=True, help="mesh:MxN or torus:MxN (M columns, N rows)")
    p.add_argument("--algorithm", "--algorithms", required=True, help="one name from 'meshcast algorithms'")
    p.add_argument("--source", default="0,0", help="x,y of the source (default 0,0)")
    p.add_argument("--dests", default=None, help="destinations, e.g. '3,2 9,3 8,5'")
    p.add_argument(
        "--random-dests", type=int, default=None, metavar="K", help="K random destinations (--seed)"
    )
    p.add_argument("--param", action="append", default=[], metavar="NAME=VALUE", help="algorithm parameter")
    p.add_argument("--out", required=True, help="picture file: .png or .svg")
    p.add_argument("--title", default=None, help="replace the title (algorithm, time, traffic)")
    p.add_argument("--link-steps", action="store_true", help="write each link's send step on its arrow")
    p.add_argument("--dpi", type=int, default=150, help="resolution of a PNG (default 150)")
    # the picture is of logical send steps: a link model and the free clock's fidelity settings
    # change nothing in it, so show refuses them rather than ignore them
    add_run_options(p, omit=frozenset({LINKS, FREE_CLOCK}))


def cmd_show(args: argparse.Namespace) -> int:
    """``meshcast show``: validate, emulate one traced multicast, draw it."""
    fmt = args.out.rsplit(".", 1)[-1].lower() if "." in args.out else ""
    if fmt not in FORMATS:
        raise UsageError(f"--out {args.out!r}: the picture must end in .png or .svg")
    if "," in args.algorithm:
        raise UsageError(f"--algorithm {args.algorithm!r}: show draws one algorithm at a time")
    if args.dests is not None and args.random_dests is not None:
        raise UsageError("give either --dests or --random-dests, not both")
    in_range("--dpi", args.dpi, 10, 1200)
    in_range("--random-dests", args.random_dests, 1, MAX_COUNT)
    topo = topology_from(args.topology)
    settings = settings_from(args, topo)
    params = check_params([args.algorithm.strip()], parse_params(args.param))
    out = prepare_out_file(args.out)
    try:
        source = parse_coord(args.source)
        dests = parse_coords(args.dests) if args.dests is not None else None
        result = show(topo, args.algorithm.strip(), source, dests, settings, args.random_dests, params)
    except (PlanError, TopologyError) as exc:
        raise UsageError(str(exc)) from None
    (record,) = result.multicasts
    draw_multicast(topo, record, out, args.title, args.link_steps, args.dpi, result.run.port_model)
    t = record.time
    print(
        f"{record.algorithm}: time {t if t is not None else 'incomplete'}, traffic {record.traffic}; "
        f"wrote {out}",
        file=sys.stderr,
    )
    if record.missing or not result.run.complete:
        print(f"meshcast: {plural(len(record.missing), 'destination')} not reached", file=sys.stderr)
        return 1
    return 0


COMMANDS: dict[str, Callable[[argparse.Namespace], int]] = {"show": cmd_show}
