"""The free clock's fused hop (:meth:`Engine.take_free` on :func:`free_packet`'s fields) equals
:meth:`Engine.receive_free` on the decoded packet: the same sends, byte for byte once encoded,
and the same records, telemetry and the domain's free times included.

Two engines with the same settings and the same clock (a counter: every reading is compared)
first take the same earlier packets, so the compared one may meet busy ports; then one takes the
packet as a :class:`Packet` and the other as its fields. Packets come from real headers (a rule's
``prepare`` and ``forward`` along a random walk), sometimes spoiled.
"""

from __future__ import annotations

import itertools
import random
from typing import Any

import msgpack
import pytest
from hypothesis import HealthCheck, event, given, settings
from hypothesis import strategies as st

from node.routing import registry
from node.settings import NodeSettings
from node.switching.engine import Engine
from node.topology import Coord, Topology
from node.transport.wire import (
    TEL_HOP,
    Packet,
    PacketFrame,
    decode_link,
    encode_free,
    encode_packet,
    free_packet,
)
from tests.test_fused_step import SPOILS, _rule_on, _spoiled, _walk


def _engine(topo: Topology, here: Coord, s: NodeSettings) -> Engine:
    return Engine(topo, here, registry, s, clock_ns=itertools.count(10_000, 7).__next__)


def _state(e: Engine) -> dict[str, Any]:
    return {
        "counts": (e.received, e.delivered, e.copies, e.sent, e.dropped),
        "deliveries": [(d.mc, d.step, d.hops, d.startups, d.wall_ns, d.tel) for d in e.deliveries],
        "errors": [(x.kind, x.cause, x.mc) for x in e.errors],
        "maps": (e.traffic, e.links_used, e.link_sends, e.link_trace, e.injected),
        "free": {k: (d.in_free, dict(d.out_free)) for k, d in e._domains.items()},
        "credit": e._credit,
    }


@settings(max_examples=400, deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(
    seed=st.integers(0, 2**32 - 1),
    kind=st.sampled_from(["mesh", "torus"]),
    port_model=st.sampled_from(["one-port", "all-port"]),
    contention=st.sampled_from(["isolated", "shared", "shared-buffered"]),
    telemetry=st.booleans(),
    trace=st.booleans(),
    spoil=SPOILS,
)
def test_take_free_equals_receive_free(
    seed: int, kind: str, port_model: str, contention: str, telemetry: bool, trace: bool, spoil: str | None
) -> None:
    rng = random.Random(seed)
    alg, topo = _rule_on(kind, rng)
    walks = [w for w in (_walk(topo, alg, rng) for _ in range(4)) if w is not None]
    if not walks:
        event("no packet on the way")
        return
    here = walks[-1][0]
    s = NodeSettings(
        clock="free",
        port_model=port_model,
        contention="shared" if contention.startswith("shared") else "isolated",
        buffer=4 if contention == "shared-buffered" else None,
        telemetry=telemetry,
        trace=trace,
        hop_limit=3 * topo.diameter,
    )
    a, b = _engine(topo, here, s), _engine(topo, here, s)
    mc = rng.randint(0, 3)
    earlier = [  # other packets' headers, taken here (some are not on their way: errors, as a node would)
        Packet(rng.randint(0, 3), alg, header, hops, 1, rng.randint(0, 6))
        for _, _, header, hops in walks[:-1]
    ]
    for e in (a, b):  # the same history: busy ports, free times ahead
        for p in earlier:
            e.receive_free(Packet(p.mc, p.alg, p.header, p.hops, p.startups, p.sent))
    _, _, header, hops = walks[-1]
    alg, header, hops = _spoiled(spoil, alg, header, hops, topo.diameter, rng)
    tel = bytes(rng.randrange(256) for _ in range(TEL_HOP * rng.randint(1, 3))) if telemetry else None
    rx = rng.choice([0, 123_456])
    startups, sent = rng.randint(1, 5), rng.randint(0, 9)
    packet = Packet(mc, alg, header, hops, startups, sent, tel)
    packet.rx = rx
    want = [(port, encode_packet(p)) for port, p in a.receive_free(packet)]
    got = [(port, encode_free(w)) for port, w in b.take_free(mc, alg, header, hops, startups, sent, tel, rx)]
    assert got == want
    assert _state(b) == _state(a)
    event(f"sends {len(want)}, delivered {a.delivered}, errors {sorted({x.kind for x in a.errors})}")
    event(f"sent before it: {a.sent - len(want)}")


def test_free_packet_reads_what_decode_link_reads() -> None:
    for tel in (None, bytes(TEL_HOP), bytes(3 * TEL_HOP)):
        pkt = Packet(3, "vh", [[1, 2]], 2, 1, 6, tel)
        data = encode_packet(pkt)
        assert free_packet(data) == (3, "vh", [[1, 2]], 2, 1, 6, tel)
        assert decode_link(data) == PacketFrame(Packet(3, "vh", [[1, 2]], 2, 1, 6, tel))
        assert encode_free(pkt.to_wire()) == data


@pytest.mark.parametrize(
    "obj",
    [
        ["P", [3, "vh", [], 0, 1, 6]],  # hops 0
        ["P", [-1, "vh", [], 2, 1, 6]],  # a negative multicast
        ["P", [3, "", [], 2, 1, 6]],  # no algorithm
        ["P", [3, "vh", [], 2, 0, 6]],  # no start-up
        ["P", [3, "vh", [], 2, 1, -1]],  # a negative send step
        ["P", [3, "vh", [], 2, 1, 6, b"tel"]],  # telemetry of no whole hop
        ["P", [3, "vh", [], 2, 1, 6, "text"]],
        ["P", [3, "vh", [], 2, 1]],
        ["P", [3, "vh", [], 2, 1, 6], 0],
        ["S", 6, 5, [[3, "vh", [], 2, 1, 6]], 0],
        ["B"],
        "P",
    ],
)
def test_free_packet_declines_every_other_frame(obj: Any) -> None:
    assert free_packet(msgpack.packb(obj, use_bin_type=True)) is None


def test_free_packet_declines_garbage() -> None:
    assert free_packet(b"\xc1\xff") is None
    assert free_packet(bytearray(b"\x90")) is None
