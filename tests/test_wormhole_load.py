"""Unicast wormhole traffic under load: zero-load latency, the XY bound, ``meshcast load`` under wormhole.

Zero load: a worm that meets no other worm arrives exactly hops + L + Ts cycles after its injection
(docs/wormhole.md; unicast has no preparation time unless ``--prep`` sets one for every algorithm).
"""

from __future__ import annotations

import itertools
import random
from dataclasses import replace
from pathlib import Path

import pytest

from coordinator.cli import main
from coordinator.experiments.load import Traffic, load_point, run_plan, xy_bound
from coordinator.runtimes.records import RunSettings
from coordinator.workloads.plan import Multicast, Plan
from node.topology import Topology

WORM = RunSettings(contention="shared", switching="wormhole", flits=16, ts=5, max_steps=5000)


def _one_worm_at_a_time(topo: Topology, count: int, gap: int) -> Plan:
    """``count`` random unicasts (seeded), one every ``gap`` cycles: the zero-load limit."""
    rng = random.Random(7)
    nodes = list(topo.nodes())
    mcs = []
    for i in range(count):
        src, dst = rng.sample(nodes, 2)
        mcs.append(Multicast(i, "unicast", src, (dst,), i * gap))
    return Plan(topo, tuple(mcs))


@pytest.mark.parametrize("spec", ["mesh:8x8", "mesh:10x10"])
@pytest.mark.parametrize("engines", [False, True], ids=["model", "engines"])
@pytest.mark.parametrize("prep", [None, 3])
def test_zero_load_latency_is_hops_plus_l_plus_ts(spec: str, engines: bool, prep: int | None) -> None:
    topo = Topology.parse(spec)
    gap = 16 + 5 + 3 + topo.diameter + 2  # each worm has arrived before the next starts
    plan = _one_worm_at_a_time(topo, 40, gap)
    settings = replace(WORM, runtime="engines" if engines else "model", prep=prep)
    raw = run_plan(plan, settings)
    assert not raw.incomplete and len(raw.arrivals) == len(plan.multicasts)
    extra = prep or 0  # unicast: no preparation in seed 004's table; --prep P applies to every algorithm
    hops_seen = set()
    for a in raw.arrivals:
        m = plan.multicasts[a.mc]
        (dx, dy), (sx, sy) = a.node, m.source
        assert a.node == m.destinations[0] and a.hops == abs(dx - sx) + abs(dy - sy)  # XY: shortest
        assert a.step - m.step == a.hops + 16 + 5 + extra, (m, a)
        hops_seen.add(a.hops)
    assert len(hops_seen) >= 7  # short and long worms alike


def test_light_poisson_load_stays_near_the_zero_load_latency() -> None:
    topo = Topology.parse("mesh:8x8")
    traffic = Traffic(rate=0.001, k=1, duration=2000, seed=3)
    p = load_point(topo, "unicast", traffic, replace(WORM, runtime="model"), warmup=200, batches=5)
    zero_load = 16 + 5 + 2 * 8 / 3  # mean XY distance between distinct nodes of a k×k mesh: 2k/3
    assert p.saturated is None and p.latency is not None
    assert zero_load - 1.5 < p.latency < zero_load + 3


def _xy_max_channel_load(topo: Topology) -> float:
    """Flits per cycle on the busiest link when every node sends one flit per cycle, uniformly."""
    load: dict[tuple[tuple[int, int], tuple[int, int]], float] = {}
    nodes = list(topo.nodes())
    share = 1 / (len(nodes) - 1)
    for (sx, sy), (dx, dy) in itertools.permutations(nodes, 2):
        x, y = sx, sy
        while (x, y) != (dx, dy):
            nxt = (x + (dx > x) - (dx < x), y) if x != dx else (x, y + (dy > y) - (dy < y))
            load[((x, y), nxt)] = load.get(((x, y), nxt), 0.0) + share
            x, y = nxt
    return max(load.values())


@pytest.mark.parametrize("spec", ["mesh:8x8", "mesh:10x10", "mesh:5x3", "mesh:4x7", "mesh:6x1"])
def test_xy_bound_is_one_over_the_busiest_links_load(spec: str) -> None:
    topo = Topology.parse(spec)
    assert xy_bound(topo) == pytest.approx(1 / _xy_max_channel_load(topo))


def test_xy_bound_of_square_meshes_and_torus() -> None:
    for k in (4, 8, 10):
        assert xy_bound(Topology.parse(f"mesh:{k}x{k}")) == pytest.approx(4 * (k * k - 1) / k**3)
    assert xy_bound(Topology.parse("torus:4x4")) is None


def test_load_points_under_wormhole_agree_between_model_and_engines() -> None:
    topo = Topology.parse("mesh:4x4")
    traffic = Traffic(rate=0.02, k=1, duration=600, seed=2)
    model = load_point(topo, "unicast", traffic, replace(WORM, runtime="model"), warmup=100, batches=5)
    engines = load_point(topo, "unicast", traffic, replace(WORM, runtime="engines"), warmup=100, batches=5)
    assert model == engines  # peak_queue too: the model counts its input buffers as the engines do
    assert model.peak_queue > 0 and model.link_sends > 0
    assert model.saturated is None and model.latency is not None and model.latency >= 16 + 5 + 1


def test_wormhole_overload_is_saturated() -> None:
    topo = Topology.parse("mesh:4x4")
    traffic = Traffic(rate=0.2, k=1, duration=400, seed=2)  # 3.2 flits/node/cycle offered, bound 0.94
    p = load_point(topo, "unicast", traffic, replace(WORM, runtime="model", max_steps=800), warmup=50)
    assert p.saturated is not None and p.latency is None
    assert p.throughput * 16 <= xy_bound(topo)  # type: ignore[operator]


def test_load_command_under_wormhole_prints_the_bound(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    argv = ["load", "--topology", "mesh:4x4", "--algorithms", "unicast", "--dests", "1",
            "--rates", "0.005,0.01", "--duration", "300", "--warmup", "50", "--switching", "wormhole",
            "--flits", "8", "--ts", "0", "--runtime", "engines", "--out", str(tmp_path)]  # fmt: skip
    assert main(argv) == 0
    assert f"{0.9375 / 8:.5f} messages/node/step" in capsys.readouterr().out
    assert len((tmp_path / "load.csv").read_text().splitlines()) == 3
    assert (tmp_path / "load.png").stat().st_size > 1000


def test_engines_runtime_refuses_the_free_clock(capsys: pytest.CaptureFixture[str]) -> None:
    argv = ["load", "--topology", "mesh:4x4", "--algorithms", "vh", "--rates", "0.01", "--runtime", "engines",
            "--clock", "free"]  # fmt: skip
    assert main(argv) == 2
    assert "lockstep" in capsys.readouterr().err
