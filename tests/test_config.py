"""Experiment files: --print-config writes what --config reads; every --out holds its config.toml."""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

import pytest

from coordinator.cli import main
from tests.test_validation import one_line_exit_2

ARGS = ["--topology", "torus:6x6", "--algorithm", "vh,dp,pair", "--random-dests", "5", "--repeat", "3",
        "--seed", "9", "--port-model", "all-port", "--param", "T=0.5"]  # fmt: skip
EXAMPLES = Path(__file__).resolve().parent.parent / "examples" / "experiments"


def run_json(argv: list[str], capsys: pytest.CaptureFixture[str]) -> dict[str, Any]:
    assert main([*argv, "--json"]) == 0
    doc: dict[str, Any] = json.loads(capsys.readouterr().out)
    return doc


def records(doc: dict[str, Any]) -> list[Any]:
    """The lockstep records: every multicast's arrivals, logically (wall clock left out)."""
    return [
        (
            m["id"],
            m["algorithm"],
            m["destinations"],
            [(a["node"], a["step"], a["hops"], a["startups"]) for a in m["arrivals"]],
        )
        for m in doc["multicasts"]
    ]


def print_config(argv: list[str], capsys: pytest.CaptureFixture[str]) -> str:
    assert main([*argv, "--print-config"]) == 0
    return capsys.readouterr().out


def test_print_config_then_config_gives_the_same_records(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    cfg = tmp_path / "x.toml"
    cfg.write_text(print_config(["run", *ARGS[:-2]], capsys))
    assert 'command = "run"' in cfg.read_text() and 'topology = "torus:6x6"' in cfg.read_text()
    assert records(run_json(["run", "--config", str(cfg)], capsys)) == records(
        run_json(["run", *ARGS[:-2]], capsys)
    )


def test_the_command_line_overrides_the_file(tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    cfg = tmp_path / "x.toml"
    cfg.write_text(print_config(["run", *ARGS[:-2]], capsys))
    doc = run_json(["run", "--config", str(cfg), "--port-model", "one-port", "--seed", "2"], capsys)
    assert doc["run"]["port_model"] == "one-port" and doc["run"]["seed"] == 2
    assert records(doc) == records(
        run_json(["run", *ARGS[:-2], "--port-model", "one-port", "--seed", "2"], capsys)
    )


def test_every_out_directory_holds_the_config_that_reruns_it(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    out = tmp_path / "out"
    assert main(["run", *ARGS[:-2], "--out", str(out)]) == 0
    capsys.readouterr()
    again = run_json(["run", "--config", str(out / "config.toml")], capsys)
    saved = json.loads((out / "run.json").read_text())
    assert records(again) == records(saved)
    sweep = tmp_path / "sweep"
    assert main(["sweep", "--topology", "mesh:4x4", "--algorithms", "vh", "--dests", "2,3", "--repeat", "2",
                 "--out", str(sweep)]) == 0  # fmt: skip
    assert 'algorithms = "vh"' in (sweep / "config.toml").read_text()
    load = tmp_path / "load"
    argv = ["load", "--topology", "mesh:4x4", "--algorithms", "vh", "--rates", "0.01", "--duration", "40"]
    assert main([*argv, "--warmup", "10", "--out", str(load)]) == 0
    assert 'command = "load"' in (load / "config.toml").read_text()


def test_a_result_directory_pins_what_the_run_resolved(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    """Options left to the run (port model, contention, warm-up repetitions) are written into the
    result's config.toml with the values it used, so a changed default cannot change a rerun;
    --print-config, before any run, leaves them commented."""
    import tomllib

    argv = ["run", "--topology", "mesh:4x4", "--algorithm", "herley-tiles", "--mcast-set", "random"]
    argv += ["--d", "3", "--c", "3"]
    assert main([*argv, "--print-config"]) == 0
    assert "port-model" not in tomllib.loads(capsys.readouterr().out)["options"]
    out = tmp_path / "out"
    assert main([*argv, "--out", str(out)]) == 0
    pinned = tomllib.loads((out / "config.toml").read_text())["options"]
    # the mcast(n, d, c) model runs all-port though one-port is the option's default
    assert pinned["port-model"] == "all-port" and pinned["contention"] in ("isolated", "shared")
    capsys.readouterr()
    again = run_json(["run", "--config", str(out / "config.toml")], capsys)
    assert records(again) == records(json.loads((out / "run.json").read_text()))
    dests = tmp_path / "dests"
    argv = ["run", "--topology", "mesh:4x4", "--algorithm", "vh", "--dests", "3,3", "--repeat", "3"]
    assert main([*argv, "--clock", "free", "--out", str(dests)]) == 0
    assert tomllib.loads((dests / "config.toml").read_text())["options"]["warmup-repeats"] == 1


@pytest.mark.parametrize(
    ("text", "words"),
    [
        ('command = "run"\n[options]\ncolour = "red"\n', "'meshcast run' has no option --colour"),
        ('command = "run"\n[options]\nrepeat = "many"\n', "repeat = 'many'"),
        ('command = "run"\n[options]\nclock = "sundial"\n', "clock must be one of lockstep, free"),
        ('command = "run"\n[options]\ntrace = 1\n', "trace must be true or false"),
        (
            'command = "sweep"\n[options]\n',
            "is an experiment file of 'meshcast sweep', not of 'meshcast run'",
        ),
        ("command = \n", "not TOML"),
        ('command = "run"\nextra = 1\n', "unknown top-level key 'extra'"),
        ('command = "run"\n[options]\nparam = "T=1"\n', "param takes a list"),
    ],
)
def test_bad_experiment_files_are_one_line(
    text: str, words: str, tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    cfg = tmp_path / "bad.toml"
    cfg.write_text(text)
    assert words in one_line_exit_2(["run", "--config", str(cfg)], capsys)


def test_a_missing_file_is_one_line(capsys: pytest.CaptureFixture[str]) -> None:
    assert "--config /nonexistent.toml:" in one_line_exit_2(["run", "--config", "/nonexistent.toml"], capsys)


def test_the_examples_run(tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    doc = run_json(["run", "--config", str(EXAMPLES / "example1.toml")], capsys)
    assert doc["run"]["complete"] and len(doc["multicasts"]) == 7
    doc = run_json(["run", "--config", str(EXAMPLES / "jitter-links.toml"), "--repeat", "3"], capsys)
    assert doc["run"]["complete"] and doc["run"]["link_model"]["default"] == "delay 1ms, jitter normal:250us"
    assert (
        main(["sweep", "--config", str(EXAMPLES / "sweep.toml"), "--repeat", "2", "--out", str(tmp_path)])
        == 0
    )


def test_print_config_holds_every_option(capsys: pytest.CaptureFixture[str]) -> None:
    """Every option of ``run`` is in the experiment file: with its value, or (not given: TOML has
    no null) as a commented line saying what it takes; the file still reads back the same."""
    import argparse
    import tomllib

    from coordinator.cli import build_parser
    from coordinator.cli.config import _actions

    assert main(["run", "--topology", "mesh:4x4", "--algorithm", "vh", "--print-config"]) == 0
    text = capsys.readouterr().out
    given = tomllib.loads(text)["options"]
    lines = [ln[2:] for ln in text.splitlines() if ln.startswith("# ") and " = " in ln]
    commented = {ln.partition(" = ")[0] for ln in lines}
    sub = next(a for a in build_parser()._actions if isinstance(a, argparse._SubParsersAction))
    keys = set(_actions(sub.choices["run"]))
    assert keys and keys <= set(given) | commented, sorted(keys - set(given) - commented)
    assert not set(given) & commented
    assert {"port-model", "buffer", "link-delay", "deployment"} <= commented
