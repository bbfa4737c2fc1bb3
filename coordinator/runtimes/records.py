"""What a run gathers: raw per-node records, and the collector that builds them from reports.

The same :class:`RawRun` comes out of every runtime and out of the reference model, so the
tests can compare them record for record.
"""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import Any

from coordinator.workloads.plan import Plan
from node.topology import Coord

__all__ = ["Arrival", "Collector", "RawRun", "RunSettings"]


@dataclass(frozen=True, slots=True)
class RunSettings:
    """How a run is emulated (not what is injected)."""

    port_model: str = "one-port"
    contention: str = "isolated"
    clock: str = "lockstep"
    hop_limit: int | None = None
    max_steps: int = 10_000
    wall_budget: float = 600.0
    trace: bool = False
    seed: int = 1
    runtime: str = "in-process"
    broker: str | None = None
    run_dir: str | None = None
    buffer: int | None = None
    out_buffer: int | None = None
    policy: str = "block"


@dataclass(frozen=True, slots=True)
class Arrival:
    """A delivery: multicast, node, logical step, hops, start-ups; wall clock and host if measured."""

    mc: int
    node: Coord
    step: int
    hops: int
    startups: int
    wall_ns: int | None = None
    host: str | None = None

    def logical(self) -> tuple[int, Coord, int, int, int]:
        return (self.mc, self.node, self.step, self.hops, self.startups)


@dataclass
class RawRun:
    """Everything a run produced, before metrics."""

    arrivals: list[Arrival] = field(default_factory=list)
    traffic: dict[int, int] = field(default_factory=dict)
    links: dict[int, set[tuple[Coord, str]]] = field(default_factory=dict)
    trace: list[tuple[int, Coord, str, int]] = field(default_factory=list)
    errors: list[dict[str, Any]] = field(default_factory=list)
    injected: dict[int, tuple[int, str]] = field(default_factory=dict)
    hosts: dict[Coord, str] = field(default_factory=dict)
    node_status: dict[Coord, str] = field(default_factory=dict)
    peak_queue: dict[Coord, int] = field(default_factory=dict)
    node_stats: dict[Coord, dict[str, float]] = field(default_factory=dict)
    link_sends: dict[tuple[Coord, str], int] = field(default_factory=dict)
    dropped: int = 0
    last_step: int = 0
    wall_s: float = 0.0
    incomplete: list[str] = field(default_factory=list)

    def logical_arrivals(self) -> list[tuple[int, Coord, int, int, int]]:
        return sorted(a.logical() for a in self.arrivals)


def _coord(v: Any) -> Coord:
    return (int(v[0]), int(v[1]))


class Collector:
    """Turns node reports into a :class:`RawRun`; knows when every destination has been reached."""

    def __init__(self, plan: Plan) -> None:
        self.plan = plan
        self.raw = RawRun()
        self.expected = sum(len(m.destinations) for m in plan.multicasts)
        self._dest_sets = {m.id: set(m.destinations) for m in plan.multicasts}
        self._reached: set[tuple[int, Coord]] = set()
        self.done: set[Coord] = set()

    @property
    def reached(self) -> int:
        return len(self._reached)

    def handle(self, msg: dict[str, Any]) -> None:
        """Take in one report or done message; malformed parts become recorded errors."""
        kind = msg.get("type")
        try:
            node = _coord(msg["node"])
        except (KeyError, TypeError, ValueError, IndexError):
            self.raw.errors.append({"node": None, "kind": "bad-report", "cause": f"no node in {kind!r}"})
            return
        host = self.raw.hosts.get(node)
        try:
            if kind == "hello":
                self.raw.hosts[node] = str(msg.get("host", ""))
            elif kind == "report":
                for mc, step, hops, startups, wall in msg.get("arrivals", []):
                    self.raw.arrivals.append(
                        Arrival(int(mc), node, int(step), int(hops), int(startups), wall, host)
                    )
                    if node in self._dest_sets.get(int(mc), ()):
                        self._reached.add((int(mc), node))
                for kind_, cause, mc in msg.get("errors", []):
                    self.raw.errors.append({"node": list(node), "kind": kind_, "cause": cause, "mc": mc})
            elif kind == "error":
                self.raw.errors.append(
                    {"node": list(node), "kind": "control", "cause": str(msg.get("cause"))}
                )
            elif kind == "done":
                self.done.add(node)
                self.raw.node_status[node] = str(msg.get("status", "ok"))
                self.raw.last_step = max(self.raw.last_step, int(msg.get("last_step", 0)))
                self.raw.peak_queue[node] = int(msg.get("peak_queue", 0))
                self.raw.node_stats[node] = {
                    k: float(msg.get(k, 0)) for k in ("peak_in", "peak_out", "mean_occupancy", "dropped")
                }
                self.raw.dropped += int(msg.get("dropped", 0))
                for port, n in dict(msg.get("link_sends", {})).items():
                    self.raw.link_sends[(node, str(port))] = int(n)
                for mc, n, ports in msg.get("traffic", []):
                    self.raw.traffic[int(mc)] = self.raw.traffic.get(int(mc), 0) + int(n)
                    self.raw.links.setdefault(int(mc), set()).update((node, str(p)) for p in ports)
                for mc, port, step in msg.get("trace", []):
                    self.raw.trace.append((int(mc), node, str(port), int(step)))
                for mc, ns in msg.get("injected", []):
                    self.raw.injected[int(mc)] = (int(ns), host or "")
        except (TypeError, ValueError) as exc:
            self.raw.errors.append({"node": list(node), "kind": "bad-report", "cause": f"{kind}: {exc}"})
