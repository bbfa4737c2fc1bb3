"""Traffic generators and offered-load points (shared contention)."""

from __future__ import annotations

from pathlib import Path

import pytest

from coordinator.cli import main
from coordinator.experiments.load import Traffic, load_point, parse_rates, poisson_plan
from coordinator.runtimes.records import RunSettings
from node.topology import Topology

MESH = Topology.parse("mesh:6x6")


def test_poisson_sources_inject_at_the_requested_rate() -> None:
    plan = poisson_plan(MESH, "vh", Traffic(rate=0.05, k=4, duration=400, seed=3))
    expected = 0.05 * MESH.size * 400
    assert abs(len(plan.multicasts) - expected) < 4 * expected**0.5
    assert all(0 <= m.step < 400 and len(m.destinations) == 4 for m in plan.multicasts)
    assert plan == poisson_plan(MESH, "vh", Traffic(rate=0.05, k=4, duration=400, seed=3))  # seeded


def test_unicast_mix_and_hot_spot() -> None:
    t = Traffic(rate=0.05, k=4, duration=400, unicast_fraction=0.9, hotspot=(5, 5), hotspot_fraction=0.5)
    plan = poisson_plan(MESH, "dp", t)
    uni = [m for m in plan.multicasts if m.algorithm == "unicast"]
    assert 0.8 < len(uni) / len(plan.multicasts) < 0.97
    assert all(len(m.destinations) == 1 for m in uni)
    hot = sum((5, 5) in m.destinations for m in plan.multicasts if m.source != (5, 5))
    assert hot / len(plan.multicasts) > 0.4


def test_light_load_is_not_saturated_and_delivers_what_is_offered() -> None:
    s = RunSettings(contention="shared", max_steps=2000)
    p = load_point(MESH, "vh", Traffic(rate=0.01, k=4, duration=500), s, warmup=100, batches=5)
    assert p.saturated is None and p.latency is not None
    assert p.ci95[0] is not None and p.ci95[0] <= p.latency <= p.ci95[1]  # type: ignore[operator]
    assert abs(p.throughput - p.offered) < 0.2 * p.offered


def test_overload_is_reported_as_saturated() -> None:
    s = RunSettings(contention="shared", max_steps=300)
    p = load_point(MESH, "unicast", Traffic(rate=0.8, k=8, duration=150), s, warmup=20)
    assert p.saturated is not None and p.latency is None


def test_load_command_writes_csv_and_plot(tmp_path: Path) -> None:
    argv = ["load", "--topology", "mesh:4x4", "--algorithms", "vh", "--dests", "3", "--rates", "0.01,0.03",
            "--duration", "200", "--warmup", "50", "--out", str(tmp_path)]  # fmt: skip
    assert main(argv) == 0
    assert len((tmp_path / "load.csv").read_text().splitlines()) == 3
    assert (tmp_path / "load.png").stat().st_size > 1000


@pytest.mark.parametrize("bad", ["0:1:3", "a,b", "0.1:0.01:3", "-1"])
def test_bad_rates(bad: str, capsys: pytest.CaptureFixture[str]) -> None:
    with pytest.raises(ValueError):
        parse_rates(bad)
    assert main(["load", "--topology", "mesh:4x4", "--algorithms", "vh", "--rates", bad]) == 2
    assert "--rates" in capsys.readouterr().err


def test_a_max_steps_load_would_not_use_is_refused(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    """load bounds a point at --duration × --budget-factor: another --max-steps is refused, not ignored;
    the bound its own config.toml records runs again."""
    argv = ["load", "--topology", "mesh:4x4", "--algorithms", "unicast", "--dests", "1", "--rates", "0.01",
            "--duration", "50"]  # fmt: skip
    assert main([*argv, "--max-steps", "77"]) == 2
    err = capsys.readouterr().err
    assert "--max-steps 77" in err and "(200 here)" in err and len(err.strip().splitlines()) == 1
    assert main([*argv, "--out", str(tmp_path)]) == 0
    assert "# max-steps = 200  # the bound each point ran under" in (tmp_path / "config.toml").read_text()
    again = ["load", "--config", str(tmp_path / "config.toml"), "--out"]
    assert main([*again, str(tmp_path / "again")]) == 0
    assert main([*again, str(tmp_path / "longer"), "--duration", "60"]) == 0  # its own bound, 240
    assert "# max-steps = 240 " in (tmp_path / "longer" / "config.toml").read_text()
