"""Node containers that read their Python code from volumes rather than from the image's layers.

On an engine whose storage driver is ``fuse-overlayfs`` (rootless Docker, Docker inside a
container: this project's machine) every container mounts its own FUSE file system, and each
node's interpreter reads its ~260 modules through that container's FUSE daemon, with no page
cache shared between containers. Measured on this machine (2 cores, 64 node containers on the
host network): the nodes' Python spent ~43 CPU-s and the FUSE daemons ~9 CPU-s; with the venv
and the standard library bind-mounted, ~33 and ~2, and the run started 6-9 s sooner.

So, once per image, the runtime copies the image's venv and standard library into named
volumes (Docker fills an empty named volume from the image when a container first mounts it)
and mounts them read-only into every node container. A volume is named and labelled after the
image's id, so a rebuilt image gets fresh volumes, and volumes of images that no longer exist
are removed. ``MESHCAST_CODE_VOLUMES``: ``auto`` (the default: on for fuse-overlayfs and vfs),
``on`` or ``off``. Anything that goes wrong here is said and the run goes on without volumes.

``python -m coordinator.runtimes.codevolumes IMAGE`` fills them right away (the offline image
build does, so that the first run after a build does not spend its start-up copying).
"""

from __future__ import annotations

import hashlib
import os
from collections.abc import Callable, Mapping, Sequence
from dataclasses import dataclass
from typing import Final

import trio

__all__ = ["CODE_VOLUMES_ENV", "CodeVolume", "code_volume_setting", "ensure_code_volumes", "volume_name"]

CODE_VOLUMES_ENV: Final = "MESHCAST_CODE_VOLUMES"
LABEL: Final = "org.meshcast.code"
"""The image id (first 12 hex digits) a code volume was filled from."""
PATH_LABEL: Final = "org.meshcast.path"
MARKER: Final = ".meshcast-code"
"""Written into each volume after Docker filled it: a volume without it is incomplete."""
SLOW_DRIVERS: Final = frozenset({"fuse-overlayfs", "vfs"})
_PATHS_SCRIPT: Final = "import sys, sysconfig; print(sys.prefix); print(sysconfig.get_path('stdlib'))"
_TIMEOUT: Final = 300.0


@dataclass(frozen=True)
class CodeVolume:
    """A named volume holding the image's files under ``path`` (mounted read-only there)."""

    name: str
    path: str

    @property
    def mount(self) -> str:
        return f"{self.name}:{self.path}:ro"


def code_volume_setting(env: Mapping[str, str]) -> str:
    """``auto``, ``on`` or ``off`` from ``MESHCAST_CODE_VOLUMES`` (UsageError for anything else)."""
    value = env.get(CODE_VOLUMES_ENV, "").strip().lower() or "auto"
    if value not in ("auto", "on", "off"):
        from coordinator.errors import UsageError

        raise UsageError(f"{CODE_VOLUMES_ENV}={value!r}: use 'auto' (the default), 'on' or 'off'")
    return value


def short_id(image_id: str) -> str:
    """An image id's first 12 hex digits (``sha256:`` dropped): what names and labels carry."""
    return image_id.split(":")[-1][:12]


def volume_name(image_id: str, path: str) -> str:
    """``meshcast-code-<image id, 12 hex>-<path hash, 8 hex>``: one image, one path, one name."""
    return f"meshcast-code-{short_id(image_id)}-{hashlib.sha256(path.encode()).hexdigest()[:8]}"


@dataclass(frozen=True)
class _Listed:
    """A code volume as ``docker volume ls`` shows it: name, image label, path label, host path."""

    name: str
    image: str
    path: str
    mountpoint: str


_LS_FORMAT: Final = (
    '{{.Name}}\t{{.Label "org.meshcast.code"}}\t{{.Label "org.meshcast.path"}}\t{{.Mountpoint}}'
)
"""One :class:`_Listed` per line (the labels are :data:`LABEL` and :data:`PATH_LABEL`)."""


async def _docker(*args: str, env: Mapping[str, str]) -> tuple[int, str]:
    """Run ``docker args``; its exit status and output (stderr appended), within a deadline."""
    with trio.move_on_after(_TIMEOUT):
        p = await trio.run_process(
            ["docker", *args], capture_stdout=True, capture_stderr=True, check=False, env=dict(env)
        )
        return p.returncode, p.stdout.decode() + p.stderr.decode()
    return -1, f"docker {args[0]} took over {_TIMEOUT:g} s"


class _Failed(Exception):
    """A docker command failed: the run goes on without code volumes."""


async def _ok(*args: str, env: Mapping[str, str]) -> str:
    rc, out = await _docker(*args, env=env)
    if rc != 0:
        raise _Failed(f"docker {' '.join(args[:3])} ...: {out.strip()[-300:]}")
    return out


async def _listed(env: Mapping[str, str]) -> list[_Listed]:
    """Every code volume on the engine, with its labels and host path, in one call."""
    out = await _ok("volume", "ls", "--filter", f"label={LABEL}", "--format", _LS_FORMAT, env=env)
    rows = [line.split("\t") for line in out.splitlines() if line.strip()]
    return [_Listed(*row) for row in rows if len(row) == 4]


async def _filled(volumes: Sequence[_Listed], image: str, env: Mapping[str, str]) -> bool:
    """Whether every volume has its marker: read from the host when the engine's files are
    readable here, else by a throwaway container."""
    if all(v.mountpoint and os.access(v.mountpoint, os.R_OK) for v in volumes):
        return all(os.path.exists(os.path.join(v.mountpoint, MARKER)) for v in volumes)
    mounts = [a for v in volumes for a in ("-v", f"{v.name}:{v.path}:ro")]
    test = " && ".join(f"test -e {v.path}/{MARKER}" for v in volumes)
    rc, _ = await _docker("run", "--rm", "--network", "none", *mounts, image, "sh", "-c", test, env=env)
    return rc == 0


async def _forget_old(current: str, listed: Sequence[_Listed], env: Mapping[str, str]) -> None:
    """Remove code volumes filled from images that are gone (a volume still in use stays)."""
    if all(v.image == current for v in listed):
        return
    images = {short_id(i) for i in (await _ok("image", "ls", "-q", "--no-trunc", env=env)).split()}
    stale = [v.name for v in listed if v.image not in images | {current}]
    if stale:
        await _docker("volume", "rm", *stale, env=env)


async def make_code_volumes(
    image: str, env: Mapping[str, str], say: Callable[[str], None] = lambda _: None
) -> list[CodeVolume]:
    """The code volumes for ``image``, filled now if they are not yet; ``[]`` when off or not worth
    it here. Raises when a docker command fails (OSError, ValueError, or ``_Failed`` naming it)."""
    setting = code_volume_setting(env)
    if setting == "off":
        return []
    if setting == "auto":
        driver = (await _ok("info", "--format", "{{.Driver}}", env=env)).strip()
        if driver not in SLOW_DRIVERS:
            return []
    image_id = (await _ok("image", "inspect", "--format", "{{.Id}}", image, env=env)).strip()
    short = short_id(image_id)
    listed = await _listed(env)
    mine = [v for v in listed if v.image == short]
    if mine:
        if all(v.path for v in mine) and await _filled(mine, image, env):
            await _forget_old(short, listed, env)
            return sorted((CodeVolume(v.name, v.path) for v in mine), key=lambda v: v.path)
        await _docker("volume", "rm", "-f", *(v.name for v in mine), env=env)  # incomplete: fill again
    say(f"copying {image}'s Python code into volumes (once per image)")
    out = await _ok("run", "--rm", "--network", "none", image, "python", "-c", _PATHS_SCRIPT, env=env)
    paths = [p for p in out.split() if p.startswith("/")][:2]
    if len(paths) != 2:
        raise _Failed(f"the image did not say where its Python lives: {out.strip()[-200:]!r}")
    volumes = [CodeVolume(volume_name(image_id, p), p) for p in paths]
    for v in volumes:
        await _ok("volume", "create", "--label", f"{LABEL}={short}", "--label", f"{PATH_LABEL}={v.path}",
                  v.name, env=env)  # fmt: skip
    mounts = [a for v in volumes for a in ("-v", f"{v.name}:{v.path}")]
    touch = " && ".join(f"touch {v.path}/{MARKER}" for v in volumes)
    await _ok("run", "--rm", "--network", "none", *mounts, image, "sh", "-c", touch, env=env)
    await _forget_old(short, listed, env)
    return sorted(volumes, key=lambda v: v.path)


async def ensure_code_volumes(
    image: str, env: Mapping[str, str], say: Callable[[str], None] = lambda _: None
) -> list[CodeVolume]:
    """:func:`make_code_volumes` for a run: a failure is said and means "no volumes".

    Never raises for the engine's sake (a bad ``MESHCAST_CODE_VOLUMES`` is a UsageError).
    """
    try:
        return await make_code_volumes(image, env, say)
    except (_Failed, OSError, ValueError) as exc:
        say(f"code volumes: {exc}; the nodes read their code from the image")
        return []


def main(argv: Sequence[str] | None = None) -> int:
    """Fill ``IMAGE``'s code volumes now (if this engine wants them) and print their names.

    0 when they are there or not wanted here, 1 when making them failed (said why), 2 for a
    bad command line or ``MESHCAST_CODE_VOLUMES``.
    """
    import sys

    from coordinator.errors import UsageError

    args = list(sys.argv[1:] if argv is None else argv)
    if len(args) != 1 or args[0].startswith("-"):
        print("usage: python -m coordinator.runtimes.codevolumes IMAGE", file=sys.stderr)
        return 2
    try:
        volumes = trio.run(make_code_volumes, args[0], dict(os.environ), print)
    except UsageError as exc:
        print(f"error: {exc}", file=sys.stderr)
        return 2
    except (_Failed, OSError, ValueError) as exc:
        print(f"code volumes: {exc}")
        return 1
    names = ", ".join(v.name for v in volumes) or "none (not used on this engine)"
    print(f"code volumes of {args[0]}: {names}")
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
