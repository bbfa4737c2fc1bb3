"""The physics check on processes (issue 42): 64 node processes, d = 2 ms, σ = 0.5 ms, 20 kept
repetitions, with two busy loops beside them, at K = 1 and dilated ten times: in each run the
verdict passes no run that misses the link model's mean or SD by more than its own thresholds
and chance allow, and dilation takes the hosts' share of the per-node variance down at least as
fast as it divides their time.

The verdict judges the whole run, the physics check each destination on 20 samples: a run the
verdict passes (the hosts at most 25% of the variance) can see one destination's SD 36% over the
links' by chance, as CI's did on 7 Dec (h = 7: 1.799 ms against 1.323, the hosts' share 22.5%).
So the check the verdict must not contradict is the one at the tolerances it admits
(:func:`coordinator.experiments.physics.admitted_tolerances`: SD within 65%, mean within 42%
at n = 20, p = 0.995); the strict check's misses are printed beside it.

Slow and marked (about 110 s). Not a test: the K at which a given machine reads ok, which depends
on the machine and what else it runs; ``benchmarks/dilation_demo.py`` prints it, and
docs/measurements/telemetry.md ("The physics check") holds the figures (this machine kind, two
busy loops: K = 10 ok at 14-17%; CI's machine the same days: 30-42% at K = 10, 87% at K = 80).
Nor is the check at K = 1 on an idle machine, which issue 42 asks for and which does not hold on
this machine kind (the hosts add about 0.5 ms a hop against 2 ms links)."""

from __future__ import annotations

import pytest

from coordinator.experiments.physics import PhysicsOutcome, busy_loops, physics_run

pytestmark = pytest.mark.slow

DILATION_UNDER_LOAD = 10.0
"""K beside two busy loops: 99% of the variance the hosts' at K = 1, 14% at K = 10 on this
machine kind (6 Dec 2026)."""
REPEAT = 20
"""Kept repetitions a run (at 10 the physics check's SD is too noisy to judge: it missed by chance)."""


def _ratio(out: PhysicsOutcome) -> float:
    """The hosts' variance over the link model's, from the verdict's share of the total."""
    assert out.hosts_share is not None, out.fidelity_line
    return out.hosts_share / max(1e-9, 1 - out.hosts_share)


def test_dilation_takes_the_hosts_share_down_under_two_busy_loops() -> None:
    """At K = 1 and K = 10 beside two busy loops: the verdict never passes a miss of the physics
    beyond what it admits,
    and the hosts' variance against the links' falls at least √K times. Dilation divides the hosts'
    time by K (variance K²), but a dilated hop lasts K times longer in wall time and meets more of
    the loops' preemptions: usually the ratio falls about K times, once (7 Dec, CI) only 6 times."""
    k = DILATION_UNDER_LOAD
    with busy_loops(2):
        runs = [physics_run(1.0, REPEAT), physics_run(k, REPEAT)]
    for out in runs:
        assert out.complete, out
        if out.admitted_misses:  # the verdict must have seen it
            assert not out.fidelity_ok, f"verdict ok at K = {out.k:g} but {out.admitted_misses}"
        if out.fidelity_ok and not out.physics_holds:
            print(f"K = {out.k:g}: verdict ok, strict physics check missed by chance: {out.misses}")
    plain, dilated = runs
    assert _ratio(dilated) <= _ratio(plain) / k**0.5, (plain.fidelity_line, dilated.fidelity_line)
