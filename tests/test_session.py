"""The coordinator's session on its own, over in-memory channels: when each node is assigned.

A node dials its neighbours with larger coordinates (node/transport/tcp.py) and listens before it says
hello, so the session assigns a node only once every neighbour it dials has said hello: no
node ever dials a port that nobody listens on yet.
"""

from __future__ import annotations

import trio
import trio.testing

from coordinator.runtimes.records import RunSettings
from coordinator.workloads.plan import Multicast, Plan
from node import protocol
from node.topology import Coord, Topology
from tests.helpers import scripted_session


async def test_a_node_is_assigned_once_the_neighbours_it_dials_said_hello() -> None:
    plan = Plan(Topology.parse("mesh:3x1"), (Multicast(1, "vh", (0, 0), ((2, 0),), 0),))
    session, inbox_tx, sent = scripted_session(plan, RunSettings(wall_budget=20))

    def sent_to(kind: type[protocol.Event]) -> list[Coord | None]:
        return [n for n, e in sent if isinstance(e, kind)]

    nodes = {(0, 0), (1, 0), (2, 0)}
    async with trio.open_nursery() as nursery:
        nursery.start_soon(session.run, nodes)

        async def say(event: protocol.Event) -> None:
            inbox_tx.send_nowait(protocol.encode(event))
            await trio.testing.wait_all_tasks_blocked()

        await say(protocol.Hello((0, 0), "h"))
        assert sent_to(protocol.Assign) == []  # it dials (1,0), which has not said hello
        await say(protocol.Hello((2, 0), "h"))
        assert sent_to(protocol.Assign) == [(2, 0)]  # it dials nobody
        await say(protocol.Hello((1, 0), "h"))
        assert sent_to(protocol.Assign) == [(2, 0), (1, 0), (0, 0)]
        for n in sorted(nodes):
            await say(protocol.Ready(n))
        # (0,0), assigned on (1,0)'s hello, goes on like the others: every node gets its plan
        assert sorted(n for n in sent_to(protocol.PlanMessage) if n is not None) == sorted(nodes)
        nursery.cancel_scope.cancel()


async def test_settle_times_what_nodes_in_this_process_make_of_a_broadcast() -> None:
    """The free clock paces its probes by this: two checkpoints outlast every woken task's turn."""
    from coordinator.runtimes.session import Session

    async with trio.open_nursery() as nursery:
        txs = []
        for _ in range(20):
            tx, rx = trio.open_memory_channel[bytes](1)
            txs.append(tx)

            async def node(rx: trio.MemoryReceiveChannel[bytes] = rx) -> None:
                await rx.receive()
                end = trio.current_time() + 0.002  # 2 ms of work each, without yielding
                while trio.current_time() < end:
                    pass

            nursery.start_soon(node)
        await trio.testing.wait_all_tasks_blocked()
        for tx in txs:
            tx.send_nowait(b"start")
        took = await Session._settle()
        assert took >= 20 * 0.002
        assert await Session._settle() < 0.02  # and nothing when nobody has anything to do
