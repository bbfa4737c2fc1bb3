"""``meshcast reproduce malani``: the paper's data, the registry, and the real setting at --repeat 5.

The end-to-end test runs the paper's full setting (20×20 mesh and torus, 19 points, five
algorithms) with 5 runs per point, as the issue asks CI to do, and checks the output's shape:
all six tables, the claims, every plot a non-empty PNG, the CSVs.
"""

from __future__ import annotations

import csv
import types
from itertools import product
from pathlib import Path

import pytest

from coordinator.analysis.verdicts import read_claims
from coordinator.cli import main
from coordinator.output.report import fmt_delta, markdown_table, read_data_table
from coordinator.reproduce import _load, reproductions
from coordinator.reproduce.malani import FIGURES, KS, TABLES, TableSpec

PNG = b"\x89PNG\r\n\x1a\n"
#: The §4.3 claims per topology, as each Claim's text starts.
CLAIMS = (
    "PAIR's traffic is below DIAG's on the {kind}",
    "PAIR's time is not above DIAG's on the {kind}",
    "MIN's traffic is below PAIR's on the {kind}",
    "MIN's time is slightly above PAIR's on the {kind}",
)


@pytest.mark.parametrize("spec", TABLES, ids=lambda t: t.file)
def test_paper_tables_are_package_data(spec: TableSpec) -> None:
    t = read_data_table(spec.file)
    assert "seed 000_bcffb0adcff8a962.txt" in t.source and f"Table {spec.number}" in t.source
    assert t.columns[:3] == ("destinations", "diag", "pair") and "min_ci_high" in t.columns
    assert [int(v) for v in t.column("destinations")] == list(KS)
    for r in t.rows:
        for a in ("pair", "min"):
            assert r[f"{a}_ci_low"] <= r[a] <= r[f"{a}_ci_high"]


def test_paper_aat_is_traffic_minus_k() -> None:
    """The paper's Tables 3 and 6 are its Tables 2 and 5 minus k (to the transcription's rounding)."""
    for aat, tr in ((3, 2), (6, 5)):
        a, t = read_data_table(TABLES[aat - 1].file), read_data_table(TABLES[tr - 1].file)
        for ra, rt in zip(a.rows, t.rows, strict=True):
            for alg in ("diag", "pair", "min"):
                assert ra[alg] == pytest.approx(rt[alg] - rt["destinations"], abs=0.015)


def test_registry_finds_malani_and_refuses_broken_modules() -> None:
    reps = reproductions()
    assert "malani" in reps and reps["malani"].default_repeat == 100
    bad = types.ModuleType("coordinator.reproduce.bad")
    with pytest.raises(TypeError, match="NAME"):
        _load(bad)


def test_report_helpers() -> None:
    assert (
        markdown_table(["a", "b"], [[1, "x|y"]], ["l", "r"]) == "| a | b |\n| :--- | ---: |\n| 1 | x\\|y |\n"
    )
    assert fmt_delta(11.0, 10.0) == "+1.00 (+10.0%)"
    assert fmt_delta(9.0, 10.0) == "−1.00 (−10.0%)"
    assert fmt_delta(None, 10.0) == "—"


def test_bad_arguments(tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    for argv, words in (
        (["reproduce", "nosuch", "--out", str(tmp_path)], "invalid choice"),
        (["reproduce", "malani"], "--out"),
        (["reproduce", "malani", "--out", str(tmp_path), "--repeat", "0"], "at least 1"),
        (["reproduce", "malani", "--out", str(tmp_path), "--jobs", "0"], "--jobs"),
        (["reproduce", "malani", "--out", str(tmp_path), "--algorithms", "pair,xy"], "xy is not one"),
        (["reproduce", "malani", "--out", str(tmp_path), "--chunk", "-1"], "--chunk"),
    ):
        assert main(argv) == 2
        err = capsys.readouterr().err.strip()
        assert len(err.splitlines()) == 1 and words in err, err


@pytest.fixture(scope="module")
def report_dir(tmp_path_factory: pytest.TempPathFactory) -> Path:
    out = tmp_path_factory.mktemp("malani")
    assert main(["reproduce", "malani", "--repeat", "5", "--out", str(out)]) == 0
    return out


@pytest.mark.slow
def test_report_has_every_table_and_claim(report_dir: Path) -> None:
    text = (report_dir / "report.md").read_text()
    for spec in TABLES:
        assert f"### Table {spec.number}: {spec.title}" in text
    assert text.count("*Likely reasons.*") == 6
    claims = read_claims(report_dir / "claims.csv")  # every verdict one of the vocabulary
    assert all(c.markdown() in text for c in claims) and "**Verdicts.**" in text
    said = [c.text for c in claims]
    for kind, claim in product(("mesh", "torus"), CLAIMS):
        assert sum(t.startswith(claim.format(kind=kind)) for t in said) == 1, claim
    for start in (
        "Torus times are below mesh times",
        "DIAG/PAIR's additional traffic",
        "MIN's additional traffic",
    ):
        assert sum(t.startswith(start) for t in said) == 1, start
    assert len(claims) == 11
    for problem in ("Table 2's PAIR traffic", "Table 4's torus times", "Table 5's torus traffic"):
        assert f"* **{problem}" in text.split("## Where the paper contradicts itself")[1]
    # one table row per point in each table, plus the mean row
    assert text.count("\n| 380 |") == 6 and text.count("\n| **mean** |") == 6
    assert "5 runs per point" in text


@pytest.mark.slow
def test_report_plots_are_pngs(report_dir: Path) -> None:
    names = {f.filename for f in FIGURES} | {
        f"{kind}_{m}_all.png" for kind in ("mesh", "torus") for m in ("time", "traffic", "additional_traffic")
    }
    assert len(names) == 18
    text = (report_dir / "report.md").read_text()
    for name in names:
        p = report_dir / "plots" / name
        data = p.read_bytes()
        assert data.startswith(PNG) and len(data) > 5_000, name
        assert f"(plots/{name})" in text


@pytest.mark.slow
def test_report_csvs(report_dir: Path) -> None:
    for kind in ("mesh", "torus"):
        with (report_dir / kind / "tidy.csv").open(newline="") as f:
            rows = list(csv.DictReader(f))
        assert len(rows) == 5 * len(KS) * 5
        assert {r["algorithm"] for r in rows} == {"diag", "pair", "min", "vh", "dist"}
        assert all(r["missing"] == "0" and r["topology"] == f"{kind}:20x20" for r in rows)
        with (report_dir / kind / "summary.csv").open(newline="") as f:
            assert len(list(csv.DictReader(f))) == 5 * len(KS)


@pytest.mark.slow
def test_report_only_rebuilds_the_same_report(report_dir: Path, tmp_path: Path) -> None:
    import shutil

    copy = tmp_path / "copy"
    shutil.copytree(report_dir, copy)
    (copy / "report.md").unlink()
    shutil.rmtree(copy / "plots")
    assert main(["reproduce", "malani", "--out", str(copy), "--report-only"]) == 0
    assert (copy / "report.md").read_text() == (report_dir / "report.md").read_text()
    assert len(list((copy / "plots").glob("*.png"))) == 18


def test_report_only_without_a_run(tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    assert main(["reproduce", "malani", "--out", str(tmp_path), "--report-only"]) == 2
    err = capsys.readouterr().err.strip()
    assert len(err.splitlines()) == 1 and "no earlier run" in err


@pytest.mark.slow
def test_report_with_a_subset_of_algorithms(report_dir: Path, tmp_path: Path) -> None:
    """Without DIAG the PAIR-vs-DIAG claims and Figs. 27–32 are left out, the rest stays."""
    import json
    import shutil

    copy = tmp_path / "subset"
    shutil.copytree(report_dir, copy)
    shutil.rmtree(copy / "plots")
    meta = json.loads((copy / "reproduction.json").read_text())
    meta["algorithms"] = ["pair", "min"]
    (copy / "reproduction.json").write_text(json.dumps(meta))
    assert main(["reproduce", "malani", "--out", str(copy), "--report-only"]) == 0
    text = (copy / "report.md").read_text()
    assert "below DIAG's" not in text and "MIN's traffic is below PAIR's" in text
    assert "DIAG" not in (copy / "claims.csv").read_text() and "PAIR's additional traffic" in text
    assert "DIAG ours" not in text and "MIN ours" in text
    assert sorted(p.name[:5] for p in (copy / "plots").glob("fig*.png")) == [f"fig{n}" for n in range(33, 39)]
