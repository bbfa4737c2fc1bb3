"""Check a routing rule (built-in or plug-in) against the project's own properties.

On seeded random instances (topology, source, destinations) a rule must deliver to every
destination exactly once, reach no other node, give the same records in the lockstep emulation
as in the reference model, and keep every packet under a hop limit of the node count (a packet
with more hops than nodes has looped). Every failing instance is named so it can be replayed.
"""

from __future__ import annotations

import random
from collections import Counter
from collections.abc import Callable
from dataclasses import dataclass

import trio

from coordinator.experiments.run import emulate
from coordinator.runtimes.model import run_model
from coordinator.runtimes.records import RawRun, RunSettings
from coordinator.workloads.plan import Multicast, Plan
from node.routing import Algorithm, registry
from node.topology import Coord, Topology, coords_text

__all__ = ["PROPERTIES", "Failure", "Instance", "check_algorithm", "instances"]

PROPERTIES = (
    "exactly-once delivery",
    "no strays",
    "lockstep emulation = reference model",
    "hop limit (no packet travels more hops than there are nodes)",
)
SIZES = range(3, 8)
MAX_DESTS = 12


@dataclass(frozen=True, slots=True)
class Instance:
    """One random multicast: its number, topology, source and destinations."""

    index: int
    topology: Topology
    source: Coord
    destinations: tuple[Coord, ...]

    def describe(self) -> str:
        dests = " ".join(f"{x},{y}" for x, y in self.destinations)
        return (
            f"instance {self.index}: --topology {self.topology.spec} --source "
            f"{self.source[0]},{self.source[1]} --dests '{dests}'"
        )


@dataclass(frozen=True, slots=True)
class Failure:
    """A property an instance broke, and how."""

    instance: Instance
    prop: str
    detail: str

    def __str__(self) -> str:
        return f"{self.instance.describe()}: {self.prop}: {self.detail}"


def instances(algorithm: Algorithm, count: int, seed: int) -> list[Instance]:
    """``count`` seeded random instances on topologies ``algorithm`` supports."""
    rng = random.Random(seed)
    out: list[Instance] = []
    tries = 0
    while len(out) < count:
        tries += 1
        if tries > 100 * count + 100:
            raise ValueError(
                f"algorithm {algorithm.name!r} supports none of the sizes {SIZES.start}..{SIZES.stop - 1}"
            )
        kind = rng.choice(algorithm.kinds)
        topo = Topology.parse(f"{kind}:{rng.choice(SIZES)}x{rng.choice(SIZES)}")
        if algorithm.unsupported(topo) is not None:
            continue
        nodes = list(topo.nodes())
        source = rng.choice(nodes)
        others = [n for n in nodes if n != source]
        k = rng.randint(1, min(MAX_DESTS, len(others)))
        out.append(Instance(len(out), topo, source, tuple(rng.sample(others, k))))
    return out


def _problems(inst: Instance, emulated: RawRun, modelled: RawRun) -> list[Failure]:
    found: list[Failure] = []
    dests = set(inst.destinations)
    counts = Counter(a.node for a in emulated.arrivals)
    bad = sorted((d, counts.get(d, 0)) for d in dests if counts.get(d, 0) != 1)
    if bad:
        shown = ", ".join(f"({x},{y}) {n} times" for (x, y), n in bad[:5])
        found.append(Failure(inst, PROPERTIES[0], f"delivered {shown}"))
    strays = sorted(n for n in counts if n not in dests)
    if strays:
        found.append(Failure(inst, PROPERTIES[1], "reached " + coords_text(strays[:5])))
    if emulated.logical_arrivals() != modelled.logical_arrivals() or emulated.traffic != modelled.traffic:
        found.append(
            Failure(
                inst,
                PROPERTIES[2],
                f"emulation {emulated.logical_arrivals()[:4]}…, traffic {emulated.traffic}; "
                f"model {modelled.logical_arrivals()[:4]}…, traffic {modelled.traffic}",
            )
        )
    hop = [e for e in (*emulated.errors, *modelled.errors) if e.get("kind") == "hop-limit"]
    if hop:
        found.append(Failure(inst, PROPERTIES[3], str(hop[0].get("cause"))))
    other = [e for e in emulated.errors if e.get("kind") != "hop-limit"]
    if other:
        found.append(
            Failure(inst, "no rule or node errors", f"{other[0].get('kind')}: {other[0].get('cause')}")
        )
    return found


def check_algorithm(
    name: str, count: int = 20, seed: int = 1, progress: Callable[[int, int], None] | None = None
) -> tuple[list[Instance], list[Failure]]:
    """Run ``count`` random instances of algorithm ``name``; the instances and every failure."""
    alg = registry.get(name)
    insts = instances(alg, count, seed)
    failures: list[Failure] = []
    for i, inst in enumerate(insts):
        plan = Plan(inst.topology, (Multicast(0, name, inst.source, inst.destinations),))
        settings = RunSettings(hop_limit=inst.topology.size, max_steps=50 * inst.topology.size + 100)
        emulated = trio.run(emulate, plan, settings)
        modelled = run_model(plan, settings)
        failures.extend(_problems(inst, emulated, modelled))
        if progress is not None:
            progress(i + 1, len(insts))
    return insts, failures
