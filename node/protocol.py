"""The control protocol between a node and the coordinator: typed events, one codec, one phase table.

Every control message is a frozen dataclass below; :func:`encode` and :func:`decode` are the
only way to and from msgpack bytes (a map with a ``type`` and the event's fields, so the bytes
stay readable by any msgpack tool). :func:`decode` never lets bad input through: it raises a
:class:`ProtocolError` naming the cause. :data:`TRANSITIONS` is the protocol's phase table
(phase x message type -> next phase): the node actor and the coordinator's session both follow
it, one conversation per node, so an out-of-order message is a reported error on both sides.

The conversation: node hello -> coordinator assign -> node ready (links up) -> plan -> start
-> node reports (and, in the free clock, probe/counters) -> stop (free clock, or to abort) ->
node done. Every message carries the run's epoch (the epoch rule, at :data:`TRANSITIONS`), and
while the run lasts the coordinator says ``beat`` every third of its lease to every node (a node
that hears none for a lease leaves the run) and ``abandon`` when the run ends. Under
``sync: barrier`` (lockstep without null frames across processes) every node
joins with a ``step-done`` before its first step and sends one after each step it did; the
coordinator, the barrier's leader, answers the nodes due next with ``go`` (the step, and the ports
whose frames of the step before they must read), and every node with the run's last step at the
end. ``error`` (a bad message the node could not use) may come in any phase. Setting
names are the coordinator's RunSettings names all the way down (``buffer``, ``out_buffer``).
"""

from __future__ import annotations

import enum
import functools
import math
import secrets
from collections.abc import Callable, Mapping
from dataclasses import MISSING, dataclass, field, fields
from typing import Any, ClassVar, Final, get_args, get_type_hints

import msgpack

from node import defaults
from node.choices import Sync
from node.settings import INT64, NodeSettings, Setting, number
from node.topology import PORTS, Coord, Topology
from node.transport.linkmodel import LinkModel
from node.transport.wire import MAX_FRAME, PROTOCOL_VERSION, tel_values

__all__ = [
    "PROTOCOL_VERSION",
    "REJECTED",
    "TO_COORDINATOR",
    "TO_NODE",
    "TRANSITIONS",
    "Abandon",
    "Assign",
    "Assignment",
    "Beat",
    "BrokerBack",
    "BrokerLost",
    "Counters",
    "Done",
    "Error",
    "Event",
    "Go",
    "Hello",
    "NodeAborted",
    "Phase",
    "PlanMessage",
    "Probe",
    "ProtocolError",
    "Ready",
    "Report",
    "Start",
    "StepDone",
    "Stop",
    "advance",
    "decode",
    "decode_settings",
    "decode_stamped",
    "encode",
    "new_epoch",
    "optional_text",
    "same_run",
    "settings_wire",
    "stamp",
    "unpack",
]


class ProtocolError(Exception):
    """A control message that is malformed or out of order, with its cause."""


# -- field checkers: each takes the decoded msgpack value and returns the typed one or raises --------
Check = Callable[[Any], Any]


def _fail(what: str, v: Any) -> ProtocolError:
    return ProtocolError(f"{what}, got {v!r:.60}")


def _int(v: Any) -> int:
    if type(v) is not int:
        raise _fail("expected an integer", v)
    return v


def _opt_int(v: Any) -> int | None:
    return None if v is None else _int(v)


def _nat(v: Any) -> int:
    if type(v) is not int or v < 0:
        raise _fail("expected a non-negative integer", v)
    return v


def _opt_nat(v: Any) -> int | None:
    return None if v is None else _nat(v)


def _port(v: Any) -> str:
    if v not in PORTS:
        raise _fail(f"expected a port ({', '.join(PORTS)})", v)
    return str(v)


def _ports(v: Any) -> tuple[str, ...]:
    ports = tuple(_port(x) for x in _array(v))
    if len(set(ports)) != len(ports):
        raise _fail("expected distinct ports", v)
    return ports


def _float(v: Any) -> float:
    if type(v) not in (int, float):
        raise _fail("expected a number", v)
    return float(v)


def _settle(v: Any) -> float:
    x = _float(v)
    if not 0.0 <= x <= 60.0:
        raise _fail("expected seconds from 0 to 60", v)
    return x


def _str(v: Any) -> str:
    if not isinstance(v, str):
        raise _fail("expected a string", v)
    return v


def optional_text(v: Any) -> str | None:
    """The wire check of a text that may be absent (None)."""
    return None if v is None else _str(v)


def _bool(v: Any) -> bool:
    if not isinstance(v, bool):
        raise _fail("expected true or false", v)
    return v


def _coord(v: Any) -> Coord:
    if not (isinstance(v, (list, tuple)) and len(v) == 2):
        raise _fail("expected a node [x, y]", v)
    return (_int(v[0]), _int(v[1]))


def _map(v: Any) -> dict[str, Any]:
    if not isinstance(v, dict) or not all(isinstance(k, str) for k in v):
        raise _fail("expected a map with string keys", v)
    return dict(v)


def _int_map(v: Any) -> dict[str, int]:
    return {k: _int(x) for k, x in _map(v).items()}


def _array(v: Any) -> list[Any]:
    return list(_as_array(v))


def _as_array(v: Any) -> list[Any] | tuple[Any, ...]:
    """``v`` itself if it is an array (a list, as msgpack decodes, or a tuple), without a copy."""
    if not isinstance(v, (list, tuple)):
        raise _fail("expected an array", v)
    return v


def _tuple_of(*checks: Check) -> Check:
    n = len(checks)

    def check(v: Any) -> tuple[Any, ...]:
        if len(_as_array(v)) != n:
            raise _fail(f"expected {n} elements", v)
        return tuple([c(x) for c, x in zip(checks, v, strict=True)])

    return check


def _int_row(width: int, last_optional: bool = False) -> Check:
    """:func:`_tuple_of` for rows of ``width`` integers (the last may be None): the bulk of reports.

    Checked in one pass over the row, without a call per element: a report carries a row per
    delivery, and these checks ran as often as the packets' own hops.
    """
    fixed = width - 1 if last_optional else width

    def check(v: Any) -> tuple[int | None, ...]:
        if len(_as_array(v)) != width:
            raise _fail(f"expected {width} elements", v)
        for i in range(fixed):
            if type(v[i]) is not int:
                raise _fail("expected an integer", v[i])
        if last_optional and v[fixed] is not None and type(v[fixed]) is not int:
            raise _fail("expected an integer", v[fixed])
        return tuple(v)

    return check


_five = _int_row(5, last_optional=True)


def _arrival_row(v: Any) -> tuple[Any, ...]:
    """A report's delivery row: five integers (the last may be None), then optionally its telemetry."""
    if len(_as_array(v)) != 6:
        return _five(v)
    row = _five(v[:5])
    if type(v[5]) is not bytes:
        raise _fail("expected telemetry bytes", v[5])
    try:
        return (*row, tel_values(v[5]))
    except ValueError as exc:
        raise _fail(str(exc), len(v[5])) from None


def _traffic(v: Any) -> tuple[int, ...]:
    """A ``done``'s traffic, flat: ``[mc, sends, ports, mc, sends, ports, ...]``, ``ports`` a port
    set as an int (:data:`node.topology.PORT_BITS`). A node of a large sweep chunk forwards
    hundreds of thousands of multicasts: one array of ints, checked without a call per element,
    not an array (and an array of port names) per multicast."""
    if len(_as_array(v)) % 3:
        raise _fail("expected a multiple of 3 elements (multicast, sends, ports)", len(v))
    for x in v:
        if type(x) is not int or x < 0:
            raise _fail("expected an integer >= 0", x)
    for i in range(2, len(v), 3):
        if v[i] > 15:
            raise _fail("expected a port set (0-15)", v[i])
    return tuple(v)


def _worm_run(v: Any) -> tuple[int, int, int, int, str, str, int, int]:
    """A ``done``'s wormhole flit run: (multicast, worm x, worm y, worm n, input, output, first
    step, count): ``count`` flits of the worm that came in on the input port (``inj``: injected
    here) left the node on the output port (``ej``: to its processor) in consecutive steps from
    ``first`` on."""
    if len(_as_array(v)) != 8:
        raise _fail("expected 8 elements (multicast, worm x, worm y, worm n, input, output, first, count)", v)
    for i in (0, 1, 2, 3, 6, 7):
        if type(v[i]) is not int or v[i] < 0:
            raise _fail("expected an integer >= 0", v[i])
    if v[4] not in PORTS and v[4] != "inj":
        raise _fail(f"expected an input port ({', '.join(PORTS)}) or inj", v[4])
    if v[5] not in PORTS and v[5] != "ej":
        raise _fail(f"expected an output port ({', '.join(PORTS)}) or ej", v[5])
    if v[7] < 1:
        raise _fail("expected a run of at least 1 flit", v[7])
    return (v[0], v[1], v[2], v[3], str(v[4]), str(v[5]), v[6], v[7])


def _seq(item: Check) -> Check:
    def check(v: Any) -> tuple[Any, ...]:
        return tuple([item(x) for x in _as_array(v)])

    return check


def _opt(check: Check) -> Check:
    def opt(v: Any) -> Any:
        return None if v is None else check(v)

    return opt


def _any(v: Any) -> Any:
    return v


def _plain(v: Any) -> Any:
    """Tuples (and enums) as msgpack-ready values."""
    if isinstance(v, enum.Enum):
        return v.value
    if isinstance(v, tuple):
        return [_plain(x) for x in v]
    if isinstance(v, dict):
        return {k: _plain(x) for k, x in v.items()}
    return v


def _choice(choices: tuple[str, ...]) -> Check:
    def check(v: Any) -> str:
        if v not in choices:
            raise _fail(f"expected one of {', '.join(choices)}", v)
        return str(v)

    return check


def _setting_check(f: Any, hints: Mapping[str, Any]) -> Check:
    """The wire check of a :class:`node.settings.NodeSettings` field, from its type and its
    setting's range and choices: a node takes only values the command line could have given."""
    s: Setting = f.metadata["setting"]
    hint = hints[f.name]
    optional = type(None) in get_args(hint)
    base = next((t for t in (get_args(hint) or (hint,)) if t is not type(None)), hint)
    check: Check
    if base is bool:
        check = _bool
    elif base is int:
        low, high = s.low, s.high

        def check(v: Any) -> int:
            if type(v) is not int or (low is not None and v < low) or (high is not None and v > high):
                raise _fail(f"expected an integer from {number(low or 0)} to {number(high or INT64)}", v)
            return v

    elif base is float:
        flow, fhigh = s.low, s.high

        def check(v: Any) -> float:
            x = _float(v)
            if not math.isfinite(x) or (flow is not None and x < flow) or (fhigh is not None and x > fhigh):
                raise _fail(f"expected a number from {number(flow or 0)} to {number(fhigh or INT64)}", v)
            return x

    elif base is str:
        check = _choice(s.choices) if s.choices else _str
    else:
        raise TypeError(f"setting {f.name!r} of type {hint!r} has no wire form")
    return _opt(check) if optional else check


def decode_settings(cls: Any, obj: object, what: str = "settings") -> dict[str, Any]:
    """The fields of settings class ``cls`` in ``obj`` (a map by field name, as ``to_wire`` makes
    it; a field left out keeps its default), each checked as ``assign`` checks it: a setting from
    its type, range and choices, another field by its ``check`` metadata. ProtocolError naming
    ``what`` and the field for anything else (an unknown name, a value out of range)."""
    if not isinstance(obj, Mapping):
        raise ProtocolError(f"{what}: expected a map of settings, got {obj!r:.60}")
    hints = get_type_hints(cls)
    checks = {f.name: f.metadata.get("check") or _setting_check(f, hints) for f in fields(cls)}
    unknown = sorted(str(k) for k in obj if k not in checks)
    if unknown:
        raise ProtocolError(f"{what}: unknown setting {unknown[0]!r}")
    out: dict[str, Any] = {}
    for name, value in obj.items():
        try:
            out[name] = checks[name](value)
        except ProtocolError as exc:
            raise ProtocolError(f"{what}.{name}: {exc}") from None
    return out


def settings_wire(s: Any, *, changed: bool = False) -> dict[str, Any]:
    """Settings ``s`` as plain data by field name (``changed``: only those that differ from their
    defaults); a field whose value has a ``to_wire`` (the link model) as that."""
    out: dict[str, Any] = {}
    for f in fields(s):
        v = getattr(s, f.name)
        if changed and v == f.default:
            continue
        out[f.name] = v.to_wire() if hasattr(v, "to_wire") else _plain(v)
    return out


_FIELDS: dict[str, tuple[tuple[str, Check, bool], ...]] = {}


def _fields_of(cls: Any) -> tuple[tuple[str, Check, bool], ...]:
    """Each field of an event class: name, check, and whether it may be absent (has a default).

    Kept per type (``dataclasses.fields`` builds its answer anew on every call).
    """
    got = _FIELDS.get(cls.TYPE)
    if got is None:
        hints = get_type_hints(cls) if issubclass(cls, NodeSettings) else {}
        got = _FIELDS[cls.TYPE] = tuple(
            (
                f.name,
                f.metadata["check"] if "check" in f.metadata else _setting_check(f, hints),
                f.default is not MISSING or f.default_factory is not MISSING,
            )
            for f in fields(cls)
        )
    return got


class _Event:
    """Base of every control event: its wire ``type`` and the generic field-by-field codec."""

    TYPE: ClassVar[str]
    __slots__ = ()

    def to_wire(self) -> dict[str, Any]:
        """The event as plain msgpack-ready values (tuples as lists, enums as their values)."""
        return {k: _plain(v) for k, v in self._wire_map().items()}

    def _wire_map(self) -> dict[str, Any]:
        """The wire map with the field values as they are (msgpack packs tuples as arrays)."""
        out: dict[str, Any] = {"type": self.TYPE}
        for name, _, _ in _fields_of(type(self)):
            out[name] = getattr(self, name)
        return out

    @classmethod
    def from_wire(cls, obj: Mapping[str, Any]) -> Any:
        kwargs: dict[str, Any] = {}
        for name, check, optional in _fields_of(cls):
            if name not in obj:
                if optional:
                    continue
                raise ProtocolError(f"{cls.TYPE}: missing field {name!r}")
            try:
                kwargs[name] = check(obj[name])
            except ProtocolError as exc:
                raise ProtocolError(f"{cls.TYPE}.{name}: {exc}") from None
        return cls(**kwargs)


# -- node -> coordinator --------------------------------------------------------------------------
@dataclass(frozen=True, slots=True)
class Hello(_Event):
    """A node is up: its coordinates, host name and the algorithms it can run (built-in and
    plug-ins), so a run that needs one it lacks is refused before it starts."""

    TYPE: ClassVar[str] = "hello"
    node: Coord = field(metadata={"check": _coord})
    host: str = field(metadata={"check": _str}, default="")
    algorithms: tuple[str, ...] | None = field(metadata={"check": _opt(_seq(_str))}, default=None)
    version: int = field(metadata={"check": _int}, default=PROTOCOL_VERSION)
    """The node's protocol version (a hello without one is version 1's): another is refused."""

    @classmethod
    def from_wire(cls, obj: Mapping[str, Any]) -> Any:
        if "version" not in obj:  # said by a node from before versions
            obj = {**obj, "version": 1}
        return _Event.from_wire.__func__(cls, obj)  # type: ignore[attr-defined]


@dataclass(frozen=True, slots=True)
class Ready(_Event):
    """A node's links are up: it waits for its plan."""

    TYPE: ClassVar[str] = "ready"
    node: Coord = field(metadata={"check": _coord})


Arrivals = tuple[tuple[Any, ...], ...]
"""Deliveries: (multicast, step, hops, start-ups, wall-clock ns or None)."""
Errors = tuple[tuple[str, str, int | None], ...]
"""Node errors: (kind, cause, multicast or None)."""


@dataclass(frozen=True, slots=True)
class Report(_Event):
    """Deliveries and errors a node gathered since its last report."""

    TYPE: ClassVar[str] = "report"
    node: Coord = field(metadata={"check": _coord})
    arrivals: Arrivals = field(metadata={"check": _seq(_arrival_row)}, default=())
    """Per delivery ``(mc, step, hops, startups, wall_ns)``, and with the free clock's telemetry a
    sixth element: the path's ``(node, receive ns, send ns)`` triples, flat, then this node's id and
    receive ns (:class:`node.switching.engine.Delivery`)."""
    errors: Errors = field(metadata={"check": _seq(_tuple_of(_str, _str, _opt_int))}, default=())


@dataclass(frozen=True, slots=True)
class Error(_Event):
    """A node could not use a message (before it has an engine to report through)."""

    TYPE: ClassVar[str] = "error"
    node: Coord = field(metadata={"check": _coord})
    cause: str = field(metadata={"check": _str})


@dataclass(frozen=True, slots=True)
class Counters(_Event):
    """Free clock: a node's answer to a probe."""

    TYPE: ClassVar[str] = "counters"
    node: Coord = field(metadata={"check": _coord})
    probe: int = field(metadata={"check": _int})
    sent: int = field(metadata={"check": _int})
    received: int = field(metadata={"check": _int})
    errors: int = field(metadata={"check": _int}, default=0)


@dataclass(frozen=True, slots=True)
class Done(_Event):
    """A node's final report: its status (``ok``, or why it stopped; ``lost: ...``) and statistics."""

    TYPE: ClassVar[str] = "done"
    node: Coord = field(metadata={"check": _coord})
    status: str = field(metadata={"check": _str}, default="ok")
    host: str = field(metadata={"check": _str}, default="")
    last_step: int = field(metadata={"check": _int}, default=0)
    traffic: tuple[int, ...] = field(metadata={"check": _traffic}, default=())
    """(multicast, sends, port set) per multicast the node forwarded, flat (see :func:`_traffic`)."""
    trace: tuple[tuple[int, str, int], ...] = field(
        metadata={"check": _seq(_tuple_of(_int, _str, _int))}, default=()
    )
    injected: tuple[tuple[int, int], ...] = field(metadata={"check": _seq(_int_row(2))}, default=())
    sent: int = field(metadata={"check": _int}, default=0)
    received: int = field(metadata={"check": _int}, default=0)
    peak_queue: int = field(metadata={"check": _int}, default=0)
    peak_in: int = field(metadata={"check": _int}, default=0)
    peak_out: int = field(metadata={"check": _int}, default=0)
    mean_occupancy: float = field(metadata={"check": _float}, default=0.0)
    dropped: int = field(metadata={"check": _int}, default=0)
    copies: int = field(metadata={"check": _int}, default=0)
    """Packet copies the node made (outputs beyond the first of each packet it took in)."""
    link_sends: dict[str, int] = field(metadata={"check": _int_map}, default_factory=dict)
    protocol_errors: int = field(metadata={"check": _int}, default=0)
    stale: int = field(metadata={"check": _int}, default=0)
    """Control messages of other runs (another epoch) the node dropped."""
    delivered: int | None = field(metadata={"check": _opt(_int)}, default=None)
    """Deliveries the node recorded over the run: more than its reports carried means some were lost."""
    worms: tuple[tuple[int, int, int, int, str, str, int, int], ...] = field(
        metadata={"check": _seq(_worm_run)}, default=()
    )
    """Wormhole switching with ``trace``: the runs of flits each worm moved here (see :func:`_worm_run`)."""

    @property
    def lost(self) -> bool:
        """The coordinator's side declared this node lost (it sent no final report of its own)."""
        return self.status.startswith("lost:")


@dataclass(frozen=True, slots=True)
class StepDone(_Event):
    """Barrier sync: a node did ``step`` (None: it joins, before its first step).

    What :meth:`node.sync.barrier.RemoteBarrier.done` takes from a node's clock: whether the step was
    busy, the next step at which it has work of its own, and the ports it sent a non-empty
    frame on at this step (the coordinator wakes those neighbours at the next step).
    """

    TYPE: ClassVar[str] = "step-done"
    node: Coord = field(metadata={"check": _coord})
    step: int | None = field(metadata={"check": _opt_nat}, default=None)
    busy: bool = field(metadata={"check": _bool}, default=False)
    next_work: int | None = field(metadata={"check": _opt_nat}, default=None)
    sent: tuple[str, ...] = field(metadata={"check": _ports}, default=())


# -- coordinator -> node --------------------------------------------------------------------------
@dataclass(frozen=True, slots=True, kw_only=True)
class Assign(NodeSettings, _Event):
    """What the coordinator tells a node before it opens its links: the run's node settings
    (:class:`node.settings.NodeSettings`, by their names) and the session's own fields below."""

    TYPE: ClassVar[str] = "assign"
    run: str = field(metadata={"check": _str})
    topology: str = field(metadata={"check": _str})
    node: Coord = field(metadata={"check": _coord})
    token: str = field(metadata={"check": _str}, default="")
    peers: dict[str, Any] = field(metadata={"check": _map}, default_factory=dict)
    sync: str = field(metadata={"check": _choice(defaults.SYNCS)}, default=Sync.ALPHA)
    """Lockstep: ``alpha`` (null frames on every link every step) or ``barrier`` (step-done/go)."""
    links: dict[str, Any] = field(metadata={"check": _map}, default_factory=dict)
    """The link model (:meth:`node.transport.linkmodel.LinkModel.to_wire`); empty: links without behaviour."""


PlanEntry = tuple[int, str, Coord, tuple[Coord, ...], int, dict[str, Any]]
"""One injection: (multicast, algorithm, source, destinations, step, parameters)."""


def _params(v: Any) -> dict[str, Any]:
    return {} if v is None else _map(v)


@dataclass(frozen=True, slots=True)
class PlanMessage(_Event):
    """The injections a node sources, and the step of the run's last injection."""

    TYPE: ClassVar[str] = "plan"
    last_step: int = field(metadata={"check": _int}, default=0)
    multicasts: tuple[PlanEntry, ...] = field(
        metadata={"check": _seq(_tuple_of(_int, _str, _coord, _seq(_coord), _int, _params))}, default=()
    )


@dataclass(frozen=True, slots=True)
class Start(_Event):
    """Every node is ready: step 0 begins."""

    TYPE: ClassVar[str] = "start"
    settle: float = field(metadata={"check": _settle}, default=0.0)
    """Free clock: seconds the sources wait before injecting, so that every node across processes
    has taken this start in (and is idle) when the first packet is on its way."""


@dataclass(frozen=True, slots=True)
class Probe(_Event):
    """Free clock: report your counters (numbered, so answers match their probe)."""

    TYPE: ClassVar[str] = "probe"
    probe: int = field(metadata={"check": _int})


@dataclass(frozen=True, slots=True)
class Stop(_Event):
    """Stop now and send your final report."""

    TYPE: ClassVar[str] = "stop"


@dataclass(frozen=True, slots=True)
class Go(_Event):
    """Barrier sync: do ``step``, reading first the frames of ``step - 1`` on the ports ``expect``;
    ``step`` None: the run is over, its last step is ``end`` (count the idle steps up to it).
    A go for the step the node just did, or with neither step nor end, asks it for its last
    step-done again (the coordinator lost it: a broker restart)."""

    TYPE: ClassVar[str] = "go"
    step: int | None = field(metadata={"check": _opt_nat}, default=None)
    expect: tuple[str, ...] = field(metadata={"check": _ports}, default=())
    end: int | None = field(metadata={"check": _opt_nat}, default=None)


# -- the coordinator's presence (outside the phase table: on its own topic, for every node) -----
@dataclass(frozen=True, slots=True)
class Beat(_Event):
    """The coordinator of the run whose epoch the message carries is alive (sent every third of
    its lease while the run lasts): a node that hears none for ``lease`` seconds leaves the run."""

    TYPE: ClassVar[str] = "beat"
    lease: float = field(metadata={"check": _float})


@dataclass(frozen=True, slots=True)
class Abandon(_Event):
    """The run of the message's epoch is over (ended, or interrupted): a node still in it leaves
    at once (a coordinator that died says nothing: its lease ends the run)."""

    TYPE: ClassVar[str] = "abandon"
    cause: str = field(metadata={"check": _str}, default="")


# -- the coordinator's own bus --------------------------------------------------------------------
@dataclass(frozen=True, slots=True)
class BrokerLost(_Event):
    """The coordinator's control bus lost its broker (put in its inbox by the bus, not a node)."""

    TYPE: ClassVar[str] = "broker-lost"
    broker: str = field(metadata={"check": _str})
    cause: str = field(metadata={"check": _str})


@dataclass(frozen=True, slots=True)
class BrokerBack(_Event):
    """The coordinator's control bus is connected to its broker again."""

    TYPE: ClassVar[str] = "broker-back"
    broker: str = field(metadata={"check": _str})


Event = (
    Hello | Ready | Report | Error | Counters | Done | StepDone | Assign | PlanMessage | Start | Probe | Stop
    | Go | BrokerLost | BrokerBack | Beat | Abandon
)  # fmt: skip

_TYPES: Final[dict[str, type[_Event]]] = {
    c.TYPE: c
    for c in (
        Hello,
        Ready,
        Report,
        Error,
        Counters,
        Done,
        StepDone,
        Assign,
        PlanMessage,
        Start,
        Probe,
        Stop,
        Go,
        BrokerLost,
        BrokerBack,
        Beat,
        Abandon,
    )
}


def _enum_value(v: Any) -> Any:
    if isinstance(v, enum.Enum):
        return v.value
    raise TypeError(f"cannot encode {type(v).__name__} in a control message")


def new_epoch() -> int:
    """A fresh run epoch: a random non-zero 63-bit integer (msgpack's int64; 0 means unstated)."""
    return secrets.randbits(63) or 1


def same_run(mine: int, stated: int) -> bool:
    """The epoch rule: a message belongs to my run unless both epochs are known and differ (0 is
    unstated: a message of an in-memory test bus, or mine before I learnt my run's epoch)."""
    return not (mine and stated and mine != stated)


def encode(event: Event, epoch: int = 0) -> bytes:
    """The msgpack bytes of ``event``, stamped with the run's ``epoch`` (0: unstated); without an
    epoch, the same bytes as packing :meth:`to_wire`."""
    wire = event._wire_map()
    if epoch:
        wire["epoch"] = epoch
    return msgpack.packb(wire, use_bin_type=True, default=_enum_value)


def decode(data: bytes) -> Event:
    """The event in ``data``; raises :class:`ProtocolError` naming why it is not one."""
    return decode_stamped(data)[0]


def decode_stamped(data: bytes) -> tuple[Event, int]:
    """The event in ``data`` and the epoch it carries (0: none); :class:`ProtocolError` naming why
    it is not one."""
    if not isinstance(data, (bytes, bytearray, memoryview)):
        raise ProtocolError(f"control message must be bytes, got {type(data).__name__}")
    if len(data) > MAX_FRAME:
        raise ProtocolError(f"control message of {len(data)} bytes exceeds the limit of {MAX_FRAME}")
    try:
        obj = msgpack.unpackb(data, raw=False, strict_map_key=True, use_list=True)
    except Exception as exc:  # msgpack raises several unrelated types for garbage
        raise ProtocolError(f"not msgpack ({type(exc).__name__}: {exc})") from None
    if not isinstance(obj, dict) or not isinstance(obj.get("type"), str):
        raise ProtocolError(f"control message must be a map with a 'type', got {obj!r:.60}")
    cls = _TYPES.get(obj["type"])
    if cls is None:
        raise ProtocolError(f"unknown control message type {obj['type']!r:.40}")
    epoch = obj.get("epoch", 0)
    if type(epoch) is not int or not 0 <= epoch <= 2**63 - 1:
        raise ProtocolError(f"{obj['type']}: epoch: expected an integer from 0 to 2^63-1, got {epoch!r:.40}")
    event: Event = cls.from_wire(obj)
    return event, epoch


Stamped = tuple[Event, int]
"""An event and its run's epoch as it goes between tasks of one process, without the codec."""


def stamp(event: Event, epoch: int = 0) -> Stamped:
    """:func:`encode`'s in-process twin: ``event`` and ``epoch`` as the receiver would decode them,
    without msgpack (at 262,144 nodes the round trips of their control messages cost as much CPU
    as the rest of their set-up). The same frozen event, but for the one field the decoder
    converts rather than checks: a report's telemetry bytes become integers (:func:`_arrival_row`)."""
    if isinstance(event, Report) and any(len(row) == 6 for row in event.arrivals):
        event = Report.from_wire(event._wire_map())
    return (event, epoch)


def unpack(data: bytes | Stamped) -> tuple[Event, int]:
    """:func:`decode_stamped` for bytes; an in-process :func:`stamp` as it is."""
    if type(data) is tuple:
        return data
    return decode_stamped(data)  # type: ignore[arg-type]


# -- the phase table ------------------------------------------------------------------------------
class Phase(enum.StrEnum):
    """Where one node's conversation with the coordinator is (the same on both sides)."""

    NEW = "new"  # nothing said yet
    HELLO = "hello"  # the node said hello; it waits for its assignment
    ASSIGNED = "assigned"  # it has its assignment and opens its links
    READY = "ready"  # links up; it waits for the plan
    PLANNED = "planned"  # it has its plan; it waits for start
    RUNNING = "running"
    STOPPING = "stopping"  # told to stop; its final report is due
    DONE = "done"


_P = Phase
_LIVE: Final = (_P.NEW, _P.HELLO, _P.ASSIGNED, _P.READY, _P.PLANNED, _P.RUNNING, _P.STOPPING)
TRANSITIONS: Final[dict[tuple[Phase, str], Phase]] = {
    (_P.NEW, "hello"): _P.HELLO,
    (_P.HELLO, "assign"): _P.ASSIGNED,
    (_P.ASSIGNED, "ready"): _P.READY,
    (_P.READY, "plan"): _P.PLANNED,
    (_P.PLANNED, "start"): _P.RUNNING,
    (_P.RUNNING, "probe"): _P.RUNNING,
    (_P.RUNNING, "counters"): _P.RUNNING,
    # barrier sync: step-done and go while running; either may cross a stop, a go a final report
    (_P.RUNNING, "step-done"): _P.RUNNING,
    (_P.RUNNING, "go"): _P.RUNNING,
    (_P.STOPPING, "step-done"): _P.STOPPING,
    (_P.STOPPING, "go"): _P.STOPPING,
    (_P.DONE, "go"): _P.DONE,
    # a node reports whatever it gathered, from its assignment on (link errors, bad plan entries)
    **{(p, "report"): p for p in (_P.ASSIGNED, _P.READY, _P.PLANNED, _P.RUNNING, _P.STOPPING)},
    # a bad message may be reported at any time; a stop or a final report may come in any phase
    **{(p, "error"): p for p in _LIVE},
    **{(p, "stop"): _P.STOPPING for p in _LIVE},
    **{(p, "done"): _P.DONE for p in _LIVE},
    # a stop broadcast can cross a node's final report
    (_P.DONE, "stop"): _P.DONE,
    (_P.DONE, "probe"): _P.DONE,
    (_P.STOPPING, "probe"): _P.STOPPING,
}
"""(phase, message type) -> next phase; any pair missing here is a protocol error.

The epoch rule comes before the table: every control message carries its run's epoch (made by the
coordinator's session, new for every run), and a message whose epoch is not the receiver's run's
(:func:`same_run`) is dropped and counted (a node's ``done.stale``), never looked up here: a
message of a run that ended cannot move a conversation of the next one. ``beat`` and ``abandon``
are outside the table too (the coordinator's presence, said to every node at once)."""


REJECTED: Final = "rejected"
"""The error kind of a link connection refused before it authenticated (:mod:`node.transport.tcp`):
counted apart from the run's errors, since a stranger cannot fail a run."""
TO_NODE: Final = frozenset({"assign", "plan", "start", "probe", "stop", "go"})
"""Message types a node accepts; the others only ever go to the coordinator."""
TO_COORDINATOR: Final = frozenset({"hello", "ready", "report", "error", "counters", "done", "step-done"})
"""Message types the coordinator accepts from a node."""


def advance(phase: Phase, event: Event | str) -> Phase:
    """The phase after ``event`` (or message type) in ``phase``; :class:`ProtocolError` if out of order."""
    kind = event if isinstance(event, str) else event.TYPE
    nxt = TRANSITIONS.get((phase, kind))
    if nxt is None:
        raise ProtocolError(f"unexpected {kind!r} while {phase.value}")
    return nxt


class NodeAborted(Exception):
    """The run cannot go on at this node (a link died, a protocol step never came)."""


@functools.lru_cache(maxsize=16)
def _topology(spec: str) -> Topology:
    """The topology ``spec`` names, one object for every node of a run (it is frozen)."""
    return Topology.parse(spec)


@dataclass(frozen=True, slots=True)
class Assignment:
    """What the coordinator tells a node before it opens its links (an ``assign``, checked)."""

    run_id: str
    topology: Topology
    here: Coord
    token: str
    peers: dict[str, Any]
    settings: NodeSettings
    """The run's node settings, by the coordinator's names (the engine is built from them)."""
    sync: str = Sync.ALPHA
    link_model: LinkModel | None = None
    """Free clock: how each link delays its frames (None: as fast as the host moves them)."""
    epoch: int = 0
    """The run's epoch (0: unstated): link hellos carry it, and those of another run are refused."""

    @classmethod
    def from_event(cls, msg: Assign, epoch: int = 0) -> Assignment:
        """The assignment in ``msg``; NodeAborted naming the cause if it does not fit."""
        try:
            topo = _topology(msg.topology)
            here = topo.check(msg.node, "assigned node")
        except ValueError as exc:
            raise NodeAborted(f"bad assignment: {type(exc).__name__}: {exc}") from None
        model = None
        if msg.links:
            try:
                model = LinkModel.from_wire(msg.links)
                model.check(topo)
            except ValueError as exc:
                raise NodeAborted(f"bad assignment: {exc}") from None
        return cls(
            msg.run, topo, here, msg.token, dict(msg.peers), msg, msg.sync,
            None if model is None or model.idle else model, epoch,
        )  # fmt: skip
