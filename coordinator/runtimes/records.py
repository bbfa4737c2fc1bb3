"""What a run gathers: raw per-node records, and the collector that builds them from reports.

The same :class:`RawRun` comes out of every runtime and out of the reference model, so the
tests can compare them record for record.
"""

from __future__ import annotations

from dataclasses import dataclass, field, replace
from typing import Any

from coordinator.workloads.plan import Plan
from node import defaults, protocol
from node.settings import (
    CLOCKS,
    EMULATION,
    FREE_CLOCK,
    INT64,
    MAX_COUNT,
    MAX_WALL_S,
    RUNNING,
    TIMING,
    NodeSettings,
    setting,
)
from node.topology import Coord, port_names
from node.transport.linkmodel import LinkModel
from node.transport.wire import Worm

__all__ = ["CLOCKS", "LINKS", "REFUSED", "TIMING", "Arrival", "Collector", "RawRun", "RunSettings"]

LINKS = "link model (free clock: wall-clock arrivals carry it; lockstep records are logical and unchanged)"
"""The option group of the link model's settings."""
REFUSED = "refused before start-up: "
"""How ``RawRun.incomplete`` begins when a node could not run the plan at all (nothing ran)."""


def _flag(v: object) -> bool:
    """The wire check of a plain boolean field."""
    if not isinstance(v, bool):
        raise protocol.ProtocolError(f"expected true or false, got {v!r:.40}")
    return v


def _link_model(v: object) -> LinkModel | None:
    """The wire check of ``RunSettings.link_model``."""
    if v is None:
        return None
    try:
        return LinkModel.from_wire(v)
    except ValueError as exc:
        raise protocol.ProtocolError(str(exc)) from None


@dataclass(frozen=True, slots=True, kw_only=True)
class RunSettings(NodeSettings):
    """How a run is emulated (not what is injected): the settings every node is told
    (:class:`node.settings.NodeSettings`) and those only the coordinator reads. Each field is a
    setting: its default here, its flag, help and range in its metadata."""

    wall_budget: float = setting(
        600.0,
        "--wall-budget",
        "wall-clock budget",
        low=0.001,
        high=MAX_WALL_S,
        unit="s",
        group=RUNNING,
    )
    seed: int = setting(
        1,
        "--seed",
        "seed of every random choice (sets, sources, link jitter)",
        low=0,
        high=INT64,
        group=EMULATION,
    )
    runtime: str = setting("in-process", None, "where the nodes run (each command offers its own)")
    network: str | None = setting(None, None, "containers: the node containers' network")
    """containers: ``bridge`` (a namespace and an address per node container), ``pod`` (one
    namespace for the run's containers) or ``host``. None: ``MESHCAST_CONTAINER_NETWORK``, else
    ``bridge`` (coordinator/runtimes/containers.py, ``network_mode``)."""
    broker: str | None = setting(
        None, "--broker", "MQTT broker URL (processes/containers runtimes)", group=RUNNING
    )
    run_dir: str | None = field(default=None, metadata={"check": protocol.optional_text})
    sync: str | None = setting(
        None,
        "--sync",
        "lockstep: alpha: a frame on every link every step (α-synchronizer); barrier: only nodes "
        "with work step, no null frames (processes/containers: the coordinator leads a step barrier). "
        "Same records. Default: barrier",
        choices=defaults.SYNCS,
        group=RUNNING,
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
        group=RUNNING,
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
        group=RUNNING,
    )
    """in-process: OS processes the nodes are split over (1: all in this process, node/shard.py)."""
    link_delay: str | None = setting(
        None,
        "--link-delay",
        "propagation delay of every link, per frame (e.g. 2ms, 500us; default 0)",
        metavar="D",
        group=LINKS,
    )
    link_jitter: str | None = setting(
        None,
        "--link-jitter",
        "extra delay per frame, drawn per link and frame (seeded by --seed): uniform:A (on [0, A]), "
        "normal:SD (delay truncated at 0), lognormal:SD (mean SD), exponential:MEAN; FIFO per link",
        metavar="DIST:V",
        group=LINKS,
    )
    link_rate: str | None = setting(
        None,
        "--link-rate",
        "serialisation rate of every link: a frame takes its bytes / R (e.g. 100Mbit, 10MB)",
        metavar="R",
        group=LINKS,
    )
    """``--link-KEY``: each key of :class:`node.transport.linkmodel.LinkSpec` is a setting of its own,
    as its text (:func:`coordinator.cli.options.link_model_from` builds the model from them)."""
    link_file: str | None = setting(
        None,
        "--link-file",
        "per-node and per-link overrides, one a line: 'node X,Y delay=5ms', "
        "'link X,Y PORT jitter=normal:1ms rate=10Mbit', 'default ...' (docs: links)",
        metavar="FILE",
        group=LINKS,
    )
    link_model: LinkModel | None = field(default=None, metadata={"check": _link_model})
    """How each link delays its frames under the free clock (node/transport/linkmodel.py), built
    from the ``link_*`` settings and the seed; None: no behaviour. It is what the nodes are told
    (``assign``'s ``links``) and what the settings' wire form carries (a file's overrides read)."""

    time_dilation: float = setting(
        1.0,
        "--time-dilation",
        "free clock: the link model acts K times slower in wall-clock time (delay, jitter, rate), "
        "and latencies are divided by K, so the hosts' cost per hop looks K times smaller to the "
        "emulated network (DieCast); the wall budget and every wait are K times longer",
        low=1.0,
        high=10_000.0,
        metavar="K",
        group=FREE_CLOCK,
    )
    dilated: bool = field(default=False, metadata={"check": _flag})
    """Whether :func:`dilate` has applied ``time_dilation`` to the link model and wall budget."""
    fidelity_share: float = setting(
        0.25,
        "--fidelity-share",
        "free clock: the most of the per-node variance of latency the hosts may add to the link "
        "model's for the fidelity verdict to be ok (docs/guide/fidelity.md)",
        low=0.0,
        high=1.0,
        metavar="SHARE",
        group=FREE_CLOCK,
    )
    fidelity_per_hop: float = setting(
        0.25,
        "--fidelity-per-hop",
        "free clock: the most host time per hop, as a share of the link's mean delay, for the "
        "fidelity verdict to be ok",
        low=0.0,
        high=1e6,
        metavar="SHARE",
        group=FREE_CLOCK,
    )

    def to_wire(self, *, changed: bool = False) -> dict[str, Any]:
        """The settings' wire form: plain data by field name (JSON or msgpack), the link model as
        its wire map (a link file's overrides read in); ``changed``: only what differs from the
        defaults (what a compose file shows)."""
        return protocol.settings_wire(self, changed=changed)

    @classmethod
    def from_wire(cls, obj: object) -> RunSettings:
        """The settings of :meth:`to_wire`, each field checked as the nodes' ``assign`` checks it
        (:func:`node.protocol.decode_settings`); ProtocolError naming the field."""
        return cls(**protocol.decode_settings(cls, obj))


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
    tel: tuple[int, ...] | None = None
    """Free-clock telemetry: the path's (node, receive ns, send ns) triples, then this node's id and
    receive ns; its delivery time is ``wall_ns`` (:class:`node.switching.engine.Delivery`)."""

    def logical(self) -> tuple[int, Coord, int, int, int]:
        return (self.mc, self.node, self.step, self.hops, self.startups)


def dilate(settings: RunSettings) -> RunSettings:
    """``settings`` with its time dilation applied, once: the link model K times slower and the
    wall budget K times longer (a second call changes nothing)."""
    k = settings.time_dilation
    if settings.dilated or k == 1:
        return settings
    model = None if settings.link_model is None else settings.link_model.dilated(k)
    return replace(settings, link_model=model, wall_budget=settings.wall_budget * k, dilated=True)


@dataclass
class RawRun:
    """Everything a run produced, before metrics."""

    arrivals: list[Arrival] = field(default_factory=list)
    traffic: dict[int, int] = field(default_factory=dict)
    host_idle: list[float] = field(default_factory=list)
    """CPU idle of this machine (a fraction) over each second of the run (free clock; empty else)."""
    loadavg: tuple[float, float, float] | None = None
    """The load average when the run ended (free clock)."""
    dilation: float = 1.0
    """``--time-dilation``: the wall-clock latencies are this many times the emulated network's."""
    links: dict[int, set[tuple[Coord, str]]] = field(default_factory=dict)
    trace: list[tuple[int, Coord, str, int]] = field(default_factory=list)
    worms: list[tuple[int, Coord, str, str, Worm, int, int]] = field(default_factory=list)
    """Wormhole switching with a trace: (multicast, node, input port or ``inj``, output port or
    ``ej``, worm, first step, count): ``count`` flits of ``worm`` that came into ``node`` on the
    input leaving it on the output in consecutive steps from ``first``."""
    errors: list[dict[str, Any]] = field(default_factory=list)
    injected: dict[int, tuple[int, str]] = field(default_factory=dict)
    hosts: dict[Coord, str] = field(default_factory=dict)
    placement: dict[Coord, tuple[str, str]] = field(default_factory=dict)
    """Swarm: the swarm node (host name, node ID) whose engine ran each node (empty elsewhere)."""
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
            # every delivery of a run passes here: names bound once, no list per arrival for its tail
            append, dest_sets, reached, no_dests = raw.arrivals.append, self._dest_sets, self._reached, ()
            for arrival in msg.arrivals:
                if len(arrival) == 5:
                    mc, step, hops, startups, wall = arrival
                    tel = None
                else:
                    mc, step, hops, startups, wall, tel = arrival
                append(Arrival(mc, node, step, hops, startups, wall, host, tel))
                if node in dest_sets.get(mc, no_dests):
                    reached.add((mc, node))
            for kind, cause, mc_ in msg.errors:
                if kind == protocol.REJECTED:  # a stranger at the link port: not the run's fault
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
            if msg.stale:  # control messages of another run the node dropped (the epoch rule)
                raw.node_stats[node]["stale"] = float(msg.stale)
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
