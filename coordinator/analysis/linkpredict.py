"""Measured against predicted: per node, what a link model alone says its arrivals should be.

A destination whose packet crossed h links, each taking a time of mean m and SD s as the link
model draws it (the message serialised at the link's rate, then ``max(0, d + jitter)``: the
clamped normal's exact moments, not d and σ; :meth:`LinkSpec.hop_moments`), arrives after h·m
plus what the h hops cost the hosts, with an SD of √h·s plus host noise. The per-hop cost beyond
the model, ``(mean / h) − m``, is what the hosts added; it is reported, not assumed.
"""

from __future__ import annotations

import math
import statistics
from collections import defaultdict
from collections.abc import Iterable

from coordinator.analysis.metrics import sample_sd
from coordinator.analysis.result_types import MulticastResult, Prediction
from node.transport.linkmodel import LinkModel

__all__ = ["predict"]


def predict(records: Iterable[MulticastResult], model: LinkModel, message_bytes: int) -> list[Prediction]:
    """One row per (algorithm, source, node) reached in two or more repetitions, by the model's
    default link (a run with per-node or per-link overrides is predicted as if it had none), for
    messages of ``message_bytes`` (``--flits`` × ``--flit-bytes``) on an idle link."""
    per_hop, sigma = model.default.hop_moments(message_bytes)
    groups: dict[tuple[str, tuple[int, ...], tuple[int, ...]], list[tuple[int, int]]] = defaultdict(list)
    for r in records:
        for a in r.arrivals:
            if a.wall_ns is not None:
                groups[(r.algorithm, r.source, a.node)].append((a.hops, a.wall_ns))
    rows = []
    for (alg, src, node), got in sorted(groups.items()):
        if len(got) < 2:
            continue
        hops = statistics.median_low([h for h, _ in got])
        walls = [w / 1e9 for _, w in got]
        mean, sd = statistics.fmean(walls), sample_sd(walls)
        assert sd is not None  # two or more repetitions
        rows.append(
            Prediction(
                algorithm=alg,
                source=(src[0], src[1]),
                node=(node[0], node[1]),
                hops=hops,
                repetitions=len(got),
                mean_s=mean,
                predicted_mean_s=hops * per_hop,
                sd_s=sd,
                predicted_sd_s=math.sqrt(hops) * sigma,
                host_cost_per_hop_s=(mean / hops - per_hop) if hops else None,
            )
        )
    return rows
