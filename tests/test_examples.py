"""The worked examples of ALGORITHMS.md, run through the emulation and the reference model.

Routing-rule tests check the same numbers by walking headers; here every one of them must also
come out of real message passing between trio nodes (one-port, lockstep) and out of the model.
"""

from __future__ import annotations

import pytest

from coordinator.analysis.metrics import multicast_metrics
from coordinator.runtimes.records import RunSettings
from coordinator.workloads.plan import explicit
from node.topology import Topology, parse_coords
from tests.helpers import emulated, modelled

EX1 = "4,6 6,6 0,2 4,0 3,0 7,4"
EX2 = "3,2 9,3 8,5 4,7 7,7 2,8 5,8 9,8"
BAD = "9,3 3,1 2,8 4,8"
EX3 = "4,7 7,5 0,3 2,3 5,1 6,3 1,0 3,0"
DP6 = "0,0 5,0 5,1 0,2 5,3 1,3 5,4 4,5 0,5"

# (topology, algorithm, source, destinations, traffic, one-port time or None)
CASES = [
    ("mesh:8x8", "vh", "0,0", EX1, 25, 12),
    ("mesh:8x8", "diag", "0,0", EX1, 21, 12),
    ("mesh:8x8", "dist", "0,0", EX1, 17, 12),
    ("mesh:8x8", "pair", "0,0", EX1, 17, 12),
    ("mesh:10x9", "pair", "0,0", EX2, 34, 17),
    ("mesh:10x9", "min", "0,0", EX2, 29, 17),
    ("mesh:10x9", "pair", "0,0", BAD, 23, None),
    ("mesh:10x9", "min", "0,0", BAD, 20, None),
    ("torus:8x8", "pair", "0,0", EX3, 21, 6),
    ("torus:8x8", "min", "0,0", EX3, 20, 6),
    ("torus:8x8", "vh", "0,0", EX3, 22, None),
    ("mesh:6x6", "dp", "3,2", DP6, 33, None),
    ("mesh:8x8", "dp", "2,5", "1,6 2,6 1,7 2,3 5,2 1,2 0,2 6,1", 23, None),
    ("mesh:6x6", "mp", "3,2", DP6, 21, None),
    ("mesh:8x8", "group-graph", "2,5", "1,6 2,6 1,7 2,3 5,2 1,2 0,2 6,1", 15, None),
    ("mesh:8x8", "group-pattern", "2,5", "1,6 2,6 1,7 2,3 5,2 1,2 0,2 6,1", 15, None),
]


@pytest.mark.parametrize(("topology", "algorithm", "source", "dests", "traffic", "time"), CASES)
def test_worked_example(
    topology: str, algorithm: str, source: str, dests: str, traffic: int, time: int | None
) -> None:
    topo = Topology.parse(topology)
    (src,) = parse_coords(source)
    plan = explicit(topo, [algorithm], src, parse_coords(dests), params={"T": 0.5})
    s = RunSettings(port_model="one-port")
    for raw in (emulated(plan, s), modelled(plan, s)):
        (m,) = multicast_metrics(plan, raw)
        assert not m.missing and m.duplicates == 0 and m.stray == 0
        assert m.traffic == traffic
        if time is not None:
            assert m.time == time


def test_vh_example_1_all_port_time_is_the_longest_path() -> None:
    plan = explicit(Topology.parse("mesh:8x8"), ["vh"], (0, 0), parse_coords(EX1))
    (m,) = multicast_metrics(plan, emulated(plan, RunSettings(port_model="all-port")))
    assert m.time == 12  # (6,6) is 12 hops away and every path is a shortest path
    assert m.traffic == m.distinct_links == 25
    assert {a.node: a.step for a in m.arrivals}[(0, 2)] == 2
