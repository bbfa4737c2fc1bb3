"""Every node's own engine in one plain lockstep loop: the in-process runtime without trio and links.

Why: large mcast(n, d, c) runs (seed 002) need each node's buffer occupancy (``peak_queue``,
``node_stats``), which only the nodes' :class:`~node.engine.Engine` measures — the reference
model (``coordinator/runtimes/model.py``) does not — while the trio runtime spends most of its time on
per-step link frames. This loop drives the very same engines in the actor's lockstep order (at
step t each node takes its neighbours' step t−1 frames port by port — credits, then packets —,
then its injections, then ``Engine.step``) and stops where every actor would (the step after
the last busy one plus the network's diameter). Packets and plan parameters go through msgpack
as on the wire. Its records equal the in-process runtime's, node statistics included
(``tests/test_mcast.py`` checks it).
"""

from __future__ import annotations

import time
from collections.abc import Callable
from typing import Any

import msgpack

from coordinator.runtimes.records import Arrival, RawRun, RunSettings
from coordinator.workloads.plan import Plan
from node.engine import Engine, Injection
from node.routing import registry
from node.topology import PORTS, Coord, Topology
from node.wire import Packet

__all__ = ["run_engines"]


def _wire(obj: Any) -> Any:
    return msgpack.unpackb(msgpack.packb(obj, use_bin_type=True), raw=False)


def _injections(plan: Plan) -> dict[Coord, dict[int, list[Injection]]]:
    out: dict[Coord, dict[int, list[Injection]]] = {n: {} for n in plan.topology.nodes()}
    for mc, alg, src, dests, step, params in _wire(plan.to_wire())["multicasts"]:
        inj = Injection(int(mc), str(alg), [tuple(d) for d in dests], dict(params or {}), int(step))
        out[(int(src[0]), int(src[1]))].setdefault(inj.step, []).append(inj)
    return out


def _engines(topo: Topology, s: RunSettings) -> dict[Coord, Engine]:
    return {
        n: Engine(
            topo,
            n,
            registry,
            port_model=s.port_model,
            contention=s.contention,
            hop_limit=s.hop_limit,
            trace=s.trace,
            in_capacity=s.buffer,
            out_capacity=s.out_buffer,
            policy=s.policy,
            clock_ns=time.monotonic_ns,
        )
        for n in topo.nodes()
    }


def run_engines(
    plan: Plan, settings: RunSettings, progress: Callable[[int, int], None] | None = None
) -> RawRun:
    """Run ``plan`` in lockstep on every node's engine; the same :class:`RawRun` as a runtime."""
    if settings.clock != "lockstep":
        raise ValueError("the engine loop runs the lockstep clock only")
    topo = plan.topology
    engines = _engines(topo, settings)
    injections = _injections(plan)
    nodes = list(topo.nodes())
    ports = {n: [p for p in PORTS if topo.neighbour(n, p) is not None] for n in nodes}
    expected = sum(len(m.destinations) for m in plan.multicasts)
    # frames[node][port] = (packets, freed): what the neighbour across ``port`` sent at t−1
    frames: dict[Coord, dict[str, tuple[list[Packet], int]]] = {n: {} for n in nodes}
    last_busy = plan.last_step
    raw = RawRun()
    started = time.perf_counter()
    t = 0
    while True:
        nxt: dict[Coord, dict[str, tuple[list[Packet], int]]] = {n: {} for n in nodes}
        for n in nodes:
            e = engines[n]
            if t > 0:
                mine = frames[n]
                for p in ports[n]:
                    pkts, freed = mine.get(p, ([], 0))
                    e.credit_back(p, freed)
                    for pkt in pkts:
                        e.receive(pkt, p)
            for inj in injections[n].pop(t, ()):
                e.inject(inj)
            busy = e.busy()
            sends = e.step(t)
            if busy or sends:
                last_busy = t
            freed_by_port = e.take_freed()
            for p in ports[n]:
                out = [Packet.from_wire(_wire(pkt.to_wire())) for q, pkt in sends if q == p]
                freed = freed_by_port.get(p, 0)
                if out or freed:
                    nb = topo.neighbour(n, p)
                    assert nb is not None
                    nxt[nb][topo.opposite(p)] = (out, freed)
        if progress is not None:
            progress(sum(len(e.deliveries) for e in engines.values()), expected)
        if t - last_busy > topo.diameter or t >= settings.max_steps:
            break
        frames = nxt
        t += 1
    raw.last_step = t
    for n, e in engines.items():
        raw.arrivals.extend(Arrival(d.mc, n, d.step, d.hops, d.startups, d.wall_ns, "") for d in e.deliveries)
        raw.errors.extend({"node": list(n), "kind": x.kind, "cause": x.cause, "mc": x.mc} for x in e.errors)
        raw.node_status[n] = "ok"
        raw.hosts[n] = ""
        raw.peak_queue[n] = e.peak_queue
        raw.node_stats[n] = {
            "peak_in": float(e.peak_in),
            "peak_out": float(e.peak_out),
            "mean_occupancy": e.occupancy_sum / e.steps if e.steps else 0.0,
            "dropped": float(e.dropped),
        }
        raw.dropped += e.dropped
        for p, k in e.link_sends.items():
            raw.link_sends[(n, p)] = k
        for mc, k in e.traffic.items():
            raw.traffic[mc] = raw.traffic.get(mc, 0) + k
            raw.links.setdefault(mc, set()).update((n, p) for p in e.links_used.get(mc, ()))
        raw.trace.extend((mc, n, p, st) for mc, p, st in e.link_trace)
        for mc, ns in e.injected.items():
            raw.injected[mc] = (ns, "")
    raw.wall_s = time.perf_counter() - started
    if raw.last_step >= settings.max_steps:
        raw.incomplete.append(f"step budget of {settings.max_steps} steps ran out")
    return raw
