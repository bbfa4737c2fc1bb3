"""``meshcast reproduce variation`` (issue 34's study): the fits, the rows a run's records make, a
failed run reported and retried, and a small run end to end (in-process, 4×4, two algorithms).
"""

from __future__ import annotations

import csv
import math
import re
import shutil
import statistics
from collections import Counter
from pathlib import Path

import pytest

from coordinator.analysis.fits import fit_loglog, fit_sqrt, iqr_sd
from coordinator.cli import main
from coordinator.reproduce import reproductions
from coordinator.reproduce import variation as v
from coordinator.reproduce.framework import ProgressFn
from coordinator.runtimes.records import Arrival, RawRun, RunSettings
from coordinator.workloads.plan import Plan
from node.topology import Topology
from tests.test_validation import one_line_exit_2

PNG = b"\x89PNG\r\n\x1a\n"
MESH4 = Topology.parse("mesh:4x4")
SMALL = ["--topology", "mesh:4x4", "--algorithms", "vh,dp", "--sets", "2", "--dests", "5"]
SMALL += ["--repeat", "3", "--runtime", "in-process"]


def _rows(path: Path) -> list[dict[str, str]]:
    with path.open(newline="") as f:
        return list(csv.DictReader(f))


def test_fits_recover_a_square_root_law() -> None:
    pts = [(h, 0.25 * math.sqrt(h) * (1 + 0.05 * (-1) ** h)) for h in range(1, 30)]
    a, k = fit_sqrt(pts), fit_loglog(pts)
    assert a.value == pytest.approx(0.25, rel=0.02) and a.holds(0.25) and a.n == 29
    assert k.value == pytest.approx(0.5, rel=0.05) and k.holds(0.5) and k.above_zero
    flat = [(h, 1.0 + 0.01 * (h % 3)) for h in range(1, 30)]
    assert not fit_loglog(flat).above_zero
    assert fit_loglog([(2, 1.0), (2, 2.0), (2, 3.0)]).value is None  # one h: no slope
    assert fit_sqrt([]).value is None


def test_the_robust_sd_ignores_a_stalled_repetition() -> None:
    calm = [10.0, 10.2, 9.8, 10.1, 9.9, 10.0, 10.3, 9.7]
    stalled = [*calm, 60.0]
    robust, before = iqr_sd(stalled), iqr_sd(calm)
    assert robust is not None and before is not None
    assert robust == pytest.approx(before, rel=0.5)
    assert robust < 0.05 * statistics.stdev(stalled)  # the SD is made by the stall
    assert iqr_sd([1.0]) is None


def test_sets_are_seeded_and_every_algorithm_gets_each_set_in_rounds() -> None:
    sets = v.draw_sets(MESH4, 3, 5, 7)
    assert sets == v.draw_sets(MESH4, 3, 5, 7) and sets != v.draw_sets(MESH4, 3, 5, 8)
    for s in sets:
        assert len(set(s.destinations)) == 5 and s.source not in s.destinations
    plan, slots = v.make_plan(MESH4, sets, ("vh", "dp"), reps=2, warmup=1)
    assert len(plan.multicasts) == 3 * 3 * 2
    # a round runs every set and algorithm once; the first round is the warm-up
    assert [(slots[m.id].rep, slots[m.id].set, m.algorithm) for m in plan.multicasts[:6]] == [
        (0, s, a) for s in range(3) for a in ("vh", "dp")
    ]
    assert [slots[m.id].warmup for m in plan.multicasts] == [True] * 6 + [False] * 12
    for m in plan.multicasts:
        s = sets[slots[m.id].set]
        assert (m.source, m.destinations) == (s.source, s.destinations)


def test_records_time_each_delivery_on_its_host_and_flag_incomplete_multicasts() -> None:
    plan, slots = v.make_plan(MESH4, v.draw_sets(MESH4, 1, 2, 1), ("vh",), reps=3, warmup=0)
    raw = RawRun(injected={0: (1000, "a"), 1: (2000, "a")})
    for m in plan.multicasts[:2]:
        for i, d in enumerate(m.destinations):
            host = "b" if (m.id, i) == (1, 1) else "a"  # timed on another host: no latency
            raw.arrivals.append(Arrival(m.id, d, i + 1, i + 1, 1, 5000 + m.id, host))
    arrivals, mcs = v.records("bare", plan, slots, raw)
    assert [m["complete"] for m in mcs] == [1, 0, 0]  # the third never started
    assert [r["latency_ns"] for r in arrivals] == [4000, 4000, 3001, None]
    assert mcs[2]["reached"] == 0 and mcs[1]["wall_ok"] == 1


def test_rounds_run_in_blocks_each_led_by_a_cold_multicast_left_out() -> None:
    plan, slots = v.make_plan(MESH4, v.draw_sets(MESH4, 2, 3, 1), ("vh", "dp"), reps=4, warmup=1)
    blocks = v.interleaved(plan, slots, 2)
    assert len(blocks) == 2 and len(v.interleaved(plan, slots, 9)) == 5  # at most one a round
    ran = [m for b in blocks for m in b.multicasts[1:]]
    assert ran == list(plan.multicasts)  # every multicast once, in order, in whole rounds
    colds = [b.multicasts[0] for b in blocks]
    assert all(c.id not in slots for c in colds) and len({c.id for c in colds}) == 2
    assert [(c.source, c.destinations) for c in colds] == [
        (b.multicasts[1].source, b.multicasts[1].destinations) for b in blocks
    ]
    _, mcs = v.records("bare", plan, slots, RawRun())
    assert len(mcs) == len(plan.multicasts)  # the cold ones never become rows


def test_records_divide_by_the_dilation_and_split_by_the_telemetry() -> None:
    plan, slots = v.make_plan(MESH4, v.draw_sets(MESH4, 1, 1, 1), ("vh",), reps=1, warmup=0)
    m = plan.multicasts[0]
    # injected at 1000 on host a; one hop: the source sends at 1400, the destination receives at
    # 5400 and delivers at 6000 (link 4000 ns, nodes 1000 ns), all under dilation 4
    tel = (0, 1000, 1400, 1, 5400)
    raw = RawRun(injected={m.id: (1000, "a")}, dilation=4.0)
    raw.arrivals.append(Arrival(m.id, m.destinations[0], 1, 1, 1, 6000, "a", tel))
    (row,), _ = v.records("link", plan, slots, raw)
    assert (row["latency_ns"], row["link_ns"], row["node_ns"]) == (1250, 1000, 250)


def test_a_failed_run_is_reported_and_what_it_never_started_runs_again(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    plan, _ = v.make_plan(MESH4, v.draw_sets(MESH4, 1, 2, 1), ("vh", "dp"), reps=2, warmup=0)
    calls: list[list[int]] = []

    async def fake(todo: Plan, settings: RunSettings, progress: ProgressFn | None) -> RawRun:
        ids = [m.id for m in todo.multicasts]
        calls.append(ids)
        raw = RawRun(injected={i: (0, "h") for i in ids[:2]})  # only the first two start
        if len(ids) > 2:
            raw.incomplete.append("node (1,1) lost")
        return raw

    monkeypatch.setattr(v, "emulate_apart", fake)
    raw, notes = v.run_condition(plan, RunSettings(clock="free"), None)
    assert calls == [[0, 1, 2, 3], [2, 3]]
    assert set(raw.injected) == {0, 1, 2, 3}
    assert notes == ["run 1 of 4 multicasts incomplete: node (1,1) lost; 2 multicasts not started, run again"]


@pytest.mark.parametrize(
    ("extra", "words"),
    [
        (["--sets", "0"], "--sets must be positive"),
        (["--dests", "16"], "--dests must be between 1 and 15 on mesh:4x4"),
        (["--algorithms", "vh,qg"], "qg is not one"),
        (["--link-jitter", "pareto:1ms"], "--link-jitter: link jitter 'pareto:1ms'"),
        (["--link-delay=-1ms"], "--link-delay '-1ms' is negative"),
        (["--topology", "torus:4x4"], "this study runs on a mesh"),
        (["--warmup", "-1"], "--warmup must be at least 0"),
        (["--wall-budget", "nan"], "--wall-budget must be a positive number"),
        (["--time-dilation", "0.5"], "--time-dilation must be a number at least 1"),
        (["--runtime", "model"], "invalid choice: 'model'"),
    ],
)
def test_bad_options_exit_2_with_one_line(
    extra: list[str], words: str, tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    argv = ["reproduce", "variation", "--out", str(tmp_path / "out"), "--topology", "mesh:4x4", *extra]
    assert words in one_line_exit_2(argv, capsys)
    assert not (tmp_path / "out").exists()


def test_registered_with_its_options() -> None:
    rep = reproductions()["variation"]
    assert rep.default_repeat == 20
    names = {o.name for o in rep.options}
    assert {
        "--sets",
        "--dests",
        "--repeat",
        "--runtime",
        "--link-delay",
        "--link-jitter",
        "--warmup",
    } <= names
    runtime = next(o for o in rep.options if o.name == "--runtime")
    assert runtime.default == "processes"


@pytest.fixture(scope="module")
def report_dir(tmp_path_factory: pytest.TempPathFactory) -> Path:
    out = tmp_path_factory.mktemp("variation")
    assert main(["reproduce", "variation", *SMALL, "--out", str(out)]) == 0
    return out


def test_tidy_csvs_have_their_columns_and_every_delivery(report_dir: Path) -> None:
    for name, columns in (
        ("arrivals.csv", v.ARRIVAL_COLUMNS),
        ("multicasts.csv", v.MULTICAST_COLUMNS),
        ("sets.csv", v.SET_COLUMNS),
        ("nodes.csv", v.NODE_COLUMNS),
        ("cv.csv", v.CV_COLUMNS),
        ("summary.csv", v.SUMMARY_COLUMNS),
    ):
        with (report_dir / name).open() as f:
            assert tuple(next(csv.reader(f))) == columns, name
    arrivals = _rows(report_dir / "arrivals.csv")
    # 2 conditions × 2 algorithms × 2 sets × (1 warm-up + 3) repetitions × 5 destinations
    assert len(arrivals) == 2 * 2 * 2 * 4 * 5
    assert Counter(r["warmup"] for r in arrivals) == {"0": 120, "1": 40}
    assert all(r["ok"] == "1" and int(r["latency_ns"]) > 0 for r in arrivals)
    # every delivery split by its telemetry, exactly, in the emulated network's time
    assert all(int(r["link_ns"]) + int(r["node_ns"]) == int(r["latency_ns"]) for r in arrivals)
    for r in arrivals:  # each link of the model takes at least its delay (normal jitter: less 4 SD)
        if r["condition"] == "link" and int(r["hops"]) > 0:
            assert int(r["link_ns"]) >= int(r["hops"]) * (1e6 - 4 * 0.25e6)
    mcs = _rows(report_dir / "multicasts.csv")
    assert len(mcs) == 32 and all(r["complete"] == "1" for r in mcs)
    # the same set (source) for both algorithms
    assert len({(r["set"], r["source"]) for r in mcs}) == 2
    nodes = _rows(report_dir / "nodes.csv")
    assert len(nodes) == 2 * 2 * 2 * 5 and all(r["n"] == "3" for r in nodes)
    for r in nodes:
        h = int(r["hops"])
        if r["condition"] == "link":  # h·d, less 3 SDs of the jitter (normal: a frame may beat d)
            assert float(r["mean_ms"]) >= h * 1.0 - 3 * 0.25 * math.sqrt(h)
    assert len(_rows(report_dir / "cv.csv")) == 2 * 2 * 2 * 3
    summary = _rows(report_dir / "summary.csv")
    assert [(r["condition"], r["algorithm"]) for r in summary] == [
        (c, a) for c in ("bare", "link") for a in ("vh", "dp")
    ]


def test_report_and_plots_are_written(report_dir: Path) -> None:
    text = (report_dir / "report.md").read_text()
    for heading in (
        "# Variation of arrival times",
        "## Definitions",
        "## What it shows",
        "### No link model",
        "### Link model: delay 1ms, jitter normal:0.25ms",
        "## Per algorithm",
        "## SD at equal h",
        "## Plots",
        "## Destination sets",
    ):
        assert heading in text, heading
    assert "Run status:** complete" in text and "`nproc`" in text
    assert "--runtime in-process" in text.splitlines()[2]
    assert text.count("**In this condition: ") == 2 and "### Both conditions" in text
    linked = re.findall(r"!\[[^]]*\]\((plots/[^)]+\.png)\)", text)
    assert linked == [
        "plots/sd_vs_h.png",
        "plots/robust_sd_vs_h.png",
        "plots/mean_vs_h.png",
        "plots/cv.png",
        "plots/split_vs_h.png",
    ]
    assert "time dilation K = 4" in text and "**Did the hosts keep up?**" in text
    assert "| Link model: delay 1ms, jitter normal:0.25ms | 4 |" in text  # the split table's K
    for rel in linked:
        data = (report_dir / rel).read_bytes()
        assert data.startswith(PNG) and len(data) > 5000, rel


def test_report_only_rebuilds_from_the_tidy_data(report_dir: Path, tmp_path: Path) -> None:
    copy = tmp_path / "copy"
    shutil.copytree(report_dir, copy)
    for derived in ("report.md", "nodes.csv", "cv.csv", "summary.csv"):
        (copy / derived).unlink()
    shutil.rmtree(copy / "plots")
    assert main(["reproduce", "variation", "--report-only", "--out", str(copy)]) == 0
    for name in ("report.md", "nodes.csv", "cv.csv", "summary.csv"):
        assert (copy / name).read_text() == (report_dir / name).read_text(), name
    assert (copy / "plots" / "sd_vs_h.png").read_bytes().startswith(PNG)


def test_report_only_without_an_earlier_run_exits_2(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    line = one_line_exit_2(["reproduce", "variation", "--report-only", "--out", str(tmp_path)], capsys)
    assert "--report-only: no earlier run to read" in line


def test_an_incomplete_run_is_reported_not_dropped(
    monkeypatch: pytest.MonkeyPatch, tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    """A multicast that lost a delivery: exit 1, named in the report's status, left out of the numbers."""
    real = v.emulate_apart

    async def lossy(plan: Plan, settings: RunSettings, progress: ProgressFn | None) -> RawRun:
        raw = await real(plan, settings, progress)
        raw.arrivals = [a for a in raw.arrivals if a.mc != 5] + [a for a in raw.arrivals if a.mc == 5][1:]
        raw.incomplete.append("multicast 5: a destination not reached")
        return raw

    monkeypatch.setattr(v, "emulate_apart", lossy)
    assert main(["reproduce", "variation", *SMALL, "--out", str(tmp_path)]) == 1
    assert "reproduction incomplete" in capsys.readouterr().err
    text = (tmp_path / "report.md").read_text()
    assert (
        "Run status:** **incomplete**: 2 of 32 multicasts (bare, incomplete: 1; link, incomplete: 1)" in text
    )
    assert "multicast 5: a destination not reached" in text
    mcs = {(r["condition"], r["id"]): r for r in _rows(tmp_path / "multicasts.csv")}
    assert mcs[("bare", "5")]["complete"] == "0" and mcs[("bare", "5")]["reached"] == "4"
    cv = _rows(tmp_path / "cv.csv")
    assert len(cv) == 2 * 2 * 2 * 3 - 2


def test_the_committed_in_process_companion_rebuilds(tmp_path: Path) -> None:
    """docs/reproductions/variation/in-process (the same study in one process) comes back from its
    tidy data line for line but the "Generated by" line (the top-level report: test_reproduce_framework)."""
    src = Path(__file__).resolve().parents[1] / "docs" / "reproductions" / "variation" / "in-process"
    copy = tmp_path / "in-process"
    shutil.copytree(src, copy)
    assert main(["reproduce", "variation", "--report-only", "--out", str(copy)]) == 0
    before, after = ((d / "report.md").read_text().splitlines() for d in (src, copy))
    assert [a for a in before if not a.startswith("Generated by")] == [
        b for b in after if not b.startswith("Generated by")
    ]
