"""The command line: results, files written, and one-line errors for bad input."""

from __future__ import annotations

import argparse
import csv
import json
from pathlib import Path

import pytest

from coordinator.cli import main

EX1 = ["--topology", "mesh:8x8", "--algorithm", "vh", "--source", "0,0", "--dests", "4,6 6,6 0,2 4,0 3,0 7,4"]


def test_run_json_has_the_documented_shape(capsys: pytest.CaptureFixture[str]) -> None:
    assert main(["run", *EX1, "--port-model", "one-port", "--json", "--trace"]) == 0
    doc = json.loads(capsys.readouterr().out)
    assert doc["run"]["topology"] == "mesh:8x8" and doc["run"]["clock"] == "lockstep"
    (m,) = doc["multicasts"]
    assert (m["time"], m["traffic"], m["distinct_links"], m["additional_traffic"]) == (12, 25, 25, 19)
    assert {"node", "step", "hops", "startups", "wall_ns"} <= set(m["arrivals"][0])
    assert len(m["links"]) == 25 and m["links"][0]["step"] == 0
    assert doc["summary"]["time"]["mean"] == 12.0
    assert doc["errors"] == []


def test_out_writes_all_files(tmp_path: Path) -> None:
    assert main(["run", *EX1, "--trace", "--out", str(tmp_path), "--json"]) == 0
    for name in ("run.json", "multicasts.csv", "arrivals.csv", "links.csv"):
        assert (tmp_path / name).stat().st_size > 0
    rows = list(csv.DictReader((tmp_path / "arrivals.csv").open()))
    assert len(rows) == 6
    assert sum(1 for _ in csv.DictReader((tmp_path / "links.csv").open())) == 25
    assert not list(tmp_path.glob(".*"))  # no temporary files left behind


def test_random_repeat_and_free_clock(capsys: pytest.CaptureFixture[str]) -> None:
    args = ["run", "--topology", "torus:6x6", "--algorithm", "vh,unicast", "--random-dests", "5"]
    assert main([*args, "--repeat", "3", "--seed", "2", "--clock", "free", "--json"]) == 0
    doc = json.loads(capsys.readouterr().out)
    assert len(doc["multicasts"]) == 6
    vh, uni = doc["multicasts"][:3], doc["multicasts"][3:]
    assert [m["destinations"] for m in vh] == [m["destinations"] for m in uni]  # same sets for both
    assert set(doc["by_algorithm"]) == {"vh", "unicast"}


@pytest.mark.parametrize(
    ("argv", "needle"),
    [
        (["run", "--topology", "mesh:8", "--algorithm", "vh", "--random-dests", "3"], "cannot read topology"),
        (
            ["run", "--topology", "mesh:8x8", "--algorithm", "nope", "--random-dests", "3"],
            "unknown algorithm",
        ),
        (
            ["run", "--topology", "mesh:8x8", "--algorithm", "tasnem", "--random-dests", "3"],
            "does not support mesh",
        ),
        (
            ["run", "--topology", "mesh:8x8", "--algorithm", "vh", "--dests", "9,9"],
            "(9,9) is outside mesh:8x8",
        ),
        (["run", "--topology", "mesh:8x8", "--algorithm", "vh", "--dests", "0,0"], "is the source itself"),
        (["run", "--topology", "mesh:8x8", "--algorithm", "vh", "--dests", "1,1 1,1"], "listed twice"),
        (["run", "--topology", "mesh:8x8", "--algorithm", "vh", "--dests", "1;1"], "cannot read coordinate"),
        (["run", "--topology", "mesh:2x2", "--algorithm", "vh", "--random-dests", "4"], "cannot pick 4"),
        (["run", "--topology", "mesh:8x8", "--algorithm", "vh"], "say which destinations"),
        (["run", "--topology", "mesh:8x8", "--algorithm", "vh", "--random-dests", "x"], "invalid int"),
        (
            ["run", "--topology", "mesh:8x8", "--algorithm", "vh", "--random-dests", "2", "--max-steps", "0"],
            "max-steps",
        ),
        (
            ["run", "--topology", "mesh:8x8", "--algorithm", "vh", "--random-dests", "2", "--repeat", "0"],
            "repeat",
        ),
        (["frobnicate"], "invalid choice"),
    ],
)
def test_bad_arguments_are_one_line_errors(
    argv: list[str], needle: str, capsys: pytest.CaptureFixture[str]
) -> None:
    assert main(argv) == 2
    err = capsys.readouterr().err
    assert needle in err
    assert "Traceback" not in err and len(err.strip().splitlines()) == 1


def test_step_budget_names_unreached_destinations(capsys: pytest.CaptureFixture[str]) -> None:
    assert main(["run", *EX1, "--max-steps", "5", "--json"]) == 1
    doc = json.loads(capsys.readouterr().out)
    assert not doc["run"]["complete"]
    assert any("step budget" in r for r in doc["run"]["incomplete"])
    (m,) = doc["multicasts"]
    assert [4, 6] in m["missing"] and m["time"] is None
    assert any(e["kind"] == "undelivered" for e in doc["errors"])


def test_algorithms_lists_topologies(capsys: pytest.CaptureFixture[str]) -> None:
    assert main(["algorithms"]) == 0
    out = capsys.readouterr().out
    assert "vh" in out and "unicast" in out and "mesh, torus" in out


def test_every_option_has_help_text() -> None:
    """Every option of every command explains itself in --help (defaults are added by the formatter)."""
    from coordinator.cli import HelpFormatter, _subparsers, build_parser

    missing = []
    for p in _subparsers(build_parser()):
        assert p.formatter_class is HelpFormatter
        for a in p._actions:
            if a.option_strings and a.option_strings[0] != "-h" and not a.help:
                missing.append(f"{p.prog} {a.option_strings[0]}")
    assert not missing, missing


def test_help_shows_defaults(capsys: pytest.CaptureFixture[str]) -> None:
    with pytest.raises(SystemExit):
        main(["sweep", "--help"])
    text = " ".join(capsys.readouterr().out.split())
    assert "(default: 10000)" in text and "(default: 1)" in text


def test_run_help_lists_every_setting_under_a_named_group() -> None:
    """``run --help`` is grouped: the command's own options first, then one group per part of the
    settings (the model, switching, free clock, running, links, timing); no setting is loose."""
    import argparse

    from coordinator.cli import build_parser
    from coordinator.runtimes.records import RunSettings
    from node.settings import settings_of

    parser = build_parser()
    sub = next(a for a in parser._actions if isinstance(a, argparse._SubParsersAction))
    run = sub.choices["run"]
    loose = {o for a in run._optionals._group_actions for o in a.option_strings}
    flags = {m.flag for _, m in settings_of(RunSettings) if m.flag is not None}
    assert flags and not flags & loose, sorted(flags & loose)
    assert not {"--runtime", "--network"} & loose
    titles = [g.title for g in run._action_groups if g._group_actions]
    assert len(titles) >= 7, titles  # options, the experiment file, and the settings' groups


@pytest.mark.parametrize("option", [["--link-delay", "5ms"], ["--time-dilation", "2"], ["--no-telemetry"]])
def test_show_refuses_what_its_picture_does_not_read(
    option: list[str], capsys: pytest.CaptureFixture[str]
) -> None:
    """``show`` draws logical send steps: a link model or a free-clock fidelity setting would change
    nothing in the picture, so it is refused in one line (exit 2), not silently ignored."""
    from tests.test_validation import one_line_exit_2

    argv = ["show", "--topology", "mesh:4x4", "--algorithm", "vh", "--random-dests", "3", "--out", "x.png"]
    assert option[0] in one_line_exit_2([*argv, *option], capsys)


@pytest.mark.parametrize(
    ("command", "extra"),
    [
        ("run", ["--dests", "3,3"]),
        ("show", ["--source", "0,0", "--dests", "3,3", "--out", "pic"]),
        ("load", ["--out", "l", "--rates", "0.01"]),
        ("sweep", ["--dests", "2", "--out", "s"]),
        ("compose", []),
    ],
)
@pytest.mark.parametrize("spelling", ["--algorithm", "--algorithms"])
def test_algorithm_and_algorithms_are_one_option_everywhere(
    command: str, extra: list[str], spelling: str, tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """Both spellings parse to the same option in every command that names algorithms (no
    abbreviation guessing: each is declared)."""
    from coordinator.cli import build_parser

    monkeypatch.chdir(tmp_path)
    args = build_parser().parse_args([command, "--topology", "mesh:4x4", spelling, "vh", *extra])
    assert "vh" in str(getattr(args, "algorithm", None) or getattr(args, "algorithms", None))
    subparsers = next(a for a in build_parser()._actions if isinstance(a, argparse._SubParsersAction))
    declared = {s for a in subparsers.choices[command]._actions for s in a.option_strings}
    assert {"--algorithm", "--algorithms"} <= declared


def test_timing_is_a_deprecated_alias_of_latency_model(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    """--timing still works for one release, says once on stderr what replaced it, and an old
    experiment file's ``timing`` key still loads."""
    base = ["run", *EX1, "--json"]
    assert main([*base, "--latency-model", "wormhole"]) == 0
    new = capsys.readouterr()
    assert main([*base, "--timing", "wormhole"]) == 0
    old = capsys.readouterr()
    assert "deprecated" not in new.err
    assert old.err.strip() == (
        "meshcast: --timing is deprecated and goes in the next release: use --latency-model"
    )
    assert json.loads(old.out)["run"]["timing"] == json.loads(new.out)["run"]["timing"] is not None
    cfg = tmp_path / "old.toml"
    cfg.write_text('command = "run"\n[options]\ntiming = "wormhole"\n')
    assert main([*base, "--config", str(cfg)]) == 0
    assert json.loads(capsys.readouterr().out)["run"]["timing"]["model"] == "wormhole"


def test_an_incomplete_run_says_its_errors_in_words(capsys: pytest.CaptureFixture[str]) -> None:
    argv = ["run", "--topology", "mesh:8x8", "--algorithm", "vh", "--source", "0,0", "--dests", "7,7 6,6"]
    assert main([*argv, "--hop-limit", "3"]) == 1
    out = capsys.readouterr().out
    assert "first: hop-limit multicast 0 at (" in out and "packet exceeded the hop limit 3" in out
    assert "{" not in out and "arrival steps (vh): none" in out
