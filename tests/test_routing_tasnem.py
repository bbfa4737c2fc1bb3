"""TASNEM (node/routing/tasnem.py): a hand-checked walk, odd-row fixes, headers, properties."""

from __future__ import annotations

from collections import Counter
from collections.abc import Sequence
from dataclasses import dataclass, field
from typing import Any

import msgpack
import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from node.routing import registry
from node.routing.base import Algorithm, Forward, HeaderError, PlanError
from node.routing.tasnem import (
    dest_prep,
    divide_dest1,
    divide_dest2,
    forward,
    mess_forward,
    mirrored_label,
    prepare,
    q_label,
    r_row,
)
from node.topology import Coord, Topology

TASNEM = registry.get("tasnem")
T6 = Topology.parse("torus:6x6")
T4x5 = Topology.parse("torus:4x5")


# -- a packet walker -----------------------------------------------------------------------------


@dataclass
class Walked:
    """What one multicast did: deliveries (node, hops, start-ups), link traversals, sends per node."""

    deliveries: list[tuple[Coord, int, int]] = field(default_factory=list)
    traffic: int = 0
    sends: Counter[Coord] = field(default_factory=Counter)
    fanouts: list[tuple[Coord, list[str]]] = field(default_factory=list)

    @property
    def latency(self) -> int:
        """The longest delivery, in hops (the paper's network latency)."""
        return max((h for _, h, _ in self.deliveries), default=0)

    def delivered(self) -> Counter[Coord]:
        """How many times each node delivered."""
        return Counter(n for n, _, _ in self.deliveries)

    def hops(self) -> dict[Coord, int]:
        """Hop count of the delivery at each node."""
        return {n: h for n, h, _ in self.deliveries}


def _wire(header: Any) -> Any:
    """The header as the neighbour decodes it (tuples become lists)."""
    return msgpack.unpackb(msgpack.packb(header))


def run_walk(algorithm: Algorithm, topology: Topology, source: Coord, dests: Sequence[Coord]) -> Walked:
    """Follow every packet from ``prepare`` through ``forward`` at each hop, engine bookkeeping."""
    out = Walked()
    limit = 4 * topology.size + 16
    first = algorithm.prepare(topology, source, list(dests), {})
    out.sends[source] += len(first)
    stack: list[tuple[Coord, str, Any, int, int]] = [(source, p, _wire(h), 1, 1) for p, h in first]
    while stack:
        here, port, header, hops, startups = stack.pop()
        assert hops <= limit, f"hop limit exceeded at {here}"
        nxt = topology.neighbour(here, port)
        assert nxt is not None
        out.traffic += 1
        fwd: Forward = algorithm.forward(topology, nxt, header)
        if fwd.deliver:
            out.deliveries.append((nxt, hops, startups))
        out.sends[nxt] += len(fwd.sends)
        out.fanouts.append((nxt, [p for p, _ in fwd.sends]))
        su = startups + (1 if fwd.startup else 0)
        stack.extend((nxt, p, _wire(h), hops + 1, su) for p, h in fwd.sends)
    return out


def _h(dests: Sequence[Coord], d_x: int, d_y: int) -> list[Any]:
    """A header as it looks on the wire."""
    return [[list(d) for d in dests], d_x, d_y]


# -- labels and the helper procedures ------------------------------------------------------------


def test_q_uses_the_number_of_columns() -> None:
    t = Topology.parse("torus:5x3")
    assert [q_label(t, (x, 0)) for x in range(5)] == [0, 1, 2, 3, 4]
    assert [q_label(t, (x, 1)) for x in range(5)] == [9, 8, 7, 6, 5]
    assert q_label(t, (4, 2)) == 14
    assert sorted(q_label(t, c) for c in t.nodes()) == list(range(15))
    assert mirrored_label(t, (0, 1)) == q_label(t, (4, 1)) == 5


def test_r_wraps_at_both_ends() -> None:
    assert [r_row(0, 1, 6), r_row(5, 1, 6), r_row(0, -1, 6), r_row(3, -1, 6)] == [1, 0, 5, 2]


def test_divide_dest1_inclusive_and_strict() -> None:
    q = lambda c: q_label(T6, c)  # noqa: E731
    d = [(2, 2), (0, 1), (1, 2), (4, 4)]
    assert divide_dest1(d, (0, 1), (1, 2), q) == ([(0, 1), (1, 2)], [(2, 2), (4, 4)])
    assert divide_dest1(d, (0, 1), (1, 2), q, strict=True) == ([], d)


def test_divide_dest2_takes_boundary_rows_on_the_dx_side() -> None:
    d = [(1, 0), (3, 5), (4, 5), (1, 3), (0, 5)]
    assert divide_dest2(d, 4, 6, -1) == ([(1, 0), (3, 5), (0, 5)], [(4, 5), (1, 3)])
    assert divide_dest2(d, 0, 6, 1) == ([(1, 0), (3, 5), (4, 5)], [(1, 3), (0, 5)])


# -- the hand-checked example: torus 6×6, source (2,1) --------------------------------------------
# Q on 6×6: row 0 → 0..5, row 1 → 11..6, row 2 → 12..17, row 3 → 23..18, row 4 → 24..29, row 5 → 35..30.
# y_s = 1 < 3: Case 1, d_y = 1, d_x = -1 (odd row); D1 = labels [Q(2,1), Q(5,4)] = [9, 29].
D_EX = [(0, 1), (4, 2), (1, 3), (3, 3), (4, 4), (5, 0), (3, 5)]
D1_EX = [(0, 1), (4, 2), (1, 3), (3, 3), (4, 4)]  # labels 11, 16, 22, 20, 28
D2_EX = [(5, 0), (3, 5)]  # labels 5 and 32


def test_example_dest_prep() -> None:
    # D1 goes up with d_x = -1; D2 goes down with -d_x = +1 (module docstring, item 3).
    assert dest_prep(T6, (2, 1), D_EX) == [(D1_EX, -1, 1), (D2_EX, 1, -1)]


def test_example_source_runs_mess_forward_on_each_packet() -> None:
    # up: between Q(2,1)=9 and Q(2,2)=14 lies (0,1)=11, and (2,2) is no destination → go -x with all.
    # down: between Q(2,0)=2 and Q(2,1)=9 lies (5,0)=5, and (2,0) is no destination → go +x with all.
    assert _wire(prepare(T6, (2, 1), D_EX, {})) == [
        ["-x", _h(D1_EX, -1, 1)],
        ["+x", _h(D2_EX, 1, -1)],
    ]


def test_example_step_at_0_1_delivers_then_turns_up() -> None:
    # (0,1) is a destination; nothing lies between Q(0,1)=11 and Q(0,2)=12 → vertical with -d_x.
    fwd = forward(T6, (0, 1), _h(D1_EX, -1, 1))
    assert fwd.deliver and not fwd.startup
    assert _wire(fwd.sends) == [["+y", _h([(4, 2), (1, 3), (3, 3), (4, 4)], 1, 1)]]


def test_example_step_at_1_2_splits() -> None:
    # Between Q(1,2)=13 and Q(1,3)=22: (4,2)=16 and (3,3)=20; the vertical neighbour (1,3) is a
    # destination → D1 goes on horizontally, the rest (with (1,3)) vertically with -d_x.
    fwd = forward(T6, (1, 2), _h([(4, 2), (1, 3), (3, 3), (4, 4)], 1, 1))
    assert not fwd.deliver
    assert _wire(fwd.sends) == [["+x", _h([(4, 2), (3, 3)], 1, 1)], ["+y", _h([(1, 3), (4, 4)], -1, 1)]]
    # the branch at (3,2): (4,2)=16 between 15 and Q(3,3)=20, and (3,3) is a destination → split
    fwd = forward(T6, (3, 2), _h([(4, 2), (3, 3)], 1, 1))
    assert _wire(fwd.sends) == [["+x", _h([(4, 2)], 1, 1)], ["+y", _h([(3, 3)], -1, 1)]]


def test_example_down_packet_crosses_the_wrap_around() -> None:
    # (5,0) delivers; in row 0 going down, Divide_Dest2 takes (3,5) (boundary row, x < 5).
    fwd = forward(T6, (5, 0), _h([(5, 0), (3, 5)], -1, -1))
    assert fwd.deliver and _wire(fwd.sends) == [["-x", _h([(3, 5)], -1, -1)]]
    # at (3,0) no boundary destination has x < 3 → down over the wrap-around to (3,5)
    fwd = forward(T6, (3, 0), _h([(3, 5)], -1, -1))
    assert not fwd.deliver and _wire(fwd.sends) == [["-y", _h([(3, 5)], 1, -1)]]


def test_example_whole_walk() -> None:
    w = run_walk(TASNEM, T6, (2, 1), D_EX)
    # up:   (2,1)→(1,1)→(0,1)*→(0,2)→(1,2)→[(2,2)→(3,2)→(4,2)*, (3,2)→(3,3)*],
    #       (1,2)→(1,3)*→(1,4)→(2,4)→(3,4)→(4,4)*                               13 channels
    # down: (2,1)→(3,1)→(4,1)→(5,1)→(5,0)*→(4,0)→(3,0)→(3,5)*                    7 channels
    assert w.hops() == {(0, 1): 2, (4, 2): 7, (3, 3): 7, (1, 3): 5, (4, 4): 9, (5, 0): 4, (3, 5): 7}
    assert w.delivered() == Counter(D_EX)
    assert (w.traffic, w.latency) == (20, 9)
    assert {s for _, _, s in w.deliveries} == {1}
    assert w.sends[(2, 1)] == 2 and w.sends[(1, 2)] == 2 and w.sends[(3, 2)] == 2


# -- odd numbers of rows (module docstring, item 6): torus 4×5 ------------------------------------
# Q on 4×5: row 0 → 0..3, row 1 → 7..4, row 2 → 8..11, row 3 → 15..12, row 4 → 16..19.


def test_odd_rows_up_packet_in_the_top_row_goes_the_dx_way() -> None:
    # source (1,3): Case 2 (3 >= 2), D1 = labels [Q(0,0), Q(1,3)] = [0, 14]; (3,4)=19 goes up.
    assert dest_prep(T4x5, (1, 3), [(3, 4)]) == [([(3, 4)], -1, 1)]
    # at (1,4) = top row, d_x = +1: the printed x_D < x_c would miss (3,4); we take the d_x side.
    fwd = forward(T4x5, (1, 4), _h([(3, 4)], 1, 1))
    assert _wire(fwd.sends) == [["+x", _h([(3, 4)], 1, 1)]]
    w = run_walk(TASNEM, T4x5, (1, 3), [(3, 4)])
    assert w.hops() == {(3, 4): 3} and w.traffic == 3


def test_odd_rows_down_packet_uses_mirrored_labels_after_the_wrap_around() -> None:
    # source (1,0): Case 1, D1 = labels [Q(1,0), Q(3,3)] = [1, 12]; all three go down with d_x = -1.
    d = [(0, 4), (2, 4), (1, 3)]
    assert dest_prep(T4x5, (1, 0), d) == [(d, -1, -1)]
    # at (0,4), d_x = +1 is not Q's label-decreasing direction of even row 4 → Q'(x,y) = Q(3-x, y):
    # Q'(0,3)=12 < Q'(1,3)=13, Q'(2,4)=17 < Q'(0,4)=19 → both between, (0,3) no destination → +x.
    fwd = forward(T4x5, (0, 4), _h(d, 1, -1))
    assert fwd.deliver and _wire(fwd.sends) == [["+x", _h([(2, 4), (1, 3)], 1, -1)]]
    fwd = forward(T4x5, (1, 4), _h([(2, 4), (1, 3)], 1, -1))
    assert _wire(fwd.sends) == [["+x", _h([(2, 4)], 1, -1)], ["-y", _h([(1, 3)], -1, -1)]]
    w = run_walk(TASNEM, T4x5, (1, 0), d)
    assert w.hops() == {(0, 4): 2, (2, 4): 4, (1, 3): 4} and w.traffic == 5


def test_case_2_with_row_minus_one_starts_at_label_zero() -> None:
    # 4×5, source (1,2): y_s - ceil(5/2) = -1 → D1 = labels [0, Q(1,2) = 9].
    d = [(3, 0), (0, 1), (2, 2), (0, 2), (1, 4)]
    assert dest_prep(T4x5, (1, 2), d) == [([(3, 0), (0, 1), (0, 2)], -1, -1), ([(2, 2), (1, 4)], 1, 1)]


# -- plans and headers ---------------------------------------------------------------------------


def test_registered_for_tori_only() -> None:
    assert TASNEM.kinds == ("torus",) and TASNEM.family == "tasnem"
    assert "does not support mesh" in (TASNEM.unsupported(Topology.parse("mesh:6x6")) or "")
    assert TASNEM.unsupported(T6) is None


@pytest.mark.parametrize(
    ("topology", "dests", "match"),
    [
        (Topology.parse("mesh:6x6"), [(1, 1)], "tori only"),
        (T6, [(2, 1)], "source"),
        (T6, [(1, 1), (1, 1)], "twice"),
        (T6, [(6, 1)], "not a node"),
    ],
)
def test_bad_plans(topology: Topology, dests: list[Coord], match: str) -> None:
    with pytest.raises(PlanError, match=match):
        prepare(topology, (2, 1), dests, {})


def test_no_destinations_no_packets() -> None:
    assert prepare(T6, (2, 1), [], {}) == []


@pytest.mark.parametrize(
    ("header", "match"),
    [
        ("x", r"\[D, d_x, d_y\]"),
        ([[[1, 1]], 1], r"\[D, d_x, d_y\]"),
        ([[[1, 9]], 1, 1], "bad tasnem destination"),
        ([[], 1, 1], "empty"),
        ([[[1, 1], [1, 1]], 1, 1], "twice"),
        ([[[1, 1]], 0, 1], "d_x"),
        ([[[1, 1]], 1, True], "d_y"),
        ([[[1, 1]], 1, "1"], "d_y"),
    ],
)
def test_bad_headers(header: Any, match: str) -> None:
    with pytest.raises(HeaderError, match=match):
        forward(T6, (0, 0), header)


def test_forward_refuses_a_mesh() -> None:
    with pytest.raises(HeaderError, match="tori only"):
        forward(Topology.parse("mesh:6x6"), (0, 0), _h([(1, 1)], 1, 1))


# -- properties ----------------------------------------------------------------------------------


@st.composite
def torus_multicasts(draw: st.DrawFn) -> tuple[Topology, Coord, list[Coord]]:
    """A torus of 3..12 by 3..12, a source, and a set of other nodes in random order."""
    t = Topology("torus", draw(st.integers(3, 12)), draw(st.integers(3, 12)))
    nodes = list(t.nodes())
    source = draw(st.sampled_from(nodes))
    others = [c for c in nodes if c != source]
    dests = draw(st.lists(st.sampled_from(others), unique=True, max_size=len(others)))
    return t, source, dests


@settings(max_examples=150, deadline=None)
@given(torus_multicasts())
def test_tasnem_reaches_every_destination_once(case: tuple[Topology, Coord, list[Coord]]) -> None:
    t, source, dests = case
    w = run_walk(TASNEM, t, source, dests)
    assert w.delivered() == Counter(dests)
    assert all(s <= 2 for _, _, s in w.deliveries)
    # every node, per packet received, sends to at most two distinct neighbours
    assert all(len(ports) <= 2 and len(set(ports)) == len(ports) for _, ports in w.fanouts)
    # and so does the source per packet it prepares (Mess_Forward runs there once per SendS)
    for group, d_x, d_y in dest_prep(t, source, dests):
        ports = [p for p, _ in mess_forward(t, source, group, d_x, d_y).sends]
        assert 1 <= len(ports) <= 2 and len(set(ports)) == len(ports)
    for node, hops, _ in w.deliveries:
        assert hops >= t.distance(source, node)
