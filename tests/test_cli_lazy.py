"""The command line imports only the module of the command it runs (start-up is most of a short
command's CPU time): the table of command modules is true, and a command leaves the others unloaded."""

from __future__ import annotations

import argparse
import importlib
import subprocess
import sys

import pytest

import coordinator.cli as cli


def test_the_table_of_command_modules_names_what_each_module_adds() -> None:
    for module, names in cli._MODULES.items():
        mod = importlib.import_module(f"coordinator.cli.{module}")
        assert tuple(mod.COMMANDS) == names, module


def test_a_partial_parser_knows_every_command_name() -> None:
    full = cli.build_parser()
    partial = cli.build_parser("load")
    names = [a.choices for a in full._actions if hasattr(a, "choices") and isinstance(a.choices, dict)]
    part = [a.choices for a in partial._actions if hasattr(a, "choices") and isinstance(a.choices, dict)]
    assert sorted(names[0]) == sorted(part[0])
    assert "--rates" in part[0]["load"].format_help()


_PROBE = """
import sys
from coordinator.cli import main
try:
    main({argv!r})
except SystemExit:
    pass
print(" ".join(sorted(sys.modules)))
"""


@pytest.mark.parametrize(
    ("argv", "absent"),
    [
        (["load", "--help"], ["coordinator.runtimes.containers", "aiomqtt", "matplotlib", "docker", "trio",
                              "coordinator.experiments.bench", "coordinator.reproduce"]),
        (["run", "--help"], ["coordinator.runtimes.containers", "aiomqtt", "matplotlib", "docker",
                             "coordinator.cli.load_command"]),
        (["algorithms"], ["coordinator.runtimes.containers", "aiomqtt", "matplotlib",
                          "coordinator.cli.bench_command"]),
    ],
)  # fmt: skip
def test_a_command_does_not_import_what_it_does_not_use(argv: list[str], absent: list[str]) -> None:
    out = subprocess.run(
        [sys.executable, "-c", _PROBE.format(argv=argv)], capture_output=True, text=True, check=True
    ).stdout.split("\n")
    loaded = set(out[-2].split())
    assert "coordinator.cli" in loaded
    assert not loaded & set(absent), sorted(loaded & set(absent))


def test_main_still_finds_a_handler_put_in_by_hand(monkeypatch: pytest.MonkeyPatch) -> None:
    calls: list[str] = []

    def handler(args: argparse.Namespace) -> int:
        calls.append(args.command)
        return 0

    monkeypatch.setitem(cli.COMMANDS, "algorithms", handler)
    assert cli.main(["algorithms"]) == 0
    assert calls == ["algorithms"]
