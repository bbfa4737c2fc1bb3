"""The port discipline without any I/O."""

import pickle

from node.routing import registry
from node.settings import NodeSettings
from node.switching.engine import Engine, Injection, NodeError
from node.topology import Topology
from node.transport.wire import Packet

T = Topology.parse("mesh:4x4")


def test_one_port_sends_one_packet_per_step() -> None:
    e = Engine(T, (0, 0), registry, NodeSettings(port_model="one-port"))
    e.inject(Injection(0, "unicast", [(3, 0), (0, 3), (2, 2)], {}))
    sent = [e.step(t) for t in range(4)]
    assert [len(s) for s in sent] == [1, 1, 1, 0]
    # farthest first: (2,2) is 4 away, then (3,0), (0,3) at 3 (tie: smaller coordinate first)
    assert [s[0][1].header for s in sent[:3]] == [[2, 2], [0, 3], [3, 0]]
    assert [s[0][1].sent for s in sent[:3]] == [0, 1, 2]


def test_all_port_sends_on_every_port_at_once() -> None:
    e = Engine(T, (1, 1), registry, NodeSettings(port_model="all-port"))
    e.inject(Injection(0, "unicast", [(3, 1), (0, 1), (1, 3), (1, 0)], {}))
    assert sorted(p for p, _ in e.step(0)) == ["+x", "+y", "-x", "-y"]


def test_one_port_takes_in_one_packet_per_step_when_shared() -> None:
    e = Engine(T, (1, 1), registry, NodeSettings(port_model="one-port", contention="shared"))
    for mc in range(3):
        e.receive(Packet(mc, "unicast", [1, 1], 1, 1, 0))
    steps = [e.step(t) for t in (1, 2, 3)]
    assert [d.step for d in e.deliveries] == [1, 2, 3]
    assert all(s == [] for s in steps)


def test_isolated_multicasts_do_not_wait_for_each_other() -> None:
    e = Engine(T, (1, 1), registry, NodeSettings(port_model="one-port", contention="isolated"))
    for mc in range(3):
        e.receive(Packet(mc, "unicast", [1, 1], 1, 1, 0))
    e.step(1)
    assert [d.step for d in e.deliveries] == [1, 1, 1]


def test_bad_input_is_recorded_not_raised() -> None:
    e = Engine(T, (1, 1), registry, NodeSettings(hop_limit=5))
    e.receive(Packet(0, "nope", [1, 1], 1, 1, 0))
    e.receive(Packet(1, "unicast", "garbage", 1, 1, 0))
    e.receive(Packet(2, "unicast", [1, 1], 6, 1, 0))
    e.receive(Packet(3, "vh", [[9, 9]], 1, 1, 0))
    for t in range(1, 6):
        e.step(t)
    kinds = sorted(x.kind for x in e.errors)
    assert kinds == ["bad-header", "bad-header", "hop-limit", "unknown-algorithm"]
    assert not e.deliveries


def test_free_clock_schedules_one_port_sends_in_order() -> None:
    e = Engine(T, (0, 0), registry, NodeSettings(port_model="one-port"))
    out = e.inject_free(Injection(0, "unicast", [(3, 0), (0, 3)], {}, step=0))
    assert [p.sent for _, p in out] == [0, 1]
    f = Engine(T, (1, 0), registry, NodeSettings(port_model="one-port"))
    f.receive_free(Packet(0, "unicast", [1, 0], 1, 1, 4))
    assert f.deliveries[0].step == 5


def test_credits_are_returned_only_under_credit_flow() -> None:
    """Unbounded (or dropping) inputs return no credits, so no frame is sent only to carry them."""
    topo = Topology("mesh", 3, 1)
    for kwargs, credits in (
        ({}, {}),
        ({"contention": "shared", "buffer": 2, "policy": "drop"}, {}),
        ({"contention": "shared", "buffer": 2}, {"-x": 1}),
    ):
        e = Engine(topo, (1, 0), registry, NodeSettings(**kwargs))  # type: ignore[arg-type]
        e.receive(Packet(0, "unicast", [2, 0], 1, 1, 0), "-x")
        assert [p for p, _ in e.step(1)] == ["+x"]
        assert e.take_freed() == credits


def test_a_node_error_pickles_as_itself() -> None:
    for err in (NodeError("bad-header", "vh: KeyError", 3), NodeError("hop-limit", "exceeded")):
        assert pickle.loads(pickle.dumps(err)) == err


def test_emptied_domains_are_pooled_by_thread() -> None:
    """Engines made in one thread share one pool of emptied domains; another thread's engines get
    their own (a test and a pop of one list from two threads could meet)."""
    import threading

    from node.switching.engine import _spare_pool

    here = _spare_pool()
    other: list[object] = []
    t = threading.Thread(target=lambda: other.append(_spare_pool()))
    t.start()
    t.join()
    assert _spare_pool() is here
    assert other and other[0] is not here
