"""Measured against predicted: per node, what a link model alone says its arrivals should be.

A destination whose packet crossed h links, each delaying it by d plus independent jitter of
mean μ and SD σ, arrives after h·(d + μ) plus what the h hops cost the hosts, with an SD of √h·σ
plus host noise. The per-hop cost beyond the model, ``(mean / h) − d − μ``, is what the hosts
added; it is reported, not assumed.
"""

from __future__ import annotations

import math
import statistics
from collections import defaultdict
from collections.abc import Iterable

from coordinator.analysis.result_types import MulticastResult, Prediction
from node.linkmodel import LinkModel

__all__ = ["predict"]


def predict(records: Iterable[MulticastResult], model: LinkModel) -> list[Prediction]:
    """One row per (algorithm, source, node) reached in two or more repetitions, by the model's
    default link (a run with per-node or per-link overrides is predicted as if it had none)."""
    spec = model.default
    mu = spec.jitter.mean if spec.jitter is not None else 0.0
    sigma = spec.jitter.sd if spec.jitter is not None else 0.0
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
        mean, sd = statistics.fmean(walls), statistics.stdev(walls)
        rows.append(
            Prediction(
                algorithm=alg,
                source=(src[0], src[1]),
                node=(node[0], node[1]),
                hops=hops,
                repetitions=len(got),
                mean_s=mean,
                predicted_mean_s=hops * (spec.delay + mu),
                sd_s=sd,
                predicted_sd_s=math.sqrt(hops) * sigma,
                host_cost_per_hop_s=(mean / hops - spec.delay - mu) if hops else None,
            )
        )
    return rows
