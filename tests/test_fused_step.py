"""The fused in-process lockstep node-step (packets at an idle node) equals the general one.

:func:`node.sync.polled.fused_step` reads the frames' bytes and writes the sends' without
frame or packet objects and without the engine's and clock's general steps. Here two copies of
one node take the same frames, one through it and one through the general path
(:func:`node.sync.polled.layered_step`), and must agree on the bytes
each link carries, the clock and every record the engine keeps, then on every step after it
while packets the fused step left queued go out; where packets share a domain, it must decline
and read nothing. Packets come from real headers (a rule's
``prepare`` and ``forward`` along a random walk), sometimes spoiled (an unknown algorithm, a
garbage header, a hop count past the limit), so the error branches are compared too.
"""

from __future__ import annotations

import itertools
import random
from collections.abc import Hashable
from typing import Any

import msgpack
import pytest
import trio
from hypothesis import HealthCheck, event, given, settings
from hypothesis import strategies as st

from coordinator.runtimes.inprocess import run_inprocess
from coordinator.runtimes.records import RawRun, RunSettings
from coordinator.workloads.plan import random_plan
from node.routing import registry
from node.settings import NodeSettings
from node.switching.engine import Engine
from node.switching.lockstep import Lockstep
from node.sync import polled
from node.topology import PORTS, Coord, Topology
from node.transport.links import QueueLink, queue_link_pair
from node.transport.wire import Packet, StepFrame, decode_link, encode_link, encode_step, step_packets

ALGORITHMS = sorted(a.name for a in registry)


class _Node:
    """One node's engine, clock and links (the far ends kept, to read what it sent)."""

    def __init__(self, topo: Topology, here: Coord, s: NodeSettings) -> None:
        self.engine = Engine(topo, here, registry, s)
        self.ports = tuple(p for p in PORTS if topo.neighbour(here, p) is not None)
        self.clock = Lockstep(self.engine, self.ports, diameter=topo.diameter, max_steps=10_000)
        self.links: dict[str, Any] = {}
        self.far: dict[str, QueueLink] = {}
        for p in self.ports:
            self.links[p], self.far[p] = queue_link_pair()
        self.neighbours: dict[str, Hashable] = {p: topo.neighbour(here, p) for p in self.ports}
        self.bad: list[tuple[str, str]] = []

    def step(self, t: int, fused: bool) -> list[Hashable]:
        if fused:
            got = polled.fused_step(t, self.clock, self.links, self.neighbours)
            assert got is not None, "the fused step declined a frame it should take"
            return got
        return polled.layered_step(t, self.clock, self.links, {}, self.bad.append, self.neighbours)  # type: ignore[arg-type]

    def wire(self) -> dict[str, list[bytes]]:
        """What it sent on each port since the last call (taken off the far ends)."""
        out = {p: list(f.waiting) for p, f in self.far.items()}
        for f in self.far.values():
            f.waiting.clear()
        return out

    def state(self) -> dict[str, Any]:
        e, c = self.engine, self.clock
        return {
            "clock": (c.step, c.last_busy, c.busy, c.next_work),
            "counts": (e.received, e.steps, e.delivered, e.copies, e.sent, e.dropped),
            "peaks": (e.peak_queue, e.peak_in, e.peak_out, e.occupancy_sum),
            "deliveries": [(d.mc, d.step, d.hops, d.startups) for d in e.deliveries],
            "errors": [(x.kind, x.cause, x.mc) for x in e.errors],
            "maps": (e.traffic, e.links_used, e.link_sends, e.link_trace),
            "queued": {
                key: (list(d.inbox), {k: list(q) for k, q in d.out.items() if q}, d.n_out)
                for key, d in e._domains.items()  # what the step left queued
            },
        }


def _walk(topo: Topology, alg: str, rng: random.Random) -> tuple[Coord, str, Any, int] | None:
    """A real packet somewhere on a multicast's way: (node it reaches, input port, header, hops)."""
    rule = registry.get(alg)
    nodes = list(topo.nodes())
    src = rng.choice(nodes)
    dests = rng.sample([n for n in nodes if n != src], rng.randint(1, min(10, len(nodes) - 1)))
    try:
        sends = rule.prepare(topo, src, dests, {})
    except (ValueError, TypeError, KeyError):  # a rule that needs parameters or other destinations
        return None
    here, hops = src, 0
    for _ in range(rng.randint(1, 2 * topo.diameter)):
        if not sends:
            break
        port, header = rng.choice(sends)
        nxt = topo.neighbour(here, port)
        assert nxt is not None
        here, hops = nxt, hops + 1
        arrived = (here, topo.opposite(port), header, hops)
        if rng.random() < 0.6:
            return arrived
        sends = rule.forward(topo, here, header).sends
    return arrived if hops else None


def _rule_on(kind: str, rng: random.Random) -> tuple[str, Topology]:
    """A rule that runs on ``kind``, and a topology of that kind (4 to 8 a side) it supports."""
    alg = rng.choice([a for a in ALGORITHMS if kind in registry.get(a).kinds])
    topo = Topology(kind, rng.randint(4, 8), rng.randint(4, 8))
    return alg, topo if not registry.get(alg).unsupported(topo) else Topology(kind, 8, 8)


SPOILS = st.sampled_from([None, None, None, "algorithm", "header", "hops"])
"""How a packet is spoiled, if at all (:func:`_spoiled`)."""


def _spoiled(
    spoil: str | None, alg: str, header: Any, hops: int, diameter: int, rng: random.Random
) -> tuple[str, Any, int]:
    """The packet's algorithm, header and hops, spoiled as ``spoil`` says (the hop limit is three
    diameters): an unknown rule, a garbage header, or one hop too many."""
    if spoil == "algorithm":
        return "no-such-rule", header, hops
    if spoil == "header":
        return alg, rng.choice(["garbage", [[-1, 99]], {"a": 1}, 7, [[1]]]), hops
    if spoil == "hops":
        return alg, header, 3 * diameter + 1
    return alg, header, hops


@settings(max_examples=600, deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(
    seed=st.integers(0, 2**32 - 1),
    kind=st.sampled_from(["mesh", "torus"]),
    port_model=st.sampled_from(["one-port", "all-port"]),
    contention=st.sampled_from(["isolated", "isolated", "shared"]),
    trace=st.booleans(),
    spoil=SPOILS,
    others=st.sampled_from([0, 0, 1, 2, 3]),
    same_mc=st.integers(0, 9),
    behind=st.booleans(),
)
def test_the_fused_step_equals_the_general_one(
    seed: int,
    kind: str,
    port_model: str,
    contention: str,
    trace: bool,
    spoil: str | None,
    others: int,
    same_mc: int,
    behind: bool,
) -> None:
    rng = random.Random(seed)
    alg, topo = _rule_on(kind, rng)
    walked = _walk(topo, alg, rng)
    if walked is None:
        event("no packet on the way")
        return
    here, port_in, header, hops = walked
    s = NodeSettings(port_model=port_model, contention=contention, trace=trace, hop_limit=3 * topo.diameter)
    mc, startups, t = rng.randint(0, 50), rng.randint(1, 5), rng.randint(1, 40)
    alg, header, hops = _spoiled(spoil, alg, header, hops, topo.diameter, rng)
    # the packet, and others beside it (other multicasts, the same header: on any link, in one frame
    # or apart; now and then one of the same multicast, which must wait for the first)
    by_port: dict[str, list[Packet]] = {port_in: [Packet(mc, alg, header, hops, startups, t - 1)]}
    ports = [p for p in PORTS if topo.neighbour(here, p) is not None]
    for i in range(others):
        other = mc if same_mc == 0 and i == 0 else mc + 1 + i
        by_port.setdefault(rng.choice(ports), []).append(Packet(other, alg, header, hops, startups, t - 1))
    frames = {p: encode_link(StepFrame(t - 1, rng.randint(-1, 40), tuple(pk))) for p, pk in by_port.items()}
    # a neighbour that did step t before this node: its frame of step t waits behind, for step t + 1
    late = (rng.choice(list(frames)), encode_link(StepFrame(t, t, (Packet(99, alg, header, hops, 1, t),))))
    fused, general = _Node(topo, here, s), _Node(topo, here, s)
    for node in (fused, general):
        node.engine.steps = node.clock.step = rng.randint(0, t)  # idle steps the sparse run skipped
        for p, frame in frames.items():
            node.links[p].waiting.append(frame)
        if behind:
            node.links[late[0]].waiting.append(late[1])
        assert node.engine.fusable and node.clock.fusable(t)
    mcs = [pk.mc for pk in itertools.chain(*by_port.values())]
    if len(mcs) > 1 and (contention == "shared" or len(set(mcs)) < len(mcs)):
        before = fused.state()
        assert polled.fused_step(t, fused.clock, fused.links, fused.neighbours) is None
        assert fused.state() == before
        assert all(fused.links[p].waiting[0] == frame for p, frame in frames.items())  # nothing read
        event("declined: packets share a domain")
        assert fused.step(t, False) == general.step(t, False)
    else:
        assert fused.step(t, True) == general.step(t, False)
    assert fused.wire() == general.wire()
    assert fused.state() == general.state()
    assert not general.bad
    assert {p: link.waiting for p, link in fused.links.items()} == (
        {p: link.waiting for p, link in general.links.items()}
    )
    assert sum(len(link.waiting) for link in general.links.values()) == behind
    e = general.engine
    event(f"{len(mcs)} packet(s) on {len(frames)} link(s), errors {sorted({x.kind for x in e.errors})}")
    event(f"delivered {e.delivered}, sent {e.sent}, left queued: {e.busy()}")
    # what the step left queued goes out the same way, step after step
    for u in range(t + 1, t + 12):
        if not general.engine.busy():
            break
        assert fused.step(u, False) == general.step(u, False)
        assert fused.wire() == general.wire()
        assert fused.state() == general.state()
    assert not general.engine.busy()


def test_step_packets_reads_what_decode_link_reads_and_encode_step_writes_what_encode_link_writes() -> None:
    pkts = (Packet(3, "vh", [[1, 2], [3, 4]], 2, 1, 6), Packet(4, "dor", [5, 5], 1, 2, 6))
    data = encode_link(StepFrame(6, 5, pkts))
    assert encode_step(6, 5, [p.to_wire() for p in pkts]) == data
    assert step_packets(data, 6) == (5, [(3, "vh", [[1, 2], [3, 4]], 2, 1), (4, "dor", [5, 5], 1, 2)])
    assert decode_link(data) == StepFrame(6, 5, pkts)
    assert step_packets(encode_link(StepFrame(6, 5, ())), 6) == (5, [])


@pytest.mark.parametrize(
    "obj",
    [
        ["S", 6, 5, [[3, "vh", [], 2, 1, 6, bytes(20)]], 0],  # telemetry (a hop's)
        ["S", 6, 5, [[3, "vh", [], 2, 1, 6], [3, "vh", [], 0, 1, 6]], 0],  # one bad of two
        ["S", 7, 5, [[3, "vh", [], 2, 1, 6]], 0],  # another step
        ["S", 6, 5, [[3, "vh", [], 0, 1, 6]], 0],  # hops 0
        ["S", 6, 5, [[-1, "vh", [], 2, 1, 6]], 0],  # a negative multicast
        ["S", 6, 5, [[3, "", [], 2, 1, 6]], 0],  # no algorithm
        ["S", 6, 5, [[3, "vh", [], 2, 1, 6]], -1],  # negative credits
        ["S", 6, -2, [[3, "vh", [], 2, 1, 6]], 0],  # last busy below -1
        ["S", 6, 5, [[3, "vh", [], 2, 1, 6]]],  # the 4-element form
        ["S", 6, 5, [["H", 1, 2]], 0],  # a flit, not a packet
        ["P", [3, "vh", [], 2, 1, 6]],
        ["B"],
        "S",
    ],
)
def test_step_packets_declines_every_other_frame(obj: Any) -> None:
    assert step_packets(msgpack.packb(obj), 6) is None


def test_step_packets_declines_garbage() -> None:
    assert step_packets(b"\xc1\xff", 0) is None
    assert step_packets(bytearray(b"\x90"), 0) is None


def test_the_fused_step_declines_where_the_general_one_is_needed() -> None:
    topo = Topology.parse("torus:5x5")
    frame = encode_link(StepFrame(2, 2, (Packet(0, "unicast", [3, 3], 1, 1, 2),)))

    def node(**kw: Any) -> _Node:
        n = _Node(topo, (2, 2), NodeSettings(**kw))
        n.clock.step = 3
        return n

    credited = node(contention="shared", buffer=2, policy="block")  # credit flow
    credited.links["+x"].waiting.append(frame)
    two = node()  # two frames of one multicast: one packet waits for the other
    two.links["+x"].waiting.append(frame)
    two.links["-x"].waiting.append(frame)
    injecting = node()  # an injection at the step
    injecting.clock._injections[3] = []
    injecting.links["+x"].waiting.append(frame)
    early = node()  # a frame of the step itself, from a neighbour that went first
    early.links["+x"].waiting.append(encode_link(StepFrame(3, 2, (Packet(0, "unicast", [3, 3], 1, 1, 3),))))
    none = node()
    for n in (credited, two, injecting, early, none):
        before = (n.state(), {p: list(link.waiting) for p, link in n.links.items()})
        assert polled.fused_step(3, n.clock, n.links, n.neighbours) is None
        assert (n.state(), {p: list(link.waiting) for p, link in n.links.items()}) == before  # nothing read
    assert len(two.links["+x"].waiting) == len(two.links["-x"].waiting) == 1


def _runs(plan_seed: int, s: RunSettings, topo: str) -> RawRun:
    plan = random_plan(Topology.parse(topo), ["vh", "unicast"], 6, 4, seed=plan_seed)
    return trio.run(run_inprocess, plan, s)


@pytest.mark.parametrize("port_model", ["one-port", "all-port"])
def test_a_sparse_run_keeps_its_records_with_the_fused_step(
    port_model: str, monkeypatch: pytest.MonkeyPatch
) -> None:
    s = RunSettings(port_model=port_model, trace=True)
    with_it = _runs(3, s, "torus:8x8")
    monkeypatch.setattr(polled, "FUSED", False)
    without = _runs(3, s, "torus:8x8")
    for raw in (with_it, without):
        assert not raw.incomplete
    assert with_it.logical_arrivals() == without.logical_arrivals()
    assert with_it.traffic == without.traffic
    assert sorted(with_it.trace) == sorted(without.trace)
    assert with_it.node_stats == without.node_stats
    assert with_it.link_sends == without.link_sends
    assert with_it.peak_queue == without.peak_queue
    assert with_it.last_step == without.last_step
