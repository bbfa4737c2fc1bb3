"""The in-process runtime split into shards: one OS process per shard, so a run uses every core.

Each shard (:mod:`node.shard`, ``python -m node.shard``) hosts a contiguous block of the nodes
as trio tasks; links inside a shard are memory links, links between shards go over one TCP
connection per pair of shards. The :class:`~coordinator.runtimes.session.Session` stays here: it
reaches each node through its shard's control connection (frames tagged with the node). In
lockstep the shards' sparse barriers agree on every step (:mod:`node.sync.shardstep`), so every shard
count gives the unsharded records.

Every shard runs in this coroutine's nursery: all are reaped on success, failure and Ctrl-C
(they are started in their own session, so a terminal's SIGINT reaches only this process,
which tears them down). A shard that exits or drops its control connection before the run is
over ends the run with :class:`~coordinator.errors.RunFailed` naming it.
"""

from __future__ import annotations

import math
import os
import secrets
import subprocess
import sys
import tempfile
from collections.abc import Callable
from functools import partial
from typing import Final

import trio

from coordinator.errors import RunFailed
from coordinator.runtimes.records import RawRun, RunSettings
from coordinator.runtimes.session import Session
from coordinator.runtimes.signals import run_interruptible
from coordinator.workloads.plan import Plan
from node.shard import BROADCAST, SETUP_TIMEOUT, TOKEN_ENV, FrameWriter, blocks, pack, unpack
from node.topology import Coord
from node.transport.tcp import FrameError, FrameReader
from node.transport.wire import MAX_FRAME, frame_bytes

__all__ = ["run_shards"]

LOOPBACK: Final = "127.0.0.1"
EXIT_GRACE: Final = 10.0
"""How long shards may take to exit by themselves after the run before they are terminated."""
REPORT_GRACE: Final = 5.0
"""How long the last reports of a shard that exited cleanly may take to reach the session."""


class _Shard:
    """One shard process as the coordinator sees it."""

    def __init__(self, index: int, nodes: list[Coord]) -> None:
        self.index = index
        self.nodes = nodes
        self.pid: int | None = None
        self.stream: trio.SocketStream | None = None
        self.writer: FrameWriter | None = None
        self.exited = trio.Event()
        self.returncode: int | None = None
        self.stderr = b""

    def name(self) -> str:
        (x0, y0), (x1, y1) = self.nodes[0], self.nodes[-1]
        pid = f", pid {self.pid}" if self.pid is not None else ""
        return f"shard {self.index} (nodes ({x0},{y0})..({x1},{y1}){pid})"

    def why(self) -> str:
        """How the process ended, with the last line it wrote to stderr."""
        if self.returncode is None:
            return "still running"
        rc = self.returncode
        how = f"was killed by signal {-rc}" if rc < 0 else f"exited with status {rc}"
        lines = self.stderr.decode(errors="replace").strip().splitlines()
        return how + (f": {lines[-1]}" if lines else "")


async def run_shards(
    plan: Plan,
    settings: RunSettings,
    progress: Callable[[int, int], None] | None = None,
    *,
    started: Callable[[int, int], None] | None = None,
    sparse: bool = True,
) -> RawRun:
    """Run ``plan`` on ``settings.shards`` shard processes; ``started(index, pid)`` as each starts.

    Lockstep: each shard's nodes share a sparse step barrier that agrees every step with the
    other shards (:class:`node.sync.shardstep.ShardBarrier`); ``sparse=False``: the α-synchronizer.
    """
    topo = plan.topology
    n = settings.shards
    if not 1 <= n <= topo.size:
        raise ValueError(f"{n} shards for the {topo.size} nodes of {topo.spec}: give 1 to {topo.size}")
    shards = [_Shard(i, nodes) for i, nodes in enumerate(blocks(topo, n))]
    where = {node: s for s in shards for node in s.nodes}
    token = secrets.token_hex(16)
    to_coord_tx, to_coord_rx = trio.open_memory_channel[bytes](math.inf)
    failures: list[str] = []
    finished = trio.Event()

    async def send_to(node: Coord, data: bytes) -> None:
        writer = where[node].writer
        assert writer is not None
        writer.send_nowait(pack([node[0], node[1], data]))

    async def broadcast(data: bytes) -> None:
        for s in shards:
            assert s.writer is not None
            s.writer.send_nowait(pack([BROADCAST, BROADCAST, data]))

    session = Session(plan, settings, send_to, broadcast, to_coord_rx, progress=progress, lead=False)

    def fail(scope: trio.CancelScope, cause: str) -> None:
        if not finished.is_set() and not failures:
            failures.append(cause)
        scope.cancel()

    async def process(s: _Shard, port: int, scope: trio.CancelScope) -> None:
        cmd = [sys.executable, "-m", "node.shard", LOOPBACK, str(port), str(s.index)]
        env = {**os.environ, TOKEN_ENV: token}
        with tempfile.TemporaryFile() as err:
            async with trio.open_nursery() as inner:
                proc: trio.Process = await inner.start(
                    partial(
                        trio.run_process,
                        cmd,
                        env=env,
                        check=False,
                        stdin=subprocess.DEVNULL,
                        stdout=subprocess.DEVNULL,
                        stderr=err,
                        start_new_session=True,
                    )
                )
                s.pid = proc.pid
                if started is not None:
                    started(s.index, proc.pid)
                s.returncode = await proc.wait()
            err.seek(0)
            s.stderr = err.read()[-4096:]
        s.exited.set()
        await ended(s, scope, f"{s.name()} {s.why()} before the run ended")

    async def ended(s: _Shard, scope: trio.CancelScope, cause: str) -> None:
        """A shard ended: fine if the run ends with the reports it sent, else the run fails."""
        if s.returncode in (None, 0):  # its last reports may still be on their way to the session
            with trio.move_on_after(REPORT_GRACE):
                await finished.wait()
        fail(scope, cause)

    async def control(s: _Shard, reader: FrameReader, scope: trio.CancelScope) -> None:
        try:
            while True:
                to_coord_tx.send_nowait(await reader.next())
        except (trio.EndOfChannel, trio.BrokenResourceError, FrameError, OSError):
            pass
        with trio.move_on_after(2.0):  # name how the process ended, if it did
            await s.exited.wait()
        await ended(s, scope, f"{s.name()} closed its control connection before the run ended ({s.why()})")

    async def accept(listener: trio.SocketListener) -> list[FrameReader]:
        """Every shard's control connection, checked by its first frame (the run token)."""
        readers: list[FrameReader | None] = [None] * n
        ports: list[int] = [0] * n
        hosts: list[str] = [LOOPBACK] * n
        while None in readers:
            stream = await listener.accept()
            reader = FrameReader(stream, MAX_FRAME + 1024)
            try:
                hello = unpack(await reader.next(1024))
            except (trio.EndOfChannel, trio.BrokenResourceError, FrameError, OSError, ValueError):
                hello = None
            i = hello.get("shard") if isinstance(hello, dict) else None
            if not (isinstance(hello, dict) and hello.get("token") == token and isinstance(i, int)
                    and 0 <= i < n and readers[i] is None):  # fmt: skip
                await trio.aclose_forcefully(stream)
                continue
            readers[i] = reader
            shards[i].stream = stream
            shards[i].writer = FrameWriter(stream)
            given = hello.get("port")
            ports[i] = given if isinstance(given, int) else 0
            hosts[i] = stream.socket.getpeername()[0]
        answer = {"topology": topo.spec, "shards": n, "hosts": hosts, "ports": ports, "sparse": sparse}
        for s in shards:
            assert s.stream is not None
            await s.stream.send_all(frame_bytes(pack(answer)))
        return [r for r in readers if r is not None]

    async def run() -> RawRun:
        raw: RawRun | None = None
        listener = (await trio.open_tcp_listeners(0, host=LOOPBACK))[0]
        port = listener.socket.getsockname()[1]
        async with trio.open_nursery() as nursery:
            scope = nursery.cancel_scope
            for s in shards:
                nursery.start_soon(process, s, port, scope, name=f"shard-{s.index}")
            try:
                with trio.fail_after(SETUP_TIMEOUT):
                    readers = await accept(listener)
            except trio.TooSlowError:
                fail(scope, f"the shards did not all connect within {SETUP_TIMEOUT:g} s")
                readers = []
            finally:
                await listener.aclose()
            for s, reader in zip(shards, readers, strict=False):
                assert s.writer is not None
                nursery.start_soon(s.writer.run)
                nursery.start_soon(control, s, reader, scope)
            if readers:
                raw = await session.run(set(topo.nodes()))
                finished.set()
                with trio.move_on_after(EXIT_GRACE):
                    for s in shards:
                        await s.exited.wait()
                scope.cancel()
        if failures:
            raise RunFailed(failures[0])
        assert raw is not None
        return raw

    return await run_interruptible(run, session.partial)
