"""The runtimes behind one front door: what each one is, what it supports, and how to run it.

Every runtime declares its clocks, switchings, syncs, contention and port models, its node cap,
what it needs on the machine, and its runner (imported only when used), and describes itself to
the code that drives it: where its nodes live (:class:`Nodes`), whether it needs a broker, can
be sharded, offers network modes, can be deployed, records a trace, and runs repetitions on
warm nodes. The command line's ``--runtime`` choices, its up-front refusals (:func:`problem`)
and the README's support table (:func:`support_table`) all come from :data:`RUNTIMES`; nothing
else lists them, and no code outside this module compares a runtime's name
(``tests/test_registry.py`` walks every module for such a comparison).
"""

from __future__ import annotations

import enum
import importlib
import importlib.util
from collections.abc import Awaitable, Callable, Mapping, Sequence
from dataclasses import dataclass
from typing import Any, Final

from coordinator.runtimes.records import RawRun, RunSettings
from coordinator.workloads.plan import Plan
from node.defaults import SYNCS
from node.settings import CLOCKS, CONTENTIONS, PORT_MODELS, SWITCHINGS

__all__ = ["RUNTIMES", "Nodes", "Runtime", "deployable", "get", "names", "problem", "reference", "run",
           "support_table"]  # fmt: skip

Progress = Callable[[int, int], None]


class Nodes(enum.Enum):
    """Where a runtime's nodes live: what a deployment of them tracks and how they are reached."""

    NONE = "no nodes: one central model of them all"
    LOOP = "every node's engine in one plain loop in this process"
    TASKS = "trio tasks in this process (or in its shard processes)"
    PROCESSES = "OS processes on this host: tracked by pid, linked over loopback ports"
    CONTAINERS = "containers of a compose project: tracked by project, linked by service name"
    SWARM = "services of a swarm stack, spread over the swarm's hosts, linked over its overlay network"


def _attribute(module: str, name: str) -> Any:
    """``module``'s attribute ``name``, the module imported now (a runner costs nothing until used)."""
    return getattr(importlib.import_module(module), name)


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
    max_nodes: int = 262_144
    needs: str = ""
    """What the machine must have (said in the support table; checked when the runtime starts)."""
    is_async: bool = True
    """False: the runner is a plain function, run in a worker thread (no trio, every node in one loop)."""
    commands: tuple[str, ...] = ("run", "sweep", "load", "reproduce")
    """The commands that offer it."""
    nodes: Nodes = Nodes.TASKS
    """Where its nodes live."""
    needs_broker: bool = False
    """An MQTT broker carries its control messages (``--broker``; else one it starts itself)."""
    shardable: bool = False
    """``--shards N`` spreads its nodes over N processes."""
    networks: str = ""
    """The runner module's tuple of network modes ``--network`` may pick (empty: none offered)."""
    deployable: bool = False
    """Offered by ``meshcast deploy`` as long-lived nodes (``runtimes/deployments.py`` starts, watches,
    repairs and stops them by where they live: :attr:`nodes`)."""
    parts: str = ""
    """The runner module's function running a sequence of repetitions on one set of nodes, kept
    warm between them (as a deployment's are); empty: each repetition starts its nodes anew."""
    warm_by_deployment: bool = False
    """Without :attr:`parts`: the repetitions of one condition run on a deployment made for them
    (``coordinator/runtimes/warm.py``), so its nodes start once, not once per repetition."""
    trace_switchings: tuple[str, ...] = SWITCHINGS
    """The switchings whose ``--trace`` it records."""
    traced_by: str = ""
    """The runtime with the same records that keeps the trace this one does not."""

    @property
    def emulates(self) -> bool:
        """Whether it runs nodes (an emulation) rather than one central reference model."""
        return self.nodes is not Nodes.NONE

    @property
    def network_modes(self) -> tuple[str, ...]:
        """The network modes ``--network`` may pick here (its runner module imported now)."""
        modes: tuple[str, ...] = _attribute(self.module, self.networks) if self.networks else ()
        return modes

    def problem(self, s: RunSettings) -> str | None:
        """Why ``s`` cannot run here (one line), or None."""
        if s.clock not in self.clocks:
            return f"the {self.name} runtime runs the {' and '.join(self.clocks)} clock only, not {s.clock}"
        if s.switching not in self.switchings:
            what = " and ".join(self.switchings)
            return f"the {self.name} runtime runs {what} switching only, not {s.switching}"
        if s.trace and s.switching not in self.trace_switchings:
            instead = f": use --runtime {self.traced_by} (the same records)" if self.traced_by else ""
            return f"the {self.name} runtime records no {s.switching} trace{instead}"
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
        if s.network is not None and (not self.networks or s.deployment is not None):
            which = " and ".join(r.name for r in RUNTIMES.values() if r.networks)
            why = f"{self.name} (its nodes are not containers)"
            if s.deployment is not None:
                why = f"deployment {s.deployment!r} (its nodes keep the network they were deployed on)"
            return f"--network applies to --runtime {which} only, not {why}"
        if s.shards > 1 and (not self.shardable or s.deployment is not None):
            which = " and ".join(r.name for r in RUNTIMES.values() if r.shardable)
            where = f"deployment {s.deployment!r}" if s.deployment is not None else f"the {self.name} runtime"
            return f"--shards applies to the {which} runtime only, not {where}"
        if importlib.util.find_spec(self.module) is None:
            return f"runtime {self.name!r} is not available in this build"
        return None

    async def run(self, plan: Plan, settings: RunSettings, progress: Progress | None) -> RawRun:
        """Run ``plan`` here (the runner's module imported now: the others cost nothing)."""
        runner = _attribute(self.module, self.function)
        if not self.is_async:
            import trio

            raw: RawRun = await trio.to_thread.run_sync(runner, plan, settings)
            return raw
        out: Awaitable[RawRun] = runner(plan, settings, progress)
        return await out

    async def run_parts(
        self, parts: Sequence[tuple[Plan, RunSettings]], settings: RunSettings, progress: Progress | None
    ) -> list[RawRun]:
        """Run each (plan, settings) part in turn on one set of warm nodes (only if :attr:`parts`)."""
        assert self.parts, f"the {self.name} runtime starts its nodes anew for each part"
        out: Awaitable[list[RawRun]] = _attribute(self.module, self.parts)(parts, settings, progress)
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
            shardable=True,
        ),
        Runtime(
            "engines",
            "every node's engine in one plain loop, no trio, no links (records as in-process)",
            "coordinator.runtimes.engines",
            "run_engines",
            clocks=("lockstep",),
            is_async=False,
            commands=("run", "sweep", "load"),
            nodes=Nodes.LOOP,
        ),
        Runtime(
            "processes",
            "one OS process per node, TCP links, MQTT control",
            "coordinator.runtimes.processes",
            "run_processes",
            syncs=SYNCS,
            max_nodes=1024,
            needs="mosquitto",
            nodes=Nodes.PROCESSES,
            needs_broker=True,
            deployable=True,
            parts="run_processes_parts",
        ),
        Runtime(
            "containers",
            "one container per node (docker-compose), TCP links, MQTT control",
            "coordinator.runtimes.containers",
            "run_containers",
            syncs=SYNCS,
            max_nodes=256,
            needs="Docker, docker-compose and the image (make image)",
            nodes=Nodes.CONTAINERS,
            needs_broker=True,
            networks="NETWORK_MODES",
            deployable=True,
            warm_by_deployment=True,
        ),
        Runtime(
            "swarm",
            "one service per node on a Docker swarm's hosts (docker stack), TCP links, MQTT control",
            "coordinator.runtimes.swarm",
            "run_swarm",
            syncs=SYNCS,
            max_nodes=256,
            needs="a Docker swarm manager and the image on every host (deploy/swarm-lab.sh)",
            commands=("run", "sweep"),
            nodes=Nodes.SWARM,
            needs_broker=True,
        ),
        Runtime(
            "model",
            "the central reference model: no nodes, no messages (records as lockstep)",
            "coordinator.runtimes.model",
            "run_model",
            clocks=("lockstep",),
            is_async=False,
            nodes=Nodes.NONE,
            trace_switchings=("store-and-forward",),  # the flit model keeps no trace
            traced_by="engines",
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


def reference() -> Runtime:
    """The central reference model: the one runtime that runs no nodes."""
    (model,) = (r for r in RUNTIMES.values() if not r.emulates)
    return model


def deployable() -> tuple[str, ...]:
    """The runtimes ``meshcast deploy`` offers."""
    return tuple(n for n, r in RUNTIMES.items() if r.deployable)


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
