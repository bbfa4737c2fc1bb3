"""The centralised reference model: the lockstep semantics as one plain loop over steps.

It calls the same routing rules as the nodes but shares none of the node's code (no
engine, no actor, no links), so that agreement between the two is evidence, not an echo.
Headers go through msgpack between hops, as on the wire.
"""

from __future__ import annotations

from collections import deque
from typing import Any

import msgpack

from coordinator.plan import Plan
from coordinator.records import Arrival, RawRun, RunSettings
from node.routing import UnknownAlgorithm, registry
from node.routing.base import HeaderError
from node.topology import PORTS, Coord

__all__ = ["run_model"]

# a packet in the model: [mc, alg, header, hops, startups]
Pkt = list[Any]


def _wire(header: Any) -> Any:
    return msgpack.unpackb(msgpack.packb(header, use_bin_type=True), raw=False)


def run_model(plan: Plan, settings: RunSettings) -> RawRun:
    """Emulate ``plan`` centrally; same records as a lockstep run of the nodes."""
    topo = plan.topology
    one_port = settings.port_model == "one-port"
    isolated = settings.contention == "isolated"
    hop_limit = settings.hop_limit if settings.hop_limit is not None else 4 * topo.size + 16
    raw = RawRun()
    inject: dict[int, list[Any]] = {}
    for m in plan.multicasts:
        inject.setdefault(m.step, []).append(m)
    # buffers[node][domain] = (inbox deque of Pkt, outq dict key -> deque of (port, Pkt))
    buffers: dict[Coord, dict[int, tuple[deque[Pkt], dict[str, deque[tuple[str, Pkt]]]]]] = {}
    in_flight: list[tuple[Coord, int, Pkt]] = []  # (to, receiving port index, pkt)

    def dom(node: Coord, mc: int) -> tuple[deque[Pkt], dict[str, deque[tuple[str, Pkt]]]]:
        key = mc if isolated else 0
        per = buffers.setdefault(node, {})
        if key not in per:
            per[key] = (deque(), {})
        return per[key]

    def queue(
        node: Coord, mc: int, sends: list[tuple[str, Any]], alg: str, hops: int, sts: list[int]
    ) -> None:
        out = dom(node, mc)[1]
        for (port, header), st in zip(sends, sts, strict=True):
            if topo.neighbour(node, port) is None:
                raw.errors.append({"node": list(node), "kind": "bad-send", "cause": port, "mc": mc})
                continue
            out.setdefault("*" if one_port else port, deque()).append(
                (port, [mc, alg, _wire(header), hops, st])
            )

    last_busy = plan.last_step
    t = 0
    while True:
        arrivals: dict[Coord, list[tuple[int, Pkt]]] = {}
        for to, pidx, pkt in in_flight:
            arrivals.setdefault(to, []).append((pidx, pkt))
        in_flight = []
        for node, lst in arrivals.items():
            lst.sort(key=lambda e: e[0])  # stable: per-link order kept
            for _, pkt in lst:
                dom(node, pkt[0])[0].append(pkt)
        for m in inject.get(t, ()):
            alg = registry.get(m.algorithm)
            sends = alg.prepare(topo, m.source, list(m.destinations), m.params)
            queue(m.source, m.id, sends, m.algorithm, 1, [1] * len(sends))
        busy = False
        for node in sorted(buffers):
            per = buffers[node]
            for key in sorted(per):
                inbox, out = per[key]
                busy = True
                n_in = 1 if one_port else len(inbox)
                for _ in range(min(n_in, len(inbox))):
                    mc, alg_name, header, hops, st = inbox.popleft()
                    if hops > hop_limit:
                        raw.errors.append({"node": list(node), "kind": "hop-limit", "cause": "", "mc": mc})
                        continue
                    try:
                        fwd = registry.get(alg_name).forward(topo, node, header)
                    except (
                        UnknownAlgorithm,
                        HeaderError,
                        ValueError,
                        TypeError,
                        KeyError,
                        IndexError,
                    ) as exc:
                        raw.errors.append(
                            {"node": list(node), "kind": "bad-header", "cause": str(exc), "mc": mc}
                        )
                        continue
                    if fwd.deliver:
                        raw.arrivals.append(Arrival(mc, node, t, hops, st))
                    queue(node, mc, fwd.sends, alg_name, hops + 1, fwd.startups_of(st))
                keys = ["*"] if one_port else list(PORTS)
                for k in keys:
                    q = out.get(k)
                    if q:
                        port, pkt = q.popleft()
                        mc = pkt[0]
                        nb = topo.neighbour(node, port)
                        assert nb is not None
                        in_flight.append((nb, PORTS.index(topo.opposite(port)), pkt))
                        raw.traffic[mc] = raw.traffic.get(mc, 0) + 1
                        raw.links.setdefault(mc, set()).add((node, port))
                        if settings.trace:
                            raw.trace.append((mc, node, port, t))
            for key in [k for k, (i, o) in per.items() if not i and not any(o.values())]:
                del per[key]
        buffers = {n: p for n, p in buffers.items() if p}
        if busy:
            last_busy = max(last_busy, t)
        if (not buffers and not in_flight and t >= plan.last_step) or t >= settings.max_steps:
            break
        t += 1
    raw.last_step = t if t >= settings.max_steps else last_busy + topo.diameter + 1
    if t >= settings.max_steps and (buffers or in_flight):
        raw.incomplete.append(f"step budget of {settings.max_steps} steps ran out")
    return raw
