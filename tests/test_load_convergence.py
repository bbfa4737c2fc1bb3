"""BookSim2's convergence judging makes ``meshcast load``'s saturation call stable (issue 45, item 5).

The network: a 4×4 torus, wormhole, dimension-order unicast with a dateline (2 VCs of 4 flits),
8-flit packets, Ts = 0, uniform traffic from every node (Poisson), rates 0.03 to 0.12
packets/node/cycle in steps of 0.01, judged with the defaults (10 sample periods of duration / 10
cycles, 3 of warm-up, latency bound 500, 5% thresholds). About a minute on the reference model.
"""

from __future__ import annotations

import json

import pytest

from coordinator.cli import main

GRID = [round(0.03 + 0.01 * i, 2) for i in range(10)]
STEP = 0.01
SWEEP = ["load", "--topology", "torus:4x4", "--algorithms", "unicast", "--dests", "1",
         "--switching", "wormhole", "--flits", "8", "--ts", "0", "--vcs", "2", "--buffer-flits", "4",
         "--runtime", "model",
         "--rates", ",".join(map(str, GRID))]  # fmt: skip


def _first_unstable(seed: int, duration: int, capsys: pytest.CaptureFixture[str]) -> float:
    """The lowest rate the sweep calls unstable (every rate above it unstable too: monotone)."""
    assert main([*SWEEP, "--seed", str(seed), "--duration", str(duration), "--json"]) == 0
    points = json.loads(capsys.readouterr().out)["points"]
    verdicts = [p["verdict"] for p in points]
    assert verdicts[0] == "converged", points[0]["why"]  # light load converges
    first = verdicts.index("unstable")  # the grid reaches past saturation
    assert set(verdicts[first:]) == {"unstable"} and set(verdicts[:first]) == {"converged"}
    return float(points[first]["rate"])


@pytest.mark.slow
@pytest.mark.parametrize("seed", [1, 2, 3])
def test_first_unstable_rate_moves_at_most_one_step_when_the_duration_doubles(
    seed: int, capsys: pytest.CaptureFixture[str]
) -> None:
    short = _first_unstable(seed, 3000, capsys)
    long = _first_unstable(seed, 6000, capsys)
    assert abs(long - short) <= STEP + 1e-9, (short, long)
