"""A lockstep network of :class:`node.switching.wormhole.WormholeEngine`s for the tests, with deadlock
detection.

Each step every node takes its neighbours' step t−1 link frames — msgpack bytes holding the
flits in wire form and the returned credits, as a runtime would ship them —, then its
injections, then steps. The run ends when nothing is busy or in flight (after the last
injection), when worms are in flight but no flit moved and no timer ran anywhere for more
than two steps (deadlock: the report names the worms and the channels they hold), or at
``max_steps``.
"""

from __future__ import annotations

import re
from collections.abc import Sequence
from dataclasses import dataclass, field
from typing import Any

import msgpack

from coordinator.runtimes.records import RawRun
from coordinator.runtimes.wormhole_model import run_wormhole_model
from coordinator.workloads.plan import Multicast, Plan
from node.choices import Contention, PortModel, Switching
from node.routing import registry
from node.settings import NodeSettings
from node.switching.engine import Injection
from node.switching.wormhole import Flit, Holding, WormholeEngine, decode_flit
from node.topology import Coord, Topology
from node.transport.wire import WireError

Record = tuple[int, Coord, int, int, int]  # mc, node, step, hops, start-ups

STALL_STEPS = 2


@dataclass
class NetRun:
    """What a run of the engines produced: sorted arrival records, deadlock report, traffic, errors."""

    arrivals: list[Record]
    deadlock: list[Holding] = field(default_factory=list)
    last_step: int = 0
    traffic: dict[int, int] = field(default_factory=dict)
    errors: list[Any] = field(default_factory=list)
    incomplete: bool = False


def worm_settings(**kw: Any) -> NodeSettings:
    """Wormhole settings for the tests: all-port and a step budget of 100,000 unless ``kw`` says
    otherwise; every other setting its field's default."""
    return NodeSettings(
        **{"switching": Switching.WORMHOLE, "contention": Contention.SHARED, "port_model": PortModel.ALL_PORT,
           "max_steps": 100_000, **kw}
    )  # fmt: skip


def up_to_verdict(multicasts: Sequence[Multicast], model: RawRun) -> list[Multicast]:
    """The multicasts the model made: those up to its deadlock verdict's cycle (docs/wormhole.md
    "Deadlock": none after it), or all. This network has no verdict (it ends at the stall, as the
    distributed runtimes do), so it is compared with the model on these."""
    for x in model.incomplete:
        got = re.match(r"deadlock at cycle (\d+): \d+ worms wait", x)
        if got:
            return [m for m in multicasts if m.step <= int(got.group(1))]
    return list(multicasts)


def model_run(plan: Plan, **kw: Any) -> RawRun:
    """The wormhole reference model on ``plan`` under :func:`worm_settings` (``kw``)."""
    return run_wormhole_model(plan, worm_settings(**kw))


def run_network(
    topology: Topology,
    multicasts: Sequence[Multicast],
    heads: list[tuple[Coord, str, Flit]] | None = None,
    **kw: Any,
) -> NetRun:
    """Step every node's engine in lockstep until quiet, deadlocked or out of steps (settings:
    :func:`worm_settings` of ``kw``); ``heads``: gets (node, port, flit) of every head flit sent."""
    s = worm_settings(**kw)
    max_steps = s.max_steps
    nodes = list(topology.nodes())
    engines = {n: WormholeEngine(topology, n, registry, s) for n in nodes}
    inj: dict[int, list[Multicast]] = {}
    for m in multicasts:
        inj.setdefault(m.step, []).append(m)
    last_inj = max(inj, default=0)
    frames: dict[Coord, dict[str, bytes]] = {n: {} for n in nodes}
    quiet = 0
    t = 0
    run = NetRun([])
    while True:
        nxt: dict[Coord, dict[str, bytes]] = {n: {} for n in nodes}
        for n in nodes:
            e = engines[n]
            for p, data in frames[n].items():
                items, freed = msgpack.unpackb(data, raw=False)  # not `flits`: that is the message length
                # per-VC credits as the wire decoder gives them (a tuple: the compiled engine checks)
                e.credit_back(p, tuple(freed) if isinstance(freed, list) else freed)
                for obj in items:
                    f = decode_flit(obj)
                    assert not isinstance(f, WireError), f.cause
                    e.receive(f, p)
        for m in inj.get(t, ()):
            engines[m.source].inject(Injection(m.id, m.algorithm, list(m.destinations), dict(m.params), t))
        moved = timers = busy = False
        for n in nodes:
            e = engines[n]
            sends = e.step(t)
            moved |= e.moved > 0
            timers |= e.timing()
            busy |= e.busy()
            freed = e.take_freed()
            by_port: dict[str, list[Flit]] = {}
            for p, f in sends:
                by_port.setdefault(p, []).append(f)
                if heads is not None and f.kind in ("H", "W"):
                    heads.append((n, p, f))
            for p in set(by_port) | set(freed):
                nb = topology.neighbour(n, p)
                assert nb is not None
                nxt[nb][topology.opposite(p)] = msgpack.packb(
                    [[f.to_wire() for f in by_port.get(p, [])], freed.get(p, 0)], use_bin_type=True
                )
        frames = nxt
        in_flight = any(frames[n] for n in nodes)
        quiet = 0 if moved or timers else quiet + 1
        if t >= last_inj and not busy and not in_flight:
            break
        if busy and quiet > STALL_STEPS:
            run.deadlock = [h for n in nodes for h in engines[n].holdings()]
            break
        if t >= max_steps:
            run.incomplete = True
            break
        t += 1
    run.last_step = t
    run.arrivals = sorted((d.mc, n, d.step, d.hops, d.startups) for n in nodes for d in engines[n].deliveries)
    for n in nodes:
        for mc, k in engines[n].traffic.items():
            run.traffic[mc] = run.traffic.get(mc, 0) + k
        run.errors.extend((n, x.kind, x.cause) for x in engines[n].errors)
    return run
