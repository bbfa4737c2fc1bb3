"""``meshcast reproduce load`` (seed 004 under load): units, claims from data, a quick run's report."""

from __future__ import annotations

import csv
from pathlib import Path

import pytest

from coordinator.cli import main
from coordinator.load import LoadPoint, Traffic, poisson_plan
from coordinator.reproduce import reproductions
from coordinator.reproduce.load import (
    ALGORITHMS,
    INTERARRIVAL_CYCLES,
    STEP_CYCLES,
    CvCell,
    cv_claims,
    load_claims,
    paper_cv,
)
from node.topology import Topology

PNG = b"\x89PNG\r\n\x1a\n"


def test_paper_cv_table_is_read() -> None:
    paper = paper_cv()
    if not paper:
        pytest.skip("../shared/paper-tables/aldubai_cv.csv is not beside this checkout")
    assert paper[("mesh:16x16", 20, "qg")] == pytest.approx(0.264)
    assert len(paper) == 2 * 4 * 4


def test_single_source_streams_at_250_cycles() -> None:
    topo = Topology.parse("mesh:8x8")
    rate = STEP_CYCLES / INTERARRIVAL_CYCLES
    plan = poisson_plan(topo, "qg", Traffic(rate, 5, 2000, seed=2, sources=((3, 3),)))
    assert {m.source for m in plan.multicasts} == {(3, 3)}
    assert abs(len(plan.multicasts) - 2000 * rate) < 4 * (2000 * rate) ** 0.5
    # the default is unchanged: every node a source
    assert len({m.source for m in poisson_plan(topo, "qg", Traffic(0.05, 5, 400, seed=2)).multicasts}) > 50


def _pt(alg: str, rate: float, lat: float | None, thr: float) -> dict[str, object]:
    p = LoadPoint(alg, rate, rate * 10, thr, lat, (lat, lat), [], None, 100, 5)
    return {
        "sweep": "multicast",
        "point": p,
        "saturated": None if lat is not None else "x",
        "wormhole_latency": 100.0,
    }


def test_load_claims_follow_the_data() -> None:
    rows = []
    for a, lo, hi, thr in (
        ("dp", 10, 80, 0.3),
        ("mp", 9, 60, 0.35),
        ("cp", 12, 30, 0.5),
        ("qg", 11, 20, 0.55),
    ):
        rows += [_pt(a, 0.01, lo, 0.1), _pt(a, 0.05, hi, thr), _pt(a, 0.08, None, thr * 0.8)]
    claims = {c.claim[:40]: c for c in load_claims({"multicast": rows, "mixed": []})}
    verdicts = [c.verdict for c in claims.values()]
    assert verdicts[0] == "supported"  # DP/MP below CP/QG at the lowest rate
    assert verdicts[1] == "supported"  # CP and QG reach the highest throughput
    assert verdicts[2] == "supported"  # QG lowest latency at the highest common unsaturated rate


def test_cv_claims_follow_the_data() -> None:
    cells = {}
    for mesh, bump in (("mesh:16x16", 0.0), ("mesh:32x32", 0.1)):
        for k in (20, 80):
            for a, base, slope in (
                ("dp", 0.4, 0.002),
                ("mp", 0.35, 0.002),
                ("cp", 0.45, 0.002),
                ("qg", 0.2, 0.0),
            ):
                v = base + bump + slope * k
                cells[(mesh, k, a)] = CvCell(mesh, k, a, [v], [v], [1.0], [(0, 0)], 1.0, 0.0)
    verdicts = [c.verdict for c in cv_claims(cells, {})]
    assert verdicts[:3] == ["supported"] * 3


def test_quick_reproduction_writes_report_plots_and_csvs(tmp_path: Path) -> None:
    assert "load" in reproductions()
    out = tmp_path / "load"
    assert main(["reproduce", "load", "--quick", "--repeat", "1", "--jobs", "1", "--out", str(out)]) == 0
    report = (out / "report.md").read_text()
    for needle in ("## The paper's claims", "Mapping of time", "250/64", "## Load sweep", "## CV of the"):
        assert needle in report, needle
    plots = sorted((out / "plots").glob("*.png"))
    assert {p.name for p in plots} >= {"load_multicast.png", "load_mixed.png", "cv_6x6_steps.png"}
    for p in plots:
        assert p.read_bytes().startswith(PNG) and p.stat().st_size > 5000
        assert f"plots/{p.name}" in report
    load_rows = list(csv.DictReader((out / "load.csv").open()))
    assert len(load_rows) == 2 * 2 * len(ALGORITHMS)
    cv_rows = list(csv.DictReader((out / "cv.csv").open()))
    assert len(cv_rows) == 2 * len(ALGORITHMS) and all(int(r["multicasts"]) > 0 for r in cv_rows)
