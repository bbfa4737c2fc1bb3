"""A fork server for node processes: one parent that has imported the node once forks every node.

Starting ``python -m node`` costs an interpreter and its imports (about 0.2 s of CPU and 20 MB
each); forking a parent that already imported them costs a millisecond and shares its pages
copy-on-write. Every node is still its own OS process, with its own TCP links, MQTT connection
and trio loop (trio runs only in the children: the parent never starts a loop or a thread).

The parent (``python -m coordinator.runtimes.forkserver``) speaks JSON lines on stdin/stdout:

    in:  {"id": 3, "argv": ["--node", "1,2", ...], "log": "/run/logs/node-1-2.log"}
    out: {"id": 3, "pid": 4711}             the child is forked
    out: {"id": 3, "exit": 0}               it exited: its status (-N: killed by signal N)

Teardown: when its stdin closes (the coordinator is done, or died however it died) or on
SIGTERM/SIGINT, the parent terminates its children, kills those still up after a grace period,
reaps them and exits. Each child also asks the kernel to kill it if the parent dies
(``PR_SET_PDEATHSIG``), so not even a SIGKILLed fork server leaves a node behind. With
``MESHCAST_PROFILE_DIR`` set, each node runs under cProfile and leaves ``node-x-y.prof`` there.
:class:`ForkServer` is the coordinator's side, a trio object.
"""

from __future__ import annotations

import contextlib
import json
import os
import select
import signal
import sys
import time
from dataclasses import dataclass, field
from typing import Any, Final

__all__ = ["KILL_GRACE", "ForkServer", "serve"]

KILL_GRACE: Final = 3.0
"""How long children have to exit after SIGTERM before the fork server kills them."""
_PR_SET_PDEATHSIG: Final = 1
_PR_SET_NAME: Final = 15


def _prctl(option: int, arg: int | bytes) -> None:
    """Linux ``prctl``; a no-op where there is none (the children then rely on the parent's teardown)."""
    try:
        import ctypes

        libc = ctypes.CDLL(None, use_errno=True)
        libc.prctl(option, arg, 0, 0, 0)
    except (OSError, AttributeError):
        pass


def _warm() -> None:
    """Import everything a node needs, once, so that every fork shares it."""
    import gc

    import node.__main__
    import node.actor
    import node.transport.mqtt
    import node.transport.tcp  # noqa: F401

    gc.collect()
    gc.freeze()  # the collector leaves these objects alone: their pages stay shared in children


def _child(argv: list[str], log: str, parent: int, name: str) -> None:
    """In the forked child: become node ``argv`` with its output in ``log``; never returns."""
    code = 1
    try:
        _prctl(_PR_SET_PDEATHSIG, signal.SIGKILL)
        if os.getppid() != parent:  # the parent died between fork and prctl
            os._exit(1)
        _prctl(_PR_SET_NAME, name.encode()[:15])
        signal.signal(signal.SIGTERM, signal.SIG_DFL)
        signal.signal(signal.SIGINT, signal.default_int_handler)
        signal.signal(signal.SIGCHLD, signal.SIG_DFL)
        fd = os.open(log, os.O_WRONLY | os.O_CREAT | os.O_TRUNC, 0o644)
        null = os.open(os.devnull, os.O_RDONLY)
        os.dup2(null, 0)
        os.dup2(fd, 1)
        os.dup2(fd, 2)
        os.closerange(3, 1 << 16)  # the fork server's pipes: the coordinator must see them close
        import random

        random.seed()
        from node.__main__ import main

        profile_dir = os.environ.get("MESHCAST_PROFILE_DIR")
        if profile_dir:  # cProfile each node: where a node process spends its time
            import cProfile

            profiler = cProfile.Profile()
            try:
                code = profiler.runcall(main, argv)
            finally:
                profiler.dump_stats(
                    os.path.join(profile_dir, name.replace(" ", "-").replace(",", "-") + ".prof")
                )
        else:
            code = main(argv)
    except SystemExit as exc:
        code = exc.code if isinstance(exc.code, int) else 1
    except BaseException as exc:  # a node's own crash: name it in its log, exit 1
        with contextlib.suppress(BaseException):
            print(f"node: crashed: {type(exc).__name__}: {exc}", file=sys.stderr, flush=True)
        code = 1
    finally:
        try:
            sys.stdout.flush()
            sys.stderr.flush()
        finally:
            os._exit(code)


def _status(raw: int) -> int:
    """A wait status as a subprocess return code: the exit status, or -N for signal N."""
    return -os.WTERMSIG(raw) if os.WIFSIGNALED(raw) else os.WEXITSTATUS(raw)


@dataclass
class _Server:
    """The fork server's state: its children and where its replies go."""

    out: int  # the reply pipe's file descriptor
    children: dict[int, int] = field(default_factory=dict)  # pid -> request id
    stopping: bool = False

    def say(self, doc: dict[str, Any]) -> None:
        """One reply line (short: a pipe writes it whole). In teardown, a full pipe drops it."""
        data = (json.dumps(doc) + "\n").encode()
        if not self.stopping:
            os.write(self.out, data)
            return
        with contextlib.suppress(OSError):
            os.write(self.out, data)

    def spawn(self, line: str) -> None:
        try:
            req = json.loads(line)
            rid, argv, log = int(req["id"]), [str(a) for a in req["argv"]], str(req["log"])
            name = str(req.get("name", "node"))
        except (ValueError, KeyError, TypeError) as exc:
            print(f"forkserver: bad request {line[:200]!r}: {exc}", file=sys.stderr, flush=True)
            return
        sys.stdout.flush()
        sys.stderr.flush()
        parent = os.getpid()
        pid = os.fork()
        if pid == 0:
            _child(argv, log, parent, name)
        self.children[pid] = rid
        self.say({"id": rid, "pid": pid})

    def reap(self) -> None:
        while self.children:
            try:
                pid, raw = os.waitpid(-1, os.WNOHANG)
            except ChildProcessError:
                return
            if pid == 0:
                return
            rid = self.children.pop(pid, None)
            if rid is not None:
                self.say({"id": rid, "exit": _status(raw)})

    def stop(self) -> None:
        """Terminate every child, kill what is left after the grace, reap them all."""
        self.stopping = True
        os.set_blocking(self.out, False)  # a full pipe nobody reads must not block the teardown
        for pid in list(self.children):
            with contextlib.suppress(ProcessLookupError):
                os.kill(pid, signal.SIGTERM)
                os.kill(pid, signal.SIGCONT)  # a stopped (SIGSTOP) node takes its SIGTERM now
        deadline = time.monotonic() + KILL_GRACE
        while self.children and time.monotonic() < deadline:
            self.reap()
            time.sleep(0.02)
        for pid in list(self.children):
            with contextlib.suppress(ProcessLookupError):
                os.kill(pid, signal.SIGKILL)
        while self.children:
            try:
                pid, raw = os.waitpid(-1, 0)
            except ChildProcessError:
                break
            rid = self.children.pop(pid, None)
            if rid is not None:
                self.say({"id": rid, "exit": _status(raw)})


def serve() -> int:
    """The fork server's loop: fork on each request line, report exits, tear down at EOF or a signal."""
    _prctl(_PR_SET_NAME, b"meshcast-fork")
    out = os.dup(1)
    os.dup2(2, 1)  # a stray print must not corrupt the reply stream
    sys.stdout = sys.stderr
    server = _Server(out)

    def on_signal(signum: int, frame: object) -> None:
        server.stopping = True

    signal.signal(signal.SIGTERM, on_signal)
    signal.signal(signal.SIGINT, on_signal)
    _warm()
    server.say({"ready": os.getpid()})
    stdin = sys.stdin.fileno()
    buf = b""
    try:
        while not server.stopping:
            try:
                ready, _, _ = select.select([stdin], [], [], 0.05)
            except InterruptedError:
                ready = []
            if ready:
                chunk = os.read(stdin, 65536)
                if not chunk:
                    break  # the coordinator is gone or done
                buf += chunk
                *lines, buf = buf.split(b"\n")
                for line in lines:
                    if line.strip():
                        server.spawn(line.decode(errors="replace"))
            server.reap()
    except BrokenPipeError:
        pass
    finally:
        with contextlib.suppress(BrokenPipeError):
            server.stop()
    return 0


class ForkServer:
    """The coordinator's side: start nodes through a running fork server and wait for their exits."""

    def __init__(self, stdin: Any, stdout: Any) -> None:
        import trio

        self._stdin: trio.abc.SendStream = stdin
        self._stdout: trio.abc.ReceiveStream = stdout
        self._next = 0
        self._exits: dict[int, int] = {}
        self._events: dict[int, trio.Event] = {}
        self._lock = trio.Lock()
        self.ready = trio.Event()
        self.closed = False

    async def pump(self) -> None:
        """Read the server's replies until it exits (run this in a nursery)."""
        buf = b""
        while True:
            chunk = await self._stdout.receive_some(65536)
            if not chunk:
                break
            buf += chunk
            *lines, buf = buf.split(b"\n")
            for line in lines:
                try:
                    doc = json.loads(line)
                except ValueError:
                    continue
                if "ready" in doc:
                    self.ready.set()
                elif "exit" in doc:
                    rid = int(doc["id"])
                    self._exits[rid] = int(doc["exit"])
                    self._event(rid).set()
        self.closed = True
        self.ready.set()
        for event in self._events.values():
            event.set()

    def _event(self, rid: int) -> Any:
        import trio

        return self._events.setdefault(rid, trio.Event())

    async def spawn(self, argv: list[str], log: str, name: str) -> int:
        """Ask for one node process; returns the id to :meth:`wait` on."""
        await self.ready.wait()
        rid, self._next = self._next, self._next + 1
        self._event(rid)
        if self.closed:
            self._exits[rid] = -signal.SIGKILL
            self._events[rid].set()
            return rid
        line = json.dumps({"id": rid, "argv": argv, "log": log, "name": name}) + "\n"
        async with self._lock:
            await self._stdin.send_all(line.encode())
        return rid

    async def wait(self, rid: int) -> int:
        """The exit status of node ``rid`` (-9 if the fork server went away first)."""
        await self._event(rid).wait()
        return self._exits.get(rid, -signal.SIGKILL)


if __name__ == "__main__":
    sys.exit(serve())
