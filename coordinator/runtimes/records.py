"""What a run gathers: raw per-node records, and the collector that builds them from reports.

The same :class:`RawRun` comes out of every runtime and out of the reference model, so the
tests can compare them record for record.
"""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import Any

from coordinator.workloads.plan import Plan
from node import defaults, protocol
from node.linkmodel import LinkModel
from node.settings import CLOCKS, INT64, MAX_COUNT, MAX_WALL_S, TIMING, NodeSettings, setting
from node.tcp import REJECTED as REJECTED_KIND
from node.topology import Coord, port_names
from node.wire import Worm

__all__ = ["CLOCKS", "REFUSED", "TIMING", "Arrival", "Collector", "RawRun", "RunSettings"]

REFUSED = "refused before start-up: "
"""How ``RawRun.incomplete`` begins when a node could not run the plan at all (nothing ran)."""


@dataclass(frozen=True, slots=True, kw_only=True)
class RunSettings(NodeSettings):
    """How a run is emulated (not what is injected): the settings every node is told
    (:class:`node.settings.NodeSettings`) and those only the coordinator reads. Each field is a
    setting: its default here, its flag, help and range in its metadata."""

    wall_budget: float = setting(
        600.0, "--wall-budget", "wall-clock budget", low=0.001, high=MAX_WALL_S, unit="s"
    )
    seed: int = setting(
        1, "--seed", "seed of every random choice (sets, sources, link jitter)", low=0, high=INT64
    )
    runtime: str = setting("in-process", None, "where the nodes run (each command offers its own)")
    network: str | None = setting(None, None, "containers: the node containers' network")
    """containers: ``bridge`` (a namespace and an address per node container), ``pod`` (one
    namespace for the run's containers) or ``host``. None: ``MESHCAST_CONTAINER_NETWORK``, else
    ``bridge`` (coordinator/runtimes/containers.py, ``network_mode``)."""
    broker: str | None = setting(None, "--broker", "MQTT broker URL (processes/containers runtimes)")
    run_dir: str | None = None
    sync: str | None = setting(
        None,
        "--sync",
        "lockstep: alpha: a frame on every link every step (α-synchronizer); barrier: only nodes "
        "with work step, no null frames (processes/containers: the coordinator leads a step barrier). "
        "Same records. Default: barrier",
        choices=defaults.SYNCS,
    )
    """Lockstep: ``alpha`` (α-synchronizer, a frame on every link every step) or ``barrier`` (only
    nodes with work step, no null frames; across processes the coordinator leads the barrier).
    None: the runtime's default, ``barrier`` (in-process its shared barrier, across processes and
    containers the coordinator-led one); ``alpha`` is asked for by name."""
    deployment: str | None = setting(
        None,
        "--deployment",
        "run on the long-lived deployment NAME ('meshcast deploy'; its runtime replaces --runtime)",
        metavar="NAME",
    )
    shards: int = setting(
        1,
        "--shards",
        "in-process: split the nodes over N OS processes, one per core, links between them "
        "over loopback TCP (1: all in this process; same records; docs/deploy.md)",
        low=1,
        high=MAX_COUNT,
        unit="processes",
        metavar="N",
    )
    """in-process: OS processes the nodes are split over (1: all in this process, node/shard.py)."""
    link_model: LinkModel | None = None
    """How each link delays its frames under the free clock (node/linkmodel.py); None: no behaviour."""


@dataclass(slots=True, unsafe_hash=True)  # not frozen (4x faster __init__, paid per delivery); hashable
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
    worms: list[tuple[int, Coord, str, str, Worm, int, int]] = field(default_factory=list)
    """Wormhole switching with a trace: (multicast, node, input port or ``inj``, output port or
    ``ej``, worm, first step, count): ``count`` flits of ``worm`` that came into ``node`` on the
    input leaving it on the output in consecutive steps from ``first``."""
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
    rejected: dict[Coord, list[str]] = field(default_factory=dict)
    """Per node, connections to its link port refused before they authenticated (strangers:
    garbage, a wrong token, silence): counted and shown, but not errors of the run."""

    def logical_arrivals(self) -> list[tuple[int, Coord, int, int, int]]:
        return sorted(a.logical() for a in self.arrivals)


class Collector:
    """Turns node reports into a :class:`RawRun`; knows when every destination has been reached."""

    def __init__(self, plan: Plan) -> None:
        self.plan = plan
        self.raw = RawRun()
        self.expected = sum(len(m.destinations) for m in plan.multicasts)
        self._dest_sets = {m.id: set(m.destinations) for m in plan.multicasts}
        self._reached: set[tuple[int, Coord]] = set()
        self.done: set[Coord] = set()
        self.received: dict[Coord, int] = {}
        """Arrivals each node's reports carried here."""
        self.claimed: dict[Coord, int] = {}
        """Deliveries each node says (in its final report) it recorded."""

    def lost_reports(self) -> list[str]:
        """Nodes whose final report claims more deliveries than their reports brought here."""
        return [
            f"node ({n[0]},{n[1]}) recorded {c} deliveries, {self.received.get(n, 0)} reached the coordinator"
            for n, c in sorted(self.claimed.items())
            if c > self.received.get(n, 0)
        ]

    @property
    def reached(self) -> int:
        return len(self._reached)

    def handle(self, msg: protocol.Event) -> None:
        """Take in one hello, report, error or done (already decoded and checked)."""
        raw = self.raw
        if isinstance(msg, protocol.Hello):
            raw.hosts[msg.node] = msg.host
            return
        if not isinstance(msg, (protocol.Report, protocol.Error, protocol.Done)):
            return
        node = msg.node
        host = raw.hosts.get(node)
        if isinstance(msg, protocol.Report):
            self.received[node] = self.received.get(node, 0) + len(msg.arrivals)
            for mc, step, hops, startups, wall in msg.arrivals:
                raw.arrivals.append(Arrival(mc, node, step, hops, startups, wall, host))
                if node in self._dest_sets.get(mc, ()):
                    self._reached.add((mc, node))
            for kind, cause, mc_ in msg.errors:
                if kind == REJECTED_KIND:  # a stranger at the link port: not the run's fault
                    raw.rejected.setdefault(node, []).append(cause)
                else:
                    raw.errors.append({"node": list(node), "kind": kind, "cause": cause, "mc": mc_})
        elif isinstance(msg, protocol.Error):
            raw.errors.append({"node": list(node), "kind": "control", "cause": msg.cause})
        else:
            self.done.add(node)
            if msg.delivered is not None:
                self.claimed[node] = msg.delivered
            raw.node_status[node] = msg.status
            raw.last_step = max(raw.last_step, msg.last_step)
            raw.peak_queue[node] = msg.peak_queue
            raw.node_stats[node] = {
                "peak_in": float(msg.peak_in),
                "peak_out": float(msg.peak_out),
                "mean_occupancy": msg.mean_occupancy,
                "dropped": float(msg.dropped),
                "copies": float(msg.copies),
            }
            raw.dropped += msg.dropped
            for port, n in msg.link_sends.items():
                raw.link_sends[(node, port)] = n
            traffic, links, flat = raw.traffic, raw.links, msg.traffic
            pairs: dict[int, tuple[tuple[Coord, str], ...]] = {}  # port set -> its (node, port) links
            for i in range(0, len(flat), 3):  # (multicast, sends, port set) per multicast it forwarded
                mc, mask = flat[i], flat[i + 2]
                traffic[mc] = traffic.get(mc, 0) + flat[i + 1]
                ends = pairs.get(mask)
                if ends is None:
                    ends = pairs[mask] = tuple((node, p) for p in port_names(mask))
                used = links.get(mc)
                if used is None:
                    links[mc] = set(ends)
                else:
                    used.update(ends)
            for mc, port, step in msg.trace:
                raw.trace.append((mc, node, port, step))
            for mc, wx, wy, wn, came, port, first, count in msg.worms:
                raw.worms.append((mc, node, came, port, (wx, wy, wn), first, count))
            for mc, ns in msg.injected:
                raw.injected[mc] = (ns, host or "")
