"""Per-hop telemetry: a free-clock latency split into time on the links and time in the nodes.

Under ``--telemetry`` every packet copy carries, per node it left, ``node id, receive ns, send
ns`` on the host's monotonic clock (the source's receive time is its injection), and a delivery
adds the destination's ``node id, receive ns`` (:attr:`coordinator.runtimes.records.Arrival.tel`).
Then a delivery's latency (its wall time minus the injection's) is exactly

* **link time**: from each send to the next node's receive (the link model, the kernel, TCP, and
  the reading task's wake-up), plus
* **residence** (node time): from each receive to that node's send, and at the destination from
  its receive to the delivery (scheduling, decoding and the rule).

Per destination over the repetitions, :func:`variance_split` says how much of the per-node
variance of latency the hosts own: ``var(residence) / var(latency)``, the links'
``var(link) / var(latency)`` and the covariance term ``2 cov / var(latency)``; the three sum to 1.
"""

from __future__ import annotations

import statistics
from collections.abc import Iterable, Sequence
from dataclasses import dataclass

from coordinator.analysis.result_types import TelemetrySplit

__all__ = ["Split", "split", "variance_split"]


@dataclass(frozen=True, slots=True)
class Split:
    """One delivery's latency in parts (ns): ``link + residence == latency``; ``hops`` links crossed."""

    link: int
    residence: int
    hops: int

    @property
    def latency(self) -> int:
        return self.link + self.residence


def split(tel: Sequence[int], delivered_ns: int) -> Split:
    """The parts of a delivery's latency from its telemetry (triples, then the destination's node
    and receive time) and its delivery time; ValueError if the telemetry is malformed."""
    if len(tel) < 5 or len(tel) % 3 != 2:
        raise ValueError(f"telemetry of {len(tel)} values: expected triples, then node and receive ns")
    link = residence = 0
    last_send = None
    for i in range(0, len(tel) - 2, 3):
        recv, send = tel[i + 1], tel[i + 2]
        if last_send is not None:
            link += recv - last_send
        residence += send - recv
        last_send = send
    assert last_send is not None
    recv = tel[-1]
    link += recv - last_send
    residence += delivered_ns - recv
    return Split(link, residence, (len(tel) - 2) // 3)


def _cov(xs: Sequence[float], ys: Sequence[float]) -> float:
    mx, my = statistics.fmean(xs), statistics.fmean(ys)
    return sum((x - mx) * (y - my) for x, y in zip(xs, ys, strict=True)) / (len(xs) - 1)


def variance_split(per_destination: Iterable[Sequence[Split]]) -> TelemetrySplit:
    """The per-node variance of latency over repetitions, pooled over destinations, in parts
    (:class:`coordinator.analysis.result_types.TelemetrySplit`), of the deliveries grouped per
    destination (its repetitions); sample variances (n − 1)."""
    v_res = v_link = cov = 0.0
    groups = used = 0
    res_sum = link_sum = hop_sum = 0
    for parts in per_destination:
        for s in parts:
            res_sum += s.residence
            link_sum += s.link
            hop_sum += s.hops
            used += 1
        if len(parts) < 2:
            continue
        groups += 1
        res = [float(s.residence) for s in parts]
        link = [float(s.link) for s in parts]
        v_res += statistics.variance(res)
        v_link += statistics.variance(link)
        cov += _cov(link, res)
    total = v_res + v_link + 2 * cov
    share = (lambda x: x / total) if groups and total > 0 else (lambda _x: None)
    return TelemetrySplit(
        hosts=share(v_res),
        links=share(v_link),
        covariance=share(2 * cov),
        residence_per_hop_ns=res_sum / hop_sum if hop_sum else None,
        link_per_hop_ns=link_sum / hop_sum if hop_sum else None,
        destinations=groups,
        deliveries=used,
    )
