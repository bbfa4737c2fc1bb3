"""msgpack frames on links and control messages, decoded strictly.

Link frames are msgpack arrays tagged by their first element:

* ``["S", step, last_busy, [item, ...], freed]`` — lockstep: one per link per step (maybe
  empty); ``freed`` returns credits (bounded input buffers, or flit buffers under wormhole
  switching: a count, or with ``--vcs`` above 1 a list of counts per virtual channel); an
  item is a packet (store-and-forward) or a flit (wormhole, :class:`Flit`);
* ``["P", packet]`` — free clock: one data packet;
* ``["H", token, [x, y]]`` — the first frame of a TCP link: who is calling, for which run.

A packet is ``[mc, algorithm, header, hops, startups, sent_step]``, with, under the free clock's
per-hop telemetry, a seventh element: bytes holding ``node, received ns, sent ns`` per node it
left (:data:`TEL_HEAD` then :data:`TEL_SEND`, 20 bytes a hop; see :class:`Packet`); a flit is
``[kind, mc, [x, y, n], ...]`` (its first element a string, so the two never look alike).
Decoding never raises: it returns a frame or a :class:`WireError` naming the cause, so a bad frame from a peer
becomes a counted, reported event instead of an exception that kills the node.
"""

from __future__ import annotations

import struct
import threading
from dataclasses import dataclass
from typing import Any, Final

import msgpack

from node.topology import Coord

__all__ = [
    "KINDS",
    "MAX_FRAME",
    "MAX_HELLO",
    "MAX_TELEMETRY",
    "MAX_VCS",
    "PACKET_PREFIX",
    "PREFIX",
    "PROTOCOL_VERSION",
    "TEL_HEAD",
    "TEL_HOP",
    "TEL_SEND",
    "ByeFrame",
    "Credits",
    "Flit",
    "HelloFrame",
    "Item",
    "LinkFrame",
    "Packet",
    "PacketFrame",
    "StepFrame",
    "WireError",
    "Worm",
    "as_received",
    "check_length",
    "decode_control",
    "decode_flit",
    "decode_link",
    "encode_control",
    "encode_free",
    "encode_link",
    "encode_packet",
    "encode_step",
    "frame_bytes",
    "free_packet",
    "step_head",
    "step_packets",
    "tel_values",
]

MAX_FRAME: Final = 64 * 1024 * 1024
"""Largest frame a link or control channel accepts, in bytes (64 MiB; docs/deploy.md says the same).

A lockstep frame carries every packet sent on a link in one step; with thousands of isolated
multicasts whose headers carry subtrees, a source's first frames reach several MB, so 8 MiB
would be too close. Only an authenticated peer (run token and announced coordinates) can send
a frame this large: a stranger is held to :data:`MAX_HELLO` and refused on the declared length.
"""
PROTOCOL_VERSION: Final = 2
"""The version of meshcast's node protocols (control messages and link frames), said in every
hello: a node of another version is refused by name, not misread (2: run epochs and leases)."""
MAX_HELLO: Final = 1024
"""Largest first frame (the hello) an accepted TCP connection may declare: a hello is ~40 bytes."""
PREFIX: Final = struct.Struct(">I")
"""On TCP links each frame is preceded by its length (4 bytes, big-endian), checked before buffering."""


def frame_bytes(payload: bytes) -> bytes:
    """``payload`` with its length prefix, as it goes on a TCP link."""
    return PREFIX.pack(len(payload)) + payload


def check_length(declared: int, limit: int) -> str | None:
    """Why a frame declaring ``declared`` bytes is refused (over ``limit``), or None if it is fine."""
    if declared > limit:
        return f"frame declares {declared} bytes, over the limit of {limit}"
    return None


@dataclass(frozen=True, slots=True)
class WireError:
    """A frame that could not be decoded or validated, with its cause."""

    cause: str


class _Invalid(Exception):
    pass


def _int(v: object, what: str, lo: int = 0) -> int:
    if type(v) is not int or v < lo:
        raise _Invalid(f"{what} must be an integer >= {lo}, got {v!r:.40}")
    return v


TEL_HEAD: Final = struct.Struct("<IQ")
"""Telemetry: a node's id and the moment (monotonic ns) it received the packet."""
TEL_SEND: Final = struct.Struct("<Q")
"""Telemetry: the moment (monotonic ns) the node sent this copy on."""
TEL_HOP: Final = TEL_HEAD.size + TEL_SEND.size
MAX_TELEMETRY: Final = TEL_HOP * 65_536
"""Most telemetry bytes a packet may carry (20 a hop; no route is that long)."""


def tel_values(blob: bytes) -> tuple[int, ...]:
    """A delivery's telemetry as flat integers: ``node, receive ns, send ns`` per node the packet
    left, then the destination's ``node, receive ns``; ValueError if ``blob`` is not that shape."""
    if len(blob) % TEL_HOP != TEL_HEAD.size:
        raise ValueError(f"telemetry of {len(blob)} bytes: expected 20 a hop, then 12")
    out: list[int] = []
    end = len(blob) - TEL_HEAD.size
    for i in range(0, end, TEL_HOP):
        out += (*TEL_HEAD.unpack_from(blob, i), *TEL_SEND.unpack_from(blob, i + TEL_HEAD.size))
    out += TEL_HEAD.unpack_from(blob, end)
    return tuple(out)


def _plain(mc: object, alg: object, hops: object, startups: object, sent: object) -> bool:
    """Whether a packet's fields are well formed, in one test (every decoder of a packet-hop asks)."""
    return (
        type(mc) is int and mc >= 0 and type(alg) is str and alg != ""
        and type(hops) is int and hops >= 1 and type(startups) is int and startups >= 1
        and type(sent) is int and sent >= 0
    )  # fmt: skip


def _unpacked(data: object) -> Any:
    """``data``'s msgpack object, or None if it is not bytes within :data:`MAX_FRAME` that unpack
    (the fused readers then leave it to :func:`decode_link`, which says why)."""
    if type(data) is not bytes or len(data) > MAX_FRAME:
        return None
    try:
        return msgpack.unpackb(data, raw=False, strict_map_key=True, use_list=True)
    except Exception:  # garbage
        return None


@dataclass(slots=True)  # not frozen: a frozen dataclass's __init__ is 4x slower, paid per hop
class Packet:
    """One data packet: multicast id, algorithm, routing header, hops, start-ups, send step.

    ``tel`` (free clock, ``--telemetry``): per node the packet left, ``node id, receive ns, send
    ns`` on the host's monotonic clock (``time.monotonic_ns``), packed (:data:`TEL_HEAD`,
    :data:`TEL_SEND`): a node appends its bytes without reading the others'. The source's receive
    time is its injection. None: no telemetry (and six elements on the wire, as before it existed).
    """

    mc: int
    alg: str
    header: Any
    hops: int
    startups: int
    sent: int
    tel: bytes | None
    rx: int
    """Telemetry: when the frame came off the link at this node (monotonic ns; 0: not stamped).
    Not on the wire: the receiving node's reader sets it, before the packet waits in its inbox."""

    def __init__(
        self,
        mc: int,
        alg: str,
        header: Any,
        hops: int,
        startups: int,
        sent: int,
        tel: bytes | None = None,
    ) -> None:
        # Written out: mypyc compiles this one (the dataclass's own is interpreted, ~0.6 µs a call).
        self.mc = mc
        self.alg = alg
        self.header = header
        self.hops = hops
        self.startups = startups
        self.sent = sent
        self.tel = tel
        self.rx = 0

    def to_wire(self) -> list[Any]:
        if self.tel is None:
            return [self.mc, self.alg, self.header, self.hops, self.startups, self.sent]
        return [self.mc, self.alg, self.header, self.hops, self.startups, self.sent, self.tel]

    @classmethod
    def from_wire(cls, obj: object) -> Packet:
        if type(obj) is list and len(obj) == 6:  # the common case, checked in one expression
            mc, alg, header, hops, startups, sent = obj
            if _plain(mc, alg, hops, startups, sent):
                return Packet(mc, alg, header, hops, startups, sent)  # not cls(): the native constructor
        if not isinstance(obj, list) or len(obj) not in (6, 7):
            raise _Invalid(f"packet must be a 6- or 7-element array, got {obj!r:.60}")
        mc, alg, header, hops, startups, sent = obj[:6]
        if not isinstance(alg, str) or not alg:
            raise _Invalid(f"packet algorithm must be a non-empty string, got {alg!r:.40}")
        return Packet(
            _int(mc, "packet multicast id"),
            alg,
            header,
            _int(hops, "packet hops", 1),
            _int(startups, "packet start-ups", 1),
            _int(sent, "packet send step"),
            _telemetry(obj[6]) if len(obj) == 7 else None,
        )


def _telemetry(obj: object) -> bytes:
    """A packet's telemetry, checked: whole hops of bytes (:data:`TEL_HOP`), at most MAX_TELEMETRY."""
    if type(obj) is not bytes or len(obj) % TEL_HOP or len(obj) > MAX_TELEMETRY:
        raise _Invalid(f"packet telemetry must be {TEL_HOP} bytes a hop, got {obj!r:.60}")
    return obj


KINDS: Final = ("H", "B", "T", "W")  # head, body, tail, whole (a one-flit worm: head and tail)

Worm = tuple[int, int, int]
"""A worm's id: the node that started the message and that node's message counter."""


@dataclass(slots=True)  # not frozen: a frozen dataclass's __init__ is 4x slower, paid per hop
class Flit:
    """One flit: kind, multicast, worm; a head also carries algorithm, header, hops and start-ups."""

    kind: str
    mc: int
    worm: Worm
    alg: str = ""
    header: Any = None
    hops: int = 0
    startups: int = 0
    vc: int = 0
    """The virtual channel of the link it travels on (``--vcs``; 0, and not on the wire, with one)."""

    def __init__(
        self,
        kind: str,
        mc: int,
        worm: Worm,
        alg: str = "",
        header: Any = None,
        hops: int = 0,
        startups: int = 0,
        vc: int = 0,
    ) -> None:
        # Written out, not generated: mypyc compiles this one (see Packet.__init__).
        self.kind = kind
        self.mc = mc
        self.worm = worm
        self.alg = alg
        self.header = header
        self.hops = hops
        self.startups = startups
        self.vc = vc

    @property
    def head(self) -> bool:
        return self.kind in ("H", "W")

    @property
    def tail(self) -> bool:
        return self.kind in ("T", "W")

    def to_wire(self) -> list[Any]:
        """The msgpack-able form: ``[kind, mc, worm]``, plus ``alg, header, hops, startups`` for a head,
        plus the virtual channel when it is not 0 (so one VC keeps the wire as it was)."""
        base: list[Any] = [self.kind, self.mc, list(self.worm)]
        if self.head:
            base += [self.alg, self.header, self.hops, self.startups]
        if self.vc:
            base.append(self.vc)
        return base

    def copy_as(self, header: Any, hops: int, startups: int) -> Flit:
        """This flit as sent on one output: a head gets that output's header, others are unchanged."""
        if not self.head:
            return self
        return Flit(self.kind, self.mc, self.worm, self.alg, header, hops, startups)


def _nat(v: object, what: str, lo: int = 0) -> int:
    if type(v) is not int or v < lo:
        raise ValueError(f"{what} must be an integer >= {lo}, got {v!r:.40}")
    return v


def decode_flit(obj: object) -> Flit | WireError:
    """A flit from its wire form, or the :class:`WireError` saying why it is not one (never raises)."""
    try:
        if not isinstance(obj, list) or len(obj) < 3 or obj[0] not in KINDS:
            raise ValueError(f"flit must be [kind, mc, worm, ...], got {obj!r:.60}")
        kind, mc, worm = obj[0], obj[1], obj[2]
        if not isinstance(worm, list) or len(worm) != 3:
            raise ValueError(f"worm id must be [x, y, n], got {worm!r:.40}")
        wid = (_nat(worm[0], "worm x"), _nat(worm[1], "worm y"), _nat(worm[2], "worm number"))
        if kind in ("H", "W"):
            if len(obj) not in (7, 8) or not isinstance(obj[3], str) or not obj[3]:
                raise ValueError(
                    f"head flit must be [kind, mc, worm, alg, header, hops, startups(, vc)], got {obj!r:.60}"
                )
            return Flit(
                kind,
                _nat(mc, "flit mc"),
                wid,
                obj[3],
                obj[4],
                _nat(obj[5], "hops", 1),
                _nat(obj[6], "start-ups", 1),
                _nat(obj[7], "virtual channel") if len(obj) == 8 else 0,
            )
        if len(obj) not in (3, 4):
            raise ValueError(f"body/tail flit must be [kind, mc, worm(, vc)], got {obj!r:.60}")
        return Flit(
            kind, _nat(mc, "flit mc"), wid, vc=_nat(obj[3], "virtual channel") if len(obj) == 4 else 0
        )
    except ValueError as exc:
        return WireError(str(exc))


Item = Packet | Flit
"""What a lockstep frame carries: a packet (store-and-forward) or a flit (wormhole)."""


def _item(obj: object) -> Item:
    """A step frame's item: a flit when its first element is a kind string, else a packet."""
    if type(obj) is list and obj and type(obj[0]) is int:
        return Packet.from_wire(obj)
    if isinstance(obj, list) and obj and isinstance(obj[0], str):
        f = decode_flit(obj)
        if isinstance(f, WireError):
            raise _Invalid(f.cause)
        return f
    return Packet.from_wire(obj)


def _items(objs: list[Any]) -> tuple[Item, ...]:
    """A step frame's items: :meth:`Packet.from_wire`'s common case checked inline (every
    packet-hop of a lockstep run is decoded here), anything else by :func:`_item`."""
    items: list[Item] = []
    for obj in objs:
        if type(obj) is list and len(obj) == 6:
            mc, alg, header, hops, startups, sent = obj
            if _plain(mc, alg, hops, startups, sent):
                items.append(Packet(mc, alg, header, hops, startups, sent))
                continue
        items.append(_item(obj))
    return tuple(items)


Credits = int | tuple[int, ...]
"""Returned credits: a count (one virtual channel: the wire as before) or a count per virtual channel."""
MAX_VCS: Final = 16
"""Most virtual channels per physical channel (``--vcs``) a frame may return credits for."""


def _credits(v: object) -> Credits:
    if type(v) is list and 1 <= len(v) <= MAX_VCS:
        return tuple([_int(k, "freed count") for k in v])
    return _int(v, "freed count")


@dataclass(slots=True)  # not frozen: a frozen dataclass's __init__ is 4x slower, paid per hop
class StepFrame:
    """Lockstep: what one node sent one neighbour at ``step`` and the latest busy step it knows."""

    step: int
    last_busy: int
    packets: tuple[Item, ...]
    """What was sent: packets under store-and-forward, flits under wormhole switching."""
    freed: Credits = 0
    """Packets (flits) from this link the sender took out of its input buffer at ``step`` (credits)."""

    def __init__(self, step: int, last_busy: int, packets: tuple[Item, ...], freed: Credits = 0) -> None:
        # Written out, not generated: mypyc compiles this one (see Packet.__init__).
        self.step = step
        self.last_busy = last_busy
        self.packets = packets
        self.freed = freed


@dataclass(slots=True)  # not frozen: a frozen dataclass's __init__ is 4x slower, paid per hop
class PacketFrame:
    """Free clock: a single packet."""

    packet: Packet


@dataclass(frozen=True, slots=True)
class HelloFrame:
    """First frame on a TCP link: the run token, the caller's coordinates, the run's epoch (0:
    unstated) and the caller's protocol version (a 3-element hello is version 1's)."""

    token: str
    node: Coord
    epoch: int = 0
    version: int = PROTOCOL_VERSION


@dataclass(frozen=True, slots=True)
class ByeFrame:
    """Last frame on a link at a run's orderly end: the sender sends nothing more on it.

    A link that ends without one (end of stream, reset) was lost; one that ends after it was
    closed by the run's own end, which is never an error.
    """


LinkFrame = StepFrame | PacketFrame | HelloFrame | ByeFrame


PACKET_PREFIX: Final = b"\x92\xa1P"
"""The first bytes of every encoded free-clock packet frame (``["P", packet]``): how a link's
shaper tells a message, serialised as its L flits, from a bye."""


def encode_packet(packet: Packet) -> bytes:
    """The bytes of ``PacketFrame(packet)`` without building the frame (free clock: once per hop)."""
    if packet.tel is None:
        return _packb(
            ["P", [packet.mc, packet.alg, packet.header, packet.hops, packet.startups, packet.sent]]
        )
    return _packb(["P", packet.to_wire()])


def encode_link(frame: LinkFrame) -> bytes:
    if isinstance(frame, StepFrame):
        items = [
            [p.mc, p.alg, p.header, p.hops, p.startups, p.sent]  # Packet.to_wire's common case, inline
            if type(p) is Packet and p.tel is None
            else p.to_wire()
            for p in frame.packets
        ]
        obj: list[Any] = ["S", frame.step, frame.last_busy, items, frame.freed]
    elif isinstance(frame, PacketFrame):
        return encode_packet(frame.packet)
    elif isinstance(frame, ByeFrame):
        obj = ["B"]
    else:
        obj = ["H", frame.token, list(frame.node), frame.epoch, frame.version]
    return _packb(obj)


_local = threading.local()


def _packb(obj: Any) -> bytes:
    """msgpack bytes of ``obj`` from this thread's one Packer (``packb`` makes a Packer per call)."""
    try:
        packer: msgpack.Packer = _local.packer
    except AttributeError:
        packer = _local.packer = msgpack.Packer(use_bin_type=True)
    return packer.pack(obj)


def _unpack(data: object) -> Any:
    if type(data) is not bytes and not isinstance(data, (bytes, bytearray, memoryview)):  # bytes first: cheap
        raise _Invalid(f"frame must be bytes, got {type(data).__name__}")
    if len(data) > MAX_FRAME:
        raise _Invalid(f"frame of {len(data)} bytes exceeds the limit of {MAX_FRAME}")
    try:
        return msgpack.unpackb(data, raw=False, strict_map_key=True, use_list=True)
    except Exception as exc:  # msgpack raises several unrelated types for garbage
        raise _Invalid(f"not msgpack ({type(exc).__name__}: {exc})") from None


def as_received(obj: Any) -> Any:
    """``obj`` as the next node receives it: packed and unpacked (tuples arrive as lists)."""
    return msgpack.unpackb(msgpack.packb(obj, use_bin_type=True), raw=False)


def _decode_link(obj: Any) -> LinkFrame:
    if type(obj) is list and len(obj) == 5 and obj[0] == "S":  # a step frame, checked in one go
        _, step, busy, items, freed = obj
        if (
            type(step) is int and step >= 0 and type(busy) is int and busy >= -1
            and type(items) is list and type(freed) is int and freed >= 0
        ):  # fmt: skip
            return StepFrame(step, busy, _items(items), freed)
    if not isinstance(obj, list) or not obj:
        raise _Invalid(f"link frame must be a tagged array, got {obj!r:.60}")
    tag = obj[0]
    if tag == "S" and len(obj) in (4, 5):
        step = _int(obj[1], "step")
        busy = _int(obj[2], "last busy step", -1)
        if not isinstance(obj[3], list):
            raise _Invalid("step frame packets must be an array")
        freed = _credits(obj[4]) if len(obj) == 5 else 0
        return StepFrame(step, busy, tuple([_item(p) for p in obj[3]]), freed)
    if tag == "P" and len(obj) == 2:
        return PacketFrame(Packet.from_wire(obj[1]))
    if tag == "B" and len(obj) == 1:
        return ByeFrame()
    if tag == "H" and len(obj) in (3, 5):
        node = obj[2]
        if not (isinstance(obj[1], str) and isinstance(node, list) and len(node) == 2):
            raise _Invalid("hello frame must be ['H', token, [x, y], epoch, version]")
        if len(obj) == 3:  # version 1: no epoch, no version
            return HelloFrame(obj[1], (_int(node[0], "x"), _int(node[1], "y")), 0, 1)
        return HelloFrame(
            obj[1], (_int(node[0], "x"), _int(node[1], "y")), _int(obj[3], "epoch"), _int(obj[4], "version")
        )
    raise _Invalid(f"unknown link frame tag {tag!r:.20} with {len(obj)} fields")


def decode_link(data: object) -> LinkFrame | WireError:
    """Decode one link frame, or say why it is not one.

    ``data`` is ``object``, not ``bytes``: compiled (mypyc) code checks an annotation at the call,
    and outside input must get a :class:`WireError`, not a TypeError.
    """
    try:
        return _decode_link(_unpack(data))
    except _Invalid as exc:
        return WireError(str(exc))


def step_packets(data: object, due: int) -> tuple[int, list[tuple[int, str, Any, int, int]]] | None:
    """``data`` read as a well-formed step frame of step ``due`` whose items are all packets
    without telemetry: the frame's last busy step and each packet's multicast, algorithm,
    header, hops and start-ups, with no frame or packet made; None for anything else, which
    :func:`decode_link` then reads (and names, if it is at fault). The frame's credits are not
    read: a sparse step reads frames so only where no link has credit flow. ``data`` is ``object``:
    compiled code checks an annotation at the call (see :func:`decode_link`)."""
    obj = _unpacked(data)
    if type(obj) is not list or len(obj) != 5 or obj[0] != "S":
        return None
    _, step, busy, items, freed = obj
    if step != due or type(step) is not int or type(busy) is not int or busy < -1:
        return None
    if type(items) is not list or type(freed) is not int or freed < 0:
        return None
    packets: list[tuple[int, str, Any, int, int]] = []
    for pkt in items:
        if type(pkt) is not list or len(pkt) != 6:
            return None
        mc, alg, header, hops, startups, sent = pkt
        if not _plain(mc, alg, hops, startups, sent):
            return None
        packets.append((mc, alg, header, hops, startups))
    return busy, packets


_HEAD: list[tuple[int, bytes]] = [(-1, b"")]
"""The last :func:`step_head` made (one entry: the step barrier runs a step's nodes one after another)."""


def step_head(step: int) -> bytes:
    """The first bytes of every encoded step frame of ``step`` (``["S", step, ...``): a frame of
    another step, or of no step, does not start with them (msgpack writes an int one way only)."""
    last = _HEAD[0]
    if last[0] == step:
        return last[1]
    head = b"\x95\xa1S" + _packb(step)
    _HEAD[0] = (step, head)
    return head


def encode_step(step: int, last_busy: int, packets: list[list[Any]]) -> bytes:
    """The bytes of a step frame carrying ``packets`` (their wire lists), no credits, without the frame."""
    return _packb(["S", step, last_busy, packets, 0])


FreePacket = tuple[int, str, Any, int, int, int, bytes | None]
"""A free-clock packet frame as :func:`free_packet` reads it: the packet's multicast, algorithm,
header, hops, start-ups, send step and telemetry."""


def free_packet(data: object) -> FreePacket | None:
    """``data`` read as a well-formed free-clock packet frame (``["P", packet]``), its packet's
    fields without the frame or the packet made; None for anything else, which
    :func:`decode_link` then reads (and names, if it is at fault)."""
    obj = _unpacked(data)
    if type(obj) is not list or len(obj) != 2 or obj[0] != "P":
        return None
    pkt = obj[1]
    if type(pkt) is not list:
        return None
    n = len(pkt)
    if n == 6:
        mc, alg, header, hops, startups, sent = pkt
        tel = None
    elif n == 7:
        mc, alg, header, hops, startups, sent, tel = pkt
        if type(tel) is not bytes or len(tel) % TEL_HOP or len(tel) > MAX_TELEMETRY:
            return None
    else:
        return None
    if _plain(mc, alg, hops, startups, sent):
        return mc, alg, header, hops, startups, sent, tel
    return None


def encode_free(packet: list[Any]) -> bytes:
    """The bytes of a free-clock packet frame of ``packet`` (its wire list), without the frame."""
    return _packb(["P", packet])


def encode_control(msg: dict[str, Any]) -> bytes:
    return _packb(msg)


def decode_control(data: object) -> dict[str, Any] | WireError:
    """Decode a control message: a map with a string ``type``."""
    try:
        obj = _unpack(data)
    except _Invalid as exc:
        return WireError(str(exc))
    if not isinstance(obj, dict) or not isinstance(obj.get("type"), str):
        return WireError(f"control message must be a map with a 'type', got {obj!r:.60}")
    return obj
