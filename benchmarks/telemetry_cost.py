"""What per-hop telemetry costs: bytes on the wire and time per hop (issue 42, item 1).

For a free-clock packet that has crossed h links, it measures the encoded frame's size and the
time of one hop's work at a node (decode the frame, the engine's ``receive_free``, encode each
send) with telemetry on and off, on a straight VH path across a mesh. Prints one JSON object;
asserts nothing (figures, not tests). Usage: ``.venv/bin/python benchmarks/telemetry_cost.py``.

Its times move with whatever else the machine does; instruction counts do not. For those, run one
mode under callgrind twice with different hop counts and take the difference per hop::

    valgrind --tool=callgrind --callgrind-out-file=/dev/null \
        .venv/bin/python benchmarks/telemetry_cost.py --instructions on|off H HOPS
"""

from __future__ import annotations

import json
import os
import platform
import statistics
import sys
import time

from node import build_name
from node.routing import registry
from node.settings import NodeSettings
from node.switching.engine import Engine, Injection
from node.topology import Topology
from node.transport.wire import PacketFrame, decode_link, encode_packet

ROUNDS = 7
HOPS_PER_ROUND = 20_000


def hop_cost(telemetry: bool, h: int) -> tuple[float, int]:
    """(µs per hop, frame bytes) for a packet ``h`` links from its source on a 1 × (h + 2) mesh."""
    topo = Topology.parse(f"mesh:{h + 2}x1")
    settings = NodeSettings(port_model="all-port", clock="free", telemetry=telemetry)
    engines = [Engine(topo, (x, 0), registry, settings, clock_ns=time.monotonic_ns) for x in range(h + 2)]
    ((_, pkt),) = engines[0].inject_free(Injection(0, "vh", [(h + 1, 0)], {}, 0))
    for x in range(1, h):  # carry it h - 1 hops on, so its telemetry is as long as h hops make it
        ((_, pkt),) = engines[x].receive_free(pkt)
    frame = encode_packet(pkt)
    node = engines[h]
    best = float("inf")
    for _ in range(ROUNDS):
        t0 = time.perf_counter()
        for _ in range(HOPS_PER_ROUND):
            got = decode_link(frame)
            assert isinstance(got, PacketFrame)
            for _, out in node.receive_free(got.packet):
                encode_packet(out)
        best = min(best, (time.perf_counter() - t0) / HOPS_PER_ROUND * 1e6)
        node.deliveries.clear()
    return best, len(frame)


def instructions(telemetry: bool, h: int, hops: int) -> None:
    """``hops`` hops' work of a packet ``h`` links out, once: run under ``valgrind --tool=callgrind``,
    whose instruction count does not depend on what else the machine is doing."""
    topo = Topology.parse(f"mesh:{h + 2}x1")
    settings = NodeSettings(port_model="all-port", clock="free", telemetry=telemetry)
    engines = [Engine(topo, (x, 0), registry, settings, clock_ns=time.monotonic_ns) for x in range(h + 2)]
    ((_, pkt),) = engines[0].inject_free(Injection(0, "vh", [(h + 1, 0)], {}, 0))
    for x in range(1, h):
        ((_, pkt),) = engines[x].receive_free(pkt)
    frame = encode_packet(pkt)
    node = engines[h]
    for _ in range(hops):
        got = decode_link(frame)
        assert isinstance(got, PacketFrame)
        for _, out in node.receive_free(got.packet):
            encode_packet(out)


def main() -> None:
    if len(sys.argv) == 5 and sys.argv[1] == "--instructions":  # --instructions on|off H HOPS
        instructions(sys.argv[2] == "on", int(sys.argv[3]), int(sys.argv[4]))
        return
    rows = []
    for h in (1, 4, 8, 16, 32):
        off_us, off_b = hop_cost(False, h)
        on_us, on_b = hop_cost(True, h)
        rows.append({"hops": h, "us_off": round(off_us, 3), "us_on": round(on_us, 3),
                     "bytes_off": off_b, "bytes_on": on_b,
                     "bytes_per_hop": round((on_b - off_b) / h, 1),
                     "us_added": round(on_us - off_us, 3)})  # fmt: skip
    print(json.dumps({
        "command": "benchmarks/telemetry_cost.py", "build": build_name(),
        "python": platform.python_version(),
        "date": time.strftime("%Y-%m-%d %H:%M UTC", time.gmtime()), "loadavg": os.getloadavg(),
        "best_of": ROUNDS, "hops_per_round": HOPS_PER_ROUND, "rows": rows,
        "median_us_added": statistics.median(r["us_added"] for r in rows),
    }, indent=1))  # fmt: skip


if __name__ == "__main__":
    main()
