"""The lab of Docker hosts on one machine (deploy/swarm-lab.sh, issue 49 item 2).

`up 3` makes three Docker daemons, each in its own network and UTS namespace, joined by veths to
a bridge in a namespace of its own, and one swarm over them; the node image (else a tiny imported
image) is loaded on every host. The test checks the swarm (three nodes Ready, named lab1..lab3
and labelled lab=labK), then spreads a 3-replica service one task per host on an attachable
overlay network and pings every task from every other one, across hosts (ICMP echo sent from
inside each task's network namespace: nothing is needed in the image). Then `down`, and `check`
finds nothing of the lab left.

Needs root, Docker, nsenter, unshare, ip, dockerd and containerd: skipped with the reason on a
laptop without them, failing instead under CI's MESHCAST_REQUIRE_DOCKER=1. The lab of this
module has its own state dir and namespace names, so a lab a user has up is not touched.
Measured on the project's 2-core machine (7 Dec 2026, Engine 20.10.24, fuse-overlayfs): 28-40 s
with the node image (`up 3` 18-23 s, of which 16-21 s load the 477 MB image on the three hosts;
`down` 6-7 s), 10 s with the 2 MB image (`up 3` 2.0 s, `down` 4.4 s).
"""

from __future__ import annotations

import functools
import json
import os
import shutil
import subprocess
import sys
import tempfile
import time
from collections.abc import Callable, Iterator
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import pytest

from tests._env import need_swarm_lab

pytestmark = pytest.mark.slow

ROOT = Path(__file__).resolve().parent.parent
SCRIPT = ROOT / "deploy" / "swarm-lab.sh"
NODE_IMAGE = os.environ.get("MESHCAST_IMAGE", "meshcast-local/meshcast:latest")
PROBE_IMAGE = "meshcast-local/swarm-lab-probe:test"
"""Made by `docker import` (sleep and its libraries) when the node image is absent; removed after."""
LAB_ENV = {
    "MESHCAST_SWARM_LAB_DIR": "/tmp/meshcast-swarm-lab-test",
    "MESHCAST_SWARM_LAB_NAME": "meshcast-labtest",
    "MESHCAST_SWARM_LAB_TIMEOUT": "60",
}
HOSTS = 3
SERVICE = "probe"
NETWORK = "labnet"

ICMP_ECHO = r"""
import os, socket, struct, sys, time
def checksum(b):
    s = sum(struct.unpack("!%dH" % (len(b) // 2), b))
    s = (s >> 16) + (s & 0xFFFF)
    return ~(s + (s >> 16)) & 0xFFFF
dst, ident = sys.argv[1], os.getpid() & 0xFFFF
sock = socket.socket(socket.AF_INET, socket.SOCK_RAW, socket.IPPROTO_ICMP)
sock.settimeout(2)
body = struct.pack("!HH", ident, 1) + b"meshcast-lab"
t0 = time.perf_counter()
sock.sendto(struct.pack("!BBH", 8, 0, checksum(b"\x08\x00\x00\x00" + body)) + body, (dst, 0))
while True:
    buf, (src, _) = sock.recvfrom(2048)
    head = (buf[0] & 15) * 4
    kind, _, _, rid = struct.unpack("!BBHH", buf[head:head + 6])
    if src == dst and kind == 0 and rid == ident:
        print(f"{(time.perf_counter() - t0) * 1000:.2f}")
        break
"""
"""One ICMP echo to argv[1] and its reply's round trip in ms (a raw socket: run as root)."""


def run(
    args: list[str], timeout: float = 60, env: dict[str, str] | None = None
) -> subprocess.CompletedProcess[str]:
    return subprocess.run(args, capture_output=True, text=True, timeout=timeout, env=env)


def wait_until(what: str, seconds: float, probe: Callable[[], Any]) -> Any:
    """``probe()``'s first truthy value, trying every 0.5 s for ``seconds``; fails naming ``what``."""
    deadline = time.monotonic() + seconds
    last: Any = None
    while time.monotonic() < deadline:
        last = probe()
        if last:
            return last
        time.sleep(0.5)
    pytest.fail(f"{what}: not within {seconds:.0f} s (last: {last!r})")


@dataclass
class Lab:
    env: dict[str, str]
    image: str
    hosts: list[dict[str, str]] = field(default_factory=list)
    timings: dict[str, float] = field(default_factory=dict)
    summaries: list[str] = field(default_factory=list)

    def script(self, *args: str, timeout: float = 300) -> subprocess.CompletedProcess[str]:
        return run(["bash", str(SCRIPT), *args], timeout=timeout, env=self.env)

    def docker(self, host: str, *args: str, timeout: float = 60) -> subprocess.CompletedProcess[str]:
        return run(["docker", "-H", host, *args], timeout=timeout)

    def ok(self, host: str, *args: str) -> str:
        proc = self.docker(host, *args)
        assert proc.returncode == 0, f"docker {' '.join(args)} on {host}: {proc.stderr.strip()}"
        return proc.stdout

    @property
    def manager(self) -> str:
        return self.hosts[0]["docker_host"]

    def down(self) -> subprocess.CompletedProcess[str]:
        t0 = time.monotonic()
        proc = self.script("down", timeout=180)
        if "down" not in self.timings:
            self.timings["down"] = time.monotonic() - t0
            self.summaries += proc.stderr.strip().splitlines()[-1:]
        return proc


def _probe_image() -> None:
    """A 2 MB image whose command is /usr/bin/sleep: the host's sleep and its libraries."""
    files = [Path("/usr/bin/sleep").resolve()]
    ldd = run(["ldd", str(files[0])])
    files += [Path(w) for w in ldd.stdout.split() if w.startswith("/")]
    with tempfile.TemporaryDirectory() as tmp:
        for f in files:
            dest = Path(tmp) / f.relative_to("/")
            dest.parent.mkdir(parents=True, exist_ok=True)
            shutil.copy(f, dest)
        (Path(tmp) / "usr/bin/sleep").chmod(0o755)
        tar = subprocess.Popen(["tar", "-C", tmp, "-c", "."], stdout=subprocess.PIPE)
        imp = subprocess.run(
            ["docker", "import", "-c", 'CMD ["/usr/bin/sleep", "infinity"]', "-", PROBE_IMAGE],
            stdin=tar.stdout, capture_output=True, text=True, timeout=120,
        )  # fmt: skip
        tar.wait(timeout=60)
    assert imp.returncode == 0, imp.stderr


@pytest.fixture(scope="module")
def lab() -> Iterator[Lab]:
    need_swarm_lab()
    made_probe = run(["docker", "image", "inspect", NODE_IMAGE]).returncode != 0
    image = PROBE_IMAGE if made_probe else NODE_IMAGE
    the_lab = Lab(env=dict(os.environ, **LAB_ENV), image=image)
    # leftovers of an earlier, killed run of this module (down is idempotent)
    assert the_lab.script("down").returncode == 0
    try:
        if made_probe:
            _probe_image()
        t0 = time.monotonic()
        up = the_lab.script("up", str(HOSTS), "--image", image)
        the_lab.timings["up"] = time.monotonic() - t0
        the_lab.summaries += [ln for ln in up.stderr.splitlines() if " at " in ln or " in " in ln]
        assert up.returncode == 0, f"swarm-lab.sh up failed:\n{up.stderr[-4000:]}"
        state = json.loads((Path(LAB_ENV["MESHCAST_SWARM_LAB_DIR"]) / "hosts.json").read_text())
        the_lab.hosts = state["hosts"]
        printed = [line.split() for line in up.stdout.splitlines()]
        assert printed == [
            [h["name"], h["docker_host"], h["address"], h["node_id"]] for h in the_lab.hosts
        ], up.stdout
        yield the_lab
    finally:
        down = the_lab.down()
        if made_probe:
            run(["docker", "image", "rm", PROBE_IMAGE])
        took = ", ".join(f"{k} {v:.1f} s" for k, v in the_lab.timings.items())
        print(f"swarm lab ({image}): {took}", *the_lab.summaries, sep="\n  ", file=sys.stderr)
        assert down.returncode == 0, f"swarm-lab.sh down left something:\n{down.stdout}{down.stderr}"


def _task_of(lab: Lab, host: dict[str, str]) -> tuple[str, int, str]:
    """The service's one task container on ``host``: its id, its pid, its address on the overlay."""
    label = f"label=com.docker.swarm.service.name={SERVICE}"
    ids = lab.ok(host["docker_host"], "ps", "-q", "--filter", label)
    assert len(ids.split()) == 1, f"{host['name']} runs {len(ids.split())} tasks of {SERVICE}, not one"
    info = json.loads(lab.ok(host["docker_host"], "inspect", ids.split()[0]))[0]
    return info["Id"], info["State"]["Pid"], info["NetworkSettings"]["Networks"][NETWORK]["IPAddress"]


def _ping(pid: int, address: str) -> str | None:
    """One ICMP echo from the network namespace of process ``pid``: the round trip (ms), or None."""
    proc = run(["nsenter", f"--net=/proc/{pid}/ns/net", sys.executable, "-c", ICMP_ECHO, address], timeout=10)
    return proc.stdout.strip() if proc.returncode == 0 else None


def test_three_hosts_one_swarm_an_overlay_across_them_and_nothing_left_after_down(lab: Lab) -> None:
    # the swarm: three nodes Ready, each its own host name and label, the IDs the script printed
    listing = lab.ok(lab.manager, "node", "ls", "--format", "{{json .}}")
    nodes = [json.loads(line) for line in listing.splitlines()]
    assert sorted((n["Hostname"], n["Status"]) for n in nodes) == [(f"lab{k}", "Ready") for k in (1, 2, 3)]
    assert {n["ID"] for n in nodes} == {h["node_id"] for h in lab.hosts}
    for host in lab.hosts:
        spec = lab.ok(lab.manager, "node", "inspect", "--format", "{{json .Spec.Labels}}", host["node_id"])
        labels = json.loads(spec)
        assert labels == {"lab": host["name"]}
        assert lab.ok(host["docker_host"], "info", "--format", "{{.Name}}").strip() == host["name"]
        assert lab.ok(host["docker_host"], "image", "inspect", "--format", "ok", lab.image).strip() == "ok"
    # while it is up, check names what is up (it is not blind)
    up_check = lab.script("check", timeout=60)
    assert up_check.returncode == 1
    assert "dockerd" in up_check.stdout and "network namespace meshcast-labtest1" in up_check.stdout

    # one task per host on an attachable overlay network
    lab.ok(lab.manager, "network", "create", "--driver", "overlay", "--attachable", NETWORK)
    lab.ok(
        lab.manager, "service", "create", "--detach", "--name", SERVICE, "--network", NETWORK,
        "--replicas", str(HOSTS), "--replicas-max-per-node", "1", "--restart-condition", "none",
        "--stop-grace-period", "1s", lab.image, "/usr/bin/sleep", "600",
    )  # fmt: skip

    def running() -> list[str] | None:
        out = lab.ok(lab.manager, "service", "ps", SERVICE, "--format", "{{.Node}} {{.CurrentState}}")
        states = [line.split() for line in out.splitlines()]
        return sorted(s[0] for s in states) if states and all(s[1] == "Running" for s in states) else None

    assert wait_until("the service's tasks running", 60, running) == ["lab1", "lab2", "lab3"]
    tasks = {h["name"]: _task_of(lab, h) for h in lab.hosts}
    assert len({address for _, _, address in tasks.values()}) == HOSTS

    # every task reaches every other, across hosts (vxlan between the lab's namespaces)
    rtt: dict[tuple[str, str], str] = {}
    for src, (_, pid, _) in tasks.items():
        for dst, (_, _, address) in tasks.items():
            if src != dst:
                echo = functools.partial(_ping, pid, address)
                rtt[(src, dst)] = wait_until(f"ping {src} -> {dst} ({address})", 20, echo)
    assert len(rtt) == HOSTS * (HOSTS - 1)
    print(f"round trips (ms): {rtt}", file=sys.stderr)
    if lab.image == NODE_IMAGE:  # it has python: the swarm's DNS names every task, from any host
        cid, _, _ = tasks["lab3"]
        names = lab.ok(
            lab.hosts[2]["docker_host"], "exec", cid, "python3", "-c",
            f"import socket; print(' '.join(sorted(socket.gethostbyname_ex('tasks.{SERVICE}')[2])))",
        )  # fmt: skip
        assert names.split() == sorted(address for _, _, address in tasks.values())

    # down, then nothing of the lab is left
    down = lab.down()
    assert down.returncode == 0, down.stdout + down.stderr
    check = lab.script("check", timeout=60)
    assert check.returncode == 0, check.stdout
    assert check.stdout.startswith("nothing of the lab is left")
    again = lab.script("down", timeout=60)  # idempotent
    assert again.returncode == 0, again.stdout + again.stderr
