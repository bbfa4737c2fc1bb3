"""Node containers reading their Python code from volumes filled once per image."""

from __future__ import annotations

import json
import os
import subprocess
from collections.abc import Mapping
from pathlib import Path

import pytest

from coordinator.errors import UsageError
from coordinator.runtimes import codevolumes
from coordinator.runtimes.codevolumes import (
    CODE_VOLUMES_ENV,
    LABEL,
    MARKER,
    CodeVolume,
    code_volume_setting,
    ensure_code_volumes,
    volume_name,
)
from coordinator.runtimes.containers import DEFAULT_IMAGE, ContainerRun, compose_document
from coordinator.runtimes.records import RunSettings
from coordinator.workloads.plan import Plan
from node.topology import Topology
from tests._env import need_image

VOLUMES = [
    CodeVolume("meshcast-code-abc-1", "/opt/meshcast"),
    CodeVolume("meshcast-code-abc-2", "/usr/lib/x"),
]


def test_node_services_mount_the_code_volumes_read_only_and_nothing_else_does() -> None:
    doc = compose_document(Topology("mesh", 2, 3), ["--plan", "p.json"], code_volumes=VOLUMES)
    nodes = {k: v for k, v in doc["services"].items() if k.startswith("node-")}
    assert len(nodes) == 6
    for svc in nodes.values():
        assert svc["volumes"] == ["meshcast-code-abc-1:/opt/meshcast:ro", "meshcast-code-abc-2:/usr/lib/x:ro"]
    assert not any(v.startswith("meshcast-code") for v in doc["services"]["coordinator"]["volumes"])
    assert doc["volumes"] == {v.name: {"external": True} for v in VOLUMES}  # `down -v` keeps them
    plain = compose_document(Topology("mesh", 2, 3), ["--plan", "p.json"])
    assert "volumes" not in plain and "volumes" not in plain["services"]["node-0-0"]


def test_a_run_renders_its_code_volumes_into_compose_yaml(tmp_path: Path) -> None:
    run = ContainerRun(Plan(Topology("mesh", 2, 2), ()), RunSettings(), tmp_path, env={})
    assert "meshcast-code" not in run.write().read_text()
    run.code_volumes = VOLUMES
    text = run.render().read_text()
    assert '- "meshcast-code-abc-1:/opt/meshcast:ro"' in text and "external: true" in text


def test_the_setting_is_checked() -> None:
    assert code_volume_setting({}) == "auto"
    values = [code_volume_setting({CODE_VOLUMES_ENV: v}) for v in ("on", " OFF ", "auto")]
    assert values == ["on", "off", "auto"]
    with pytest.raises(UsageError, match=f"{CODE_VOLUMES_ENV}='yes'"):
        code_volume_setting({CODE_VOLUMES_ENV: "yes"})


def test_volume_names_follow_the_image_and_the_path() -> None:
    a = volume_name("sha256:0123456789abcdef", "/opt/meshcast")
    assert a == volume_name("sha256:0123456789abcdef", "/opt/meshcast")
    assert a.startswith("meshcast-code-0123456789ab-")
    assert a != volume_name("sha256:0123456789abcdef", "/usr/lib/python3.11")
    assert a != volume_name("sha256:fedcba9876543210", "/opt/meshcast")


async def test_off_asks_nothing_of_the_engine(monkeypatch: pytest.MonkeyPatch) -> None:
    async def no_docker(*args: str, env: Mapping[str, str]) -> tuple[int, str]:
        raise AssertionError(f"docker {args} called")

    monkeypatch.setattr(codevolumes, "_docker", no_docker)
    assert await ensure_code_volumes("img", {CODE_VOLUMES_ENV: "off"}) == []


async def test_auto_is_off_on_a_driver_that_shares_its_page_cache(monkeypatch: pytest.MonkeyPatch) -> None:
    calls: list[tuple[str, ...]] = []

    async def docker(*args: str, env: Mapping[str, str]) -> tuple[int, str]:
        calls.append(args)
        return 0, "overlay2\n"

    monkeypatch.setattr(codevolumes, "_docker", docker)
    assert await ensure_code_volumes("img", {}) == []
    assert calls == [("info", "--format", "{{.Driver}}")]


async def test_a_failing_engine_means_no_volumes_and_says_why(monkeypatch: pytest.MonkeyPatch) -> None:
    async def docker(*args: str, env: Mapping[str, str]) -> tuple[int, str]:
        return (1, "Error: No such image: img") if args[0] == "image" else (0, "")

    monkeypatch.setattr(codevolumes, "_docker", docker)
    said: list[str] = []
    assert await ensure_code_volumes("img", {CODE_VOLUMES_ENV: "on"}, said.append) == []
    assert len(said) == 1 and "No such image: img" in said[0] and "read their code from the image" in said[0]


# -- with an engine ----------------------------------------------------------------------------------
def _docker(*args: str) -> str:
    return subprocess.run(["docker", *args], capture_output=True, text=True, check=True).stdout


def _created(volume: str) -> str:
    return str(json.loads(_docker("volume", "inspect", volume))[0]["CreatedAt"])


@pytest.mark.slow
async def test_volumes_are_filled_once_and_serve_the_nodes_code() -> None:
    image = os.environ.get("MESHCAST_IMAGE", DEFAULT_IMAGE)
    need_image(image)
    env = {**os.environ, CODE_VOLUMES_ENV: "on"}
    stale = "meshcast-code-test-stale"
    _docker("volume", "create", "--label", f"{LABEL}=000000000000", stale)  # from an image that is gone
    try:
        first = await ensure_code_volumes(image, env)
        assert stale not in _docker("volume", "ls", "-q").split()
    finally:
        subprocess.run(["docker", "volume", "rm", stale], capture_output=True)
    assert len(first) == 2 and "/opt/meshcast" in [v.path for v in first]
    created = {v.name: _created(v.name) for v in first}
    again = await ensure_code_volumes(image, env)
    assert again == first  # found, not filled again
    assert {v.name: _created(v.name) for v in again} == created
    mounts = [a for v in first for a in ("-v", v.mount)]
    imports = "import node.transport.mqtt, node.transport.tcp; print(node.__file__)"
    script = f"ls -a /opt/meshcast && python -c '{imports}'"
    where = _docker("run", "--rm", "--network", "none", *mounts, image, "sh", "-c", script)
    assert MARKER in where.split() and "/opt/meshcast/lib/" in where


def test_the_fill_command_says_what_it_did_in_its_exit_status(
    capsys: pytest.CaptureFixture[str], monkeypatch: pytest.MonkeyPatch
) -> None:
    """``python -m coordinator.runtimes.codevolumes IMAGE`` (the offline image build runs it):
    0 with the volumes or none wanted, 1 when making them failed, 2 for a bad call or setting."""
    for argv in ([], ["a", "b"], ["--now"]):
        assert codevolumes.main(argv) == 2
        assert "usage: python -m coordinator.runtimes.codevolumes IMAGE" in capsys.readouterr().err
    monkeypatch.setenv(CODE_VOLUMES_ENV, "off")
    assert codevolumes.main(["some/image"]) == 0
    assert "code volumes of some/image: none (not used on this engine)" in capsys.readouterr().out
    monkeypatch.setenv(CODE_VOLUMES_ENV, "yes")
    assert codevolumes.main(["some/image"]) == 2
    assert f"{CODE_VOLUMES_ENV}='yes'" in capsys.readouterr().err
    monkeypatch.setenv(CODE_VOLUMES_ENV, "on")

    async def failing(*args: object, **kwargs: object) -> tuple[int, str]:
        return 1, "Cannot connect to the Docker daemon"

    monkeypatch.setattr(codevolumes, "_docker", failing)
    assert codevolumes.main(["some/image"]) == 1
    out = capsys.readouterr().out
    assert "Cannot connect to the Docker daemon" in out and "code volumes of" not in out
    names = [CodeVolume("v1", "/opt/meshcast"), CodeVolume("v2", "/usr/lib/python3.11")]

    async def made(*args: object) -> list[CodeVolume]:
        return names

    monkeypatch.setattr(codevolumes, "make_code_volumes", made)
    assert codevolumes.main(["some/image"]) == 0
    assert "code volumes of some/image: v1, v2" in capsys.readouterr().out
