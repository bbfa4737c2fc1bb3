"""Every bad value is refused before anything starts (exit 2, one line), and completion is honest."""

from __future__ import annotations

import socket
import subprocess
import sys
import time
from collections.abc import Sequence
from pathlib import Path

import pytest

from coordinator.cli import main
from coordinator.cli.options import check_broker
from coordinator.errors import UsageError
from coordinator.output.paths import prepare_out_dir, prepare_out_file
from node.routing import Algorithm, Forward, Param, PlanError, registry
from node.routing.base import check_params
from node.routing.malani import ALGORITHMS as MALANI
from node.topology import Coord, Topology

RUN = ["run", "--topology", "mesh:4x4", "--algorithm", "vh", "--dests", "1,1 3,3"]


def test_sync_picks_the_in_process_mode_and_reaches_the_containers_coordinator() -> None:
    """``--sync`` in-process (and on shards): alpha is the α-synchronizer, barrier (the default) its
    own barrier; the containers runtime passes it on to its coordinator's command line."""
    import json

    import trio

    from coordinator.runtimes.containers import SETTINGS_ENV, settings_env
    from coordinator.runtimes.inprocess import run_inprocess
    from coordinator.runtimes.records import RunSettings
    from coordinator.workloads.plan import Multicast, Plan

    plan = Plan(Topology.parse("torus:4x4"), (Multicast(0, "vh", (0, 0), ((2, 2), (3, 1)), 2),))
    settings = [RunSettings(sync=s, shards=n) for n in (1, 2) for s in (None, "alpha", "barrier")]
    runs = [trio.run(run_inprocess, plan, s) for s in settings]
    assert all(r.logical_arrivals() == runs[0].logical_arrivals() and not r.incomplete for r in runs)
    assert {r.last_step for r in runs} == {runs[0].last_step}
    assert json.loads(settings_env(RunSettings(sync="barrier"))[SETTINGS_ENV]) == {"sync": "barrier"}
    assert json.loads(settings_env(RunSettings())[SETTINGS_ENV]) == {}


def one_line_exit_2(argv: Sequence[str], capsys: pytest.CaptureFixture[str]) -> str:
    """Run ``argv``; assert exit 2, no traceback, one line on stderr; return that line."""
    assert main(list(argv)) == 2
    err = capsys.readouterr().err.strip()
    assert "Traceback" not in err
    assert len(err.splitlines()) == 1, err
    return err


@pytest.mark.parametrize(
    ("extra", "words"),
    [
        (["--wall-budget", "nan"], "--wall-budget must be a finite number"),
        (["--sync", "barrier", "--clock", "free"], "--sync applies to --clock lockstep only"),
        (["--sync", "alpha", "--runtime", "model"], "--sync applies to the in-process, processes"),
        (["--wall-budget", "inf"], "--wall-budget must be a finite number"),
        (["--wall-budget", "-1"], "--wall-budget must be at least"),
        (["--max-steps", "99999999999999999999"], "--max-steps must be at most"),
        (["--max-steps", "0"], "--max-steps must be at least 1"),
        (["--repeat", "100000000"], "--repeat must be at most"),
        (["--repeat", "-3"], "--repeat must be at least 1"),
        (["--hop-limit", "-1"], "--hop-limit must be at least 1"),
        (["--buffer", "0"], "--buffer must be at least 1"),
        (["--seed", "-1"], "--seed must be at least 0"),
        (["--latency-model", "wormhole", "--ts", "nan"], "--ts must be a finite number"),
        (["--latency-model", "wormhole", "--flits", "0"], "--flits must be at least 1"),
    ],
)
def test_bad_numbers_exit_2(extra: list[str], words: str, capsys: pytest.CaptureFixture[str]) -> None:
    assert words in one_line_exit_2([*RUN, *extra], capsys)


LOAD = ["load", "--topology", "mesh:4x4", "--algorithms", "vh", "--rates", "0.01", "--duration", "500"]


@pytest.mark.parametrize("command", ["run", "load"])
@pytest.mark.parametrize("timing", [[], ["--latency-model", "wormhole"]])
@pytest.mark.parametrize(
    ("extra", "words"),
    [
        (["--ts", "nan"], "--ts must be a finite number"),
        (["--flits", "0"], "--flits must be at least 1"),
        (["--flits", str(2**64)], "--flits must be at most"),
        (["--beta", "inf"], "--beta must be a finite number"),
    ],
)
def test_timing_numbers_exit_2_with_or_without_timing(
    command: str, timing: list[str], extra: list[str], words: str, capsys: pytest.CaptureFixture[str]
) -> None:
    """Issue 35: a flit or timing value no run can use is refused whether or not a run would use it."""
    argv = RUN if command == "run" else LOAD
    assert words in one_line_exit_2([*argv, *timing, *extra], capsys)


def test_random_dests_negative(capsys: pytest.CaptureFixture[str]) -> None:
    argv = ["run", "--topology", "mesh:4x4", "--algorithm", "vh", "--random-dests", "-2"]
    assert "--random-dests must be at least 1" in one_line_exit_2(argv, capsys)


@pytest.mark.parametrize(
    ("argv", "words"),
    [
        (
            [
                "sweep",
                "--topology",
                "mesh:4x4",
                "--algorithms",
                "vh",
                "--dests",
                "2",
                "--out",
                "X",
                "--jobs",
                "100000",
            ],
            "--jobs must be at most",
        ),
        (
            [
                "load",
                "--topology",
                "mesh:4x4",
                "--algorithms",
                "vh",
                "--rates",
                "0.01",
                "--unicast-fraction",
                "1.5",
            ],
            "--unicast-fraction must be at most 1",
        ),
        (
            ["load", "--topology", "mesh:4x4", "--algorithms", "vh", "--rates", "0.01", "--duration", "-5"],
            "--duration must be at least 1",
        ),
        (
            [
                "show",
                "--topology",
                "mesh:4x4",
                "--algorithm",
                "vh",
                "--dests",
                "1,1",
                "--out",
                "x.png",
                "--wall-budget",
                "nan",
            ],
            "--wall-budget must be a finite number",
        ),
    ],
)
def test_other_commands_bad_numbers(argv: list[str], words: str, capsys: pytest.CaptureFixture[str]) -> None:
    assert words in one_line_exit_2(argv, capsys)


# -- output paths ------------------------------------------------------------------------------
def test_out_that_is_a_file_is_refused_before_the_run(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    f = tmp_path / "f"
    f.write_text("")
    err = one_line_exit_2([*RUN, "--out", str(f)], capsys)
    assert "not a directory" in err
    err = one_line_exit_2(
        ["sweep", "--topology", "mesh:4x4", "--algorithms", "vh", "--dests", "2", "--out", str(f)], capsys
    )
    assert "not a directory" in err


def test_out_under_a_file_is_refused(tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    f = tmp_path / "f"
    f.write_text("")
    assert "cannot create" in one_line_exit_2([*RUN, "--out", str(f / "sub")], capsys)
    png = ["show", "--topology", "mesh:4x4", "--algorithm", "vh", "--dests", "1,1", "--out", str(f / "a.png")]
    assert "not a directory" in one_line_exit_2(png, capsys)


def test_prepare_out_dir_and_file(tmp_path: Path) -> None:
    d = prepare_out_dir(tmp_path / "a" / "b")
    assert d.is_dir() and list(d.iterdir()) == []  # the probe leaves nothing behind
    assert prepare_out_file(tmp_path / "c" / "x.svg") == tmp_path / "c" / "x.svg"
    with pytest.raises(UsageError, match="is a directory"):
        prepare_out_file(d)


# -- node caps, broker -------------------------------------------------------------------------
def test_node_cap_per_runtime(capsys: pytest.CaptureFixture[str]) -> None:
    argv = [
        "run",
        "--topology",
        "mesh:40x40",
        "--algorithm",
        "vh",
        "--dests",
        "1,1",
        "--runtime",
        "processes",
    ]
    assert "at most 1024" in one_line_exit_2(argv, capsys)
    argv = [
        "run",
        "--topology",
        "mesh:17x16",
        "--algorithm",
        "vh",
        "--dests",
        "1,1",
        "--runtime",
        "containers",
    ]
    assert "at most 256" in one_line_exit_2(argv, capsys)


def _closed_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return int(s.getsockname()[1])


@pytest.mark.parametrize("url", ["mqtt://127.0.0.1:{port}", "notaurl://x", "mqtt://127.0.0.1:99999"])
def test_bad_broker_exits_2_fast(url: str, capsys: pytest.CaptureFixture[str]) -> None:
    url = url.format(port=_closed_port())
    t0 = time.monotonic()
    err = one_line_exit_2([*RUN, "--runtime", "processes", "--broker", url], capsys)
    assert "--broker" in err
    assert time.monotonic() - t0 < 30  # generous: the probe's own deadline is 3 s


def test_check_broker_accepts_a_listening_socket() -> None:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        s.listen()
        check_broker(f"mqtt://127.0.0.1:{s.getsockname()[1]}")


def test_bad_value_exits_2_as_a_process(tmp_path: Path) -> None:
    """The installed entry point: one line, status 2, no traceback (a separate interpreter)."""
    proc = subprocess.run(
        [
            sys.executable,
            "-c",
            "import sys; from coordinator.cli import main; sys.exit(main())",
            *RUN,
            "--max-steps",
            "99999999999999999999",
        ],
        capture_output=True,
        text=True,
        timeout=120,
    )
    assert proc.returncode == 2
    assert proc.stderr.strip().count("\n") == 0 and "--max-steps" in proc.stderr


# -- algorithm parameters -----------------------------------------------------------------------
@pytest.mark.parametrize(
    ("alg", "param", "words"),
    [
        ("qg", "TD=-5", "TD=-5 is invalid: it must be a number with 0 < TD < 1"),
        ("group-graph", "T=abc", "T='abc' is invalid"),
        ("vh", "T=0.5", "no parameter of that name (allowed: none)"),
        ("qg", "X=1", "(allowed: TD)"),
        ("tree", "base=qg", None),
        ("tree", "TD=7", "TD=7 is invalid"),
    ],
)
def test_params_checked(alg: str, param: str, words: str | None, capsys: pytest.CaptureFixture[str]) -> None:
    argv = ["run", "--topology", "mesh:8x8", "--algorithm", alg, "--dests", "1,1 5,5", "--param", param]
    if alg == "tree":
        argv += ["--param", "base=qg"] if param != "base=qg" else []
    if words is None:
        assert main(argv) == 0
        return
    err = one_line_exit_2(argv, capsys)
    assert words in err and param.split("=")[0] in err


def test_param_declaration_checks() -> None:
    p = Param("k", "int", 1, "a count", 1, 10)
    assert p.check("3") == 3 and p.check(10) == 10
    for bad in (0, 11, "x", 2.5, True, None):
        with pytest.raises(PlanError, match="k="):
            p.check(bad)
    f = Param("x", "float", 0.5, "", 0, 1, open_low=True)
    assert f.check(1) == 1.0
    for bad in (0, float("nan"), "inf", 1.01):
        with pytest.raises(PlanError):
            f.check(bad)
    with pytest.raises(PlanError, match="has no parameter 'q'"):
        check_params(MALANI[0], {"q": 1})


def test_algorithms_lists_parameters(capsys: pytest.CaptureFixture[str]) -> None:
    assert main(["algorithms"]) == 0
    out = capsys.readouterr().out
    assert "TD=0.5" in out and "T=0.5" in out and "base='vh'" in out


def test_every_declared_default_is_valid() -> None:
    for a in registry:
        for p in a.params:
            if p.default is not None and p.type != "list":
                p.check(p.default)


# -- honest completion -------------------------------------------------------------------------
def _boom_prepare(
    topology: Topology, source: Coord, dests: Sequence[Coord], params: object
) -> list[tuple[str, object]]:
    vh = registry.get("vh")
    return [(port, ["boom", h]) for port, h in vh.prepare(topology, source, dests, {})]


def _boom_forward(topology: Topology, here: Coord, header: object) -> Forward:
    raise ValueError("the plug-in rule fell over")


@pytest.fixture
def boom(monkeypatch: pytest.MonkeyPatch) -> str:
    alg = Algorithm("boom", "test", _boom_prepare, _boom_forward, summary="raises in forward")
    monkeypatch.setitem(registry._by_name, "boom", alg)
    monkeypatch.setattr(registry, "_order", None)  # the cached order: register() would clear it
    return "boom"


def test_rule_that_raises_is_incomplete_exit_1(boom: str, capsys: pytest.CaptureFixture[str]) -> None:
    argv = ["run", "--topology", "mesh:4x4", "--algorithm", boom, "--dests", "3,3 2,1", "--json"]
    assert main(argv) == 1
    captured = capsys.readouterr()
    import json

    doc = json.loads(captured.out)
    assert doc["run"]["complete"] is False
    causes = doc["run"]["incomplete"]
    assert any("not reached" in c for c in causes)
    assert any(c.startswith("rule error on the way") and "fell over" in c for c in causes)
    assert "rule error on the way" in captured.err


def test_complete_run_stays_complete(capsys: pytest.CaptureFixture[str]) -> None:
    assert main([*RUN, "--json"]) == 0
    import json

    doc = json.loads(capsys.readouterr().out)
    assert doc["run"]["complete"] is True and doc["run"]["incomplete"] == []


# -- exit statuses, help ------------------------------------------------------------------------
def test_exit_statuses() -> None:
    from coordinator.cli import exit_status
    from coordinator.errors import Interrupted, RunFailed

    assert exit_status(UsageError("x")) == (2, "meshcast: error: x")
    assert exit_status(RunFailed("broker lost")) == (1, "meshcast: run failed: broker lost")
    assert exit_status(Interrupted(15))[0] == 143  # type: ignore[index]
    assert exit_status(KeyboardInterrupt())[0] == 130  # type: ignore[index]
    group = BaseExceptionGroup(
        "trio", [KeyboardInterrupt(), BaseExceptionGroup("inner", [KeyboardInterrupt()])]
    )
    assert exit_status(group) == (130, "meshcast: interrupted")
    assert exit_status(BaseExceptionGroup("trio", [KeyboardInterrupt(), ValueError()])) is None
    assert exit_status(ValueError("bug")) is None


def test_keyboard_interrupt_is_one_line(
    monkeypatch: pytest.MonkeyPatch, capsys: pytest.CaptureFixture[str]
) -> None:
    import coordinator.cli as cli

    def interrupted(args: object) -> int:
        raise BaseExceptionGroup("trio", [KeyboardInterrupt()])

    monkeypatch.setitem(cli.COMMANDS, "algorithms", interrupted)
    assert main(["algorithms"]) == 130
    assert capsys.readouterr().err == "meshcast: interrupted\n"


@pytest.mark.parametrize("argv", [["--help"], ["sweep", "--help"], ["show", "--help"]])
def test_help_has_no_rest_markup(argv: list[str], capsys: pytest.CaptureFixture[str]) -> None:
    with pytest.raises(SystemExit) as exc:
        main(argv)
    assert exc.value.code == 0
    out = capsys.readouterr().out
    assert "``" not in out and ":mod:" not in out and ":func:" not in out


@pytest.mark.parametrize(
    ("argv", "words"),
    [
        ([*RUN, "--d", "-1"], "--d must be at least 1"),  # (without --mcast-set it was ignored)
        ([*RUN, "--c", "0"], "--c must be at least 1"),
        (["run", "--topology", "mesh:\uff14x\uff14", "--algorithm", "vh", "--random-dests", "2"],
         "cannot read topology"),  # full-width digits: int() would read them, a spec must not
        ([*RUN, "--broker", "mqtt://"], "--broker: broker URL 'mqtt://': no host"),  # even in-process
        ([*RUN, "--out", ""], "--out: the path is empty"),
        ([*RUN, "--out", "  "], "--out: the path is empty"),
        ([*LOAD[:5], "--rates", "0.05,,0.1", "--duration", "500"], "cannot read --rates '0.05,,0.1'"),
        ([*LOAD[:5], "--rates", "0.05,", "--duration", "500"], "cannot read --rates '0.05,'"),
        (["sweep", "--algo", "vh", "--topology", "mesh:4x4", "--dests", "2", "--out", "x"],
         "required: --algorithms"),  # no abbreviations: --algo is no option
        ([*RUN[:-2], "--dest", "1,1"], "unrecognized arguments: --dest"),
    ],
)  # fmt: skip
def test_issue_44_bad_values_exit_2(argv: list[str], words: str, capsys: pytest.CaptureFixture[str]) -> None:
    """Issue 44: values that were accepted with rc 0 (or taken as abbreviations) exit 2, one line."""
    assert words in one_line_exit_2(argv, capsys)
