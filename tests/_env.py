"""What the distributed-runtime tests need from the machine, and what to do when it is missing.

A test that needs mosquitto, a Docker engine or a browser skips, naming what is missing, unless
CI asks for it with ``MESHCAST_REQUIRE_BROKER=1`` / ``MESHCAST_REQUIRE_DOCKER=1`` /
``MESHCAST_REQUIRE_BROWSER=1``: then it fails, so a missing broker, engine or browser can never
turn its tests into silent skips.
"""

from __future__ import annotations

import os
import shutil
import subprocess
from functools import cache

import pytest

__all__ = [
    "CHROMEDRIVER",
    "CHROMIUM",
    "compose_command",
    "docker_client",
    "need_broker",
    "need_browser",
    "need_docker",
    "need_image",
    "need_swarm_lab",
]


def _missing(what: str, variable: str) -> None:
    if os.environ.get(variable, "") not in ("", "0"):
        pytest.fail(f"{what}, and {variable} is set: this run must not skip it")
    pytest.skip(what)


def need_broker() -> str:
    """The mosquitto executable, or skip (fail under MESHCAST_REQUIRE_BROKER=1)."""
    exe = shutil.which("mosquitto") or next(
        (p for p in ("/usr/sbin/mosquitto", "/usr/local/sbin/mosquitto") if os.access(p, os.X_OK)), None
    )
    if exe is None:
        _missing("mosquitto is not installed (apt-get install mosquitto)", "MESHCAST_REQUIRE_BROKER")
    assert exe is not None
    return exe


CHROMIUM = "/usr/bin/chromium"
CHROMEDRIVER = "/usr/bin/chromedriver"
"""Debian's browser and its driver (apt-get install chromium chromium-driver): nothing downloaded."""


def need_browser() -> None:
    """Debian's chromium, its chromedriver and selenium, or skip (fail under MESHCAST_REQUIRE_BROWSER=1)."""
    missing = [p for p in (CHROMIUM, CHROMEDRIVER) if not os.access(p, os.X_OK)]
    if missing:
        _missing(
            f"{' and '.join(missing)} not installed (apt-get install chromium chromium-driver)",
            "MESHCAST_REQUIRE_BROWSER",
        )
    try:
        import selenium  # noqa: F401
    except ImportError:
        _missing("selenium is not installed (pip install -e '.[test]')", "MESHCAST_REQUIRE_BROWSER")


@cache
def _docker_problem() -> str | None:
    try:
        import docker
    except ImportError:
        return "the docker SDK is not installed (pip install docker)"
    try:
        docker.from_env(timeout=10).ping()
    except Exception as exc:
        return f"no Docker engine reachable ({type(exc).__name__}: {exc})"
    if compose_command() is None:
        return "neither 'docker compose' (v2) nor 'docker-compose' (v1) is installed"
    return None


def need_docker() -> None:
    """A reachable Docker engine and a compose CLI, or skip (fail under MESHCAST_REQUIRE_DOCKER=1)."""
    problem = _docker_problem()
    if problem is not None:
        _missing(problem, "MESHCAST_REQUIRE_DOCKER")


def need_image(image: str) -> None:
    """A locally present image (no registry is assumed reachable), or skip/fail like need_docker."""
    need_docker()
    if subprocess.run(["docker", "image", "inspect", image], capture_output=True).returncode != 0:
        _missing(
            f"image {image} is not built"
            " (deploy/build-offline-image.sh, or docker build -f deploy/Dockerfile)",
            "MESHCAST_REQUIRE_DOCKER",
        )


SWARM_LAB_TOOLS = {
    "nsenter": "util-linux",
    "unshare": "util-linux",
    "setsid": "util-linux",
    "ip": "iproute2",
    "dockerd": "docker.io",
    "containerd": "containerd",
}
"""What deploy/swarm-lab.sh runs, and the Debian package of each."""


def need_swarm_lab() -> None:
    """What deploy/swarm-lab.sh needs: a Docker engine (need_docker), root, and its tools; or skip,
    naming what is missing (fail under MESHCAST_REQUIRE_DOCKER=1, as the other Docker tests)."""
    need_docker()
    if os.geteuid() != 0:
        _missing(
            "the swarm lab needs root (network namespaces, a dockerd per host): run as root",
            "MESHCAST_REQUIRE_DOCKER",
        )
    missing = [f"{tool} ({pkg})" for tool, pkg in SWARM_LAB_TOOLS.items() if shutil.which(tool) is None]
    if missing:
        _missing(f"the swarm lab needs {', '.join(missing)}: not installed", "MESHCAST_REQUIRE_DOCKER")


def docker_client():  # type: ignore[no-untyped-def]
    """A Docker SDK client (call need_docker first)."""
    import docker

    return docker.from_env(timeout=60)


@cache
def compose_command() -> tuple[str, ...] | None:
    from coordinator.runtimes.containers import compose_cli

    return compose_cli()
