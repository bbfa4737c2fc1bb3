"""The control protocol (node/protocol.py): every event round-trips, bad bytes are a ProtocolError,
and the phase table rejects messages out of order — on the node and in the coordinator's session."""

from __future__ import annotations

import math
from typing import Any

import msgpack
import pytest
import trio
from hypothesis import given
from hypothesis import strategies as st

from coordinator.runtimes.records import RunSettings
from coordinator.runtimes.session import Session
from coordinator.workloads.plan import Multicast, Plan
from node import protocol
from node.protocol import Phase, ProtocolError
from node.topology import Topology

EVENTS: list[protocol.Event] = [
    protocol.Hello((1, 2), "host-a"),
    protocol.Ready((0, 0)),
    protocol.Report((3, 1), ((7, 4, 2, 1, 123), (8, 5, 3, 2, None)),
                    (("bad-header", "why", 7), ("x", "y", None))),
    protocol.Error((0, 1), "bad assignment: nope"),
    protocol.Counters((2, 2), 5, 10, 9, 1),
    protocol.Done(
        (1, 1), "ok", "h", 42, (7, 3, 0b1001), ((7, "+x", 3),), ((7, 99),), 3, 4, 2, 1, 1, 0.5, 0, 2,
        {"+x": 3}, 1,
    ),
    protocol.Done((4, 4), "lost: gone"),
    protocol.Done((2, 3), worms=((7, 1, 1, 0, "inj", "+x", 40, 8), (7, 1, 1, 0, "-y", "ej", 41, 8))),
    protocol.Assign(run="r1", topology="torus:4x4", node=(1, 3), port_model="all-port", contention="shared",
                    clock="free", max_steps=100, hop_limit=9, trace=True, token="tok", buffer=4, out_buffer=2,
                    policy="drop", peers={"+x": {"host": "127.0.0.1", "port": 7000}}),
    protocol.PlanMessage(12, ((1, "xy-unicast", (0, 0), ((1, 1), (2, 2)), 3, {"k": [1, 2]}),)),
    protocol.Start(),
    protocol.Probe(3),
    protocol.Stop(),
    protocol.StepDone((2, 1), 7, True, 8, ("+x", "-y")),
    protocol.StepDone((0, 0)),
    protocol.Go(8, ("-x",)),
    protocol.Go(None, (), 41),
    protocol.BrokerLost("mqtt://127.0.0.1:1883", "connection refused"),
    protocol.BrokerBack("mqtt://127.0.0.1:1883"),
    protocol.Beat(6.0),
    protocol.Abandon("interrupted"),
]  # fmt: skip


@pytest.mark.parametrize("event", EVENTS, ids=lambda e: e.TYPE)
def test_every_event_round_trips(event: protocol.Event) -> None:
    assert protocol.decode(protocol.encode(event)) == event


@pytest.mark.parametrize("event", EVENTS, ids=lambda e: e.TYPE)
def test_encode_packs_the_plain_wire_form(event: protocol.Event) -> None:
    """encode() packs field values as they are (tuples as arrays): the bytes of to_wire()'s lists."""
    assert protocol.encode(event) == msgpack.packb(event.to_wire(), use_bin_type=True)


@given(st.lists(st.tuples(*[st.integers(0, 9)] * 4, st.none() | st.integers(0, 9)), max_size=4), st.data())
def test_a_bad_arrival_element_is_named(rows: list[tuple[Any, ...]], data: st.DataObject) -> None:
    """The arrivals' one-pass row check refuses what the generic per-element check refused."""
    wire: list[list[Any]] = [list(r) for r in rows] + [[1, 2, 3, 4, None]]
    row = data.draw(st.sampled_from(wire))
    i = data.draw(st.integers(0, 4))
    row[i] = data.draw(st.sampled_from(["x", 1.5, True, [1]] + ([] if i == 4 else [None])))
    packed = msgpack.packb({"type": "report", "node": [0, 0], "arrivals": wire}, use_bin_type=True)
    with pytest.raises(ProtocolError, match=r"report\.arrivals: expected an integer"):
        protocol.decode(packed)


@given(st.integers(0, 5), st.sampled_from(["x", 1.5, None, [1], {"a": 1}, -1]))
def test_a_bad_traffic_element_is_named(i: int, bad: Any) -> None:
    """The done's flat traffic (multicast, sends, port set per multicast) is checked in one pass,
    naming what is wrong."""
    flat: list[Any] = [1, 1, 0, 3, 2, 0b1001]
    flat[i] = bad
    done = {"type": "done", "node": [0, 0], "status": "ok", "traffic": flat}
    with pytest.raises(ProtocolError, match=r"done\.traffic: expected an integer >= 0"):
        protocol.decode(msgpack.packb(done, use_bin_type=True))
    for wrong, cause in (
        ([3, 2], "a multiple of 3"),
        ([3, 2, 16], "a port set"),
        ([[3], 2, 1], "an integer"),
    ):
        done["traffic"] = wrong
        with pytest.raises(ProtocolError, match=rf"done\.traffic: .*{cause}"):
            protocol.decode(msgpack.packb(done, use_bin_type=True))


def test_every_message_type_is_covered() -> None:
    assert {e.TYPE for e in EVENTS} == set(protocol._TYPES)


@given(st.binary(max_size=200))
def test_garbage_is_a_protocol_error_or_an_event(data: bytes) -> None:
    try:
        event = protocol.decode(data)
    except ProtocolError as exc:
        assert str(exc)
    else:
        assert protocol.decode(protocol.encode(event)) == event


_values = st.recursive(
    st.none() | st.booleans() | st.integers(-3, 3) | st.text(max_size=4) | st.floats(allow_nan=False),
    lambda inner: st.lists(inner, max_size=3) | st.dictionaries(st.text(max_size=4), inner, max_size=3),
    max_leaves=8,
)


@given(st.sampled_from(EVENTS), st.data())
def test_a_corrupted_field_is_named(event: protocol.Event, data: st.DataObject) -> None:
    wire: dict[str, Any] = event.to_wire()
    if len(wire) == 1:
        return  # no fields to corrupt
    name = data.draw(st.sampled_from(sorted(k for k in wire if k != "type")))
    wire[name] = data.draw(_values)
    try:
        decoded = protocol.decode(msgpack.packb(wire, use_bin_type=True))
    except ProtocolError as exc:
        assert name in str(exc) and wire["type"] in str(exc)
    else:  # the new value happened to be valid: it must still round-trip
        assert protocol.decode(protocol.encode(decoded)) == decoded


@pytest.mark.parametrize(
    ("data", "cause"),
    [
        (b"\xc1", "not msgpack"),
        (msgpack.packb([1, 2]), "map with a 'type'"),
        (msgpack.packb({"type": "warp"}), "unknown control message type"),
        (msgpack.packb({"type": "hello"}), "missing field 'node'"),
        (msgpack.packb({"type": "probe", "probe": True}), "probe.probe"),
        (msgpack.packb({"type": "ready", "node": [1]}), "ready.node"),
        (msgpack.packb({"type": "go", "step": 3, "expect": ["up"]}), "go.expect"),
        (msgpack.packb({"type": "go", "step": -1}), "go.step"),
        (msgpack.packb({"type": "step-done", "node": [0, 0], "sent": ["+x", "+x"]}), "step-done.sent"),
        (
            msgpack.packb({"type": "done", "node": [0, 0], "worms": [[7, 1, 1, 0, "inj", "+x", 40]]}),
            "done.worms.*8 elements",
        ),
        (
            msgpack.packb({"type": "done", "node": [0, 0], "worms": [[7, 1, 1, 0, "+x", "up", 40, 8]]}),
            "done.worms.*or ej",
        ),
        (
            msgpack.packb({"type": "done", "node": [0, 0], "worms": [[7, 1, 1, 0, "+x", "ej", 40, 0]]}),
            "done.worms.*at least 1",
        ),
        (
            msgpack.packb({"type": "done", "node": [0, 0], "worms": [[7, 1, 1, -1, "+x", "ej", 40, 2]]}),
            "done.worms.*>= 0",
        ),
        (msgpack.packb({"type": "done", "node": [0, 0], "worms": 5}), "done.worms.*array"),
        (
            msgpack.packb({"type": "done", "node": [0, 0], "worms": [[7, 1, 1, 0, "ej", "+x", 40, 2]]}),
            "done.worms.*or inj",
        ),
    ],
)
def test_malformed_messages_name_their_cause(data: bytes, cause: str) -> None:
    with pytest.raises(ProtocolError, match=cause):
        protocol.decode(data)


def test_the_phase_table_walks_a_barrier_run() -> None:
    phase = Phase.NEW
    for kind in ["hello", "assign", "ready", "plan", "start", "step-done", "go", "step-done", "go", "report",
                 "stop", "step-done", "go", "done", "go"]:  # fmt: skip
        phase = protocol.advance(phase, kind)
    assert phase is Phase.DONE
    with pytest.raises(ProtocolError):
        protocol.advance(Phase.PLANNED, "go")


def test_the_phase_table_walks_the_whole_conversation() -> None:
    phase = Phase.NEW
    for kind in ["hello", "assign", "ready", "report", "plan", "start", "report", "probe", "counters", "stop",
                 "report", "done", "stop"]:  # fmt: skip
        phase = protocol.advance(phase, kind)
    assert phase is Phase.DONE


@pytest.mark.parametrize(
    ("before", "kind"),
    [
        ([], "ready"),  # links up before saying hello
        (["hello"], "plan"),  # a plan before the assignment
        (["hello", "assign"], "start"),  # start before ready and plan
        (["hello", "assign", "ready"], "start"),  # start before the plan
        (["hello", "assign", "ready", "plan", "start"], "assign"),  # a second assignment mid-run
        (["hello", "hello"][:1], "hello"),  # hello twice
        (["hello", "assign", "ready", "plan", "start", "done"], "report"),  # a report after done
    ],
)
def test_the_phase_table_rejects_out_of_order_messages(before: list[str], kind: str) -> None:
    phase = Phase.NEW
    for k in before:
        phase = protocol.advance(phase, k)
    with pytest.raises(ProtocolError, match=f"unexpected '{kind}'"):
        protocol.advance(phase, kind)


def _session(
    plan: Plan, settings: RunSettings
) -> tuple[Session, trio.MemorySendChannel[bytes], list[protocol.Event]]:
    """A Session whose nodes are an inbox the test fills, and the events it sent them (decoded)."""
    inbox_tx, inbox_rx = trio.open_memory_channel[bytes](math.inf)
    sent: list[protocol.Event] = []

    async def send(*args: Any) -> None:  # send_to(node, data) and broadcast(data) alike
        sent.append(protocol.decode(args[-1]))

    return Session(plan, settings, send, send, inbox_rx), inbox_tx, sent


async def test_the_session_records_an_out_of_order_message() -> None:
    """A node that sends ``ready`` before ``hello`` is named in a protocol error; the run goes on."""
    topo = Topology.parse("mesh:2x1")
    plan = Plan(topo, (Multicast(1, "xy-unicast", (0, 0), ((1, 0),)),))
    session, inbox_tx, sent = _session(plan, RunSettings(wall_budget=0.5))
    inbox_tx.send_nowait(protocol.encode(protocol.Ready((1, 0))))
    inbox_tx.send_nowait(protocol.encode(protocol.Stop()))  # not a node's message at all
    inbox_tx.send_nowait(protocol.encode(protocol.Hello((1, 0), "h")))
    raw = await session.run({(0, 0), (1, 0)})
    causes = [e["cause"] for e in raw.errors if e["kind"] == "protocol"]
    assert any("(1,0)" in c and "unexpected 'ready' while new" in c for c in causes), causes
    assert any("'stop' is not a message for the coordinator" in c for c in causes), causes
    # (1,0) was assigned all the same (it dials nobody, so it needs no other node's hello)
    assert [type(e) for e in sent[:1]] == [protocol.Assign]
    assert any("budget" in s for s in raw.incomplete)


async def test_a_node_lacking_an_algorithm_is_refused_before_start_up() -> None:
    """A node whose hello does not list the plan's algorithm (a plug-in missing from its image)
    ends the run before anything is assigned or started, naming the node and the algorithm."""
    topo = Topology.parse("mesh:2x1")
    plan = Plan(topo, (Multicast(1, "vh", (0, 0), ((1, 0),)),))
    session, inbox_tx, sent = _session(plan, RunSettings(wall_budget=30))
    inbox_tx.send_nowait(protocol.encode(protocol.Hello((0, 0), "h", ("vh", "dp"))))
    inbox_tx.send_nowait(protocol.encode(protocol.Hello((1, 0), "h", ("dp",))))
    with trio.fail_after(10):  # refused at once, not at the wall budget
        raw = await session.run({(0, 0), (1, 0)})
    assert raw.incomplete[0].startswith("refused before start-up: node (1,0) lacks algorithm(s) vh")
    assert not any(isinstance(e, (protocol.PlanMessage, protocol.Start)) for e in sent)
    assert any(isinstance(e, protocol.Stop) for e in sent)


def test_reports_lost_in_transit_are_named() -> None:
    """A node's final report says how many deliveries it recorded; fewer arrived: not complete."""
    from coordinator.runtimes.records import Collector

    topo = Topology.parse("mesh:2x1")
    plan = Plan(topo, (Multicast(1, "vh", (0, 0), ((1, 0),)), Multicast(2, "vh", (0, 0), ((1, 0),))))
    collector = Collector(plan)
    collector.handle(protocol.Report((1, 0), ((1, 1, 1, 0, None),), ()))
    collector.handle(protocol.Done((1, 0), delivered=2))
    collector.handle(protocol.Done((0, 0), delivered=0))
    assert collector.lost_reports() == ["node (1,0) recorded 2 deliveries, 1 reached the coordinator"]
    collector.handle(protocol.Report((1, 0), ((2, 1, 1, 0, None),), ()))
    assert collector.lost_reports() == []


@pytest.mark.parametrize("event", EVENTS, ids=lambda e: e.TYPE)
def test_every_event_carries_its_epoch(event: protocol.Event) -> None:
    """The epoch travels in the payload of every message, and comes back as it went."""
    epoch = protocol.new_epoch()
    assert protocol.decode_stamped(protocol.encode(event, epoch)) == (event, epoch)
    assert protocol.decode_stamped(protocol.encode(event)) == (event, 0)


@pytest.mark.parametrize("bad", [-1, 2**63, "e", 1.5, None])
def test_a_bad_epoch_is_a_protocol_error(bad: Any) -> None:
    wire = {**protocol.Stop().to_wire(), "epoch": bad}
    with pytest.raises(ProtocolError, match="epoch"):
        protocol.decode(msgpack.packb(wire, use_bin_type=True))


def test_the_epoch_rule() -> None:
    """Another run's message is never this run's; an unstated epoch (0) is anyone's."""
    assert protocol.same_run(5, 5) and protocol.same_run(5, 0) and protocol.same_run(0, 7)
    assert not protocol.same_run(5, 6)
    assert len({protocol.new_epoch() for _ in range(1000)}) == 1000 and protocol.new_epoch() > 0


def test_a_hello_without_a_version_is_version_1() -> None:
    wire = protocol.Hello((1, 2), "h").to_wire()
    assert protocol.decode(msgpack.packb(wire, use_bin_type=True)) == protocol.Hello((1, 2), "h")
    assert protocol.Hello((1, 2), "h").version == protocol.PROTOCOL_VERSION
    del wire["version"]
    assert protocol.decode(msgpack.packb(wire, use_bin_type=True)) == protocol.Hello((1, 2), "h", version=1)


async def test_the_session_drops_and_counts_messages_of_another_epoch() -> None:
    """Hellos and reports of another run (an older epoch) move nothing and are counted; the
    session's own messages carry its epoch."""
    topo = Topology.parse("mesh:2x1")
    plan = Plan(topo, (Multicast(1, "vh", (0, 0), ((1, 0),)),))
    inbox_tx, inbox_rx = trio.open_memory_channel[bytes](math.inf)
    stamped: list[int] = []

    async def send(*args: Any) -> None:
        stamped.append(protocol.decode_stamped(args[-1])[1])

    session = Session(plan, RunSettings(wall_budget=0.5), send, send, inbox_rx)
    other = session.epoch ^ 1
    for n in ((0, 0), (1, 0)):
        inbox_tx.send_nowait(protocol.encode(protocol.Hello(n, "h"), other))
    inbox_tx.send_nowait(protocol.encode(protocol.Report((1, 0), ((1, 1, 1, 0, None),)), other))
    raw = await session.run({(0, 0), (1, 0)})
    assert session.stale == 3
    assert raw.arrivals == [] and raw.errors == []
    assert stamped and set(stamped) == {session.epoch}  # (the stop at the budget's end)
    assert any("budget" in s and "hello" in s for s in raw.incomplete), raw.incomplete


async def test_a_node_of_another_protocol_version_is_refused_by_name() -> None:
    topo = Topology.parse("mesh:2x1")
    plan = Plan(topo, (Multicast(1, "vh", (0, 0), ((1, 0),)),))
    session, inbox_tx, sent = _session(plan, RunSettings(wall_budget=30))
    inbox_tx.send_nowait(protocol.encode(protocol.Hello((0, 0), "h", ("vh",))))
    inbox_tx.send_nowait(protocol.encode(protocol.Hello((1, 0), "h", ("vh",), version=1)))
    with trio.fail_after(10):
        raw = await session.run({(0, 0), (1, 0)})
    assert raw.incomplete[0].startswith("refused before start-up: node (1,0) speaks protocol version 1")
    assert not any(isinstance(e, (protocol.PlanMessage, protocol.Start)) for e in sent)
