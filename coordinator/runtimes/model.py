"""The centralised reference model: the lockstep semantics as one plain loop over steps.

It calls the same routing rules as the nodes but shares none of the node's code (no
engine, no actor, no links), so that agreement between the two is evidence, not an echo.
Headers go through msgpack between hops, as on the wire.
"""

from __future__ import annotations

from collections import deque
from typing import Any

from coordinator.runtimes.records import Arrival, RawRun, RunSettings
from coordinator.runtimes.wormhole_model import run_wormhole_model
from coordinator.workloads.plan import Plan
from node import defaults
from node.choices import Contention, Policy
from node.routing import UnknownAlgorithm, registry
from node.routing.base import HeaderError
from node.switching.factory import check_switching
from node.topology import PORTS, Coord
from node.transport.wire import as_received

__all__ = ["run_model"]

# a packet in the model: [mc, alg, header, hops, startups]
Pkt = list[Any]


def run_model(plan: Plan, settings: RunSettings) -> RawRun:
    """Emulate ``plan`` centrally; same records as a lockstep run of the nodes.

    Under ``switching="wormhole"`` the flit-level reference model
    (:func:`coordinator.runtimes.wormhole_model.run_wormhole_model`) runs instead.
    """
    if settings.wormhole:
        return _run_wormhole(plan, settings)
    topo = plan.topology
    one_port = settings.one_port
    isolated = settings.contention == Contention.ISOLATED
    hop_limit = settings.hop_limit if settings.hop_limit is not None else defaults.hop_limit(topo.size)
    cap_in = None if isolated else settings.buffer
    cap_out = None if isolated else settings.out_buffer
    credits_on = cap_in is not None and settings.policy == Policy.BLOCK
    raw = RawRun()
    inject: dict[int, list[Any]] = {}
    for m in plan.multicasts:
        inject.setdefault(m.step, []).append(m)
    # buffers[node][domain] = (inbox deque of (port, Pkt), outq dict key -> deque of (port, Pkt))
    Inbox = deque[tuple[str, Pkt] | tuple[None, Pkt]]
    buffers: dict[Coord, dict[int, tuple[Inbox, dict[str, deque[tuple[str, Pkt]]]]]] = {}
    held: dict[tuple[Coord, str], int] = {}
    credit: dict[tuple[Coord, str], int] = {}
    if credits_on:
        assert cap_in is not None
        credit = {(n, p): cap_in for n, p, _ in topo.links()}
    in_flight: list[tuple[Coord, str, Pkt]] = []  # (to, receiving port, pkt)
    freed_flight: list[tuple[Coord, str, int]] = []  # (upstream node, its port, credits back)

    def dom(node: Coord, mc: int) -> tuple[Inbox, dict[str, deque[tuple[str, Pkt]]]]:
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
                (port, [mc, alg, as_received(header), hops, st])
            )

    def route(node: Coord, pkt: Pkt) -> Any:
        mc, alg_name, header, hops, _ = pkt
        if hops > hop_limit:
            return {"node": list(node), "kind": "hop-limit", "cause": "", "mc": mc}
        try:
            return registry.get(alg_name).forward(topo, node, header)
        except (UnknownAlgorithm, HeaderError, ValueError, TypeError, KeyError, IndexError) as exc:
            kind = "unknown-algorithm" if isinstance(exc, UnknownAlgorithm) else "bad-header"
            return {"node": list(node), "kind": kind, "cause": str(exc), "mc": mc}

    last_busy = plan.last_step
    t = 0
    while True:
        if credits_on:
            for node, port, n in freed_flight:
                credit[(node, port)] = min(credit[(node, port)] + n, cap_in or 0)
        freed_flight = []
        for to, port, pkt in sorted(in_flight, key=lambda e: PORTS.index(e[1])):  # stable sort
            if cap_in is not None:
                if held.get((to, port), 0) >= cap_in:
                    raw.dropped += 1
                    raw.errors.append({"node": list(to), "kind": "buffer-full", "cause": port, "mc": pkt[0]})
                    continue
                held[(to, port)] = held.get((to, port), 0) + 1
            dom(to, pkt[0])[0].append((port, pkt))
        in_flight = []
        for m in inject.get(t, ()):
            alg = registry.get(m.algorithm)
            sends = alg.prepare(topo, m.source, list(m.destinations), m.params)
            queue(m.source, m.id, sends, m.algorithm, 1, [1] * len(sends))
        busy = False
        for node in sorted(buffers):
            per = buffers[node]
            freed: dict[str, int] = {}
            for key in sorted(per):
                inbox, out = per[key]
                busy = True
                n_in = 1 if one_port else len(inbox)
                for _ in range(min(n_in, len(inbox))):
                    port_in, pkt = inbox[0]
                    fwd = route(node, pkt)
                    waiting = sum(len(q) for q in out.values())
                    if (
                        cap_out is not None
                        and not isinstance(fwd, dict)
                        and waiting
                        and waiting + len(fwd.sends) > cap_out
                    ):
                        break  # the head of the FIFO waits for room, and so does the rest
                    inbox.popleft()
                    if port_in is not None:
                        freed[port_in] = freed.get(port_in, 0) + 1
                        if cap_in is not None:
                            held[(node, port_in)] -= 1
                    if isinstance(fwd, dict):
                        raw.errors.append(fwd)
                        continue
                    mc, alg_name, _, hops, st = pkt
                    if fwd.deliver:
                        raw.arrivals.append(Arrival(mc, node, t, hops, st))
                    queue(node, mc, fwd.sends, alg_name, hops + 1, fwd.startups_of(st))
                for k in ["*"] if one_port else list(PORTS):
                    q = out.get(k)
                    if not q or (credits_on and credit[(node, q[0][0])] <= 0):
                        continue
                    port, pkt = q.popleft()
                    mc = pkt[0]
                    nb = topo.neighbour(node, port)
                    assert nb is not None
                    if credits_on:
                        credit[(node, port)] -= 1
                    in_flight.append((nb, topo.opposite(port), pkt))
                    raw.traffic[mc] = raw.traffic.get(mc, 0) + 1
                    raw.links.setdefault(mc, set()).add((node, port))
                    raw.link_sends[(node, port)] = raw.link_sends.get((node, port), 0) + 1
                    if settings.trace:
                        raw.trace.append((mc, node, port, t))
            for port_in, n in freed.items():
                up = topo.neighbour(node, port_in)
                assert up is not None
                freed_flight.append((up, topo.opposite(port_in), n))
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


def _run_wormhole(plan: Plan, settings: RunSettings) -> RawRun:
    """The wormhole reference model with the run's settings (refused as the nodes refuse them)."""
    why = check_switching(settings, plan.topology.is_torus)
    if why is not None:
        raise ValueError(why)
    return run_wormhole_model(plan, settings)
