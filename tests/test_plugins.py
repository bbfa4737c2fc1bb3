"""The plug-in kit: the example package registers through its entry point, is listed with its
parameters, passes ``meshcast check-algorithm``; a deliberately broken copy fails it by name.

The entry point is made visible offline and fast: the package is copied into a temporary
directory beside a ``*.dist-info`` holding its ``entry_points.txt`` (what ``pip install``
would write), and meshcast runs in a subprocess with that directory on ``PYTHONPATH``.
"""

from __future__ import annotations

import os
import subprocess
import sys
from pathlib import Path

import pytest

from coordinator.experiments.check import PROPERTIES, instances
from node.routing import registry

EXAMPLE = Path(__file__).resolve().parent.parent / "examples" / "meshcast-example-plugin"
RUN_CLI = "import sys; from coordinator.cli import main; sys.exit(main())"


def install(site: Path, package: str, entry: str, source: str) -> None:
    """``package`` (module text ``source``) on ``site`` with an entry point named ``entry``."""
    (site / package).mkdir(parents=True)
    (site / package / "__init__.py").write_text(source)
    dist = site / f"{package}-0.1.0.dist-info"
    dist.mkdir()
    (dist / "METADATA").write_text(f"Metadata-Version: 2.1\nName: {package}\nVersion: 0.1.0\n")
    (dist / "entry_points.txt").write_text(f"[meshcast.algorithms]\n{entry} = {package}:ALGORITHMS\n")


def meshcast(site: Path, *argv: str) -> subprocess.CompletedProcess[str]:
    env = {**os.environ, "PYTHONPATH": os.pathsep.join([str(site), os.environ.get("PYTHONPATH", "")])}
    return subprocess.run(
        [sys.executable, "-c", RUN_CLI, *argv], capture_output=True, text=True, env=env, timeout=300
    )


@pytest.fixture(scope="module")
def site(tmp_path_factory: pytest.TempPathFactory) -> Path:
    site = tmp_path_factory.mktemp("site")
    good = (EXAMPLE / "meshcast_example_plugin" / "__init__.py").read_text()
    install(site, "meshcast_example_plugin", "yx", good)
    broken = good.replace("    for d in order:\n", "    for d in order[:-1]:  # drops one destination\n")
    broken = broken.replace('        "yx",\n', '        "yx-broken",\n')
    assert broken.count("order[:-1]") == 1 and '"yx-broken"' in broken
    install(site, "meshcast_broken_plugin", "yx-broken", broken)
    return site


def test_the_example_declares_its_entry_point() -> None:
    text = (EXAMPLE / "pyproject.toml").read_text()
    assert '[project.entry-points."meshcast.algorithms"]' in text
    assert 'yx = "meshcast_example_plugin:ALGORITHMS"' in text


def test_algorithms_lists_the_plugin_with_its_parameters(site: Path) -> None:
    done = meshcast(site, "algorithms")
    assert done.returncode == 0, done.stderr
    text = " ".join(done.stdout.split())
    assert "yx" in text and "example-plugin" in text and "order='far-first'" in text
    assert "warning" not in done.stderr


def test_check_algorithm_passes_on_the_example(site: Path) -> None:
    done = meshcast(site, "check-algorithm", "yx", "--instances", "12", "--seed", "3")
    assert done.returncode == 0, done.stdout + done.stderr
    assert "passed 12 random instances" in " ".join(done.stdout.split())


def test_check_algorithm_fails_on_a_broken_copy_naming_the_instance(site: Path) -> None:
    done = meshcast(site, "check-algorithm", "yx-broken", "--instances", "5", "--seed", "3")
    assert done.returncode == 1, done.stdout + done.stderr
    assert "instance 0: --topology mesh:" in done.stderr
    assert PROPERTIES[0] in done.stderr and "0 times" in done.stderr


def test_check_algorithm_on_built_in_rules_and_bad_names(capsys: pytest.CaptureFixture[str]) -> None:
    from coordinator.cli import main

    assert main(["check-algorithm", "vh", "--instances", "4"]) == 0
    assert main(["check-algorithm", "no-such-rule"]) == 2
    assert "unknown algorithm" in capsys.readouterr().err
    assert main(["check-algorithm", "vh", "--instances", "0"]) == 2


def test_instances_are_seeded_and_supported() -> None:
    alg = registry.get("tasnem")  # torus only
    a, b = instances(alg, 6, seed=9), instances(alg, 6, seed=9)
    assert a == b and all(i.topology.kind == "torus" and alg.unsupported(i.topology) is None for i in a)
    assert all(i.source not in i.destinations and len(i.destinations) >= 1 for i in a)


def test_a_plug_in_missing_where_the_nodes_run_is_one_line_and_exit_2(
    monkeypatch: pytest.MonkeyPatch, capsys: pytest.CaptureFixture[str]
) -> None:
    """Issue 35: nodes that lack the plan's algorithm (a plug-in not in the image) refuse the run
    before start-up; the command says so in one line and exits 2, as for any bad input."""
    from coordinator.cli import main
    from node.actor import Node

    class Lacking(Node):
        """(1,0) says in its hello that it cannot run vh, as a container without the plug-in would."""

        def __init__(self, here: tuple[int, int], *args: object, **kwargs: object) -> None:
            super().__init__(here, *args, **kwargs)  # type: ignore[arg-type]
            if here == (1, 0):
                self.registry = [a for a in registry if a.name != "vh"]  # type: ignore[assignment]

    monkeypatch.setattr("coordinator.runtimes.inprocess.Node", Lacking)
    rc = main(["run", "--topology", "mesh:2x2", "--algorithm", "vh", "--dests", "1,1"])
    err = capsys.readouterr().err.strip()
    assert rc == 2, err
    assert err.splitlines() == [
        "meshcast: error: refused before start-up: node (1,0) lacks algorithm(s) vh: install the plug-in "
        "where the nodes run (the container image: EXTRA_WHEELS=PROJECT make image)"
    ]
