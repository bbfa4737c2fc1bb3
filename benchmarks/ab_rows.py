"""Before and after: the bench's wormhole and store-and-forward rows of two checkouts, alternated.

Each round runs every point once in each checkout (A then B, then B then A in the next round, so
drift falls on both alike), each point in a fresh interpreter with that checkout first on its path;
it prints each point's best of the rounds in A and in B and their ratio, as one JSON object with
the date, the load averages and the command. Figures, not assertions.

``--relay``: the six in-process store-and-forward rows of ``meshcast bench`` instead, each as
the bench measures it (``beside_relay``: the relay chain run just before and after the point in
its process), and the figure is the row's ratio to that relay chain; every round's value and
the median of each side are printed too.

    .venv/bin/python benchmarks/ab_rows.py A_DIR B_DIR [--rounds 5] [--relay]
"""

from __future__ import annotations

import argparse
import json
import os
import statistics
import subprocess
import sys
import time

POINTS = [
    ("emulator_point", ["torus:20x20", "lockstep", 100, 50]),
    ("emulator_point", ["torus:20x20", "lockstep", 100, 50, 1, "engines"]),
    ("wormhole_point", ["mesh:16x16", "in-process", 50, 10]),
    ("wormhole_point", ["mesh:16x16", "engines", 50, 10]),
    ("wormhole_point", ["mesh:16x16", "model", 50, 10]),
    ("flit_load_point", ["engines"]),
    ("flit_load_point", ["model"]),
]
"""(bench function, its arguments): (b)'s dense lockstep point and (e) its engines twin (store and
forward), (c) the three wormhole points and (f) flit-level load, as ``meshcast bench`` runs them."""

RELAY_POINTS = [
    ("beside_relay", [spec, clock, m, k])
    for spec, m, k in (("torus:20x20", 100, 50), ("torus:32x32", 100, 50), ("torus:64x64", 1, 10))
    for clock in ("lockstep", "free")
]
"""``--relay``: (b)'s six in-process store-and-forward points, as ``meshcast bench`` runs them."""

CHILD = """
import json, sys
from coordinator.experiments import bench
args = json.loads(sys.argv[2])
if sys.argv[1] == "beside_relay":
    row = bench.beside_relay(bench.emulator_point, bench.Point(*args), (64, 5000))
    print(json.dumps({"rate": row.rate / row.relay_hops_per_s, "complete": row.complete}))
else:
    row = getattr(bench, sys.argv[1])(*args)
    row = row.to_json() if hasattr(row, "to_json") else dict(row)
    rate = row.get("flit_hops_per_s") or row.get("packet_hops_per_s")
    print(json.dumps({"rate": rate, "complete": row.get("complete")}))
"""


def measure(checkout: str, fn: str, args: list[object]) -> float:
    env = dict(os.environ, PYTHONPATH=checkout)
    out = subprocess.run(
        [sys.executable, "-c", CHILD, fn, json.dumps(args)],
        cwd=checkout, env=env, capture_output=True, text=True, check=True, timeout=900,
    )  # fmt: skip
    got = json.loads(out.stdout.strip().splitlines()[-1])
    if not got["complete"]:
        raise SystemExit(f"{checkout}: {fn}{args} did not complete")
    return float(got["rate"])


def _row(point: str, a: list[float], b: list[float]) -> dict[str, object]:
    """One point's figures: the best of each side and their ratio, each side's median and values."""
    return {
        "point": point, "best_a": max(a), "best_b": max(b), "b_over_a": round(max(b) / max(a), 4),
        "median_a": statistics.median(a), "median_b": statistics.median(b), "a": a, "b": b,
    }  # fmt: skip


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("a")
    ap.add_argument("b")
    ap.add_argument("--rounds", type=int, default=5)
    ap.add_argument("--relay", action="store_true", help="the in-process store-and-forward rows' ratios")
    args = ap.parse_args()
    start = (time.strftime("%Y-%m-%d %H:%M UTC", time.gmtime()), os.getloadavg())
    got: dict[str, dict[str, list[float]]] = {}
    for r in range(args.rounds):
        order = (args.a, args.b) if r % 2 == 0 else (args.b, args.a)
        for fn, fargs in RELAY_POINTS if args.relay else POINTS:
            key = f"{fn}{tuple(fargs)}"
            for which in order:
                rate = measure(which, fn, fargs)
                got.setdefault(key, {"a": [], "b": []})["a" if which == args.a else "b"].append(rate)
        print(f"round {r + 1} of {args.rounds} done, load {os.getloadavg()[0]:.2f}", file=sys.stderr)
    rows = [_row(k, v["a"], v["b"]) for k, v in got.items()]
    print(json.dumps({
        "command": "benchmarks/ab_rows.py " + " ".join(sys.argv[1:]), "a": args.a, "b": args.b,
        "rounds": args.rounds, "started": start[0], "loadavg_start": start[1], "loadavg_end": os.getloadavg(),
        "ended": time.strftime("%Y-%m-%d %H:%M UTC", time.gmtime()), "rows": rows,
    }, indent=1))  # fmt: skip


if __name__ == "__main__":
    main()
