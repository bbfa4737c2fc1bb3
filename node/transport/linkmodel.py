"""Link behaviour: per-frame propagation delay, jitter and serialisation rate, sans-IO.

A :class:`LinkModel` says how each directed link of a run behaves (a default, with per-node and
per-link overrides); a :class:`LinkShaper` turns it into one link direction's release times:
given when a frame was sent and its size, when it reaches the peer. The I/O shell that holds
frames until then is :mod:`node.transport.shaping`. Nothing here reads a clock or sleeps.

Semantics (one direction of one link, frame *k* of *n* bytes sent at *t*):

- serialisation: the link sends one frame at a time, at ``rate`` bits/s:
  ``done_k = max(t, done_{k-1}) + 8n / rate`` (no rate: ``done_k = t``);
- propagation: ``arrive_k = done_k + max(0, delay + jitter_k)``, ``jitter_k`` drawn afresh per
  frame from the link's own seeded generator (independent per link, per direction, per frame);
- FIFO: a frame never overtakes the one before it: ``release_k = max(arrive_k, release_{k-1})``.

Jitter distributions (``DIST:VALUE``, VALUE a duration):

- ``uniform:A``: uniform on [0, A] (mean A/2, SD A/√12);
- ``normal:SD``: zero-mean normal; the frame's delay is truncated at zero;
- ``lognormal:SD``: lognormal with mean SD and standard deviation SD (a heavy right tail);
- ``exponential:MEAN``: exponential with mean MEAN (SD MEAN).
"""

from __future__ import annotations

import math
import random
import re
import zlib
from collections.abc import Iterable, Mapping
from dataclasses import dataclass, field, fields, replace
from typing import Any

from node.choices import JitterKind, values
from node.topology import PORTS, Coord, Topology

__all__ = [
    "DISTRIBUTIONS",
    "Jitter",
    "LinkModel",
    "LinkShaper",
    "LinkSpec",
    "link_keys",
    "parse_duration",
    "parse_link_file",
    "parse_rate",
]

DISTRIBUTIONS = values(JitterKind)

_DURATION = re.compile(r"^\s*(-?[0-9]*\.?[0-9]+(?:[eE][-+]?[0-9]+)?)\s*(ns|us|µs|ms|s)?\s*$")
_DURATION_UNITS = {"ns": 1e-9, "us": 1e-6, "µs": 1e-6, "ms": 1e-3, "s": 1.0}
_RATE = re.compile(r"^\s*([0-9]*\.?[0-9]+(?:[eE][-+]?[0-9]+)?)\s*([kKMGT]?)(bit|bps|B)?(?:/s)?\s*$")
_RATE_PREFIX = {"": 1.0, "k": 1e3, "K": 1e3, "M": 1e6, "G": 1e9, "T": 1e12}


def parse_duration(text: str, what: str = "duration") -> float:
    """Seconds in ``text`` (``2ms``, ``500us``, ``1.5s``, ``250ns``; a bare number is seconds).

    ValueError naming ``what`` for anything else, for negatives, nan and infinities.
    """
    m = _DURATION.match(text)
    if m is None:
        raise ValueError(f"{what} {text!r} is not a duration such as 2ms, 500us or 0.1s")
    value = float(m.group(1)) * _DURATION_UNITS[m.group(2) or "s"]
    if not math.isfinite(value):
        raise ValueError(f"{what} {text!r} is not finite")
    if value < 0:
        raise ValueError(f"{what} {text!r} is negative: a link cannot deliver before it sends")
    return value


def parse_rate(text: str) -> float:
    """Bits per second in ``text`` (``100Mbit``, ``1Gbit``, ``10MB`` for bytes, ``5e6``)."""
    m = _RATE.match(text)
    if m is None:
        raise ValueError(f"link rate {text!r} is not a rate such as 100Mbit, 1Gbit or 10MB (bytes)")
    value = float(m.group(1)) * _RATE_PREFIX[m.group(2)] * (8.0 if m.group(3) == "B" else 1.0)
    if not math.isfinite(value) or value <= 0:
        raise ValueError(f"link rate {text!r} must be a positive, finite rate")
    return value


def _seconds(value: float) -> str:
    """``value`` seconds as the shortest exact duration text (for the model's readable form)."""
    for unit, scale in (("s", 1.0), ("ms", 1e-3), ("us", 1e-6)):
        if value >= scale or unit == "us":
            return f"{value / scale:g}{unit}"
    return f"{value:g}s"  # pragma: no cover - the loop always returns


@dataclass(frozen=True, slots=True)
class Jitter:
    """A per-frame random extra delay: ``kind`` (one of :data:`DISTRIBUTIONS`) and its value in seconds."""

    kind: str
    value: float

    def __post_init__(self) -> None:
        if self.kind not in DISTRIBUTIONS:
            raise ValueError(
                f"unknown jitter distribution {self.kind!r}: use one of {', '.join(DISTRIBUTIONS)}"
            )
        if not (math.isfinite(self.value) and self.value >= 0):
            raise ValueError(f"jitter {self.kind}:{self.value!r} must be a finite, non-negative duration")

    @classmethod
    def parse(cls, text: str) -> Jitter:
        """``uniform:1ms``, ``normal:0.5ms``, ``lognormal:200us``, ``exponential:1ms``."""
        kind, sep, value = text.partition(":")
        if not sep:
            raise ValueError(
                f"link jitter {text!r}: write DIST:VALUE, e.g. normal:0.5ms ({', '.join(DISTRIBUTIONS)})"
            )
        kind = kind.strip().lower()
        if kind not in DISTRIBUTIONS:
            raise ValueError(
                f"link jitter {text!r}: unknown distribution {kind!r} (use {', '.join(DISTRIBUTIONS)})"
            )
        return cls(kind, parse_duration(value, f"link jitter {kind}"))

    def to_wire(self) -> list[Any]:
        """``[kind, seconds]``."""
        return [str(self.kind), self.value]

    @classmethod
    def from_wire(cls, obj: object) -> Jitter:
        """The jitter of :meth:`to_wire`; ValueError for anything else."""
        if not (isinstance(obj, list | tuple) and len(obj) == 2 and isinstance(obj[0], str)):
            raise ValueError(f"link jitter must be [kind, seconds], got {obj!r:.60}")
        return cls(obj[0], _number(obj[1], "jitter"))

    def __str__(self) -> str:
        return f"{self.kind}:{_seconds(self.value)}"

    @property
    def mean(self) -> float:
        """The extra delay's mean (seconds), before truncation at zero."""
        if self.kind == JitterKind.UNIFORM:
            return self.value / 2
        return 0.0 if self.kind == JitterKind.NORMAL else self.value

    @property
    def sd(self) -> float:
        """The extra delay's standard deviation (seconds), before truncation at zero."""
        return self.value / math.sqrt(12) if self.kind == JitterKind.UNIFORM else self.value

    def sample(self, rng: random.Random) -> float:
        """One draw (seconds; may be negative for ``normal``)."""
        v = self.value
        if v == 0:
            return 0.0
        if self.kind == JitterKind.UNIFORM:
            return rng.uniform(0.0, v)
        if self.kind == JitterKind.NORMAL:
            return rng.gauss(0.0, v)
        if self.kind == JitterKind.EXPONENTIAL:
            return rng.expovariate(1.0 / v)
        sigma2 = math.log(2.0)  # lognormal with mean v and SD v: σ² = ln(1 + SD²/mean²)
        return rng.lognormvariate(math.log(v) - sigma2 / 2, math.sqrt(sigma2))


def _optional_text(parse: Any) -> Any:
    """A parser of an optional key's text: ``none`` is None (no jitter, no rate limit)."""
    return lambda text: None if text == "none" else parse(text)


def _optional_wire(decode: Any) -> Any:
    return lambda v: None if v is None else decode(v)


@dataclass(frozen=True, slots=True)
class LinkSpec:
    """One link direction's behaviour: delay and jitter in seconds, rate in bits/s (None: no limit).

    Each field is a key of the link model's every form: ``--link-KEY`` (a setting of
    ``RunSettings``), ``KEY=`` in a link file and the key on the wire. Its metadata holds how its
    text (``text``) and its wire value (``wire``) are read, so the conversions name no key."""

    delay: float = field(
        default=0.0,
        metadata={"text": lambda v: parse_duration(v, "link delay"), "wire": lambda v: _number(v, "delay")},
    )
    jitter: Jitter | None = field(
        default=None,
        metadata={"text": _optional_text(Jitter.parse), "wire": _optional_wire(Jitter.from_wire)},
    )
    rate: float | None = field(
        default=None,
        metadata={"text": _optional_text(parse_rate), "wire": _optional_wire(lambda v: _number(v, "rate"))},
    )

    def __post_init__(self) -> None:
        if not (math.isfinite(self.delay) and self.delay >= 0):
            raise ValueError(f"link delay {self.delay!r} must be a finite, non-negative duration")
        if self.rate is not None and not (math.isfinite(self.rate) and self.rate > 0):
            raise ValueError(f"link rate {self.rate!r} must be a positive, finite rate")

    def hop_moments(self, message_bytes: int) -> tuple[float, float]:
        """The mean and SD (seconds) of one hop's time for a message of ``message_bytes`` sent on
        an idle link, exactly as :class:`LinkShaper` draws it: the serialisation ``8n / rate``
        plus ``max(0, delay + jitter)``. Only the normal reaches below zero, so only it is
        clamped: with Z ~ N(d, σ²) and a = d/σ, E[max(0, Z)] = d·Φ(a) + σ·φ(a) and
        E[max(0, Z)²] = (d² + σ²)·Φ(a) + d·σ·φ(a). The others are non-negative: d plus the
        jitter's own mean, and its SD.
        """
        serial = 8.0 * message_bytes / self.rate if self.rate is not None else 0.0
        j, d = self.jitter, self.delay
        if j is None or j.value == 0:
            return serial + d, 0.0
        if j.kind != "normal":
            return serial + d + j.mean, j.sd
        sigma = j.value
        a = d / sigma
        cdf = 0.5 * math.erfc(-a / math.sqrt(2.0))
        pdf = math.exp(-a * a / 2.0) / math.sqrt(2.0 * math.pi)
        mean = d * cdf + sigma * pdf
        second = (d * d + sigma * sigma) * cdf + d * sigma * pdf
        return serial + mean, math.sqrt(max(0.0, second - mean * mean))

    def dilated(self, k: float) -> LinkSpec:
        """This link ``k`` times slower: delay and jitter times ``k``, rate over ``k``."""
        jitter = None if self.jitter is None else Jitter(self.jitter.kind, self.jitter.value * k)
        return LinkSpec(self.delay * k, jitter, None if self.rate is None else self.rate / k)

    @property
    def idle(self) -> bool:
        """Whether frames pass as they would without a model."""
        return self.delay == 0 and (self.jitter is None or self.jitter.value == 0) and self.rate is None

    def to_wire(self) -> dict[str, Any]:
        """The keys that differ from an idle link's, as msgpack-able values."""
        out: dict[str, Any] = {}
        for f in fields(self):
            v = getattr(self, f.name)
            if v != f.default:
                out[f.name] = v.to_wire() if isinstance(v, Jitter) else v
        return out

    @classmethod
    def from_wire(cls, obj: object) -> LinkSpec:
        keys = link_keys()
        if not isinstance(obj, Mapping) or set(obj) - set(keys):
            raise ValueError(f"a link spec is a map of {', '.join(keys)}, got {obj!r:.80}")
        return cls(**{f.name: f.metadata["wire"](obj[f.name]) for f in fields(cls) if f.name in obj})

    def merged(self, words: Mapping[str, str]) -> LinkSpec:
        """This spec with ``KEY=`` text values from ``words`` (:func:`link_keys`) put over it."""
        parse = {f.name: f.metadata["text"] for f in fields(self)}
        for key in words:
            if key not in parse:
                raise ValueError(f"unknown link setting {key!r} (use {_key_list()})")
        return replace(self, **{key: parse[key](value) for key, value in words.items()})

    def __str__(self) -> str:
        parts = [f"delay {_seconds(self.delay)}"]
        if self.jitter is not None:
            parts.append(f"jitter {self.jitter}")
        if self.rate is not None:
            parts.append(f"rate {self.rate:g} bit/s")
        return ", ".join(parts)


def link_keys() -> tuple[str, ...]:
    """The keys of a link's behaviour, in order (``delay``, ``jitter``, ``rate``)."""
    return tuple(f.name for f in fields(LinkSpec))


def _key_list() -> str:
    return ", ".join(f"{k}=" for k in link_keys())


def _number(v: object, what: str) -> float:
    if isinstance(v, bool) or not isinstance(v, int | float):
        raise ValueError(f"link {what} must be a number, got {v!r:.40}")
    return float(v)


def _coord_text(c: Coord) -> str:
    return f"{c[0]},{c[1]}"


@dataclass(frozen=True, slots=True)
class LinkModel:
    """How every link direction of a run behaves: a default, overridden per node, then per link.

    A node override applies to every link direction from or to that node; a link override (a node
    and one of its ports) to both directions of that link. ``seed`` makes every draw repeatable.
    """

    default: LinkSpec = field(default_factory=LinkSpec)
    nodes: tuple[tuple[Coord, LinkSpec], ...] = ()
    links: tuple[tuple[Coord, str, LinkSpec], ...] = ()
    seed: int = 1

    @property
    def idle(self) -> bool:
        """Whether no link of the run has a behaviour (the model changes nothing)."""
        return (
            self.default.idle and all(s.idle for _, s in self.nodes) and all(s.idle for *_, s in self.links)
        )

    def check(self, topology: Topology) -> None:
        """ValueError naming the first override whose node or link is not in ``topology``."""
        for node, _ in self.nodes:
            if not topology.contains(node):
                raise ValueError(f"link model: node {_coord_text(node)} is not in {topology.spec}")
        for node, port, _ in self.links:
            if not topology.contains(node):
                raise ValueError(f"link model: node {_coord_text(node)} is not in {topology.spec}")
            if port not in topology.neighbours(node):
                raise ValueError(
                    f"link model: link {_coord_text(node)} {port} does not exist in {topology.spec}"
                    f" (ports there: {' '.join(topology.neighbours(node)) or 'none'})"
                )

    def spec(self, topology: Topology, here: Coord, port: str) -> LinkSpec:
        """The behaviour of the direction from ``here`` out of ``port``."""
        peer = topology.neighbour(here, port)
        back = Topology.opposite(port)
        for node, p, s in reversed(self.links):
            if (node == here and p == port) or (node == peer and p == back):
                return s
        for node, s in reversed(self.nodes):
            if node in (here, peer):
                return s
        return self.default

    def shaper(self, topology: Topology, here: Coord, port: str) -> LinkShaper | None:
        """The shaper of the direction from ``here`` out of ``port`` (None: nothing to shape)."""
        spec = self.spec(topology, here, port)
        if spec.idle:
            return None
        key = f"{self.seed}:{here[0]},{here[1]}:{port}".encode()
        return LinkShaper(spec, random.Random(zlib.crc32(key) ^ (self.seed << 32)))

    def hop_bound(self, message_bytes: int = 4096) -> float:
        """Seconds a message of ``message_bytes`` rarely exceeds on any link (delay, 4 jitter SDs
        over the mean, the message serialised): what to wait for a multicast to cross a link."""
        specs = [self.default, *(s for _, s in self.nodes), *(s for *_, s in self.links)]
        return max(
            s.delay
            + (s.jitter.mean + 4 * s.jitter.sd if s.jitter is not None else 0.0)
            + (8 * message_bytes / s.rate if s.rate is not None else 0.0)
            for s in specs
        )

    def dilated(self, k: float) -> LinkModel:
        """The model acting ``k`` times slower in wall-clock time (``--time-dilation``): every delay
        and jitter ``k`` times longer, every rate ``k`` times lower; the same draws (same seed)."""
        if k == 1:
            return self
        return replace(
            self,
            default=self.default.dilated(k),
            nodes=tuple((n, s.dilated(k)) for n, s in self.nodes),
            links=tuple((n, p, s.dilated(k)) for n, p, s in self.links),
        )

    def part(self, n: int) -> LinkModel:
        """The model of a run's ``n``-th emulation of its own (a repetition): the same links, fresh draws."""
        return replace(self, seed=zlib.crc32(f"{self.seed}:part:{n}".encode()))

    def to_wire(self) -> dict[str, Any]:
        """The model as msgpack-able data (the ``assign`` message's ``links``)."""
        return {
            "default": self.default.to_wire(),
            "nodes": [[list(n), s.to_wire()] for n, s in self.nodes],
            "links": [[list(n), p, s.to_wire()] for n, p, s in self.links],
            "seed": self.seed,
        }

    @classmethod
    def from_wire(cls, obj: object) -> LinkModel:
        """The model in ``obj`` (as :meth:`to_wire` made it); ValueError naming what does not fit."""
        if not isinstance(obj, Mapping) or set(obj) - {"default", "nodes", "links", "seed"}:
            raise ValueError(f"a link model is a map of default, nodes, links and seed, got {obj!r:.80}")
        seed = obj.get("seed", 1)
        if isinstance(seed, bool) or not isinstance(seed, int):
            raise ValueError(f"link model seed must be an integer, got {seed!r:.40}")
        try:
            nodes = tuple((_coord(n), LinkSpec.from_wire(s)) for n, s in obj.get("nodes", ()))
            links = tuple((_coord(n), _port(p), LinkSpec.from_wire(s)) for n, p, s in obj.get("links", ()))
        except (TypeError, ValueError) as exc:
            raise ValueError(f"link model overrides: {exc}") from None
        return cls(LinkSpec.from_wire(obj.get("default", {})), nodes, links, seed)

    def describe(self) -> dict[str, Any]:
        """A readable form for a run's JSON and ``run.json``: durations in seconds, rates in bit/s."""
        return {
            "default": str(self.default),
            "nodes": {_coord_text(n): str(s) for n, s in self.nodes},
            "links": {f"{_coord_text(n)} {p}": str(s) for n, p, s in self.links},
            "seed": self.seed,
        }


def _coord(v: object) -> Coord:
    if not (isinstance(v, list | tuple) and len(v) == 2 and all(type(c) is int and c >= 0 for c in v)):
        raise ValueError(f"a node is [x, y], got {v!r:.40}")
    return (int(v[0]), int(v[1]))


def _port(v: object) -> str:
    if v not in PORTS:
        raise ValueError(f"a port is one of {' '.join(PORTS)}, got {v!r:.20}")
    return str(v)


def parse_link_file(text: str, base: LinkModel, name: str = "link file") -> LinkModel:
    """``base`` with the overrides of a link file.

    One line per override, ``#`` starts a comment::

        default delay=1ms jitter=normal:0.25ms
        node 3,3 delay=5ms              # every link from or to (3,3)
        link 1,2 +x delay=4ms rate=10Mbit   # both directions of (1,2)-(2,2)

    ValueError naming the file's line for anything it cannot read.
    """
    default, nodes, links = base.default, list(base.nodes), list(base.links)
    for number, raw in enumerate(text.splitlines(), 1):
        line = raw.split("#", 1)[0].split()
        if not line:
            continue
        where = f"{name}, line {number}"
        try:
            kind, rest = line[0], line[1:]
            if kind == "default":
                default = default.merged(_words(rest))
            elif kind == "node" and rest:
                nodes.append((_parse_coord(rest[0]), default.merged(_words(rest[1:]))))
            elif kind == "link" and len(rest) >= 2:
                links.append((_parse_coord(rest[0]), _port(rest[1]), default.merged(_words(rest[2:]))))
            else:
                raise ValueError(
                    f"expected 'default ...', 'node X,Y ...' or 'link X,Y PORT ...', got {raw.strip()!r}"
                )
        except ValueError as exc:
            raise ValueError(f"{where}: {exc}") from None
    return LinkModel(default, tuple(nodes), tuple(links), base.seed)


def _words(words: Iterable[str]) -> dict[str, str]:
    out: dict[str, str] = {}
    for w in words:
        key, sep, value = w.partition("=")
        if not sep or not value:
            raise ValueError(f"expected KEY=VALUE ({_key_list()}), got {w!r}")
        out[key] = value
    return out


def _parse_coord(text: str) -> Coord:
    try:
        x, y = (int(v) for v in text.split(","))
    except ValueError:
        raise ValueError(f"a node is X,Y, got {text!r}") from None
    if x < 0 or y < 0:
        raise ValueError(f"a node is X,Y with X, Y >= 0, got {text!r}")
    return (x, y)


class LinkShaper:
    """One link direction's schedule: when each frame sent on it reaches the peer (seconds)."""

    __slots__ = ("_free", "_last", "_rng", "spec")

    def __init__(self, spec: LinkSpec, rng: random.Random) -> None:
        self.spec = spec
        self._rng = rng
        self._free = -math.inf
        """When the link has sent the frames before (serialisation)."""
        self._last = -math.inf
        """When the frame before reaches the peer (FIFO)."""

    def release(self, now: float, nbytes: int) -> float:
        """When a frame of ``nbytes`` sent at ``now`` reaches the peer (never before the one before)."""
        spec = self.spec
        done = now
        if spec.rate is not None:
            done = max(now, self._free) + 8.0 * nbytes / spec.rate
            self._free = done
        extra = spec.delay + (spec.jitter.sample(self._rng) if spec.jitter is not None else 0.0)
        arrive = done + max(0.0, extra)
        self._last = max(arrive, self._last)
        return self._last
