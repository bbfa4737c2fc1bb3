"""The hand-checked TASNEM example (torus 6×6, source (2,1)) drawn with ``meshcast show`` and emulated.

``tests/test_routing_tasnem.py`` walks this example rule by rule (the steps of ``Mess_Forward`` at
(0,1), (1,2), (3,2), (5,0) and (3,0)); here the same multicast runs on the nodes, so the hand
check's hops per destination, its single start-up and its 20 links must come out of the emulation
(and of the reference model), and ``meshcast show`` must draw it.
"""

from __future__ import annotations

from pathlib import Path

import pytest

from coordinator.cli import main
from coordinator.experiments.run import result_document
from coordinator.reproduce._tasnem_study import PAPER_TIMING
from coordinator.runtimes.records import RunSettings
from coordinator.workloads.plan import explicit
from node.topology import Topology
from tests.helpers import emulated, modelled
from tests.test_routing_tasnem import D_EX

T6 = Topology.parse("torus:6x6")
SOURCE = (2, 1)
#: The hand check (test_routing_tasnem.test_example_whole_walk): hops to each destination.
#: up:   (2,1)→(1,1)→(0,1)*→(0,2)→(1,2)→[(2,2)→(3,2)→(4,2)*, (3,2)→(3,3)*], (1,2)→(1,3)*→…→(4,4)*
#: down: (2,1)→(3,1)→(4,1)→(5,1)→(5,0)*→(4,0)→(3,0)→(3,5)*
HOPS = {(0, 1): 2, (4, 2): 7, (3, 3): 7, (1, 3): 5, (4, 4): 9, (5, 0): 4, (3, 5): 7}
PNG = b"\x89PNG\r\n\x1a\n"


def test_show_draws_the_example(tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    out = tmp_path / "tasnem_6x6.png"
    dests = " ".join(f"{x},{y}" for x, y in D_EX)
    argv = ["show", "--topology", T6.spec, "--algorithm", "tasnem", "--source", "2,1", "--dests", dests]
    assert main([*argv, "--port-model", "all-port", "--link-steps", "--out", str(out)]) == 0
    data = out.read_bytes()
    assert data.startswith(PNG) and len(data) > 10_000
    assert "tasnem: time 9, traffic 20" in capsys.readouterr().err


@pytest.mark.parametrize("runtime", ["in-process", "model"])
def test_emulation_gives_the_hand_checked_hops(runtime: str) -> None:
    plan = explicit(T6, ["tasnem"], SOURCE, D_EX)
    settings = RunSettings(port_model="all-port", contention="isolated", runtime=runtime)
    raw = emulated(plan, settings) if runtime == "in-process" else modelled(plan, settings)
    assert not raw.incomplete and not raw.errors
    got = {a.node: a for a in raw.arrivals}
    assert len(raw.arrivals) == len(got) == len(D_EX)  # each destination exactly once
    assert {n: a.hops for n, a in got.items()} == HOPS
    assert {a.startups for a in raw.arrivals} == {1}  # both packets leave the source at once
    assert {n: a.step for n, a in got.items()} == HOPS  # all-port: no packet ever waits
    assert raw.traffic == {0: 20}
    # the paper's latency (seed 001 §4): 25 ns per hop along the longest path, 9 hops
    doc = result_document(plan, settings, raw, PAPER_TIMING)
    assert doc["multicasts"][0]["latency"]["max"] == pytest.approx(225.0)
