"""Where a relay-chain hop's time goes: trio's memory channels, or msgpack.

``meshcast bench``'s limit is a chain of trio tasks, each receiving a packet's msgpack bytes from a
memory channel, decoding them, counting the hop and sending the re-encoded bytes on. This runs
the same chain three ways, alternated so that the machine's drift falls on all three alike:

* ``relay``: the bench's own chain (:func:`coordinator.experiments.bench.relay_chain`);
* ``pass``: the same chain with :func:`pass_relay` tasks, passing the bytes on untouched;
* ``msgpack``: a plain loop doing only the decode, count and encode of each hop (no trio).

``relay`` − ``pass`` per hop is msgpack's share of a hop; ``pass`` per hop is the channels' and
the scheduler's. A packet-hop of the emulator at ``ratio`` 0.5 may cost two relay hops.

Usage: ``.venv/bin/python benchmarks/relay_cost.py [ROUNDS]`` (default 5). Prints one JSON object:
each way's hops/s per round and the median microseconds per hop.
"""

from __future__ import annotations

import json
import statistics
import sys
import time

import msgpack
import trio

from coordinator.experiments.bench import RELAY_PACKET, relay_chain

LENGTH, PACKETS = 64, 2000


async def pass_relay(rx: trio.MemoryReceiveChannel[bytes], tx: trio.MemorySendChannel[bytes]) -> None:
    """A relay task that passes each packet's bytes on untouched (no msgpack)."""
    async with rx, tx:
        async for data in rx:
            await tx.send(data)


def _msgpack_only(hops: int) -> float:
    """Seconds for ``hops`` decode, count and encode steps of the relay packet, in a plain loop."""
    data = msgpack.packb(RELAY_PACKET)
    t0 = time.perf_counter()
    for _ in range(hops):
        pkt = msgpack.unpackb(data)
        pkt[3] += 1
        data = msgpack.packb(pkt)
    return time.perf_counter() - t0


def main(rounds: int) -> dict[str, object]:
    hops = LENGTH * PACKETS
    rates: dict[str, list[float]] = {"relay": [], "pass": [], "msgpack": []}
    for _ in range(rounds):
        rates["relay"].append(relay_chain(LENGTH, PACKETS))
        rates["pass"].append(relay_chain(LENGTH, PACKETS, relay=pass_relay))
        rates["msgpack"].append(hops / _msgpack_only(hops))
    us = {way: round(1e6 / statistics.median(r), 2) for way, r in rates.items()}
    return {
        "hops_per_s": {way: [round(x) for x in r] for way, r in rates.items()},
        "us_per_hop": us,
        "msgpack_share_of_relay_hop": round((us["relay"] - us["pass"]) / us["relay"], 3),
    }


if __name__ == "__main__":
    print(json.dumps(main(int(sys.argv[1]) if len(sys.argv) > 1 else 5)))
