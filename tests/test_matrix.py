"""The support matrix, walked: runtime × clock × switching × sync × port model on a small mesh.

Each cell either runs to completion (every destination reached exactly once, no errors; under
lockstep, records equal to the reference model's) or is refused before anything starts, with
one line and exit 2. What is refused comes from the runtime registry alone; this walks every
cell, the two deployment kinds and the containers included, through the real command line.
"""

from __future__ import annotations

import itertools
import json
import os
import subprocess
import sys
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest

from coordinator.cli import main
from coordinator.runtimes import deployments
from coordinator.runtimes import registry as runtimes
from coordinator.runtimes.records import RunSettings
from node.switching.factory import check_switching
from tests._env import need_broker, need_image

TOPOLOGY = "mesh:3x3"
PLAN = [
    "--topology",
    TOPOLOGY,
    "--algorithm",
    "vh",
    "--source",
    "0,0",
    "--dests",
    "2,2 0,2 2,1",
    "--seed",
    "3",
]
CLOCKS = ("lockstep", "free")
SWITCHINGS = ("store-and-forward", "wormhole")
SYNCS = (None, "alpha", "barrier")
PORT_MODELS = ("one-port", "all-port")
DEPLOYED = ("processes", "containers")
IMAGE = os.environ.get("MESHCAST_IMAGE", "meshcast-local/meshcast:latest")


def cell_args(clock: str, switching: str, sync: str | None, port_model: str) -> list[str]:
    args = [
        *PLAN,
        "--clock",
        clock,
        "--switching",
        switching,
        "--port-model",
        port_model,
        "--wall-budget",
        "120",
    ]
    return args + (["--sync", sync] if sync else [])


def refusal(runtime: str, clock: str, switching: str, sync: str | None, port_model: str) -> str | None:
    """What the registry (and the switching check) says of a cell: None if it is to run."""
    s = RunSettings(
        runtime=runtime, clock=clock, switching=switching, sync=sync, port_model=port_model,
        contention="shared" if switching == "wormhole" else "isolated",
    )  # fmt: skip
    return runtimes.problem(s) or check_switching(s)


def run_cli(argv: list[str], capsys: pytest.CaptureFixture[str]) -> tuple[int, dict[str, Any] | None, str]:
    code = main([*argv, "--json"])
    out, err = capsys.readouterr()
    return code, (json.loads(out) if code in (0, 1) and out.strip() else None), err


_reference: dict[tuple[str, str], list[tuple[Any, ...]]] = {}


def records(doc: dict[str, Any]) -> list[tuple[Any, ...]]:
    """Every arrival, logically: (multicast, node, step, hops, start-ups)."""
    return sorted(
        (m["id"], tuple(a["node"]), a["step"], a["hops"], a["startups"])
        for m in doc["multicasts"]
        for a in m["arrivals"]
    )


def reference(switching: str, port_model: str, capsys: pytest.CaptureFixture[str]) -> list[tuple[Any, ...]]:
    key = (switching, port_model)
    if key not in _reference:
        code, doc, err = run_cli(
            ["run", *cell_args("lockstep", switching, None, port_model), "--runtime", "model"], capsys
        )
        assert code == 0 and doc is not None, err
        _reference[key] = records(doc)
    return _reference[key]


def check_cell(
    where: list[str], label: str, cell: tuple[str, str, str | None, str], capsys: pytest.CaptureFixture[str]
) -> None:
    clock, switching, _, port_model = cell
    refused = refusal(label, *cell)
    code, doc, err = run_cli(["run", *cell_args(*cell), *where], capsys)
    if refused is not None:
        assert code == 2, f"{label} {cell}: expected a refusal ({refused}), got exit {code}"
        assert doc is None and len(err.strip().splitlines()) == 1 and "Traceback" not in err, err
        return
    assert code == 0 and doc is not None, f"{label} {cell}: exit {code}: {err[-2000:]}"
    assert doc["run"]["complete"], doc["run"]["incomplete"]
    assert doc["errors"] == [], doc["errors"][:3]
    for m in doc["multicasts"]:
        assert m["missing"] == [] and m["duplicates"] == 0 and m["stray"] == 0, m
        assert sorted(tuple(a["node"]) for a in m["arrivals"]) == sorted(tuple(d) for d in m["destinations"])
    if clock == "lockstep":
        assert records(doc) == reference(switching, port_model, capsys), f"{label} {cell}"


CELLS = list(itertools.product(CLOCKS, SWITCHINGS, SYNCS, PORT_MODELS))


# the swarm runtime needs a swarm of hosts: tests/test_swarm.py runs it on the lab's
IN_THIS_PROCESS = [
    r
    for r in runtimes.names("run")
    if r not in DEPLOYED and runtimes.get(r).nodes is not runtimes.Nodes.SWARM
]


@pytest.mark.parametrize("runtime", IN_THIS_PROCESS)
def test_matrix_in_this_process(runtime: str, capsys: pytest.CaptureFixture[str]) -> None:
    for cell in CELLS:
        check_cell(["--runtime", runtime], runtime, cell, capsys)


def fresh_cells(runtime: str) -> list[tuple[str, str, str | None, str]]:
    """The cells a deployed runtime walks with nodes started for each run: the default sync's,
    and every refusal. The alpha and barrier cells run on the deployment's warm nodes
    (test_matrix_on_a_deployment walks every cell): the same nodes and settings, without starting
    nodes for each (160 s of CI on containers)."""
    return [c for c in CELLS if c[2] is None or refusal(runtime, *c) is not None]


@pytest.mark.slow
def test_matrix_processes(tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    need_broker()
    for cell in fresh_cells("processes"):
        check_cell(["--runtime", "processes"], "processes", cell, capsys)


@pytest.mark.slow
def test_matrix_containers(capsys: pytest.CaptureFixture[str]) -> None:
    need_image(IMAGE)
    for cell in fresh_cells("containers"):
        check_cell(["--runtime", "containers"], "containers", cell, capsys)


_MAIN = "import sys; from coordinator.cli import main; sys.exit(main(sys.argv[1:]))"


@pytest.fixture
def deployment(
    request: pytest.FixtureRequest, tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> Iterator[str]:
    """A deployment of ``request.param`` on the matrix's mesh, destroyed afterwards."""
    runtime: str = request.param
    if runtime == "processes":
        need_broker()
    else:
        need_image(IMAGE)
    monkeypatch.setenv("MESHCAST_STATE_DIR", str(tmp_path / "state"))
    name = f"matrix-{runtime}"
    up = subprocess.run(
        [sys.executable, "-c", _MAIN, "deploy", "--name", name, "--topology", TOPOLOGY, "--runtime", runtime],
        capture_output=True, text=True, timeout=300,
    )  # fmt: skip
    try:
        assert up.returncode == 0, up.stderr
        yield name
    finally:
        for d in deployments.list_deployments():
            deployments.destroy(d.name)


@pytest.mark.slow
@pytest.mark.parametrize("deployment", DEPLOYED, indirect=True)
def test_matrix_on_a_deployment(deployment: str, capsys: pytest.CaptureFixture[str]) -> None:
    runtime = deployments.load(deployment).runtime
    for cell in CELLS:
        check_cell(["--deployment", deployment], runtime, cell, capsys)


def test_every_runtime_refuses_a_topology_over_its_cap(capsys: pytest.CaptureFixture[str]) -> None:
    for name, r in runtimes.RUNTIMES.items():
        rows = 512 if r.max_nodes > 256 * 1024 // 2 else 256  # a side stays within the topology's 1,024
        cols = r.max_nodes // rows + 1
        code = main(["run", "--topology", f"mesh:{cols}x{rows}", "--algorithm", "vh", "--random-dests", "2",
                     "--runtime", name])  # fmt: skip
        err = capsys.readouterr().err.strip()
        assert code == 2 and len(err.splitlines()) == 1, (name, err)
        assert f"the {name} runtime hosts at most {r.max_nodes}" in err


def test_the_readme_shows_the_registry_s_table() -> None:
    readme = (Path(__file__).resolve().parent.parent / "README.md").read_text()
    assert runtimes.support_table() in readme, "README's 'What runs where' table is not the registry's"
