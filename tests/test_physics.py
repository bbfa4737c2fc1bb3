"""The physics check on processes (issue 42): 64 node processes, d = 2 ms, σ = 0.5 ms, 30 kept
repetitions, with two busy loops beside them: dilated ten times, each destination's latency has
the link model's mean and SD (within 15% and 35%); and the verdict is ok there or, where the
hosts are slower than those it was measured on, ok at the dilation its NOT-ok line advises.

Slow and marked (about 90 s; twice that where the advice is followed). Not here: the same check
at K = 1 on an idle machine, which issue 42 asks for and which does not hold on this machine kind
(the hosts add about 0.5 ms a hop against 2 ms links; docs/measurements/telemetry.md, "The
physics check")."""

from __future__ import annotations

import pytest

from coordinator.experiments.physics import busy_loops, physics_run

pytestmark = pytest.mark.slow

DILATION_UNDER_LOAD = 10.0
"""K under two busy loops: measured to hold with the verdict ok on 6 Dec 2026, where K = 4 held the
physics but not the verdict (docs/measurements/telemetry.md). On CI's machine the same day, K = 10
held the physics with the verdict NOT ok (the hosts' share of the variance 30%, over the 25%); in a
later CI run K = 10 missed the SD by up to 46% and the verdict said so (42%), advising K = 20."""
FOLLOW = 2
"""How many times the test follows a NOT-ok verdict's advice before it fails."""


def test_dilation_keeps_the_physics_under_two_busy_loops() -> None:
    """At K = 10, and where the verdict says NOT ok at the K it advises (at most twice): the
    verdict never passes a run that misses the physics, and an ok verdict comes with the physics."""
    k = DILATION_UNDER_LOAD
    with busy_loops(2):
        for _ in range(1 + FOLLOW):
            out = physics_run(k, 30)
            assert out.complete
            if not out.physics_holds:  # the verdict must have seen it
                assert not out.fidelity_ok, f"verdict ok at K = {k:g} but {out.misses}"
            if out.fidelity_ok:
                break
            assert out.advised_k is not None and out.advised_k > k, out.fidelity_line
            k = out.advised_k
    assert out.fidelity_ok, out.fidelity_line
    assert out.physics_holds, f"{out.misses}; {out.fidelity_line}"
