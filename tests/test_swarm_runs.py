"""The swarm runtime across hosts: a 4×4 torus over the lab's three Docker hosts (deploy/swarm-lab.sh).

One lab for the module: three daemons, each in its own network namespace, one swarm, the node
image loaded on each. Lockstep records equal the reference model's, a free-clock run completes,
run.json says which swarm node ran each node (at least four per host), an image that differs
on a host is refused before anything starts, and a host whose daemon stops mid-run is named with
the nodes it took, while the next run completes on the hosts left. The lab is brought down at
the end and nothing of it may remain.
"""

from __future__ import annotations

import json
import os
import re
import signal
import subprocess
import sys
import time
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest

from tests._env import need_image, need_swarm_lab

pytestmark = pytest.mark.slow

ROOT = Path(__file__).resolve().parent.parent
LAB = ROOT / "deploy" / "swarm-lab.sh"
MESHCAST = str(Path(sys.executable).with_name("meshcast"))
IMAGE = os.environ.get("MESHCAST_IMAGE", "meshcast-local/meshcast:latest")
TOPOLOGY = "torus:4x4"
PLAN = ["--topology", TOPOLOGY, "--algorithm", "vh", "--random-dests", "6", "--repeat", "2", "--seed", "5"]


@pytest.fixture(scope="module")
def lab(tmp_path_factory: pytest.TempPathFactory) -> Iterator[dict[str, Any]]:
    need_swarm_lab()
    need_image(IMAGE)
    env = {**os.environ, "MESHCAST_SWARM_LAB_DIR": str(tmp_path_factory.mktemp("swarm-lab")),
           "MESHCAST_SWARM_LAB_NAME": "meshcast-runs"}  # fmt: skip
    up = subprocess.run([str(LAB), "up", "3", "--image", IMAGE], env=env, capture_output=True, text=True,
                        timeout=600, check=False)  # fmt: skip
    try:
        assert up.returncode == 0, up.stderr[-3000:]
        hosts = json.loads((Path(env["MESHCAST_SWARM_LAB_DIR"]) / "hosts.json").read_text())
        yield {**hosts, "env": env}
    finally:
        down = subprocess.run(
            [str(LAB), "down"], env=env, capture_output=True, text=True, timeout=300, check=False
        )
        check = subprocess.run(
            [str(LAB), "check"], env=env, capture_output=True, text=True, timeout=120, check=False
        )
        assert down.returncode == 0 and check.returncode == 0, (
            down.stderr[-2000:],
            check.stdout,
            check.stderr,
        )


def _meshcast(lab: dict[str, Any], args: list[str], **env: str) -> subprocess.CompletedProcess[str]:
    run_env = {**lab["env"], "DOCKER_HOST": lab["manager"], "MESHCAST_IMAGE": IMAGE,
               "MESHCAST_SWARM_HOSTS": ",".join(h["docker_host"] for h in lab["hosts"]), **env}  # fmt: skip
    return subprocess.run([MESHCAST, *args], env=run_env, capture_output=True,
                          text=True, timeout=900, check=False)  # fmt: skip


def _records(doc: dict[str, Any]) -> list[tuple[Any, ...]]:
    return sorted((m["id"], tuple(a["node"]), a["step"], a["hops"], a["startups"])
                  for m in doc["multicasts"] for a in m["arrivals"])  # fmt: skip


def test_lockstep_records_equal_the_model_with_nodes_spread_over_three_hosts(
    lab: dict[str, Any], tmp_path: Path
) -> None:
    t0 = time.perf_counter()
    p = _meshcast(lab, ["run", *PLAN, "--runtime", "swarm", "--out", str(tmp_path / "swarm"), "--json"])
    took = time.perf_counter() - t0
    assert p.returncode == 0, p.stderr[-3000:]
    doc = json.loads(p.stdout)
    assert doc["run"]["complete"], doc["run"]["incomplete"]
    ref = _meshcast(lab, ["run", *PLAN, "--runtime", "model", "--json"])
    assert ref.returncode == 0, ref.stderr[-2000:]
    assert _records(doc) == _records(json.loads(ref.stdout))
    # run.json: the swarm node (name and ID) of every node; each host ran at least 4 of the 16
    placement = json.loads((tmp_path / "swarm" / "run.json").read_text())["run"]["placement"]
    assert len(placement) == 16
    ids = {h["name"]: h["node_id"] for h in lab["hosts"]}
    per_host: dict[str, int] = {}
    for where in placement.values():
        assert ids[where["host"]] == where["id"], where
        per_host[where["host"]] = per_host.get(where["host"], 0) + 1
    assert sorted(per_host) == ["lab1", "lab2", "lab3"] and min(per_host.values()) >= 4, per_host
    print(f"swarm lockstep run on 3 hosts: {took:.1f} s wall", file=sys.stderr)


def test_a_free_clock_run_completes_and_names_its_clocks(lab: dict[str, Any], tmp_path: Path) -> None:
    # placed by the lab's labels (lab=lab1 ...): one block of nodes per label value
    args = [
        "run",
        *PLAN,
        "--runtime",
        "swarm",
        "--clock",
        "free",
        "--link-delay",
        "2ms",
        "--out",
        f"{tmp_path}",
    ]
    p = _meshcast(lab, [*args, "--json"], MESHCAST_SWARM_PLACEMENT="label:lab")
    assert p.returncode == 0, p.stderr[-3000:]
    doc = json.loads(p.stdout)
    assert doc["run"]["complete"], doc["run"]["incomplete"]
    fidelity = doc["fidelity"]
    assert fidelity["clocks"] == 3, fidelity  # one per host: lab1, lab2, lab3
    assert "3 host clocks, unsynchronised" in fidelity["line"]
    placement = json.loads((tmp_path / "run.json").read_text())["run"]["placement"]
    blocks = [placement[f"{x},{y}"]["host"] for x in range(4) for y in range(4)]  # row-major, as placed
    assert blocks == sorted(blocks)
    assert {b: blocks.count(b) for b in blocks} == {"lab1": 6, "lab2": 5, "lab3": 5}


def test_an_image_that_differs_on_a_host_is_refused_before_anything_starts(lab: dict[str, Any]) -> None:
    hosts = {h["name"]: h["docker_host"] for h in lab["hosts"]}
    other = "meshcast-test/other:latest"  # the node image on lab1 (the manager), an empty one on lab2
    subprocess.run(["docker", "-H", hosts["lab1"], "tag", IMAGE, other], check=True)
    empty = subprocess.run(["tar", "-c", "--files-from", "/dev/null"], capture_output=True, check=True).stdout
    subprocess.run(
        ["docker", "-H", hosts["lab2"], "import", "-", other], input=empty, capture_output=True, check=True
    )
    try:
        p = _meshcast(lab, ["run", *PLAN, "--runtime", "swarm"], MESHCAST_IMAGE=other)
    finally:
        for h in ("lab1", "lab2"):
            subprocess.run(["docker", "-H", hosts[h], "rmi", other], capture_output=True, check=False)
    assert p.returncode == 2, p.stderr[-2000:]
    line = p.stderr.strip().splitlines()[-1]
    assert "on swarm node lab2" in line and "docker save" in line, line
    left = subprocess.run(
        ["docker", "-H", lab["manager"], "service", "ls", "-q"], capture_output=True, text=True
    )
    assert left.stdout.strip() == ""  # refused before anything started


def test_a_host_stopped_mid_run_is_named_with_its_nodes_and_the_next_run_completes(
    lab: dict[str, Any], tmp_path: Path
) -> None:
    lab3 = next(h for h in lab["hosts"] if h["name"] == "lab3")
    out = tmp_path / "fault"
    run_env = {**lab["env"], "DOCKER_HOST": lab["manager"], "MESHCAST_IMAGE": IMAGE}
    args = [MESHCAST, "run", "--topology", TOPOLOGY, "--algorithm", "vh",
            "--random-dests", "8", "--repeat", "2", "--clock", "free", "--link-delay", "8s",
            "--wall-budget", "120", "--runtime", "swarm", "--out", str(out), "--json"]  # fmt: skip
    proc = subprocess.Popen(args, env=run_env, stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True)
    try:
        # mid-run: 15 s after the coordinator's container is up (its nodes say hello, then the run,
        # 8 s a link, lasts some 40 s more)
        deadline = time.monotonic() + 300
        while time.monotonic() < deadline and proc.poll() is None:
            ps = subprocess.run(["docker", "-H", lab["manager"], "ps", "-q", "--filter", "name=coordinator"],
                                capture_output=True, text=True, check=False)  # fmt: skip
            if ps.stdout.strip():
                break
            time.sleep(0.5)
        assert proc.poll() is None, proc.communicate()[1][-3000:]
        time.sleep(15)
        pid = int((Path(lab["dir"]) / "lab3" / "dockerd.pid").read_text())
        os.kill(pid, signal.SIGTERM)
        stdout, stderr = proc.communicate(timeout=600)
    finally:
        if proc.poll() is None:
            proc.kill()
            proc.wait()
    assert proc.returncode in (0, 1), stderr[-3000:]
    doc = json.loads(stdout)
    run = doc["run"]
    assert not run["complete"]
    on_lab3 = sorted(n for n, where in run["placement"].items() if where["host"] == "lab3")
    named = [c for c in run["incomplete"] if "swarm node lab3" in c]
    assert len(on_lab3) >= 4 and len(named) == 1, run["incomplete"]
    # every node lab3 held is in the line (those lost, then those that reported before it went)
    assert all(f"({n})" in named[0] for n in on_lab3), (run["incomplete"], on_lab3)
    lost = re.findall(r"\((\d+,\d+)\)", named[0].split("node(s): ")[1].split("; it also ran")[0])
    assert lost and set(lost) <= set(on_lab3), run["incomplete"]
    assert lab3["node_id"][:12] in named[0]
    # the swarm marks lab3 down; the next run places its nodes on lab1 and lab2 and completes
    deadline = time.monotonic() + 120
    while time.monotonic() < deadline:
        ls = subprocess.run(["docker", "-H", lab["manager"], "node", "inspect", lab3["node_id"], "--format",
                             "{{.Status.State}}"], capture_output=True, text=True, check=False)  # fmt: skip
        if ls.stdout.strip() == "down":
            break
        time.sleep(1)
    p = _meshcast(
        lab,
        ["run", *PLAN, "--runtime", "swarm", "--out", str(tmp_path / "after"), "--json"],
        MESHCAST_SWARM_HOSTS=",".join(h["docker_host"] for h in lab["hosts"] if h["name"] != "lab3"),
    )
    assert p.returncode == 0, p.stderr[-3000:]
    after = json.loads(p.stdout)["run"]
    assert after["complete"], after["incomplete"]
    assert {w["host"] for w in after["placement"].values()} == {"lab1", "lab2"}
