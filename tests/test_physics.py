"""The physics check on processes (issue 42): 64 node processes, d = 2 ms, σ = 0.5 ms, 30 kept
repetitions, with two busy loops beside them: dilated ten times, each destination's latency has
the link model's mean and SD (within 15% and 35%) and the verdict is ok.

Slow and marked (about 90 s). Not here: the same check at K = 1 on an idle machine, which issue 42
asks for and which does not hold on this machine kind (the hosts add about 0.65 ms a hop against
2 ms links: 0.2 ms in the nodes, 0.45 ms on the links beyond the model; at K = 2 still 0.3 ms, just
over the 15% the mean may miss by; docs/measurements/telemetry.md, "The physics check")."""

from __future__ import annotations

import pytest

from coordinator.experiments.physics import busy_loops, physics_run

pytestmark = pytest.mark.slow

DILATION_UNDER_LOAD = 10.0
"""K under two busy loops: measured to hold with the verdict ok on 6 Dec 2026, where K = 4 held the
physics but not the verdict (docs/measurements/telemetry.md)."""


def test_dilation_keeps_the_physics_under_two_busy_loops() -> None:
    with busy_loops(2):
        out = physics_run(DILATION_UNDER_LOAD, 30)
    assert out.complete
    assert out.physics_holds, f"{out.misses}; {out.fidelity_line}"
    assert out.fidelity_ok, out.fidelity_line
