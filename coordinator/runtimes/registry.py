"""The runtimes behind one front door: what each one is, what it supports, and how to run it.

Every runtime declares its clocks, switchings, syncs, contention and port models, its node cap,
what it needs on the machine, and its runner (imported only when used). The command line's
``--runtime`` choices, its up-front refusals (:func:`problem`) and the README's support table
(:func:`support_table`) all come from :data:`RUNTIMES`; nothing else lists them.
"""

from __future__ import annotations

import importlib
import importlib.util
from collections.abc import Awaitable, Callable, Mapping
from dataclasses import dataclass
from typing import Final

import trio

from coordinator.runtimes.records import RawRun, RunSettings
from coordinator.workloads.plan import Plan
from node.actor import SYNCS
from node.engine import CONTENTIONS, PORT_MODELS
from node.switching import SWITCHINGS

__all__ = ["RUNTIMES", "Runtime", "get", "names", "problem", "run", "support_table"]

Progress = Callable[[int, int], None]
CLOCKS: Final = ("lockstep", "free")


@dataclass(frozen=True, slots=True)
class Runtime:
    """One runtime and what it supports."""

    name: str
    summary: str
    module: str
    function: str
    clocks: tuple[str, ...] = CLOCKS
    switchings: tuple[str, ...] = SWITCHINGS
    syncs: tuple[str, ...] = ()
    """Lockstep syncs ``--sync`` may ask for (empty: the runtime has no node actors to synchronize)."""
    max_nodes: int = 65_536
    needs: str = ""
    """What the machine must have (said in the support table; checked when the runtime starts)."""
    is_async: bool = True
    deployable: bool = False
    """Offered by ``meshcast deploy`` as long-lived nodes."""
    commands: tuple[str, ...] = ("run", "sweep", "load", "reproduce")
    """The commands that offer it."""

    def problem(self, s: RunSettings) -> str | None:
        """Why ``s`` cannot run here (one line), or None."""
        if s.clock not in self.clocks:
            return f"the {self.name} runtime runs the {' and '.join(self.clocks)} clock only, not {s.clock}"
        if s.switching not in self.switchings:
            what = " and ".join(self.switchings)
            return f"the {self.name} runtime runs {what} switching only, not {s.switching}"
        if s.trace and s.switching == "wormhole" and self.name == "model":  # the flit model keeps none
            return "the model runtime records no wormhole trace: use --runtime engines (the same records)"
        if s.sync is not None:
            if not self.syncs:
                actors = [r.name for r in RUNTIMES.values() if r.syncs]
                return (
                    f"--sync applies to the {', '.join(actors)} runtimes, not {self.name} "
                    "(which has no node actors to synchronize)"
                )
            if s.clock != "lockstep":
                return "--sync applies to --clock lockstep only (the free clock has no steps)"
        if s.contention not in CONTENTIONS:
            return f"unknown contention {s.contention!r}: use one of {', '.join(CONTENTIONS)}"
        if s.port_model not in PORT_MODELS:
            return f"unknown port model {s.port_model!r}: use one of {', '.join(PORT_MODELS)}"
        if importlib.util.find_spec(self.module) is None:
            return f"runtime {self.name!r} is not available in this build"
        return None

    async def run(self, plan: Plan, settings: RunSettings, progress: Progress | None) -> RawRun:
        """Run ``plan`` here (the runner's module imported now: the others cost nothing)."""
        runner = getattr(importlib.import_module(self.module), self.function)
        if not self.is_async:
            raw: RawRun = await trio.to_thread.run_sync(runner, plan, settings)
            return raw
        out: Awaitable[RawRun] = runner(plan, settings, progress)
        return await out


RUNTIMES: Final[Mapping[str, Runtime]] = {
    r.name: r
    for r in (
        Runtime(
            "in-process",
            "every node a trio task in this process (--shards N: over N processes)",
            "coordinator.runtimes.inprocess",
            "run_inprocess",
            syncs=SYNCS,
        ),
        Runtime(
            "engines",
            "every node's engine in one plain loop, no trio, no links (records as in-process)",
            "coordinator.runtimes.engines",
            "run_engines",
            clocks=("lockstep",),
            is_async=False,
            commands=("run", "sweep", "load"),
        ),
        Runtime(
            "processes",
            "one OS process per node, TCP links, MQTT control",
            "coordinator.runtimes.processes",
            "run_processes",
            syncs=SYNCS,
            max_nodes=1024,
            needs="mosquitto",
            deployable=True,
        ),
        Runtime(
            "containers",
            "one container per node (docker-compose), TCP links, MQTT control",
            "coordinator.runtimes.containers",
            "run_containers",
            syncs=SYNCS,
            max_nodes=256,
            needs="Docker, docker-compose and the image (make image)",
            deployable=True,
        ),
        Runtime(
            "model",
            "the central reference model: no nodes, no messages (records as lockstep)",
            "coordinator.runtimes.model",
            "run_model",
            clocks=("lockstep",),
            is_async=False,
        ),
    )
}


def names(command: str = "run") -> tuple[str, ...]:
    """The runtimes ``command`` offers."""
    return tuple(n for n, r in RUNTIMES.items() if command in r.commands)


def get(name: str) -> Runtime:
    """The runtime called ``name``; ValueError listing the others."""
    try:
        return RUNTIMES[name]
    except KeyError:
        raise ValueError(f"unknown runtime {name!r}: use one of {', '.join(RUNTIMES)}") from None


def problem(s: RunSettings) -> str | None:
    """Why ``s`` cannot run on its runtime (one line), or None."""
    try:
        return get(s.runtime).problem(s)
    except ValueError as exc:
        return str(exc)


async def run(plan: Plan, settings: RunSettings, progress: Progress | None = None) -> RawRun:
    """Run ``plan`` on ``settings.runtime``."""
    return await get(settings.runtime).run(plan, settings, progress)


def support_table() -> str:
    """The README's table of what runs where (Markdown), from :data:`RUNTIMES`."""
    head = "| runtime | what it is | clocks | switching | `--sync` | nodes at most | needs | deploy |"
    rows = [head, "|---|---|---|---|---|---|---|---|"]
    for r in RUNTIMES.values():
        syncs = ", ".join(r.syncs) or "-"
        cells = (f"`{r.name}`", r.summary, ", ".join(r.clocks), ", ".join(r.switchings), syncs,
                 f"{r.max_nodes:,}", r.needs or "-", "yes" if r.deployable else "-")  # fmt: skip
        rows.append("| " + " | ".join(cells) + " |")
    return "\n".join(rows) + "\n"
