"""The link model, sans-IO: parsing, overrides, and each link direction's release times."""

from __future__ import annotations

import itertools
import math
import random
import statistics

import pytest

from node.topology import Topology
from node.transport.linkmodel import (
    Jitter,
    LinkModel,
    LinkShaper,
    LinkSpec,
    parse_duration,
    parse_link_file,
    parse_rate,
)

MESH = Topology.parse("mesh:4x4")


@pytest.mark.parametrize(
    ("text", "seconds"),
    [
        ("2ms", 2e-3),
        ("500us", 5e-4),
        ("500µs", 5e-4),
        ("1.5s", 1.5),
        ("250ns", 2.5e-7),
        ("0.1", 0.1),
        ("0", 0.0),
    ],
)
def test_durations(text: str, seconds: float) -> None:
    assert parse_duration(text) == pytest.approx(seconds)


@pytest.mark.parametrize(
    ("text", "needle"),
    [("-1ms", "negative"), ("nan", "not a duration"), ("inf", "not a duration"),
     ("2 parsecs", "not a duration"), ("1e999s", "not finite"), ("", "not a duration")],
)  # fmt: skip
def test_bad_durations_name_the_cause(text: str, needle: str) -> None:
    with pytest.raises(ValueError, match=needle):
        parse_duration(text, "link delay")


@pytest.mark.parametrize(
    ("text", "bps"), [("100Mbit", 1e8), ("1Gbit", 1e9), ("10MB", 8e7), ("5e6", 5e6), ("64kbit/s", 64e3)]
)
def test_rates(text: str, bps: float) -> None:
    assert parse_rate(text) == pytest.approx(bps)


@pytest.mark.parametrize("text", ["0", "-5Mbit", "fast", "nan", "1e999Mbit"])
def test_bad_rates(text: str) -> None:
    with pytest.raises(ValueError, match="link rate"):
        parse_rate(text)


@pytest.mark.parametrize(
    ("text", "needle"),
    [("gamma:1ms", "unknown distribution 'gamma'"), ("normal", "DIST:VALUE"), ("normal:-1ms", "negative"),
     ("uniform:nan", "not a duration")],
)  # fmt: skip
def test_bad_jitter(text: str, needle: str) -> None:
    with pytest.raises(ValueError, match=needle):
        Jitter.parse(text)


@pytest.mark.parametrize("text", ["uniform:2ms", "normal:0.5ms", "lognormal:1ms", "exponential:1ms"])
def test_each_distribution_has_its_stated_mean_and_sd(text: str) -> None:
    """10^5 draws: the sample mean and SD are the documented ones (within 2%, or 2% of SD)."""
    j = Jitter.parse(text)
    rng = random.Random(7)
    xs = [j.sample(rng) for _ in range(100_000)]
    assert statistics.fmean(xs) == pytest.approx(j.mean, abs=0.02 * j.sd)
    assert statistics.pstdev(xs) == pytest.approx(j.sd, rel=0.03)
    if j.kind != "normal":
        assert min(xs) >= 0


def test_a_delay_only_link_releases_each_frame_delay_later() -> None:
    s = LinkShaper(LinkSpec(delay=0.002), random.Random(1))
    assert s.release(1.0, 100) == pytest.approx(1.002)
    assert s.release(1.0005, 100) == pytest.approx(1.0025)


def test_rate_serialises_frames_one_after_another() -> None:
    """8 Mbit/s: a 1000-byte frame takes 1 ms on the wire; three sent at once leave 1 ms apart."""
    s = LinkShaper(LinkSpec(delay=0.001, rate=8e6), random.Random(1))
    got = [s.release(0.0, 1000) for _ in range(3)]
    assert got == pytest.approx([0.002, 0.003, 0.004])
    assert s.release(10.0, 1000) == pytest.approx(10.002)  # an idle link starts afresh


def test_a_frame_never_overtakes_the_one_before_it() -> None:
    """Heavy jitter (mean 5 ms), frames 1 ms apart: release times never go down; some frames
    wait behind a slow one before them (released with it), the others each at their own time."""
    s = LinkShaper(LinkSpec(delay=0.001, jitter=Jitter("exponential", 0.005)), random.Random(3))
    times = [s.release(i * 1e-3, 50) for i in range(2000)]
    assert all(b >= a for a, b in itertools.pairwise(times))
    held = sum(a == b for a, b in itertools.pairwise(times))
    assert 100 < held < 1900, held


def test_normal_jitter_never_releases_before_the_send() -> None:
    s = LinkShaper(LinkSpec(delay=0.0001, jitter=Jitter("normal", 0.01)), random.Random(5))
    assert all(s.release(float(i), 10) >= float(i) for i in range(2000))


def test_overrides_link_beats_node_beats_default() -> None:
    text = """
    # one slow node, one slow link
    default delay=1ms
    node 1,1 delay=5ms
    link 2,2 +x delay=9ms jitter=normal:1ms  # both directions of (2,2)-(3,2)
    """
    m = parse_link_file(text, LinkModel())
    assert m.spec(MESH, (0, 0), "+x").delay == pytest.approx(0.001)
    assert m.spec(MESH, (1, 1), "+y").delay == pytest.approx(0.005)
    assert m.spec(MESH, (0, 1), "+x").delay == pytest.approx(0.005)  # into (1,1)
    assert m.spec(MESH, (2, 2), "+x").delay == pytest.approx(0.009)
    assert m.spec(MESH, (3, 2), "-x").delay == pytest.approx(0.009)  # the other direction
    assert m.spec(MESH, (3, 2), "-x").jitter == Jitter("normal", 0.001)
    assert m.spec(MESH, (2, 2), "-x").delay == pytest.approx(0.001)


@pytest.mark.parametrize(
    ("text", "needle"),
    [("link 3,3 +x delay=1ms", "link 3,3 \\+x does not exist in mesh:4x4"),
     ("node 9,9 delay=1ms", "node 9,9 is not in mesh:4x4"),
     ("link 1,1 +z delay=1ms", "line 1: a port is one of"),
     ("node 1,1 delay=soon", "line 1: link delay 'soon'"),
     ("node 1,1 colour=red", "unknown link setting 'colour'"),
     ("wire 1,1", "line 1: expected"),
     ("\n\nnode 1 delay=1ms", "line 3: a node is X,Y")],
)  # fmt: skip
def test_bad_link_files_name_the_line_or_the_missing_link(text: str, needle: str) -> None:
    with pytest.raises(ValueError, match=needle):
        parse_link_file(text, LinkModel()).check(MESH)


def test_wire_round_trip_and_bad_wire() -> None:
    m = parse_link_file(
        "default delay=1ms rate=100Mbit\nlink 1,2 +y jitter=lognormal:2ms\nnode 0,0 delay=0",
        LinkModel(seed=9),
    )
    assert LinkModel.from_wire(m.to_wire()) == m
    for bad in ({"default": {"delay": -1}}, {"default": {"delay": "2ms"}}, {"seed": 1.5}, {"colour": 1},
                {"links": [[[1, 1], "+q", {}]]}, {"default": {"jitter": ["gamma", 1]}}):  # fmt: skip
        with pytest.raises(ValueError):
            LinkModel.from_wire(bad)


def test_draws_are_seeded_per_link_direction_and_per_part() -> None:
    m = LinkModel(LinkSpec(delay=0.001, jitter=Jitter("normal", 0.001)), seed=4)

    def draws(model: LinkModel, here: tuple[int, int], port: str) -> list[float]:
        s = model.shaper(MESH, here, port)
        assert s is not None
        return [s.release(float(i), 10) - i for i in range(5)]

    assert draws(m, (1, 1), "+x") == draws(m, (1, 1), "+x")  # repeatable
    assert draws(m, (1, 1), "+x") != draws(m, (2, 1), "-x")  # the two directions differ
    assert draws(m, (1, 1), "+x") != draws(m.part(1), (1, 1), "+x")  # a repetition draws afresh
    assert m.part(1) != m.part(2)
    assert LinkModel().shaper(MESH, (0, 0), "+x") is None  # nothing to shape
    assert LinkModel().idle and not m.idle
    assert math.isclose(Jitter("uniform", 0.012).sd, 0.012 / math.sqrt(12))


def _sampled(spec: LinkSpec, nbytes: int, n: int, seed: int) -> list[float]:
    """``n`` hop times drawn by the link model's own shaper, each frame on an idle link (sent
    long after the one before, so neither serialisation nor FIFO order holds it)."""
    s = LinkShaper(spec, random.Random(seed))
    return [s.release(t, nbytes) - t for t in (i * 100.0 for i in range(n))]


@pytest.mark.parametrize(
    ("delay", "jitter", "rate"),
    [(0.001, "normal:3ms", None), (0.0, "normal:1ms", None), (0.001, "normal:0.25ms", 1e6),
     (0.002, "uniform:1ms", 5e5), (0.001, "lognormal:1ms", None), (0.0005, "exponential:2ms", 1e6),
     (0.001, None, 1e5)],
)  # fmt: skip
def test_hop_moments_are_those_of_the_draws(delay: float, jitter: str | None, rate: float | None) -> None:
    """2·10^5 hops drawn with a seed: the sample mean and SD are the exact moments within four
    standard errors (each estimated from the draws: s/√n for the mean, √((m4 − s⁴)/n)/(2s) for
    the SD). d + μ and σ, what --predict said before, miss the clamped normal by dozens of them."""
    spec = LinkSpec(delay=delay, jitter=None if jitter is None else Jitter.parse(jitter), rate=rate)
    n, nbytes = 200_000, 256
    xs = _sampled(spec, nbytes, n, seed=11)
    mean, sd = spec.hop_moments(nbytes)
    got_mean, got_sd = statistics.fmean(xs), statistics.stdev(xs)
    if sd == 0:
        # (a send at t up to 2·10^7 s leaves float rounding of a few ns in release − t)
        assert got_sd == pytest.approx(0.0, abs=1e-7) and got_mean == pytest.approx(mean, abs=1e-7)
        return
    m4 = statistics.fmean((x - got_mean) ** 4 for x in xs)
    se_mean, se_sd = got_sd / math.sqrt(n), math.sqrt((m4 - got_sd**4) / n) / (2 * got_sd)
    assert abs(got_mean - mean) <= 4 * se_mean, (got_mean, mean, se_mean)
    assert abs(got_sd - sd) <= 4 * se_sd, (got_sd, sd, se_sd)


def test_the_clamped_normal_has_the_issues_moments() -> None:
    """normal:3ms over d = 1 ms, computed by hand: a = 1/3, Φ(a) = 0.63056, φ(a) = 0.37738;
    mean = 1·0.63056 + 3·0.37738 = 1.7627 ms, E[Y²] = 10·0.63056 + 3·0.37738 = 7.4378 ms²,
    SD = √(7.4378 − 1.7627²) = 2.0810 ms; and a serialisation of 2,048 bits at 1 Mbit/s adds
    2.048 ms to the mean alone."""
    spec = LinkSpec(delay=0.001, jitter=Jitter.parse("normal:3ms"))
    mean, sd = spec.hop_moments(0)
    assert mean == pytest.approx(1.7627e-3, abs=1e-7) and sd == pytest.approx(2.0810e-3, abs=1e-7)
    rated = LinkSpec(delay=0.001, jitter=Jitter.parse("normal:3ms"), rate=1e6).hop_moments(256)
    assert rated == pytest.approx((mean + 2.048e-3, sd))
    assert LinkSpec(delay=0.002).hop_moments(10**6) == (0.002, 0.0)
