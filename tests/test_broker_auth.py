"""Every broker meshcast starts is authenticated (issue 44, item 5).

The password file is written in Python (:mod:`coordinator.runtimes.brokerauth`) in the format of
``mosquitto_passwd``; a processes run's mosquitto, a containers run's broker container and a
containers deployment's broker refuse anonymous and wrong-password logins and accept the run's
(or the deployment's) own credentials. The container cases need Docker and the local image: they
skip without them, and fail instead under ``MESHCAST_REQUIRE_DOCKER=1`` (CI).
"""

from __future__ import annotations

import base64
import os
import secrets
import subprocess
import time
from pathlib import Path

import pytest
import trio

from coordinator.runtimes import deployments
from coordinator.runtimes.brokerauth import Credentials, password_entry, write_password_file
from coordinator.runtimes.containers import (
    BROKER_PASSWORD_FILE,
    DEFAULT_BROKER_IMAGE,
    DEFAULT_IMAGE,
    NETWORK_ENV,
    AuthFiles,
    ContainerRun,
    authenticated_broker_conf,
    compose_document,
    repo_root,
    write_auth_files,
)
from coordinator.runtimes.processes import local_broker
from coordinator.runtimes.records import RunSettings
from node.topology import Topology
from tests._env import need_broker, need_image
from tests.test_processes import same_plan

MOSQUITTO_PASSWD_LINE = (
    "meshcast:$7$101$T808bqvYU+Zpuu6d$9nKJuEnPa0gOkXNumNhWSXVnBOWr0Z8nBQaJBguKML9vjvngUKz1eu3+dB/CHV3fh3M0"
    "KTfIT18BhkT6Oit3Wg=="
)
"""What ``mosquitto_passwd -b FILE meshcast s3cret`` (mosquitto 2.0.11) wrote: salt and hash."""

REFUSED = 135
"""MQTT 5's CONNACK reason "Not authorized" (paho's ReasonCode for the MQTT 3.1.1 code 5 too)."""


def login(host: str, port: int, user: str | None, password: str | None) -> int:
    """The CONNACK reason code (0: accepted) the broker at ``host:port`` gives this login."""
    import paho.mqtt.client as mqtt

    got: list[int] = []
    client = mqtt.Client(mqtt.CallbackAPIVersion.VERSION2, client_id=f"auth-test-{secrets.token_hex(3)}")
    if user is not None:
        client.username_pw_set(user, password)
    client.on_connect = lambda _c, _u, _f, reason, _p: got.append(reason.value)
    deadline = time.monotonic() + 30
    while True:  # a broker container just started may not listen yet
        try:
            client.connect(host, port, keepalive=10)
            break
        except OSError:
            assert time.monotonic() < deadline, f"nothing listens on {host}:{port}"
            time.sleep(0.2)
    client.loop_start()
    try:
        while not got and time.monotonic() < deadline:
            time.sleep(0.02)
    finally:
        client.loop_stop()
        client.disconnect()
    assert got, f"no CONNACK from {host}:{port}"
    return got[0]


def assert_only_the_credentials_log_in(host: str, port: int, creds: Credentials) -> None:
    """Anonymous and wrong-password logins refused, the right one accepted."""
    assert login(host, port, None, None) == REFUSED, "an anonymous login was accepted"
    assert login(host, port, creds.user, creds.password + "x") == REFUSED, "a wrong password was accepted"
    assert login(host, port, "someone", creds.password) == REFUSED, "an unknown user was accepted"
    assert login(host, port, creds.user, creds.password) == 0


# -- the password file ----------------------------------------------------------------------------------
def test_the_password_entry_is_what_mosquitto_passwd_writes() -> None:
    salt = base64.b64decode(MOSQUITTO_PASSWD_LINE.split("$")[3])
    assert password_entry("meshcast", "s3cret", salt=salt) == MOSQUITTO_PASSWD_LINE
    fresh = password_entry("meshcast", "s3cret")
    assert fresh.startswith("meshcast:$7$101$") and fresh != MOSQUITTO_PASSWD_LINE  # a salt of its own
    with pytest.raises(ValueError):
        password_entry("a:b", "s3cret")


def test_the_password_file_is_its_owners_only(tmp_path: Path) -> None:
    path = tmp_path / "passwd"
    path.write_text("old")
    path.chmod(0o644)
    creds = Credentials.generate()
    write_password_file(path, creds)
    assert path.stat().st_mode & 0o777 == 0o600
    assert path.read_text().startswith(f"{creds.user}:$7$") and path.read_text().count("\n") == 1


async def test_a_processes_runs_mosquitto_refuses_other_logins(tmp_path: Path) -> None:
    need_broker()
    async with local_broker(tmp_path) as broker:
        addr = broker.address
        assert addr.username and addr.password
        creds = Credentials(addr.username, addr.password)
        await trio.to_thread.run_sync(assert_only_the_credentials_log_in, addr.host, addr.port, creds)
    assert not (tmp_path / "mosquitto.passwd").exists()  # the password does not outlive the run


def test_the_containers_broker_conf_refuses_anonymous_logins() -> None:
    conf = authenticated_broker_conf((repo_root() / "deploy" / "mosquitto.conf").read_text())
    lines = conf.splitlines()
    assert "allow_anonymous false" in lines and "allow_anonymous true" not in lines
    assert f"password_file {BROKER_PASSWORD_FILE}" in lines and "user root" in lines
    with pytest.raises(ValueError):
        authenticated_broker_conf(conf)  # no anonymous line left to replace


def test_an_authenticated_compose_file_names_the_files_not_the_password(tmp_path: Path) -> None:
    """With :class:`AuthFiles` every node and the coordinator read the credentials from the
    ``env_file`` (no environment entry overrides it) and the broker mounts the password file."""
    doc = compose_document(Topology.parse("mesh:2x2"), ["--plan", "p.json"], auth=AuthFiles())
    services = doc["services"]
    assert "./mosquitto.passwd:/mosquitto/config/passwd:ro" in services["broker"]["volumes"]
    for name in ["coordinator", *(s for s in services if s.startswith("node-"))]:
        assert services[name]["env_file"] == ["./mqtt.env"]
        assert "MESHCAST_MQTT_PASSWORD" not in services[name]["environment"]
    creds = Credentials.generate()
    write_auth_files(tmp_path, creds)
    env = tmp_path / "mqtt.env"
    assert env.read_text() == f"MESHCAST_MQTT_USER=meshcast\nMESHCAST_MQTT_PASSWORD={creds.password}\n"
    assert env.stat().st_mode & 0o777 == 0o600


# -- with an engine ----------------------------------------------------------------------------------
@pytest.fixture
def engine(monkeypatch: pytest.MonkeyPatch) -> str:
    """The local image (skip without it; fail under MESHCAST_REQUIRE_DOCKER=1) and a broker image
    that needs no registry; the image's name."""
    image = os.environ.get("MESHCAST_IMAGE", DEFAULT_IMAGE)
    need_image(image)
    if "MESHCAST_BROKER_IMAGE" not in os.environ:
        have = subprocess.run(["docker", "image", "inspect", DEFAULT_BROKER_IMAGE], capture_output=True)
        monkeypatch.setenv("MESHCAST_BROKER_IMAGE", DEFAULT_BROKER_IMAGE if have.returncode == 0 else image)
    monkeypatch.delenv(NETWORK_ENV, raising=False)
    return image


def _broker_address(run: ContainerRun) -> tuple[str, int]:
    """Where the host reaches a containers run's broker: its loopback port (host networking) or
    its container's address on the run's compose network (the default network)."""
    if run._loopback is not None:
        return "127.0.0.1", run._loopback.broker
    ps = subprocess.run(
        run.cmd("ps", "-q", "broker"), capture_output=True, text=True, cwd=run.workdir, env=run.env
    )
    cid = ps.stdout.strip()
    assert cid, ps.stderr
    ip = subprocess.run(
        ["docker", "inspect", "-f", "{{range .NetworkSettings.Networks}}{{.IPAddress}} {{end}}", cid],
        capture_output=True, text=True, check=True,
    ).stdout.split()  # fmt: skip
    assert ip, f"the broker container {cid} has no address"
    return ip[0], 1883


@pytest.mark.slow
@pytest.mark.parametrize("network", ["bridge", "host"])
async def test_a_containers_runs_broker_refuses_other_logins(
    engine: str, tmp_path: Path, monkeypatch: pytest.MonkeyPatch, network: str
) -> None:
    """The broker of a fresh containers run, as its compose file starts it: only the run's own
    credentials log in (on its compose network, and on the host's loopback with host networking).
    The compose file names the password file and the nodes' credentials file, never the password."""
    monkeypatch.setenv(NETWORK_ENV, network)
    settings = RunSettings(wall_budget=60, runtime="containers", run_dir=str(tmp_path))
    run = ContainerRun(same_plan(), settings, tmp_path, run_id="auth" + secrets.token_hex(4))
    run.write()
    await run.choose_broker()
    try:
        up = await run._run(run.cmd("up", "-d", "broker"), "compose.log", 120)
        assert up == 0, (tmp_path / "compose.log").read_text(errors="replace")
        host, port = _broker_address(run)
        await trio.to_thread.run_sync(assert_only_the_credentials_log_in, host, port, run.credentials)
    finally:
        await run.down()
    compose = (tmp_path / "compose.yaml").read_text()
    assert run.credentials.password not in compose
    assert "./mosquitto.passwd:/mosquitto/config/passwd:ro" in compose
    assert not (tmp_path / "mosquitto.passwd").exists(), "the run's password outlived it"


@pytest.mark.slow
def test_a_containers_deployments_broker_refuses_other_logins(
    engine: str, tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """A containers deployment's broker, published on 127.0.0.1 only: only the deployment's own
    credentials log in; its nodes have them (they all answer a ping); the published port is bound
    to loopback; the compose file holds no password."""
    monkeypatch.setenv("MESHCAST_STATE_DIR", str(tmp_path / "state"))
    name = "auth-" + secrets.token_hex(3)
    try:
        dep = deployments.deploy("containers", name, Topology.parse("mesh:2x2"))  # returns once nodes answer
        assert dep.user and dep.password
        address = deployments.parse_broker(dep.broker)
        assert address.host == "127.0.0.1"
        assert_only_the_credentials_log_in(address.host, address.port, Credentials(dep.user, dep.password))
        (cid,) = [c for c, service in deployments._containers(dep, running=True) if service == "broker"]
        ports = subprocess.run(["docker", "port", cid], capture_output=True, text=True, check=True).stdout
        assert ports.split() == ["1883/tcp", "->", f"127.0.0.1:{address.port}"], ports
        assert dep.password not in (dep.directory / "compose.yaml").read_text()
        assert (dep.directory / "mosquitto.passwd").stat().st_mode & 0o777 == 0o600
    finally:
        deployments.destroy(name)
