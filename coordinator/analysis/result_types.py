"""A run's results as a tree of frozen records, and its ``--json`` document (run.json).

``RunResult`` is what :func:`coordinator.experiments.run.run_result` makes of a ``RawRun``::

    RunResult
      run: RunInfo                      topology, models, runtime, seed, completion, steps, wall_s, …
        switching: SwitchingInfo        mode (and wormhole's flit-level settings)
        timing: TimingInfo | None       --latency-model's model and its parameters
      multicasts: (MulticastResult, …)  id, algorithm, source, destinations, time, traffic, cv, …
        arrivals: (ArrivalResult, …)    node, step, hops, startups, wall_ns, host (, latency)
        links: (LinkUse, …) | None      with --trace: every link traversal
        latency: MulticastLatency | None  with --latency-model
      summary: Summary                  a CI (mean, 95% interval, n) per metric
      by_algorithm: {name: Summary}
      jitter: (JitterResult, …)         per node, over repetitions of one multicast
      errors: ({…}, …)                  node error records as the nodes report them, and shortfalls
      rejected: (Rejected, …) | None    connections the link ports refused
      latency: {name: LatencySummary} | None   with --latency-model
      prediction: (Prediction, …) | None        with --predict
      mcast: {…} | None                 mcast(n, d, c) statistics (run --mcast-set)

``to_json()`` gives the document field for field (keys in the order meshcast has always written
them; an optional part that is None is left out, as it always was) and ``from_json()`` reads one
back: ``RunResult.from_json(doc).to_json() == doc``. Coordinates are tuples here, lists in JSON.
Error records and the mcast section stay mappings: their keys vary by kind.
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from dataclasses import dataclass, fields
from typing import Any

__all__ = [
    "CI",
    "TELEMETRY_FIELDS",
    "ArrivalResult",
    "JitterResult",
    "LatencySummary",
    "LinkUse",
    "MulticastLatency",
    "MulticastResult",
    "Prediction",
    "Rejected",
    "RunInfo",
    "RunResult",
    "Summary",
    "SwitchingInfo",
    "TelemetrySplit",
    "TimingInfo",
    "WormRun",
]

Coord = tuple[int, int]
Json = dict[str, Any]


def _xy(c: Sequence[int]) -> Coord:
    x, y = c
    return (x, y)


def _opt(c: Sequence[int] | None) -> Coord | None:
    return None if c is None else _xy(c)


def _list(c: Coord | None) -> list[int] | None:
    return None if c is None else list(c)


@dataclass(frozen=True, slots=True, kw_only=True)
class CI:
    """Mean and 95% confidence interval of the mean over ``n`` values (None, None, None for none)."""

    mean: float | None
    low: float | None
    high: float | None
    n: int

    def to_json(self) -> Json:
        return {"mean": self.mean, "ci95": [self.low, self.high], "n": self.n}

    @classmethod
    def from_json(cls, d: Mapping[str, Any]) -> CI:
        low, high = d["ci95"]
        return cls(mean=d["mean"], low=low, high=high, n=d["n"])


@dataclass(frozen=True, slots=True, kw_only=True)
class Summary:
    """A CI of each metric over a set of multicasts (metrics.SUMMARY_FIELDS and WALL_FIELDS)."""

    time: CI
    traffic: CI
    additional_traffic: CI
    mean_arrival: CI
    cv: CI
    cv_wall: CI

    FIELDS = ("time", "traffic", "additional_traffic", "mean_arrival", "cv", "cv_wall")

    def get(self, name: str) -> CI:
        """The CI of the metric named ``name`` (one of FIELDS)."""
        if name not in self.FIELDS:
            raise KeyError(name)
        ci: CI = getattr(self, name)
        return ci

    def to_json(self) -> Json:
        return {f: self.get(f).to_json() for f in self.FIELDS}

    @classmethod
    def from_json(cls, d: Mapping[str, Any]) -> Summary:
        return cls(**{f: CI.from_json(d[f]) for f in cls.FIELDS})


@dataclass(frozen=True, slots=True, kw_only=True)
class LatencySummary:
    """``--latency-model``: the CI over an algorithm's multicasts of their latency max, mean and CV."""

    max: CI
    mean: CI
    cv: CI

    def to_json(self) -> Json:
        return {"max": self.max.to_json(), "mean": self.mean.to_json(), "cv": self.cv.to_json()}

    @classmethod
    def from_json(cls, d: Mapping[str, Any]) -> LatencySummary:
        return cls(max=CI.from_json(d["max"]), mean=CI.from_json(d["mean"]), cv=CI.from_json(d["cv"]))


# not frozen: a frozen dataclass's __init__ is 4x slower, and there is one a delivery
@dataclass(slots=True, kw_only=True, unsafe_hash=True)
class ArrivalResult:
    """A destination's first arrival: logical step (absolute), hops, start-ups on its path, and its
    wall-clock latency (ns) and host where the source's host measured it; ``latency`` with --latency-model."""

    node: Coord
    step: int
    hops: int
    startups: int
    wall_ns: int | None
    host: str | None
    latency: float | None = None
    link_ns: int | None = None
    """Free-clock telemetry: the part of ``wall_ns`` spent on links (send to the next receive)."""
    node_ns: int | None = None
    """Free-clock telemetry: the part of ``wall_ns`` spent in nodes (receive to send, or delivery)."""

    def to_json(self) -> Json:
        d: Json = {
            "node": list(self.node),
            "step": self.step,
            "hops": self.hops,
            "startups": self.startups,
            "wall_ns": self.wall_ns,
            "host": self.host,
        }
        if self.latency is not None:
            d["latency"] = self.latency
        if self.link_ns is not None:
            d["link_ns"] = self.link_ns
            d["node_ns"] = self.node_ns
        return d

    @classmethod
    def from_json(cls, d: Mapping[str, Any]) -> ArrivalResult:
        return cls(
            node=_xy(d["node"]),
            step=d["step"],
            hops=d["hops"],
            startups=d["startups"],
            wall_ns=d["wall_ns"],
            host=d["host"],
            latency=d.get("latency"),
            link_ns=d.get("link_ns"),
            node_ns=d.get("node_ns"),
        )


@dataclass(frozen=True, slots=True, kw_only=True)
class LinkUse:
    """``--trace``: a packet of the multicast crossed the link from ``frm`` to ``to`` at ``step``."""

    frm: Coord
    to: Coord | None
    step: int

    def to_json(self) -> Json:
        return {"from": list(self.frm), "to": _list(self.to), "step": self.step}

    @classmethod
    def from_json(cls, d: Mapping[str, Any]) -> LinkUse:
        return cls(frm=_xy(d["from"]), to=_opt(d["to"]), step=d["step"])


@dataclass(frozen=True, slots=True, kw_only=True)
class WormRun:
    """``--trace`` under wormhole: ``count`` flits of ``worm`` (its source node and number there)
    that came into ``frm`` on port ``came`` (``inj``: injected there) crossed ``port`` (``ej``,
    ``to`` None: went to the node's processor) in the steps ``first`` .. ``first + count - 1``."""

    frm: Coord
    to: Coord | None
    came: str
    port: str
    worm: tuple[int, int, int]
    first: int
    count: int

    def to_json(self) -> Json:
        return {
            "from": list(self.frm),
            "to": _list(self.to),
            "in": self.came,
            "port": self.port,
            "worm": list(self.worm),
            "first": self.first,
            "count": self.count,
        }

    @classmethod
    def from_json(cls, d: Mapping[str, Any]) -> WormRun:
        w = d["worm"]
        return cls(
            frm=_xy(d["from"]),
            to=_opt(d["to"]),
            came=d["in"],
            port=d["port"],
            worm=(w[0], w[1], w[2]),
            first=d["first"],
            count=d["count"],
        )


@dataclass(frozen=True, slots=True, kw_only=True)
class MulticastLatency:
    """``--latency-model``: one multicast's latency under the model (max None while a destination is
    missing)."""

    model: str
    max: float | None
    mean: float | None
    cv: float | None

    def to_json(self) -> Json:
        return {"model": self.model, "max": self.max, "mean": self.mean, "cv": self.cv}

    @classmethod
    def from_json(cls, d: Mapping[str, Any]) -> MulticastLatency:
        return cls(model=d["model"], max=d["max"], mean=d["mean"], cv=d["cv"])


@dataclass(frozen=True, slots=True, kw_only=True)
class MulticastResult:
    """One multicast's metrics (see coordinator/analysis/metrics.py for their definitions)."""

    id: int
    algorithm: str
    source: Coord
    destinations: tuple[Coord, ...]
    injected: int
    time: int | None
    traffic: int
    distinct_links: int
    additional_traffic: int
    mean_arrival: float | None
    cv: float | None
    cv_wall: float | None
    missing: tuple[Coord, ...]
    duplicates: int
    stray: int
    arrivals: tuple[ArrivalResult, ...]
    links: tuple[LinkUse, ...] | None = None
    worms: tuple[WormRun, ...] | None = None
    """``--trace`` under wormhole (replays): the multicast's flit runs, by first step."""
    latency: MulticastLatency | None = None

    def metric(self, name: str) -> float | None:
        """The metric named ``name`` (one of Summary.FIELDS)."""
        if name not in Summary.FIELDS:
            raise KeyError(name)
        v: float | None = getattr(self, name)
        return v

    def to_json(self) -> Json:
        d: Json = {
            "id": self.id,
            "algorithm": self.algorithm,
            "source": list(self.source),
            "destinations": [list(c) for c in self.destinations],
            "injected": self.injected,
            "time": self.time,
            "traffic": self.traffic,
            "distinct_links": self.distinct_links,
            "additional_traffic": self.additional_traffic,
            "mean_arrival": self.mean_arrival,
            "cv": self.cv,
            "cv_wall": self.cv_wall,
            "missing": [list(c) for c in self.missing],
            "duplicates": self.duplicates,
            "stray": self.stray,
            "arrivals": [a.to_json() for a in self.arrivals],
        }
        if self.links is not None:
            d["links"] = [link.to_json() for link in self.links]
        if self.worms is not None:
            d["worms"] = [w.to_json() for w in self.worms]
        if self.latency is not None:
            d["latency"] = self.latency.to_json()
        return d

    @classmethod
    def from_json(cls, d: Mapping[str, Any]) -> MulticastResult:
        links, worms, latency = d.get("links"), d.get("worms"), d.get("latency")
        return cls(
            id=d["id"],
            algorithm=d["algorithm"],
            source=_xy(d["source"]),
            destinations=tuple(_xy(c) for c in d["destinations"]),
            injected=d["injected"],
            time=d["time"],
            traffic=d["traffic"],
            distinct_links=d["distinct_links"],
            additional_traffic=d["additional_traffic"],
            mean_arrival=d["mean_arrival"],
            cv=d["cv"],
            cv_wall=d["cv_wall"],
            missing=tuple(_xy(c) for c in d["missing"]),
            duplicates=d["duplicates"],
            stray=d["stray"],
            arrivals=tuple(ArrivalResult.from_json(a) for a in d["arrivals"]),
            links=None if links is None else tuple(LinkUse.from_json(x) for x in links),
            worms=None if worms is None else tuple(WormRun.from_json(x) for x in worms),
            latency=None if latency is None else MulticastLatency.from_json(latency),
        )


SPREAD = ("mean", "sd", "median", "iqr", "p95", "p99")
"""The statistics of a jitter row, in steps (``step_``) and wall-clock ns (``wall_ns_``)."""


SPREAD_CIS = ("median", "sd")
"""The statistics of a jitter row with a 95% CI (``step_median_ci95``: [low, high], or None)."""


@dataclass(frozen=True, slots=True, kw_only=True)
class Spread:
    """Mean, sample SD, median, IQR, p95 and p99 (metrics.spread) and 95% CIs of the median and
    the SD; None where unmeasured, and p95 and p99 also below their minimum of repetitions."""

    mean: float | None
    sd: float | None
    median: float | None
    iqr: float | None
    p95: float | None
    p99: float | None
    median_ci: tuple[float, float] | None = None
    sd_ci: tuple[float, float] | None = None

    def to_json(self, prefix: str) -> Json:
        ci = {f"{prefix}{k}_ci95": _pair(getattr(self, f"{k}_ci")) for k in SPREAD_CIS}
        return {**{f"{prefix}{k}": getattr(self, k) for k in SPREAD}, **ci}

    @classmethod
    def from_json(cls, d: Mapping[str, Any], prefix: str) -> Spread:
        return cls(
            **{k: d[f"{prefix}{k}"] for k in SPREAD},
            median_ci=_unpair(d.get(f"{prefix}median_ci95")),
            sd_ci=_unpair(d.get(f"{prefix}sd_ci95")),
        )


def _pair(ci: tuple[float, float] | None) -> list[float] | None:
    return None if ci is None else [ci[0], ci[1]]


def _unpair(v: Any) -> tuple[float, float] | None:
    return None if v is None else (v[0], v[1])


@dataclass(frozen=True, slots=True, kw_only=True)
class JitterResult:
    """One node's arrival latency over the repetitions of one multicast: steps and wall clock (ns)."""

    algorithm: str
    source: Coord
    node: Coord
    repetitions: int
    steps: Spread
    wall_ns: Spread
    host: str | None
    link_ns: Spread | None = None
    """Free-clock telemetry: the link part of the wall-clock latency (ns)."""
    node_ns: Spread | None = None
    """Free-clock telemetry: the node (residence) part of the wall-clock latency (ns)."""

    def to_json(self) -> Json:
        d: Json = {
            "algorithm": self.algorithm,
            "source": list(self.source),
            "node": list(self.node),
            "repetitions": self.repetitions,
            **self.steps.to_json("step_"),
            **self.wall_ns.to_json("wall_ns_"),
            "host": self.host,
        }
        if self.link_ns is not None and self.node_ns is not None:
            d |= self.link_ns.to_json("link_ns_") | self.node_ns.to_json("node_ns_")
        return d

    @classmethod
    def from_json(cls, d: Mapping[str, Any]) -> JitterResult:
        return cls(
            algorithm=d["algorithm"],
            source=_xy(d["source"]),
            node=_xy(d["node"]),
            repetitions=d["repetitions"],
            steps=Spread.from_json(d, "step_"),
            wall_ns=Spread.from_json(d, "wall_ns_"),
            host=d["host"],
            link_ns=Spread.from_json(d, "link_ns_") if "link_ns_mean" in d else None,
            node_ns=Spread.from_json(d, "node_ns_") if "node_ns_mean" in d else None,
        )


@dataclass(frozen=True, slots=True, kw_only=True)
class Rejected:
    """A connection a node's link port refused before it authenticated, and why."""

    node: Coord
    cause: str

    def to_json(self) -> Json:
        return {"node": list(self.node), "cause": self.cause}

    @classmethod
    def from_json(cls, d: Mapping[str, Any]) -> Rejected:
        return cls(node=_xy(d["node"]), cause=d["cause"])


@dataclass(frozen=True, slots=True, kw_only=True)
class Prediction:
    """``--predict``: a node's measured wall-clock arrivals (s) beside what the link model predicts."""

    algorithm: str
    source: Coord
    node: Coord
    hops: int
    repetitions: int
    mean_s: float
    predicted_mean_s: float
    sd_s: float
    predicted_sd_s: float
    host_cost_per_hop_s: float | None

    def to_json(self) -> Json:
        return {
            "algorithm": self.algorithm,
            "source": list(self.source),
            "node": list(self.node),
            "hops": self.hops,
            "repetitions": self.repetitions,
            "mean_s": self.mean_s,
            "predicted_mean_s": self.predicted_mean_s,
            "sd_s": self.sd_s,
            "predicted_sd_s": self.predicted_sd_s,
            "host_cost_per_hop_s": self.host_cost_per_hop_s,
        }

    @classmethod
    def from_json(cls, d: Mapping[str, Any]) -> Prediction:
        return cls(**{**d, "source": _xy(d["source"]), "node": _xy(d["node"])})


@dataclass(frozen=True, slots=True, kw_only=True)
class SwitchingInfo:
    """The switching mode; under wormhole the flit-level settings (the VCs only when not one)."""

    mode: str
    flits: int | None = None
    buffer_flits: int | None = None
    ts: float | None = None
    prep: int | None = None
    vcs: int | None = None
    vc_classes: str | None = None
    dateline: str | None = None  # only when not the default (wrap)

    def to_json(self) -> Json:
        d: Json = {"mode": self.mode}
        if self.mode == "wormhole":
            d |= {"flits": self.flits, "buffer_flits": self.buffer_flits, "ts": self.ts, "prep": self.prep}
            if self.vcs is not None:
                d |= {"vcs": self.vcs, "vc_classes": self.vc_classes}
            if self.dateline is not None:
                d |= {"dateline": self.dateline}
        return d

    @classmethod
    def from_json(cls, d: Mapping[str, Any]) -> SwitchingInfo:
        return cls(
            mode=d["mode"],
            flits=d.get("flits"),
            buffer_flits=d.get("buffer_flits"),
            ts=d.get("ts"),
            prep=d.get("prep"),
            vcs=d.get("vcs"),
            vc_classes=d.get("vc_classes"),
            dateline=d.get("dateline"),
        )


@dataclass(frozen=True, slots=True, kw_only=True)
class TimingInfo:
    """``--latency-model``: the latency model and its parameters."""

    model: str
    ts: float
    beta: float
    flits: int
    router: float

    def to_json(self) -> Json:
        return {
            "model": self.model,
            "ts": self.ts,
            "beta": self.beta,
            "flits": self.flits,
            "router": self.router,
        }

    @classmethod
    def from_json(cls, d: Mapping[str, Any]) -> TimingInfo:
        return cls(model=d["model"], ts=d["ts"], beta=d["beta"], flits=d["flits"], router=d["router"])


@dataclass(frozen=True, slots=True, kw_only=True)
class RunInfo:
    """What ran and how it ended. ``rejected`` counts refused connections per node ("x,y");
    ``repetitions`` says how repetitions of one ``--dests`` multicast were run (``meshcast run``);
    ``started_at_unix`` and ``coordinator_startup_s`` time a compose coordinator's start-up."""

    topology: str
    port_model: str
    clock: str
    contention: str
    runtime: str
    seed: int
    complete: bool
    incomplete: tuple[str, ...]
    steps: int
    wall_s: float
    warmup_repeats: int
    warmup_discarded: int
    switching: SwitchingInfo
    rejected: Mapping[str, int] | None = None
    link_model: Mapping[str, Any] | None = None
    sync: str | None = None
    timing: TimingInfo | None = None
    repetitions: str | None = None
    started_at_unix: float | None = None
    coordinator_startup_s: float | None = None
    time_dilation: float | None = None
    """``--time-dilation K`` (None: 1): wall-clock latencies were divided by K; ``wall_s`` was not."""
    placement: Mapping[str, Mapping[str, str]] | None = None
    """Swarm: per node ("x,y"), the swarm node that ran it: ``{"host": name, "id": node ID}``."""

    def to_json(self) -> Json:
        d: Json = {
            "topology": self.topology,
            "port_model": self.port_model,
            "clock": self.clock,
            "contention": self.contention,
            "runtime": self.runtime,
            "seed": self.seed,
            "complete": self.complete,
            "incomplete": list(self.incomplete),
            "steps": self.steps,
            "wall_s": self.wall_s,
            "warmup_repeats": self.warmup_repeats,
            "warmup_discarded": self.warmup_discarded,
        }
        if self.rejected is not None:
            d["rejected"] = dict(self.rejected)
        if self.link_model is not None:
            d["link_model"] = self.link_model
        if self.sync is not None:
            d["sync"] = self.sync
        d["switching"] = self.switching.to_json()
        if self.timing is not None:
            d["timing"] = self.timing.to_json()
        if self.repetitions is not None:
            d["repetitions"] = self.repetitions
        if self.started_at_unix is not None:
            d["started_at_unix"] = self.started_at_unix
        if self.coordinator_startup_s is not None:
            d["coordinator_startup_s"] = self.coordinator_startup_s
        if self.time_dilation is not None:
            d["time_dilation"] = self.time_dilation
        if self.placement is not None:
            d["placement"] = {k: dict(v) for k, v in self.placement.items()}
        return d

    @classmethod
    def from_json(cls, d: Mapping[str, Any]) -> RunInfo:
        timing = d.get("timing")
        return cls(
            topology=d["topology"],
            port_model=d["port_model"],
            clock=d["clock"],
            contention=d["contention"],
            runtime=d["runtime"],
            seed=d["seed"],
            complete=d["complete"],
            incomplete=tuple(d["incomplete"]),
            steps=d["steps"],
            wall_s=d["wall_s"],
            warmup_repeats=d["warmup_repeats"],
            warmup_discarded=d["warmup_discarded"],
            switching=SwitchingInfo.from_json(d["switching"]),
            rejected=d.get("rejected"),
            link_model=d.get("link_model"),
            sync=d.get("sync"),
            timing=None if timing is None else TimingInfo.from_json(timing),
            repetitions=d.get("repetitions"),
            started_at_unix=d.get("started_at_unix"),
            coordinator_startup_s=d.get("coordinator_startup_s"),
            time_dilation=d.get("time_dilation"),
            placement=d.get("placement"),
        )


@dataclass(frozen=True, slots=True, kw_only=True)
class Fidelity:
    """The verdict and the figures it rests on (ns are wall-clock ns, divided by the dilation)."""

    ok: bool | None
    reason: str
    hosts_share: float | None
    host_per_hop_ns: float | None
    residence_per_hop_ns: float | None
    link_excess_per_hop_ns: float | None
    link_mean_ns: float | None
    destinations: int
    cpu_idle_mean: float | None
    cpu_idle_min: float | None
    loadavg: tuple[float, float, float] | None
    dilation: float
    share_max: float
    per_hop_max: float
    advised_dilation: float | None = None
    """On a NOT-ok verdict, the --time-dilation that would bring the hosts' figures under the
    thresholds if their costs stayed as they are (the line's "try --time-dilation K")."""
    clocks: int = 1
    """The host clocks the nodes stamped their times with (each host's monotonic clock: none is
    synchronised with another's). A wall latency, its telemetry split and so the verdict exist
    only for a delivery on its source's clock; link time needs both ends of a link on one clock
    (or the path back on it), residence is always local."""
    unpaired: int = 0
    """Deliveries left out of the verdict: their node's clock is not their source's."""

    def line(self) -> str:
        """The one line a run prints."""
        load = ""
        if self.cpu_idle_mean is not None:
            load = f"; CPU idle {self.cpu_idle_mean:.0%} (least {self.cpu_idle_min:.0%} in a second)"
        if self.loadavg is not None:
            load += f", load {self.loadavg[0]:.1f}"
        if self.clocks > 1:
            load += (
                f"; {self.clocks} host clocks, unsynchronised: judged on the deliveries on their"
                f" source's host, {self.unpaired} on other hosts have no latency"
            )
        if self.ok is None:
            return f"fidelity: {self.reason}{load}"
        dil = f" at --time-dilation {self.dilation:g}" if self.dilation != 1 else ""
        variance = (
            f"the hosts add {_pct(self.hosts_share)} of the per-node variance"
            if self.hosts_share is not None
            else "no destination repeated (its variance not judged)"
        )
        figures = f"{variance}, {_ms(self.host_per_hop_ns)} a hop against a {_ms(self.link_mean_ns)} link"
        if self.residence_per_hop_ns is not None and self.link_excess_per_hop_ns is not None:
            figures += (
                f" ({_ms(self.residence_per_hop_ns)} in nodes, "
                f"{_ms(self.link_excess_per_hop_ns)} on links beyond the model)"
            )
        if self.ok:
            return f"fidelity: ok{dil}: {figures}{load}"
        return f"fidelity: NOT ok{dil}: {figures}{load}; {self.reason}"

    def to_json(self) -> dict[str, Any]:
        d = {f.name: getattr(self, f.name) for f in fields(self)}
        d["loadavg"] = None if self.loadavg is None else list(self.loadavg)  # as JSON reads it back
        d["line"] = self.line()
        return d

    @classmethod
    def from_json(cls, d: Mapping[str, Any]) -> Fidelity:
        later = {"clocks": 1, "unpaired": 0}  # written since: absent from older run.json files
        values = {f.name: d.get(f.name, later[f.name]) if f.name in later else d[f.name] for f in fields(cls)}
        if values["loadavg"] is not None:
            values["loadavg"] = tuple(values["loadavg"])
        return cls(**values)


def _pct(x: float | None) -> str:
    return "?" if x is None else f"{x:.0%}"


def _ms(ns: float | None) -> str:
    return "?" if ns is None else f"{ns / 1e6:.3g} ms"


@dataclass(frozen=True, slots=True, kw_only=True)
class TelemetrySplit:
    """A run's per-node variance of latency in parts (:func:`coordinator.analysis.telemetry.variance_split`):
    ``hosts`` = Σ var(residence) / Σ var(latency), ``links`` = Σ var(link) / Σ var(latency),
    ``covariance`` = 2 Σ cov / Σ var(latency) (they sum to 1), the mean residence and link time per
    hop (ns), and how many destinations (with two or more repetitions) and deliveries it rests on."""

    hosts: float | None
    links: float | None
    covariance: float | None
    residence_per_hop_ns: float | None
    link_per_hop_ns: float | None
    destinations: int
    deliveries: int

    def to_json(self) -> Json:
        return {f: getattr(self, f) for f in TELEMETRY_FIELDS}

    @classmethod
    def from_json(cls, d: Mapping[str, Any]) -> TelemetrySplit:
        return cls(**{f: d[f] for f in TELEMETRY_FIELDS})


TELEMETRY_FIELDS = (
    "hosts", "links", "covariance", "residence_per_hop_ns", "link_per_hop_ns", "destinations", "deliveries"
)  # fmt: skip


@dataclass(frozen=True, slots=True, kw_only=True)
class RunResult:
    """A run's results: the ``--json`` document as a tree of records (see the module docstring)."""

    run: RunInfo
    multicasts: tuple[MulticastResult, ...]
    summary: Summary
    by_algorithm: Mapping[str, Summary]
    jitter: tuple[JitterResult, ...]
    errors: tuple[Mapping[str, Any], ...]
    rejected: tuple[Rejected, ...] | None = None
    latency: Mapping[str, LatencySummary] | None = None
    prediction: tuple[Prediction, ...] | None = None
    mcast: Mapping[str, Any] | None = None
    telemetry: TelemetrySplit | None = None
    """Free clock with ``--telemetry``: the per-node variance of latency split into hosts and links."""
    fidelity: Fidelity | None = None
    """Free clock: whether the hosts kept up (:mod:`coordinator.analysis.fidelity`)."""

    def to_json(self) -> Json:
        d: Json = {
            "run": self.run.to_json(),
            "multicasts": [m.to_json() for m in self.multicasts],
            "summary": self.summary.to_json(),
            "by_algorithm": {a: s.to_json() for a, s in self.by_algorithm.items()},
            "jitter": [j.to_json() for j in self.jitter],
            "errors": [dict(e) for e in self.errors],
        }
        if self.rejected is not None:
            d["rejected"] = [r.to_json() for r in self.rejected]
        if self.latency is not None:
            d["latency"] = {a: s.to_json() for a, s in self.latency.items()}
        if self.prediction is not None:
            d["prediction"] = [p.to_json() for p in self.prediction]
        if self.mcast is not None:
            d["mcast"] = dict(self.mcast)
        if self.telemetry is not None:
            d["telemetry"] = self.telemetry.to_json()
        if self.fidelity is not None:
            d["fidelity"] = self.fidelity.to_json()
        return d

    @classmethod
    def from_json(cls, d: Mapping[str, Any]) -> RunResult:
        rejected, latency, prediction = d.get("rejected"), d.get("latency"), d.get("prediction")
        return cls(
            run=RunInfo.from_json(d["run"]),
            multicasts=tuple(MulticastResult.from_json(m) for m in d["multicasts"]),
            summary=Summary.from_json(d["summary"]),
            by_algorithm={a: Summary.from_json(s) for a, s in d["by_algorithm"].items()},
            jitter=tuple(JitterResult.from_json(j) for j in d["jitter"]),
            errors=tuple(d["errors"]),
            rejected=None if rejected is None else tuple(Rejected.from_json(r) for r in rejected),
            latency=None if latency is None else {a: LatencySummary.from_json(s) for a, s in latency.items()},
            prediction=None if prediction is None else tuple(Prediction.from_json(p) for p in prediction),
            mcast=d.get("mcast"),
            telemetry=TelemetrySplit.from_json(d["telemetry"]) if d.get("telemetry") is not None else None,
            fidelity=Fidelity.from_json(d["fidelity"]) if d.get("fidelity") is not None else None,
        )
