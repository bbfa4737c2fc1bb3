"""What the bench workloads' packets cost msgpack, against the relay chain's small packet.

``meshcast bench``'s ``ratio`` divides the emulator's packet-hops/s by the relay chain's hops/s,
and the relay chain passes one small packet (:data:`~coordinator.experiments.bench.RELAY_PACKET`,
a header of 6 msgpack objects). The bench's VH multicasts carry explicit-tree headers (each
packet holds its branch's subtree), so one of their hops costs msgpack more than a relay hop
does. This runs the same relay chain with the very packets each bench workload sends (captured
from the engines runtime, as their hops put them on links), so the two hop rates compare like
with like: their quotient is the most ``ratio`` the workload could reach if the emulator cost
nothing beyond decoding and encoding each packet once per hop.

Usage: ``.venv/bin/python benchmarks/header_cost.py [SPEC ...]`` (default: the bench's dense
and sparse points). Prints one JSON object per workload.
"""

from __future__ import annotations

import json
import sys
from typing import Any

import msgpack

from coordinator.experiments import bench
from coordinator.runtimes import engines
from coordinator.runtimes.records import RunSettings
from coordinator.workloads.plan import random_plan
from node.topology import Topology
from node.transport.wire import LinkFrame, StepFrame

POINTS = {"torus:20x20": (100, 50), "torus:32x32": (100, 50), "torus:64x64": (1, 10)}


def _objects(value: Any) -> int:
    """msgpack objects in ``value`` (each array, string and number counts one)."""
    if isinstance(value, list):
        return 1 + sum(_objects(v) for v in value)
    return 1


def workload_packets(spec: str, multicasts: int, dests: int) -> list[bytes]:
    """Each packet-hop of the bench workload on ``spec``: the packet's msgpack bytes as sent."""
    sent: list[bytes] = []
    encode = engines.encode_link

    def capture(frame: LinkFrame) -> bytes:
        if isinstance(frame, StepFrame):
            sent.extend(msgpack.packb(p.to_wire()) for p in frame.packets)
        return encode(frame)

    engines.encode_link = capture
    try:
        topo = Topology.parse(spec)
        plan = random_plan(topo, ["vh"], dests, multicasts, seed=1)
        engines.run_engines(plan, RunSettings(clock="lockstep"))
    finally:
        engines.encode_link = encode
    return sent


def main(specs: list[str]) -> None:
    small = bench.relay_chain()
    for spec in specs or list(POINTS):
        multicasts, dests = POINTS.get(spec, (100, 50))
        packets = workload_packets(spec, multicasts, dests)
        rate = bench.relay_chain(payloads=packets)
        objects = sum(_objects(msgpack.unpackb(p)) for p in packets)
        print(json.dumps({
            "workload": f"{spec}, {multicasts} VH multicasts x {dests} destinations",
            "packet_hops": len(packets),
            "mean_packet_bytes": round(sum(map(len, packets)) / len(packets), 1),
            "mean_packet_objects": round(objects / len(packets), 1),
            "relay_packet_bytes": len(msgpack.packb(bench.RELAY_PACKET)),
            "relay_packet_objects": _objects(bench.RELAY_PACKET),
            "relay_hops_per_s": round(small),
            "relay_workload_hops_per_s": round(rate),
            "ratio_ceiling": round(rate / small, 3),
        }))  # fmt: skip


if __name__ == "__main__":
    main(sys.argv[1:])
