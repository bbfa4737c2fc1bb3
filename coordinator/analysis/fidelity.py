"""The fidelity verdict: did the hosts keep up, so that what a free-clock run measured is the network's?

After Mininet-HiFi (Handigol et al., CoNEXT 2012), which checks while it emulates that the
emulator kept up and distrusts a result without that check, made per measurement. A destination
``h`` links away should, by the link model alone, arrive after ``h`` draws of the per-hop delay,
with mean ``h·m`` and variance ``h·s²`` (``m``, ``s``: the default link's exact moments,
:meth:`node.transport.linkmodel.LinkSpec.hop_moments`, for the run's message size). Whatever the
measured latencies add to that is the hosts' doing:

* **the hosts' share of the per-node variance**: per destination over its repetitions,
  ``(var(latency) − h·s²) / var(latency)`` (at least 0), pooled over destinations;
* **host time per hop**: ``mean latency / h − m``, with the telemetry's split of it into time in
  the nodes (residence) and time the links took beyond the model (the shaper's lateness, the
  kernel, the reading task's wake-up).

A run is **ok** when the hosts' share is at most :data:`SHARE` and host time per hop is at most
:data:`PER_HOP` of the link's mean delay, both settable (``--fidelity-share``,
``--fidelity-per-hop``). Under ``--time-dilation K`` every wall-clock figure is divided by K
before it is judged (the records are: :func:`coordinator.analysis.metrics.multicast_metrics`).
Without a link model there is nothing to be faithful to: the verdict is ``None`` and its line
says the latencies are the hosts' own.
"""

from __future__ import annotations

import math
import statistics
from collections import defaultdict
from collections.abc import Iterable, Sequence
from dataclasses import fields, replace
from typing import TYPE_CHECKING, Any

from coordinator.analysis.result_types import Fidelity
from coordinator.runtimes.records import RawRun, RunSettings
from node.transport.linkmodel import LinkModel

if TYPE_CHECKING:
    from coordinator.analysis.result_types import MulticastResult

__all__ = [
    "PER_HOP",
    "SHARE",
    "Delivery",
    "Fidelity",
    "deliveries",
    "judge",
    "judge_groups",
    "judge_run",
    "physics_misses",
]

_DEFAULTS: dict[str, Any] = {f.name: f.default for f in fields(RunSettings)}
SHARE: float = _DEFAULTS["fidelity_share"]
"""Most of the per-node variance the hosts may add to the link model's for an ok verdict."""
PER_HOP: float = _DEFAULTS["fidelity_per_hop"]
"""Most host time per hop, as a share of the link's mean delay, for an ok verdict."""


Delivery = tuple[int, float, float | None, float | None]
"""One delivery as the verdict reads it: (links crossed, latency ns, node ns, link ns); the two
parts None without telemetry."""


def deliveries(records: Iterable[MulticastResult]) -> list[list[Delivery]]:
    """The deliveries of ``records`` with a wall-clock latency, grouped per destination of each
    repeated multicast (its repetitions)."""
    groups: dict[tuple[object, ...], list[Delivery]] = defaultdict(list)
    for r in records:
        for a in r.arrivals:
            if a.wall_ns is not None and a.hops > 0:
                parts = (
                    (a.node_ns, a.link_ns)
                    if a.node_ns is not None and a.link_ns is not None
                    else (None, None)
                )
                groups[(r.algorithm, r.source, r.destinations, a.node)].append((a.hops, a.wall_ns, *parts))
    return list(groups.values())


def judge(
    records: Iterable[MulticastResult],
    model: LinkModel | None,
    *,
    idle: Sequence[float] = (),
    loadavg: tuple[float, float, float] | None = None,
    dilation: float = 1.0,
    share_max: float = SHARE,
    per_hop_max: float = PER_HOP,
    message_bytes: int = 0,
) -> Fidelity:
    """The verdict on the kept repetitions ``records`` of a free-clock run under ``model``."""
    return judge_groups(
        deliveries(records), model, idle=idle, loadavg=loadavg, dilation=dilation,
        share_max=share_max, per_hop_max=per_hop_max, message_bytes=message_bytes,
    )  # fmt: skip


def judge_run(records: Iterable[MulticastResult], settings: RunSettings, raw: RawRun) -> Fidelity:
    """:func:`judge` on a run's kept records with its settings' link model, thresholds and message
    size, and what its raw run sampled (CPU idle, load average, dilation): the one call every
    free-clock command makes. Nodes on several hosts stamp with several clocks
    (:attr:`Fidelity.clocks`): the deliveries off their source's clock are counted, not judged."""
    records = list(records)
    verdict = judge(
        records, settings.link_model, idle=raw.host_idle, loadavg=raw.loadavg, dilation=raw.dilation,
        share_max=settings.fidelity_share, per_hop_max=settings.fidelity_per_hop,
        message_bytes=settings.flits * settings.flit_bytes,
    )  # fmt: skip
    clocks = len(set(raw.hosts.values())) or 1
    if clocks == 1:
        return verdict
    unpaired = sum(1 for r in records for a in r.arrivals if a.wall_ns is None and a.hops > 0)
    return replace(verdict, clocks=clocks, unpaired=unpaired)


def judge_groups(
    groups: Sequence[Sequence[Delivery]],
    model: LinkModel | None,
    *,
    idle: Sequence[float] = (),
    loadavg: tuple[float, float, float] | None = None,
    dilation: float = 1.0,
    share_max: float = SHARE,
    per_hop_max: float = PER_HOP,
    message_bytes: int = 0,
) -> Fidelity:
    """:func:`judge` on deliveries already grouped per destination (see :func:`deliveries`), in the
    emulated network's time (already divided by ``dilation``, which labels the verdict)."""
    base = Fidelity(
        ok=None,
        reason="no link model: every latency measured is the hosts' own (nothing to be faithful to)",
        hosts_share=None,
        host_per_hop_ns=None,
        residence_per_hop_ns=None,
        link_excess_per_hop_ns=None,
        link_mean_ns=None,
        destinations=0,
        cpu_idle_mean=statistics.fmean(idle) if idle else None,
        cpu_idle_min=min(idle) if idle else None,
        loadavg=loadavg,
        dilation=dilation,
        share_max=share_max,
        per_hop_max=per_hop_max,
    )
    if model is None or model.idle:
        return base
    mean_s, sd_s = model.default.hop_moments(message_bytes)
    m, var1 = mean_s * 1e9, (sd_s * 1e9) ** 2
    var_all = var_host = 0.0
    n_dest = 0
    per_hop: list[float] = []
    res_hop: list[float] = []
    link_hop: list[float] = []
    for rows in groups:
        for h, lat, res, link in rows:
            per_hop.append(lat / h - m)
            if res is not None and link is not None:
                res_hop.append(res / h)
                link_hop.append(link / h - m)
        if len(rows) < 2:
            continue
        lats = [lat for _, lat, _, _ in rows]
        h = statistics.median_low([h for h, _, _, _ in rows])
        v = statistics.variance(lats)
        n_dest += 1
        var_all += v
        var_host += min(v, max(0.0, v - h * var1))
    share = var_host / var_all if var_all > 0 else (0.0 if n_dest else None)
    host = statistics.fmean(per_hop) if per_hop else None
    measured = replace(
        base,
        hosts_share=share,
        host_per_hop_ns=host,
        residence_per_hop_ns=statistics.fmean(res_hop) if res_hop else None,
        link_excess_per_hop_ns=statistics.fmean(link_hop) if link_hop else None,
        link_mean_ns=m,
        destinations=n_dest,
    )
    if host is None:
        return replace(measured, reason="no delivery to judge")
    bad = []
    if share is not None and share > share_max:
        bad.append(f"over {share_max:.0%} of the variance")
    if m > 0 and host > per_hop_max * m:
        bad.append(f"over {per_hop_max:.0%} of the link's delay a hop")
    if not bad:
        return replace(measured, ok=True, reason="")
    k = dilation * _suggest(host, share or 0.0, m, var1, per_hop_max, share_max)
    reason = " and ".join(bad) + f"; try --time-dilation {k:g} or fewer nodes per core"
    return replace(measured, ok=False, reason=reason, advised_dilation=k)


def _suggest(host: float, share: float, m: float, var1: float, per_hop_max: float, share_max: float) -> float:
    """A dilation that would bring the host's figures under the thresholds if host costs stayed as
    they are (dilation divides them by K): the larger of the two ratios, rounded up, at least 2."""
    k = 2.0
    if m > 0 and host > 0:
        k = max(k, host / (per_hop_max * m))
    if 0 < share < 1 and var1 > 0:
        # host variance / model variance = share / (1 - share); it must fall to share_max / (1 - share_max)
        k = max(k, math.sqrt((share / (1 - share)) / (share_max / (1 - share_max))))
    return float(math.ceil(k))


def physics_misses(
    groups: Sequence[Sequence[Delivery]],
    model: LinkModel,
    *,
    mean_tol: float = 0.15,
    sd_tol: float = 0.35,
    min_hops: int = 2,
    message_bytes: int = 0,
) -> list[str]:
    """The physics check (issue 42): per destination at least ``min_hops`` links away, its mean
    latency within ``mean_tol`` of h·m and its SD within ``sd_tol`` of √h·s (the link model's
    hop moments); one line per destination that misses (none: the check holds)."""
    mean_s, sd_s = model.default.hop_moments(message_bytes)
    misses = []
    for rows in groups:
        if len(rows) < 2:
            continue
        h = statistics.median_low([r[0] for r in rows])
        if h < min_hops:
            continue
        lats = [r[1] for r in rows]
        mean, sd = statistics.fmean(lats), statistics.stdev(lats)
        want_mean, want_sd = h * mean_s * 1e9, math.sqrt(h) * sd_s * 1e9
        if abs(mean - want_mean) > mean_tol * want_mean or abs(sd - want_sd) > sd_tol * want_sd:
            misses.append(
                f"h={h}: mean {mean / 1e6:.3f} ms against {want_mean / 1e6:.3f}, "
                f"SD {sd / 1e6:.3f} ms against {want_sd / 1e6:.3f} (n={len(rows)})"
            )
    return misses
