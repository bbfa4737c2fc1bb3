"""Seed 001: TASNEM (node/routing/tasnem.py) and its comparators HCM, T2W, Uniform (torus_paths.py).

Hand-checked walks, the odd-row readings, header and plan errors, and properties over random tori.
"""

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
from node.routing.torus_paths import cycle_label, hcm_route, hcm_split, uniform_split
from node.topology import Coord, Topology

TASNEM = registry.get("tasnem")
HCM, T2W, UNIFORM = registry.get("hcm"), registry.get("t2w"), registry.get("uniform")
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
        sus = fwd.startups_of(startups)
        stack.extend((nxt, p, _wire(h), hops + 1, su) for (p, h), su in zip(fwd.sends, sus, strict=True))
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
    order = draw(st.permutations(others))
    return t, source, order[: draw(st.integers(0, len(others)))]


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


@pytest.mark.parametrize("name", ["hcm", "t2w", "uniform"])
@settings(max_examples=120, deadline=None)
@given(case=torus_multicasts())
def test_comparators_reach_every_destination_once(
    name: str, case: tuple[Topology, Coord, list[Coord]]
) -> None:
    t, source, dests = case
    w = run_walk(registry.get(name), t, source, dests)
    assert w.delivered() == Counter(dests)
    assert all(s <= 2 for _, _, s in w.deliveries)
    first = registry.get(name).prepare(t, source, dests, {})
    assert len({p for p, _ in first}) == len(first)  # one message per source port
    if name == "uniform":
        up, down = uniform_split(t, source, dests)
        assert len(up) - len(down) in (0, 1)
    if name == "t2w":  # the source row is served by the main path, at the first start-up
        assert all(s == 1 for n, _, s in w.deliveries if n[1] == source[1])


@pytest.mark.parametrize("name", ["tasnem", "hcm", "t2w", "uniform"])
@pytest.mark.parametrize("spec", ["torus:3x3", "torus:4x5", "torus:5x4", "torus:7x7", "torus:12x9"])
def test_broadcast_reaches_everyone_once(name: str, spec: str) -> None:
    t = Topology.parse(spec)
    for source in [(0, 0), (t.cols - 1, t.rows // 2), (t.cols // 2, t.rows - 1)]:
        others = [c for c in t.nodes() if c != source]
        w = run_walk(registry.get(name), t, source, others)
        assert w.delivered() == Counter(others)


# -- the comparators (torus_paths.py) -------------------------------------------------------------


@pytest.mark.parametrize(
    "spec", ["torus:3x3", "torus:4x5", "torus:5x5", "torus:6x6", "torus:7x4", "torus:8x3"]
)
def test_cycle_label_is_a_hamiltonian_cycle(spec: str) -> None:
    t = Topology.parse(spec)
    by_label = {cycle_label(t, c): c for c in t.nodes()}
    assert sorted(by_label) == list(range(t.size))
    for i in range(t.size):
        assert t.distance(by_label[i], by_label[(i + 1) % t.size]) == 1


def _network_ports(node: Coord, high: bool) -> set[str]:
    """The two ports of ``node`` in the high network (rows in the snake direction, columns up) or
    in the low network (both reversed)."""
    s = 1 if high else -1
    row = (1 if node[1] % 2 == 0 else -1) * s
    return {"+x" if row > 0 else "-x", "+y" if high else "-y"}


@pytest.mark.parametrize("spec", ["torus:3x3", "torus:4x5", "torus:6x6", "torus:5x4"])
@pytest.mark.parametrize("high", [True, False])
def test_hcm_route_stays_in_its_network(spec: str, high: bool) -> None:
    t = Topology.parse(spec)
    for u in t.nodes():
        for v in t.nodes():
            here, hops = u, 0
            while (port := hcm_route(t, here, v, high)) is not None:
                assert port in _network_ports(here, high)
                nxt = t.neighbour(here, port)
                assert nxt is not None
                here, hops = nxt, hops + 1
                assert hops <= t.cols + t.rows - 2
            assert here == v


# Hand-checked on the 6×6 torus, source (2,1) (Q as in the TASNEM example above; K = 36).


def test_uniform_example() -> None:
    # cycle offsets from Q(2,1)=9: (0,1) 2, (4,2) 7, (3,5) 23, (5,0) 32 → up [(0,1),(4,2)],
    # down [(5,0),(3,5)]. Up: (1,1),(0,1)*,(0,2),(1,2),(2,2),(3,2),(4,2)* = 7 hops. Down: R picks
    # (3,1),(4,1),(5,1),(5,0)*, then the wrap-around (0,0) (5 labels down), (0,5),(1,5),(2,5),(3,5)* = 9.
    d = [(0, 1), (4, 2), (5, 0), (3, 5)]
    assert uniform_split(T6, (2, 1), d) == ([(0, 1), (4, 2)], [(5, 0), (3, 5)])
    assert _wire(UNIFORM.prepare(T6, (2, 1), d, {})) == [
        ["+x", ["down", [[5, 0], [3, 5]]]],
        ["-x", ["up", [[0, 1], [4, 2]]]],
    ]
    fwd = UNIFORM.forward(T6, (5, 0), ["down", [[5, 0], [3, 5]]])
    assert fwd.deliver and _wire(fwd.sends) == [["+x", ["down", [[3, 5]]]]]
    w = run_walk(UNIFORM, T6, (2, 1), d)
    assert w.hops() == {(0, 1): 2, (4, 2): 7, (5, 0): 4, (3, 5): 9}
    assert (w.traffic, w.latency) == (16, 9)


def test_hcm_example() -> None:
    # ahead of Q(2,1)=9: (0,1) 2, (4,2) 7, (1,3) 13 are high (<= 18); (4,4) 19, (3,5) 23, (5,0) 32
    # are low, visited (5,0), (3,5), (4,4). Row 1 is odd: the snake's forward side is x < 2.
    d = [(0, 1), (4, 2), (1, 3), (4, 4), (5, 0), (3, 5)]
    assert hcm_split(T6, (2, 1), d) == {
        "h1": [(0, 1), (1, 3)],
        "h2": [(4, 2)],
        "l1": [(5, 0), (3, 5), (4, 4)],
        "l2": [],
    }
    # l1: +x (3,1),(4,1),(5,1),(5,0)*,(4,0),(3,0),(3,5)*,(4,5),(4,4)* = 9; h1: -x (1,1),(0,1)*,
    # (0,2),(1,2),(1,3)* = 5; h2: +y (2,2),(3,2),(4,2)* = 3. Longest first.
    assert _wire(HCM.prepare(T6, (2, 1), d, {})) == [
        ["+x", ["l1", [[5, 0], [3, 5], [4, 4]]]],
        ["-x", ["h1", [[0, 1], [1, 3]]]],
        ["+y", ["h2", [[4, 2]]]],
    ]
    # at (0,1) (row 1, high direction -x): x_v = 1 is 5 steps round this row, 1 the other way → up
    fwd = HCM.forward(T6, (0, 1), ["h1", [[0, 1], [1, 3]]])
    assert fwd.deliver and _wire(fwd.sends) == [["+y", ["h1", [[1, 3]]]]]
    w = run_walk(HCM, T6, (2, 1), d)
    assert w.hops() == {(0, 1): 2, (1, 3): 5, (4, 2): 3, (5, 0): 4, (3, 5): 7, (4, 4): 9}
    assert (w.traffic, w.latency) == (17, 9)


def test_t2w_example() -> None:
    # destination columns 0, 4, 1, 5: +x needs 5 steps, -x 4 → the HMP goes -x to (4,1).
    # Column 2 (the source's): (2,4) is 3 up or 3 down → up, from the source.
    d = [(0, 1), (4, 2), (1, 3), (2, 4), (5, 0), (5, 3)]
    assert _wire(T2W.prepare(T6, (2, 1), d, {})) == [
        ["-x", ["hmp", -1, [[0, 1], [4, 2], [1, 3], [5, 0], [5, 3]]]],
        ["+y", ["v", 1, [[2, 4]]]],
    ]
    # (1,1) carries the HMP on and starts column 1's sweep (a second start-up for it only)
    fwd = T2W.forward(T6, (1, 1), ["hmp", -1, [[0, 1], [4, 2], [1, 3], [5, 0], [5, 3]]])
    assert (
        fwd.startup
        and fwd.carried == 1
        and _wire(fwd.sends)
        == [
            ["-x", ["hmp", -1, [[0, 1], [4, 2], [5, 0], [5, 3]]]],
            ["+y", ["v", 1, [[1, 3]]]],
        ]
    )
    # (5,1): column 5 holds (5,0) and (5,3): up sweep 5, down 4 → down
    fwd = T2W.forward(T6, (5, 1), ["hmp", -1, [[4, 2], [5, 0], [5, 3]]])
    assert _wire(fwd.sends) == [["-x", ["hmp", -1, [[4, 2]]]], ["-y", ["v", -1, [[5, 0], [5, 3]]]]]
    # (4,1) ends the HMP: it re-injects itself
    fwd = T2W.forward(T6, (4, 1), ["hmp", -1, [[4, 2]]])
    assert fwd.startup and fwd.carried == 0 and _wire(fwd.sends) == [["+y", ["v", 1, [[4, 2]]]]]
    w = run_walk(T2W, T6, (2, 1), d)
    assert sorted(w.deliveries) == [
        ((0, 1), 2, 1),
        ((1, 3), 3, 2),
        ((2, 4), 3, 1),
        ((4, 2), 5, 2),
        ((5, 0), 4, 2),
        ((5, 3), 7, 2),
    ]
    assert w.traffic == 14


def test_comparators_registered_for_tori_only() -> None:
    for a in (HCM, T2W, UNIFORM):
        assert a.kinds == ("torus",) and a.family == "torus-paths"
        assert "reconstruction" in a.source
        with pytest.raises(PlanError, match="tori only"):
            a.prepare(Topology.parse("mesh:6x6"), (0, 0), [(1, 1)], {})
        with pytest.raises(PlanError, match="source"):
            a.prepare(T6, (0, 0), [(0, 0)], {})
        assert a.prepare(T6, (0, 0), [], {}) == []


@pytest.mark.parametrize(
    ("name", "header", "match"),
    [
        ("uniform", ["sideways", [[1, 1]]], "mode"),
        ("uniform", ["up", []], "empty"),
        ("uniform", ["up", [[1, 1], [1, 1]]], "twice"),
        ("hcm", ["h3", [[1, 1]]], "mode"),
        ("hcm", ["h1", [[1, 7]]], "bad hcm destination"),
        ("t2w", ["hmp", 2, [[1, 1]]], "dx"),
        ("t2w", ["v", 2, [[0, 1]]], "dy"),
        ("t2w", ["v", 1, [[1, 1]]], "outside column"),
        ("t2w", ["w", 1, [[0, 1]]], "must be"),
    ],
)
def test_comparator_bad_headers(name: str, header: Any, match: str) -> None:
    with pytest.raises(HeaderError, match=match):
        registry.get(name).forward(T6, (0, 0), header)
    with pytest.raises(HeaderError, match="tori only"):
        registry.get(name).forward(Topology.parse("mesh:6x6"), (0, 0), header)
