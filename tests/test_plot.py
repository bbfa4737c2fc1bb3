"""``meshcast plot DIR`` and the plots ``run --out`` / ``sweep --out`` write: metrics with 95% CI
bands, paired differences on shared destination sets, load curves; a bad directory is exit 2."""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

import pytest
from matplotlib.collections import PolyCollection
from matplotlib.container import ErrorbarContainer

from coordinator.analysis.result_types import ArrivalResult, JitterResult, MulticastResult, Spread
from coordinator.cli import main
from coordinator.experiments import plot as plot_mod
from coordinator.experiments.plot import paired_differences, rows_of
from coordinator.experiments.sweep import sweep_plan
from coordinator.output.report import (
    Panel,
    Series,
    algorithm_colour,
    draw_panels,
    latency_by_hops,
    plot_jitter,
    plot_latency_by_hops,
)
from node.topology import Topology

PNG = b"\x89PNG\r\n\x1a\n"


def test_sweep_gives_every_algorithm_the_same_sets() -> None:
    """What the paired differences rely on: (k, repetition) names one destination set."""
    plan, points = sweep_plan(Topology.parse("mesh:6x6"), ["diag", "pair", "min"], [3, 5], 4, 7, None)
    sets: dict[tuple[int, int], set[tuple[object, ...]]] = {}
    for m, point in zip(plan.multicasts, points, strict=True):
        sets.setdefault(point, set()).add((m.source, m.destinations))
    assert len(sets) == 8 and all(len(s) == 1 for s in sets.values())


def test_paired_differences_pair_by_set() -> None:
    rows = [
        {"algorithm": "a", "k": 2, "pair": (2, 0), "time": 5.0},
        {"algorithm": "a", "k": 2, "pair": (2, 1), "time": 7.0},
        {"algorithm": "b", "k": 2, "pair": (2, 1), "time": 4.0},
        {"algorithm": "b", "k": 2, "pair": (2, 0), "time": 4.0},
        {"algorithm": "b", "k": 3, "pair": (3, 0), "time": 9.0},  # no partner: left out
    ]
    d = paired_differences(rows, "time", "a", "b")
    assert list(d) == [2]
    assert d[2]["mean"] == 2.0 and d[2]["n"] == 2
    lo, hi = d[2]["ci95"]
    assert lo < 2.0 < hi


def test_sweep_out_writes_plots_and_plot_redraws_them(tmp_path: Path) -> None:
    out = tmp_path / "sweep"
    argv = ["sweep", "--topology", "mesh:6x6", "--algorithms", "diag,pair", "--dests", "3,6",
            "--repeat", "3", "--jobs", "1", "--out", str(out)]  # fmt: skip
    assert main(argv) == 0
    for name in ("metrics.png", "differences.png"):
        assert (out / name).read_bytes()[:8] == PNG
        (out / name).unlink()
    assert main(["plot", str(out)]) == 0
    assert (out / "metrics.png").read_bytes()[:8] == PNG and (out / "differences.png").exists()
    rows, title = rows_of(out)
    assert len(rows) == 12 and "mesh:6x6" in title


def test_run_out_writes_plots(tmp_path: Path) -> None:
    out = tmp_path / "run"
    argv = ["run", "--topology", "mesh:6x6", "--algorithm", "vh,pair", "--random-dests", "4",
            "--repeat", "3", "--out", str(out)]  # fmt: skip
    assert main(argv) == 0
    assert (out / "metrics.png").read_bytes()[:8] == PNG
    rows, _ = rows_of(out)
    assert {r["pair"] for r in rows if r["algorithm"] == "vh"} == {
        r["pair"] for r in rows if r["algorithm"] == "pair"
    }
    assert paired_differences(rows, "traffic", "vh", "pair")[4]["n"] == 3


def test_plot_of_a_load_directory(tmp_path: Path) -> None:
    argv = ["load", "--topology", "mesh:4x4", "--algorithms", "vh", "--rates", "0.01,0.02", "--dests", "3",
            "--duration", "120", "--warmup", "20", "--batches", "4", "--judge", "batches",
            "--out", str(tmp_path)]  # fmt: skip
    assert main(argv) == 0
    assert main(["plot", str(tmp_path)]) == 0
    assert (tmp_path / "load-ci.png").read_bytes()[:8] == PNG


def test_plot_of_a_directory_without_results(tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    assert main(["plot", str(tmp_path)]) == 2
    assert "no tidy.csv" in capsys.readouterr().err
    assert main(["plot", str(tmp_path / "missing")]) == 2


def _arrivals(alg: str, rows: list[tuple[int, float | None]]) -> MulticastResult:
    arrivals = tuple(
        ArrivalResult(
            node=(h, 0), step=h, hops=h, startups=0, wall_ns=None if w is None else int(w), host=None
        )
        for h, w in rows
    )
    return MulticastResult(
        id=0, algorithm=alg, source=(0, 0), destinations=(), injected=0, time=None, traffic=0,
        distinct_links=0, additional_traffic=0, mean_arrival=None, cv=None, cv_wall=None, missing=(),
        duplicates=0, stray=0, arrivals=arrivals,
    )  # fmt: skip


def test_latency_by_hops_groups_wall_latency_by_links_crossed() -> None:
    records = [
        _arrivals("vh", [(1, 1000.0), (2, 3000.0), (2, None)]),
        _arrivals("vh", [(1, 2000.0), (2, 5000.0)]),
        _arrivals("dist", [(3, 9000.0)]),
    ]
    assert latency_by_hops(records) == {"vh": {1: [1.0, 2.0], 2: [3.0, 5.0]}, "dist": {3: [9.0]}}


def test_latency_by_hops_plot_with_a_predicted_line(tmp_path: Path) -> None:
    records = [_arrivals(a, [(h, 1000.0 * h * (10 + r) + (5e5 if r == 9 else 0)) for h in (1, 2, 4)])
               for a in ("vh", "dist") for r in range(10)]  # fmt: skip
    asked: list[int] = []

    def predict(h: int) -> float:
        asked.append(h)
        return 10_000.0 * h

    path = plot_latency_by_hops(tmp_path / "hops.png", records, predict)
    assert path.read_bytes()[:8] == PNG
    assert sorted(set(asked)) == [1, 2, 3, 4]  # every hop count between the boxes, per panel
    assert plot_latency_by_hops(tmp_path / "plain.png", records).read_bytes()[:8] == PNG
    with pytest.raises(ValueError, match="no arrival has a wall-clock latency"):
        plot_latency_by_hops(tmp_path / "none.png", [_arrivals("vh", [(1, None)])])
    assert not (tmp_path / "none.png").exists()


def test_jitter_heat_map_with_missing_wall_times(tmp_path: Path) -> None:
    steps = Spread(mean=1.0, sd=0.0, median=1.0, iqr=0.0, p95=1.0, p99=1.0)

    def row(node: tuple[int, int], median: float | None, iqr: float | None) -> JitterResult:
        wall = Spread(mean=median, sd=None, median=median, iqr=iqr, p95=None, p99=None)
        return JitterResult(
            algorithm="vh", source=(0, 0), node=node, repetitions=3, steps=steps, wall_ns=wall, host=None
        )

    jitter = [row((1, 1), 5e5, 2e4), row((2, 0), None, None)]
    assert plot_jitter(tmp_path / "j.png", 3, 2, jitter).read_bytes()[:8] == PNG


def _panel_series(values: dict[str, tuple[float, float, float]], x: float = 6) -> list[Series]:
    """One single-point series per algorithm: (mean, CI low, CI high) at ``x``."""
    return [
        Series(a, [x], [m], colour=algorithm_colour(a), band=([lo], [hi]))
        for a, (m, lo, hi) in values.items()
    ]


def test_a_single_point_per_curve_is_a_dot_with_its_ci_bar_and_the_figure_says_so() -> None:
    values = {"dp": (10.0, 8.0, 12.0), "mp": (9.0, 8.5, 9.5), "vh": (7.0, 7.0, 7.0)}
    fig = draw_panels([Panel("time", "steps", _panel_series(values))], "a run", "destinations", "note")
    (ax,) = fig.axes
    bars = [c for c in ax.containers if isinstance(c, ErrorbarContainer)]
    assert len(bars) == 3 and not [c for c in ax.collections if isinstance(c, PolyCollection)]  # no band
    assert [t.get_text() for t in ax.get_xticklabels()] == ["dp", "mp", "vh"]
    assert ax.get_xlabel() == "destinations = 6"
    (lo_hi,) = bars[0].lines[2][0].get_segments()  # dp's bar spans its CI
    assert [float(y) for _, y in lo_hi] == [8.0, 12.0]
    suptitle = fig.get_suptitle()
    assert "one point per curve at destinations = 6: a dot (mean) with its 95% CI as a bar" in suptitle


def test_several_points_per_curve_stay_lines_with_bands() -> None:
    series = [Series("vh", [3, 6], [5.0, 7.0], colour="#d62728", band=([4.0, 6.0], [6.0, 8.0]))]
    fig = draw_panels([Panel("time", "steps", series)], "a sweep", "destinations", "note")
    (ax,) = fig.axes
    assert len(ax.lines) == 1 and not ax.containers
    assert len(ax.collections) == 1 and isinstance(ax.collections[0], PolyCollection)  # the band
    assert "one point per curve" not in fig.get_suptitle()


def test_run_out_at_one_number_of_destinations_draws_dots(tmp_path: Path) -> None:
    out = tmp_path / "run"
    argv = ["run", "--topology", "mesh:6x6", "--algorithm", "dp,mp", "--random-dests", "4",
            "--repeat", "3", "--out", str(out)]  # fmt: skip
    assert main(argv) == 0
    assert (out / "metrics.png").read_bytes()[:8] == PNG and (out / "differences.png").exists()


def _incomplete_run(directory: Path) -> None:
    """A run.json of four multicasts, one of which missed two of its four destinations."""
    ds = [[1, 1], [2, 2], [3, 3], [4, 4]]

    def record(alg: str, src: list[int], traffic: int, missing: list[list[int]]) -> dict[str, object]:
        return {"algorithm": alg, "source": src, "destinations": ds, "time": None if missing else 8,
                "traffic": traffic, "additional_traffic": traffic - 4, "mean_arrival": 5.0, "cv": 0.3,
                "missing": missing}  # fmt: skip

    mcs = [record("vh", [0, 0], 12, []), record("vh", [0, 1], 14, []),
           record("dp", [0, 0], 13, []), record("dp", [0, 1], 2, ds[2:])]  # fmt: skip
    doc = {"run": {"topology": "mesh:6x6", "complete": False}, "multicasts": mcs}
    (directory / "run.json").write_text(json.dumps(doc))


def test_incomplete_multicasts_are_left_out_of_the_plots_with_a_warning(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch, capsys: pytest.CaptureFixture[str]
) -> None:
    _incomplete_run(tmp_path)
    drawn: list[Panel] = []
    real = plot_mod.plot_panels

    def spy(path: Path, panels: list[Panel], *args: Any, **kw: Any) -> Path:
        drawn.extend(panels)
        return real(path, panels, *args, **kw)

    monkeypatch.setattr(plot_mod, "plot_panels", spy)
    plotted = plot_mod.plot_dir(tmp_path)
    assert plotted.warnings == (
        "left 1 incomplete multicast out of the plots (destinations not reached: their time, traffic "
        "and CV count only the destinations reached)",
    )
    extra = next(p for p in drawn if p.title == "additional traffic")
    values = {s.label: [y for y in s.y if y is not None] for s in extra.series}
    assert values == {"vh": [9.0], "dp": [9.0]}  # dp's −2 (2 links, 4 destinations) is not drawn
    assert all(v >= 0 for p in drawn for s in p.series for v in s.y if v is not None and "−" not in s.label)
    assert main(["plot", str(tmp_path)]) == 0
    err = capsys.readouterr().err
    assert "meshcast: warning: left 1 incomplete multicast out of the plots" in err


def test_a_run_with_only_incomplete_multicasts_has_nothing_to_plot(tmp_path: Path) -> None:
    _incomplete_run(tmp_path)
    doc = json.loads((tmp_path / "run.json").read_text())
    doc["multicasts"] = doc["multicasts"][3:]
    (tmp_path / "run.json").write_text(json.dumps(doc))
    with pytest.raises(plot_mod.PlotError, match="all 1 incomplete multicast"):
        plot_mod.plot_dir(tmp_path)


def test_one_multicast_per_algorithm_is_a_table_not_five_lone_dots(tmp_path: Path) -> None:
    out = tmp_path / "one"
    argv = ["run", "--topology", "mesh:8x8", "--algorithm", "vh,dp", "--source", "0,0", "--dests", "4,6 6,6"]
    assert main([*argv, "--out", str(out)]) == 0
    assert (out / "metrics.png").read_bytes().startswith(b"\x89PNG")
    assert not (out / "differences.png").exists()  # one pair of multicasts: no CI to draw
    (tmp_path / "again").mkdir()
    plotted = plot_mod.plot_dir(out, tmp_path / "again")
    assert [p.name for p in plotted.paths] == ["metrics.png"]
