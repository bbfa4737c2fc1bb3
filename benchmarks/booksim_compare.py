"""meshcast's wormhole router under ``--router booksim`` beside BookSim2, on BookSim2's own workloads.

Why: the papers' 1-cycle router cannot be compared with BookSim2 like for like; the booksim preset
can (docs/wormhole.md "Router timing"). For each workload (``torus8``: 8×8 torus, dimension
order with a dateline, 2 VCs of 8 flits, 16-flit packets; ``mesh10``: 10×10 mesh, XY, 1 VC of
8 flits, 64-flit packets; uniform traffic) and each injection rate (packets/node/cycle), it
builds a plan of unicasts with Bernoulli injection (each node, each cycle, a packet with that
probability, to a uniform destination), runs it through the reference model (or the engines
runtime) and measures as BookSim2 does: a packet's latency from its creation to its tail's
ejection, averaged over the packets created after the warm-up; a point whose average passes 500
cycles is unstable. BookSim2's uniform traffic may pick the source itself (1/N of its packets,
latency about 3 + 4 cycles + L − 1): meshcast cannot send to itself, so it draws among the others.

With ``--booksim PATH`` (a built ``booksim``: ``tar xzf booksim2-src.tgz -C /tmp/bs && make -C
/tmp/bs/src``) it runs BookSim2 on the same config at the same rates and prints both curves side
by side; ``--csv``/``--png`` write them.

    .venv/bin/python benchmarks/booksim_compare.py torus8 --booksim /tmp/bs/src/booksim \\
        --csv docs/booksim/torus8.csv --png docs/booksim/torus8.png
"""

from __future__ import annotations

import argparse
import csv
import random
import re
import subprocess
import sys
import time
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from coordinator.runtimes.engines import run_engines
from coordinator.runtimes.records import RunSettings
from coordinator.runtimes.wormhole_model import run_wormhole_model
from coordinator.workloads.plan import Multicast, Plan
from node import defaults
from node.topology import Topology

UNSTABLE = 500.0
"""BookSim2 stops a point once its average latency passes this (cycles)."""
SHARED = Path("/work/shared/booksim")


@dataclass(frozen=True)
class Workload:
    """One of BookSim2's configs and meshcast's settings for it."""

    topology: str
    config: str
    booksim: tuple[str, ...]  # overrides on BookSim2's command line
    flits: int
    buffer_flits: int
    vcs: int
    rates: tuple[float, ...]  # packets/node/cycle
    extra: dict[str, Any] = field(default_factory=dict)  # meshcast settings beyond the preset


WORKLOADS = {
    # BookSim2's torus channels have latency 2 (kncube.cpp: "torus channel is longer due to wrap
    # around", use_noc_latency = 1 by default), their credit channels too
    "torus8": Workload(
        "torus:8x8", "torus8.cfg", (), 16, 8, 2,
        (0.001, 0.005, 0.01, 0.013, 0.014, 0.015, 0.016, 0.018, 0.02),
        {"link_latency": 2, "credit_delay": 1},
    ),
    "mesh10": Workload(
        "mesh:10x10", "mesh10.cfg", ("vc_buf_size=8",), 64, 8, 1,
        (0.0005, 0.001, 0.002, 0.0025, 0.003, 0.0035),
    ),
}  # fmt: skip


def bernoulli_plan(topo: Topology, rate: float, cycles: int, seed: int, algorithm: str = "unicast") -> Plan:
    """Each node injects a unicast with probability ``rate`` each cycle, to a uniform other node."""
    rnd = random.Random(seed)
    nodes = sorted(topo.nodes())
    mcs: list[Multicast] = []
    for t in range(cycles):
        for src in nodes:
            if rnd.random() < rate:
                dst = rnd.choice(nodes)
                while dst == src:
                    dst = rnd.choice(nodes)
                mcs.append(Multicast(len(mcs), algorithm, src, (dst,), t))
    return Plan(topo, tuple(mcs))


def meshcast_point(
    w: Workload,
    rate: float,
    cycles: int,
    warmup: int,
    seed: int,
    runtime: str,
    algorithm: str = "unicast",
    dateline: str = defaults.DATELINE,
) -> dict[str, Any]:
    """Average latency (creation to tail ejection) of the packets created after ``warmup``, the accepted
    flit rate over [warmup, cycles) and the average routers crossed (links + 1, as BookSim2 counts)."""
    topo = Topology.parse(w.topology)
    plan = bernoulli_plan(topo, rate, cycles, seed, algorithm)
    s = RunSettings(
        switching="wormhole", contention="shared", port_model="one-port", runtime=runtime,
        router="booksim", flits=w.flits, buffer_flits=w.buffer_flits, vcs=w.vcs, ts=2, prep=0,
        max_steps=cycles * 50, dateline=dateline if w.vcs > 1 else defaults.DATELINE, **w.extra,
    )  # fmt: skip
    started = time.perf_counter()
    raw = run_wormhole_model(plan, s) if runtime == "model" else run_engines(plan, s)
    wall = time.perf_counter() - started
    created = {m.id: m.step for m in plan.multicasts}
    lat, hops, accepted = [], [], 0
    for a in raw.arrivals:
        if warmup <= a.step < cycles:
            accepted += w.flits
        if created[a.mc] >= warmup:
            lat.append(a.step - created[a.mc])
            hops.append(a.hops + 1)
    n = max(1, len(lat))
    return {
        "latency": sum(lat) / n,
        "accepted": accepted / (topo.size * (cycles - warmup)),
        "routers": sum(hops) / n,
        "packets": len(lat),
        "incomplete": bool(raw.incomplete),
        "wall_s": wall,
    }


def booksim_point(path: str, w: Workload, rate: float) -> dict[str, Any]:
    """BookSim2's own numbers on the config at ``rate`` (its latency, accepted flit rate, hops)."""
    out = subprocess.run(
        [path, str(SHARED / w.config), *w.booksim, f"injection_rate={rate}"],
        capture_output=True, text=True, timeout=900, check=False,
    ).stdout  # fmt: skip

    def grab(name: str) -> float | None:
        m = re.search(name + r"\s*=\s*([0-9.eE+-]+)", out)
        return float(m.group(1)) if m else None

    return {
        "latency": grab("Packet latency average"),
        "accepted": grab("Accepted flit rate average"),
        "routers": grab("Hops average"),
        "unstable": "unstable" in out.lower() or grab("Accepted flit rate average") is None,
    }


def main() -> int:
    p = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    p.add_argument("workload", choices=sorted(WORKLOADS))
    p.add_argument("--booksim", help="a built BookSim2 binary: run it at the same rates")
    p.add_argument("--label", default="BookSim2", help="the BookSim2 curve's name in the plot")
    p.add_argument("--cycles", type=int, default=10000, help="cycles of injection per point")
    p.add_argument("--warmup", type=int, default=3000, help="packets created before this are not measured")
    p.add_argument("--seed", type=int, default=1)
    p.add_argument("--runtime", choices=["model", "engines"], default="model")
    p.add_argument(
        "--algorithm",
        choices=["unicast", "dor"],
        default="unicast",
        help="dor: a torus's half-ring tie split by parity (BookSim2 picks at random)",
    )
    p.add_argument(
        "--dateline",
        choices=["wrap", "ring"],
        default=str(defaults.DATELINE),
        help="ring: a worm that will cross a ring's wrap link takes its upper VCs for the whole ring "
        "(BookSim2's)",
    )
    p.add_argument("--rates", type=float, nargs="*", help="packets/node/cycle (default: the workload's)")
    p.add_argument("--csv", type=Path)
    p.add_argument("--png", type=Path)
    a = p.parse_args()
    w = WORKLOADS[a.workload]
    rows = []
    print(
        f"{a.workload}: {w.topology}, L={w.flits}, B={w.buffer_flits}, V={w.vcs}; "
        f"meshcast --router booksim {w.extra}, --algorithm {a.algorithm}, --dateline {a.dateline}"
    )
    print(f"{'pkt/node/cyc':>12} {'flits':>7} | {'meshcast lat':>12} {'acc':>6} {'routers':>7} | "
          f"{'booksim lat':>11} {'acc':>6} {'routers':>7}")  # fmt: skip
    for rate in a.rates or w.rates:
        m = meshcast_point(w, rate, a.cycles, a.warmup, a.seed, a.runtime, a.algorithm, a.dateline)
        b = booksim_point(a.booksim, w, rate) if a.booksim else {}
        row = {
            "rate_packets": rate,
            "rate_flits": rate * w.flits,
            "meshcast_latency": round(m["latency"], 2),
            "meshcast_accepted": round(m["accepted"], 4),
            "meshcast_routers": round(m["routers"], 3),
            "meshcast_unstable": m["latency"] > UNSTABLE or m["incomplete"],
            "booksim_latency": b.get("latency"),
            "booksim_accepted": b.get("accepted"),
            "booksim_routers": b.get("routers"),
            "booksim_unstable": b.get("unstable"),
        }
        rows.append(row)
        bl = b.get("latency")
        print(
            f"{rate:>12g} {rate * w.flits:>7.4f} | {m['latency']:>12.2f} {m['accepted']:>6.4f} "
            f"{m['routers']:>7.3f} | {bl if bl is not None else '-':>11} {b.get('accepted') or '-':>6} "
            f"{b.get('routers') or '-':>7}  ({m['packets']} packets, {m['wall_s']:.1f} s)",
            flush=True,
        )
    if a.csv:
        a.csv.parent.mkdir(parents=True, exist_ok=True)
        with a.csv.open("w", newline="") as f:
            wr = csv.DictWriter(f, fieldnames=list(rows[0]))
            wr.writeheader()
            wr.writerows(rows)
    if a.png:
        import matplotlib

        matplotlib.use("Agg")
        import matplotlib.pyplot as plt

        fig, ax = plt.subplots(figsize=(6, 4))
        for who, style in (("meshcast", "o-"), ("booksim", "s--")):
            pts = [(r["rate_flits"], r[f"{who}_latency"]) for r in rows if r[f"{who}_latency"] is not None]
            pts = [(x, y) for x, y in pts if y <= UNSTABLE * 1.5]
            if pts:
                ax.plot(
                    *zip(*pts, strict=True),
                    style,
                    label=a.label if who == "booksim" else "meshcast --router booksim",
                )
        ax.set_xlabel("offered load (flits/node/cycle)")
        ax.set_ylabel("average packet latency (cycles)")
        ax.set_title(f"{a.workload}: {w.topology}, L={w.flits}, B={w.buffer_flits}, V={w.vcs}")
        ax.axhline(UNSTABLE, color="grey", lw=0.5)
        ax.legend()
        fig.tight_layout()
        a.png.parent.mkdir(parents=True, exist_ok=True)
        fig.savefig(a.png, dpi=100)
    return 0


if __name__ == "__main__":
    sys.exit(main())
