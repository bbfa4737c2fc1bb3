"""A node's settings, declared once: each field's default, its command-line face and its wire check.

:class:`NodeSettings` holds what a node is told of a run (the coordinator's
``RunSettings`` extends it with what only the coordinator reads; the wire's ``assign`` extends it
with the session's own fields). Each field is made by :func:`setting`, whose :class:`Setting`
metadata is the field's flag, help, range, unit and choices. From that one field come the command
line's option and range check, the experiment files' key, the CLI reference, the wire's decoder
check (:mod:`node.protocol` derives it from the field's type and range) and the engines' reading
(:mod:`node.switching.factory`), so a new setting is one field plus the engine that uses it::

    vcs: int = setting(defaults.VCS, "--vcs", "wormhole: virtual channels per physical channel",
                       low=1, high=MAX_VCS, unit="VCs", metavar="V")
"""

from __future__ import annotations

import dataclasses
from dataclasses import dataclass
from typing import Any, Final

from node import defaults
from node.choices import Clock, Contention, Dateline, Policy, PortModel, Router, Switching, VcClasses, values
from node.transport.wire import MAX_VCS

__all__ = [
    "CLOCKS",
    "CONTENTIONS",
    "DATELINES",
    "EMULATION",
    "FREE_CLOCK",
    "INT64",
    "MAX_COUNT",
    "MAX_STEPS",
    "MAX_WALL_S",
    "POLICIES",
    "PORT_MODELS",
    "ROUTERS",
    "RUNNING",
    "SWITCHING",
    "SWITCHINGS",
    "TIMING",
    "VC_CLASSES",
    "NodeSettings",
    "RouterTiming",
    "Setting",
    "field_problem",
    "number",
    "setting",
    "settings_of",
]

PORT_MODELS: Final = values(PortModel)
CONTENTIONS: Final = values(Contention)
CLOCKS: Final = values(Clock)
POLICIES: Final = values(Policy)
SWITCHINGS: Final = values(Switching)
VC_CLASSES: Final = values(VcClasses)
DATELINES: Final = values(Dateline)
ROUTERS: Final = values(Router)
TIMING: Final = "timing model (reported on the recorded steps, hops and start-ups)"
"""The option group of the settings the timing report shares with wormhole switching."""
EMULATION: Final = "the model (the papers' port model, contention and clock)"
SWITCHING: Final = "switching and buffers (store-and-forward or wormhole)"
FREE_CLOCK: Final = "free clock: telemetry, fidelity and time dilation"
RUNNING: Final = "where and how long it runs (runtimes, brokers, deployments)"
"""The other option groups of ``--help``: every setting with a flag is listed under one."""

INT64 = 2**63 - 1
"""The largest integer the wire carries (msgpack int64)."""
MAX_STEPS = 10**9
MAX_WALL_S = 7 * 24 * 3600.0
MAX_COUNT = 10**6
"""The largest count a setting takes (buffers, flits, hops, shards, cycles)."""


@dataclass(frozen=True, slots=True)
class Setting:
    """How one setting is given and checked. ``flag`` None: no option of its own (a composite such
    as the link model, or one whose choices depend on the command, added by the command)."""

    flag: str | None
    help: str
    low: float | None = None
    high: float | None = None
    unit: str | None = None
    choices: tuple[str, ...] | None = None
    metavar: str | None = None
    group: str | None = None
    """The option group it is listed under (None: the command's own options)."""
    unset: str | None = None
    """The option's default is None: when it is not given, the value may follow from other settings,
    as this says (the help shows the field's default, then this)."""
    kind: type | None = None
    """The option's type where it differs from the field's (``--ts`` is a float for the timing report)."""

    def describe(self) -> str:
        """The help line with its range and unit (the CLI's formatter adds the default)."""
        if self.low is None or self.high is None:
            return self.help
        unit = f" {self.unit}" if self.unit else ""
        return f"{self.help} ({number(self.low)} to {number(self.high)}{unit})"


def number(x: float) -> str:
    """``x`` as a reader writes it: 2^63-1, 1,000,000, 0.001."""
    if x == INT64:
        return "2^63-1"
    return f"{int(x):,}" if float(x).is_integer() else f"{x:g}"


def setting(default: Any, flag: str | None, help: str, **meta: Any) -> Any:
    """A dataclass field with ``default`` whose metadata is its :class:`Setting`."""
    return dataclasses.field(default=default, metadata={"setting": Setting(flag, help, **meta)})


def stage_setting(flag: str, help: str, *, low: int = 0, high: int = MAX_COUNT, cycles: bool = True) -> Any:
    """An optional wormhole router-stage setting: unset, it takes ``--router``'s preset."""
    unit = {"unit": "cycles"} if cycles else {}
    return setting(None, flag, help, low=low, high=high, unset="from --router", group=SWITCHING, **unit)


def settings_of(cls: Any) -> list[tuple[dataclasses.Field[Any], Setting]]:
    """The fields of dataclass ``cls`` that carry a :class:`Setting`, in their order."""
    return [(f, f.metadata["setting"]) for f in dataclasses.fields(cls) if "setting" in f.metadata]


def field_problem(s: Any) -> str | None:
    """Why a field of settings ``s`` is out of its declared range or choices (one line), or None.

    The check each field's :class:`Setting` declares, for settings made in code; the command line
    (``coordinator/cli/options.py``) and the wire (:mod:`node.protocol`) derive theirs from the same
    declaration and name the flag or the message."""
    for f, meta in settings_of(type(s)):
        value = getattr(s, f.name)
        if value is None:
            continue
        if meta.choices is not None and value not in meta.choices:
            return f"unknown {f.name} {value!r}: use one of {', '.join(meta.choices)}"
        low, high = meta.low, meta.high
        if low is not None and high is not None and not low <= value <= high:
            return f"{f.name} must be between {number(low)} and {number(high)}, got {value}"
    return None


@dataclass(frozen=True, slots=True, kw_only=True)
class NodeSettings:
    """How a node emulates a run: what the coordinator tells every node, by these names, in its
    ``assign``. Each field is a setting: its default here, its flag, help and range in its metadata."""

    port_model: str = setting(
        PortModel.ONE_PORT,
        "--port-model",
        "ports a node may send on in one step",
        choices=PORT_MODELS,
        unset=f"run --mcast-set: {PortModel.ALL_PORT}",
        group=EMULATION,
    )
    contention: str = setting(
        Contention.ISOLATED,
        "--contention",
        "isolated: every multicast has the network to itself (under wormhole switching each in an "
        "idle network of its own); shared: they compete for links and channels",
        choices=CONTENTIONS,
        unset=f"run --together or --inject-every, wormhole switching and load: {Contention.SHARED}",
        group=EMULATION,
    )
    clock: str = setting(
        Clock.LOCKSTEP,
        "--clock",
        "lockstep: global steps; free: forward as soon as a packet arrives (real-time jitter)",
        choices=CLOCKS,
        group=EMULATION,
    )
    hop_limit: int | None = setting(
        None,
        "--hop-limit",
        "drop packets beyond this many hops (default: no limit)",
        low=1,
        high=MAX_COUNT,
        unit="hops",
        group=EMULATION,
    )
    max_steps: int = setting(
        10_000,
        "--max-steps",
        "step budget (lockstep)",
        low=1,
        high=MAX_STEPS,
        unit="steps",
        group=EMULATION,
    )
    trace: bool = setting(False, None, "record every link traversal")
    telemetry: bool = setting(
        defaults.TELEMETRY,
        "--telemetry",
        "free clock: every packet carries each node's receive and send times, so each latency splits "
        "into link time and time in the nodes (docs/measurements/telemetry.md); --no-telemetry: not",
        group=FREE_CLOCK,
    )
    shaper_approach_us: int = setting(
        defaults.SHAPER_APPROACH_US,
        "--shaper-approach",
        "free clock with a link model: microseconds before a frame's release at which its link stops "
        "sleeping (on a timerfd) and yields until it is due (a wake-up from sleep comes about 0.1 ms "
        "late; 0: trio's sleep only, up to 1 ms late, the least CPU)",
        low=0,
        high=100_000,
        unit="µs",
        metavar="US",
        group=FREE_CLOCK,
    )
    buffer: int | None = setting(
        None,
        "--buffer",
        "shared contention: packets each input link's buffer holds (default unbounded)",
        low=1,
        high=MAX_COUNT,
        unit="packets",
        metavar="N",
        group=SWITCHING,
    )
    out_buffer: int | None = setting(
        None,
        "--out-buffer",
        "shared contention: packets a node's output buffer holds (default unbounded)",
        low=1,
        high=MAX_COUNT,
        unit="packets",
        metavar="N",
        group=SWITCHING,
    )
    policy: str = setting(
        Policy.BLOCK,
        "--policy",
        "when an input buffer is full: block the upstream link (no loss) or drop and count",
        choices=POLICIES,
        group=SWITCHING,
    )
    switching: str = setting(
        Switching.STORE_AND_FORWARD,
        "--switching",
        "wormhole: flit-level wormhole switching, one step per cycle (docs/wormhole.md); "
        "uses --flits, --ts, --buffer-flits, --prep",
        choices=SWITCHINGS,
        group=SWITCHING,
    )
    """``wormhole``: flit-level wormhole switching (node/switching/wormhole.py); the four below
    apply to it."""
    flits: int = setting(
        defaults.FLITS,
        "--flits",
        "message length L in flits (Al-Dubai, Ould-Khaoua & Mackenzie: 64; also wormhole switching)",
        low=1,
        high=MAX_COUNT,
        unit="flits",
        group=TIMING,
    )
    flit_bytes: int = setting(
        defaults.FLIT_BYTES,
        "--flit-bytes",
        "bytes in one flit: under the free clock a link's --link-rate serialises each message as "
        "--flits × this many bytes (the β·L term), whatever its encoded frame's length",
        low=1,
        high=MAX_COUNT,
        unit="bytes",
        metavar="BYTES",
        group=SWITCHING,
    )
    buffer_flits: int = setting(
        defaults.BUFFER_FLITS,
        "--buffer-flits",
        "wormhole: flits each input channel buffers (2 or more stream a worm at full rate)",
        low=1,
        high=MAX_COUNT,
        unit="flits",
        metavar="B",
        group=SWITCHING,
    )
    ts: int = setting(
        defaults.TS,
        "--ts",
        "start-up time Ts (Al-Dubai, Ould-Khaoua & Mackenzie: 33 cycles; also wormhole switching, "
        "in whole cycles)",
        low=0,
        high=1e12,
        unit="cycles",
        group=TIMING,
        kind=float,
    )
    prep: int | None = setting(
        None,
        "--prep",
        "wormhole: preparation cycles at the source (default per algorithm: "
        + ", ".join(f"{name} {cycles}" for name, cycles in defaults.PREP.items())
        + ", else 0)",
        low=0,
        high=MAX_COUNT,
        unit="cycles",
        metavar="CYCLES",
        group=SWITCHING,
    )
    """Preparation cycles at a source; None: seed 004's per-algorithm table (DP 2, MP 2, CP 4, QG 16)."""
    vcs: int = setting(
        defaults.VCS,
        "--vcs",
        "wormhole: virtual channels per physical channel, each with its own --buffer-flits buffer "
        "and credits; on a torus the upper half is used after a ring's wrap link (dateline)",
        low=1,
        high=MAX_VCS,
        unit="VCs",
        metavar="V",
        group=SWITCHING,
    )
    vc_classes: str = setting(
        defaults.VC_CLASSES,
        "--vc-classes",
        "wormhole: unicast and multicast worms share the virtual channels, or keep to disjoint "
        "halves (split: needs --vcs 2, on a torus 4)",
        choices=VC_CLASSES,
        group=SWITCHING,
    )
    dateline: str = setting(
        defaults.DATELINE,
        "--dateline",
        "wormhole on a torus with --vcs 2 or more: wrap: a worm takes a ring's upper VCs from its wrap "
        "link on, while it goes straight; ring: a worm that will cross the wrap link takes them for "
        "its whole ring, the others the lower ones (BookSim2's dim_order_torus)",
        choices=DATELINES,
        group=SWITCHING,
    )
    router: str = setting(
        defaults.ROUTER,
        "--router",
        "wormhole: the router's stage timing preset (paper: 1 cycle a hop; booksim: BookSim2's "
        "input-queued router: VC allocation, switch allocation and traversal 1 cycle each, "
        "wait_for_tail_credit, one flit per input port a cycle); a stage option overrides it",
        choices=ROUTERS,
        group=SWITCHING,
    )
    routing_delay: int | None = stage_setting(
        "--routing-delay",
        "wormhole: cycles from a head reaching the front of its input to its route (BookSim2's "
        "routing_delay)",
    )
    vc_alloc_delay: int | None = stage_setting(
        "--vc-alloc-delay",
        "wormhole: cycles from a worm getting its last output VC to its first switch allocation "
        "(vc_alloc_delay)",
    )
    sw_alloc_delay: int | None = stage_setting(
        "--sw-alloc-delay",
        "wormhole: cycles a flit spends in switch allocation once granted, before it crosses "
        "(sw_alloc_delay)",
    )
    st_delay: int | None = stage_setting(
        "--st-delay",
        "wormhole: cycles a flit spends crossing the switch (st_final_delay)",
    )
    link_latency: int | None = stage_setting(
        "--link-latency",
        "wormhole: cycles a flit spends on a link: sent at t, in the next buffer at t + this, with "
        "the switch stages before it",
        low=1,
    )
    credit_delay: int | None = stage_setting(
        "--credit-delay",
        "wormhole: extra cycles a credit takes back upstream (credit_delay; 0: usable the cycle "
        "after its flit left)",
    )
    wait_for_tail_credit: int | None = stage_setting(
        "--wait-for-tail-credit",
        "wormhole: 1: an output VC is granted again only once the credit of the tail that left on "
        "it came back (wait_for_tail_credit)",
        high=1,
        cycles=False,
    )
    input_speedup: int | None = stage_setting(
        "--input-speedup",
        "wormhole: flits an input port may send per cycle over all its VCs (input_speedup; 0: each VC one)",
        high=MAX_VCS,
        cycles=False,
    )
    lease: int = setting(
        defaults.LEASE,
        "--lease",
        "across processes and containers: seconds a node waits for a silent coordinator before it "
        "leaves the run (the coordinator says it is alive every third of it; no run ends for lasting long)",
        low=1,
        high=3600,
        unit="s",
        metavar="S",
        group=RUNNING,
    )

    def router_timing(self) -> RouterTiming:
        """The router's stage timing: the ``router`` preset with each stage setting given overriding it."""
        preset = defaults.ROUTERS[self.router]
        return RouterTiming(
            **{
                name: preset[name] if getattr(self, name) is None else getattr(self, name)
                for name in RouterTiming.__dataclass_fields__
            }
        )

    @property
    def one_port(self) -> bool:
        """Whether a node sends on one port per step (and has one injection and ejection channel)."""
        return self.port_model == PortModel.ONE_PORT

    @property
    def wormhole(self) -> bool:
        """Whether the run switches flits (wormhole) rather than whole packets."""
        return self.switching == Switching.WORMHOLE


@dataclass(frozen=True, slots=True)
class RouterTiming:
    """A wormhole router's stage timing in cycles (docs/wormhole.md "Router timing"), resolved from
    the ``router`` preset and the stage settings; the defaults are the papers' 1-cycle router."""

    routing_delay: int
    vc_alloc_delay: int
    sw_alloc_delay: int
    st_delay: int
    link_latency: int
    credit_delay: int
    wait_for_tail_credit: int
    input_speedup: int

    @property
    def pipe(self) -> int:
        """Cycles from a flit's switch allocation to its arrival in the next buffer (or the processor)."""
        return self.sw_alloc_delay + self.st_delay + self.link_latency

    @property
    def eject(self) -> int:
        """Cycles from a flit's switch allocation to the processor's having it: the ejection channel
        to the processor takes one cycle whatever the links' latency (BookSim2's ejection channel)."""
        return self.sw_alloc_delay + self.st_delay + 1

    @property
    def settle(self) -> int:
        """Cycles beyond the 1-cycle router's that a live worm may go without a change: the longest a
        flit or a credit spends in this router's pipeline past one cycle. The deadlock verdict waits
        this much longer before it calls a worm still (else a worm waiting for a flit or a credit in
        flight would read as stuck)."""
        return (
            self.routing_delay + self.vc_alloc_delay + self.sw_alloc_delay + self.st_delay
            + self.link_latency - 1 + self.credit_delay
        )  # fmt: skip

    @property
    def is_paper(self) -> bool:
        """Whether this is the papers' 1-cycle router (every record as before the stage settings)."""
        return self == RouterTiming(**defaults.ROUTERS[Router.PAPER])
