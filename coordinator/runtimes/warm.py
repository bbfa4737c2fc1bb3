"""Repetitions on warm nodes, for a runtime whose runner starts its nodes anew for each run.

A runtime whose registry entry says ``warm_by_deployment`` (containers) runs the repetitions of
one condition (``emulate_apart``) on a deployment made for them: its nodes serve run after run,
each run with its own epoch, and it is destroyed after the last. The processes runtime keeps its
own node processes warm instead (its ``parts`` runner).
"""

from __future__ import annotations

import secrets
import shutil
import subprocess
from collections.abc import Callable, Sequence
from dataclasses import replace
from functools import partial
from pathlib import Path
from typing import Final

import trio

from coordinator.runtimes import deployments, registry
from coordinator.runtimes.containers import compose_cli
from coordinator.runtimes.records import RawRun, RunSettings
from coordinator.workloads.plan import Plan

__all__ = ["WARM_PREFIX", "run_parts_on_a_deployment"]


WARM_PREFIX: Final = "warm-"
"""Deployment names of :func:`run_parts_on_a_deployment` (a ``meshcast deployments`` listing shows
them while they last)."""


async def run_parts_on_a_deployment(
    parts: Sequence[tuple[Plan, RunSettings]],
    settings: RunSettings,
    progress: Callable[[int, int], None] | None = None,
) -> list[RawRun]:
    """Run each plan of ``parts`` (with its settings) in turn on one set of nodes kept up between
    them; their records, in order (up to the first incomplete one).

    The nodes are a deployment of ``settings.runtime`` made for these parts (``meshcast deploy``'s,
    serving run after run, each run with its own epoch) and destroyed after the last, on every
    exit path: one cold start per condition instead of one per repetition. Only for the default
    network (``emulate_apart`` starts the nodes anew for each part otherwise: a deployment keeps
    the network it was made with). With ``settings.run_dir`` the nodes' logs are copied there
    before they go."""
    runtime = registry.get(settings.runtime)

    total = sum(len(m.destinations) for p, _ in parts for m in p.multicasts)
    raws: list[RawRun] = []
    done = 0

    def part_progress(reached: int, _total: int) -> None:
        if progress is not None:
            progress(done + reached, total)

    topo = parts[0][0].topology
    name = f"{WARM_PREFIX}{secrets.token_hex(4)}"
    try:
        await trio.to_thread.run_sync(partial(deployments.deploy, runtime.name, name, topo))
        for plan, s in parts:
            raw = await deployments.run_on_deployment(plan, replace(s, deployment=name), part_progress)
            raws.append(raw)
            done += sum(len(m.destinations) for m in plan.multicasts)
            if raw.incomplete:
                break
    finally:
        with trio.CancelScope(shield=True):
            if settings.run_dir is not None:
                await trio.to_thread.run_sync(_keep_logs, name, Path(settings.run_dir))
            await trio.to_thread.run_sync(deployments.destroy, name)
    return raws


def _keep_logs(name: str, run_dir: Path) -> None:
    """Copy the warm deployment ``name``'s logs into ``run_dir``: a processes deployment's node
    logs, a containers deployment's compose log and its containers' output."""
    directory = deployments.state_root() / name
    run_dir.mkdir(parents=True, exist_ok=True)
    if (directory / "logs").is_dir():
        shutil.copytree(directory / "logs", run_dir / "logs", dirs_exist_ok=True)
    cli = compose_cli()
    if cli is None or not (directory / "compose.yaml").exists():
        return
    project = deployments.load(name).project
    with (run_dir / "containers.log").open("wb") as out:
        subprocess.run(
            [*cli, "-p", project, "-f", "compose.yaml", "logs", "--no-color"], cwd=directory,
            stdout=out, stderr=subprocess.STDOUT, check=False, timeout=120,
        )  # fmt: skip
    if (directory / "compose.log").exists():
        shutil.copyfile(directory / "compose.log", run_dir / "compose.log")
