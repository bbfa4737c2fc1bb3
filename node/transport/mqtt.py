"""Control over MQTT: ``aiomqtt`` under trio through ``trio-asyncio``, confined to this module.

Both ends of the control protocol get the same small interfaces as the in-memory bus: a node
gets a :class:`node.transport.links.Control` (:func:`open_node_control`), the coordinator gets
``send_to`` / ``broadcast`` / ``inbox`` for :class:`coordinator.runtimes.session.Session`
(:func:`open_coordinator_bus`). Topics, all under ``meshcast/<run-id>/``:

* ``up/<x>-<y>``      node → coordinator (hello, ready, report, done, ...)
* ``down/<x>-<y>``    coordinator → one node (assign)
* ``down/all``        coordinator → every node (plan, start, probe, stop)
* ``status/<x>-<y>``  ``online`` on every (re)connection; the broker publishes the node's
  will, ``offline``, when its connection dies without a goodbye (process or container killed);
  both retained, so a coordinator that subscribes again after a broker restart sees the latest
* ``coordinator``     the coordinator's presence: a ``beat`` (its run's epoch and lease) at
  connection and every third of the lease, an ``abandon`` when the run ends (no will: a broker
  shutting down sends every will; a dead coordinator is silent, and its lease ends). Never
  retained: a retained message there is ignored by the nodes (it cannot stand for a live
  coordinator) and cleared by the next coordinator. Nodes publish
  nothing before a beat, so no hello is lost when nodes start before the coordinator (as in
  ``docker compose up``); they say hello stamped with that beat's epoch.
* ``ask``             a node that connected asks for a beat at once (it need not wait a third
  of a lease for the next one)
* ``ping``, ``pong/<x>-<y>``  liveness (:func:`ping_nodes`): a node answers a ping from its event
  loop, in a run or between runs, so a stopped process (whose pid lives and whose sockets still
  accept) is told from a live one

Everything is QoS 1 and published one message at a time in order. Each payload carries an
envelope (publisher epoch and sequence number) so a message re-sent after a reconnection is
delivered once. Sessions are MQTT 5 sessions that outlive a broker restart (with broker
persistence) and expire after :data:`SESSION_EXPIRY` s; the client reconnects with back-off,
resubscribes, and re-sends what was not acknowledged. Credentials come from the URL or the
environment (``MESHCAST_MQTT_USER``, ``MESHCAST_MQTT_PASSWORD``).

A node that goes ``offline`` and does not come back within :data:`LOST_GRACE` s
(:data:`RESTART_GRACE` s just after the coordinator itself had to reconnect: a broker restart
sends every client's will) is reported to the session as a ``done`` message with a
``lost: ...`` status, so a run with a dead node ends promptly and names it.
"""

from __future__ import annotations

import asyncio
import contextlib
import logging
import math
import os
import re
import secrets
import socket
import struct
from collections.abc import AsyncIterator, Callable
from contextlib import asynccontextmanager
from dataclasses import dataclass
from typing import Any, Final
from urllib.parse import unquote, urlsplit

import aiomqtt
import trio
import trio_asyncio
from paho.mqtt.client import MQTT_ERR_SUCCESS
from paho.mqtt.client import time_func as paho_time
from paho.mqtt.packettypes import PacketTypes
from paho.mqtt.properties import Properties
from paho.mqtt.subscribeoptions import SubscribeOptions

from node import defaults, protocol
from node.topology import Coord

__all__ = [
    "LOST_GRACE",
    "BrokerAddress",
    "CoordinatorBus",
    "MqttControl",
    "keepalive",
    "keepalive_for",
    "open_coordinator_bus",
    "open_node_control",
    "parse_broker",
    "ping_nodes",
    "topic_root",
]

SESSION_EXPIRY: Final = 600
"""Seconds a broker keeps a disconnected client's session (subscriptions, queued messages)."""
LOST_GRACE: Final = 5.0
RESTART_GRACE: Final = 30.0
"""The grace instead, for a will that arrives soon after the coordinator itself reconnected: the
broker restarted, it sent every client's will, and the nodes may take a while to come back."""
RESTART_WINDOW: Final = 30.0
CONNECT_TIMEOUT: Final = 3.0
"""paho's TCP connect timeout; while a restarting broker's address does not answer, each
attempt would otherwise take 5 s."""
"""Seconds after a node's will before it counts as lost (a broker restart is not a death)."""
PUBLISH_TIMEOUT: Final = 10.0
KEEPALIVE: Final = 5
"""MQTT keep-alive, seconds (``MESHCAST_MQTT_KEEPALIVE`` raises it: see :func:`keepalive`)."""
CLOSE_GRACE: Final = 5.0
"""How long closing an endpoint waits for its unsent messages to be acknowledged."""
ABORT_GRACE: Final = 0.3
"""The same when the block was cancelled (a signal): what the broker acknowledges at once goes,
and nothing holds the run's end up (a signal ends a run within 2 s)."""

_ENVELOPE = struct.Struct(">c8sQ")  # magic, publisher epoch, sequence number
_MAGIC = b"M"
_RUN_ID = re.compile(r"^[A-Za-z0-9_.-]{1,64}$")

_log = logging.getLogger("meshcast.mqtt")


@dataclass(frozen=True, slots=True)
class BrokerAddress:
    """Where the broker is and who we are to it."""

    host: str
    port: int
    username: str | None
    password: str | None

    def __str__(self) -> str:
        return f"mqtt://{self.host}:{self.port}"


def parse_broker(url: str) -> BrokerAddress:
    """Parse ``mqtt://[user[:password]@]host[:port]`` (or bare ``host[:port]``).

    Credentials missing from the URL come from ``MESHCAST_MQTT_USER`` and
    ``MESHCAST_MQTT_PASSWORD``. Raises ValueError naming what is wrong.
    """
    text = url.strip()
    if "://" not in text:
        text = "mqtt://" + text
    parts = urlsplit(text)
    if parts.scheme not in ("mqtt", "tcp"):
        raise ValueError(f"broker URL {url!r}: scheme must be mqtt:// (TLS is not supported)")
    try:
        port = parts.port or 1883
    except ValueError:
        raise ValueError(f"broker URL {url!r}: bad port") from None
    if not parts.hostname:
        raise ValueError(f"broker URL {url!r}: no host")
    user = unquote(parts.username) if parts.username else os.environ.get("MESHCAST_MQTT_USER") or None
    password = unquote(parts.password) if parts.password else os.environ.get("MESHCAST_MQTT_PASSWORD") or None
    return BrokerAddress(parts.hostname, port, user, password)


def topic_root(run_id: str) -> str:
    """``meshcast/<run-id>``; the run id must be a plain name (no MQTT wildcards or slashes)."""
    if not _RUN_ID.match(run_id):
        raise ValueError(f"run id {run_id!r}: use 1-64 letters, digits, '_', '.', '-'")
    return f"meshcast/{run_id}"


def _node_name(node: Coord) -> str:
    return f"{node[0]}-{node[1]}"


def _parse_node_name(text: str) -> Coord | None:
    x, sep, y = text.partition("-")
    if not sep or not x.isdigit() or not y.isdigit():
        return None
    return (int(x), int(y))


class _TrioSafeClient(aiomqtt.Client):
    """aiomqtt's client with its socket callbacks made safe under trio-asyncio.

    aiomqtt registers paho's socket with the loop *later* (``call_soon_threadsafe``); when the
    connection breaks in between (every broker restart), the registration comes for a socket
    paho has already closed, and under trio-asyncio trio's epoll fails with EBADF and takes
    the whole loop, and the node, down. Here each deferred registration first checks that the
    socket is still paho's current one, and trio is told before paho closes a socket.
    """

    def __init__(self, *args: Any, **kwargs: Any) -> None:
        super().__init__(*args, **kwargs)
        self._client.connect_timeout = CONNECT_TIMEOUT

    def _on_socket_open(self, client: Any, userdata: Any, sock: Any) -> None:
        with contextlib.suppress(OSError, AttributeError):  # no Nagle delay on small control messages
            sock.setsockopt(socket.IPPROTO_TCP, socket.TCP_NODELAY, 1)

        def callback() -> None:
            try:
                while True:
                    client.loop_read()
                    if hasattr(client._sock, "pending") and client._sock.pending() > 0:
                        continue
                    break
            except Exception as exc:
                if not self._disconnected.done():
                    self._disconnected.set_exception(exc)

        def register() -> None:
            if client._sock is sock and sock.fileno() >= 0:
                self._loop.add_reader(sock.fileno(), callback)
            self._misc_task = self._loop.create_task(self._misc_loop())

        self._loop.call_soon_threadsafe(register)

    async def _misc_loop(self) -> None:
        """paho's keep-alive housekeeping, woken only when a keep-alive deadline is due.

        aiomqtt wakes it every second, four wakes of an idle node in five for nothing: paho
        pings once nothing went out or came in for a keep-alive period and gives up once a
        ping is a period old, and does nothing in between (the deadlines of paho's
        ``_check_keepalive``)."""
        client = self._client
        while client.loop_misc() == MQTT_ERR_SUCCESS:
            await asyncio.sleep(_next_keepalive_check(client))

    def _on_socket_register_write(self, client: Any, userdata: Any, sock: Any) -> None:
        def callback() -> None:
            try:
                client.loop_write()
            except Exception as exc:
                if not self._disconnected.done():
                    self._disconnected.set_exception(exc)

        def register() -> None:
            if client._sock is sock and client._registered_write and sock.fileno() >= 0:
                self._loop.add_writer(sock.fileno(), callback)

        self._loop.call_soon_threadsafe(register)

    def _on_socket_close(self, client: Any, userdata: Any, sock: Any) -> None:
        fileno = sock.fileno()
        if fileno > -1:
            self._loop.remove_writer(fileno)
        super()._on_socket_close(client, userdata, sock)
        with contextlib.suppress(Exception):
            trio.lowlevel.notify_closing(sock)


def _read_outcome(client: aiomqtt.Client) -> None:
    """Mark a finished connection's futures read. aiomqtt leaves the error of a connection that
    dropped during its subscribe or first publish unread (``__aexit__`` returns early), and when
    that future is collected, asyncio reports it "never retrieved"; trio-asyncio raises such
    reports into its loop, which ended the node's *next* run, at whatever moment the collector
    ran (a broker killed just as the nodes reconnected, issue 44)."""
    for fut in (client._connected, client._disconnected):
        if fut.done() and not fut.cancelled():
            fut.exception()


def _loop_errors(loop: asyncio.AbstractEventLoop, context: dict[str, Any]) -> None:
    """The asyncio loop's error handler: an unread MQTT error of a gone connection is logged,
    anything else goes to trio-asyncio's handler (which raises it into the loop)."""
    exc = context.get("exception")
    if isinstance(exc, aiomqtt.MqttError) and "never retrieved" in str(context.get("message", "")):
        _log.info("an unread error of a closed broker connection: %s", exc)
        return
    loop.default_exception_handler(context)


def keepalive() -> int:
    """This client's MQTT keep-alive: ``MESHCAST_MQTT_KEEPALIVE`` seconds, never below
    :data:`KEEPALIVE` (a bad value gives the default). A launcher of hundreds of node processes
    on few cores raises it: a node starved of CPU for 1.5 keep-alives is cut off by the broker
    and declared lost although it is only slow. A killed node is still seen at once (its TCP
    connection closes); only a frozen one takes longer to be declared lost."""
    try:
        value = int(os.environ.get("MESHCAST_MQTT_KEEPALIVE", KEEPALIVE))
    except ValueError:
        return KEEPALIVE
    return max(KEEPALIVE, value)


def keepalive_for(nodes: int, per_second: int = 64) -> int:
    """The keep-alive a launcher of ``nodes`` nodes on few cores gives them: a second per
    ``per_second`` nodes (16 s for 1,024 node processes), never below :data:`KEEPALIVE`."""
    return max(KEEPALIVE, math.ceil(nodes / per_second))


def _next_keepalive_check(client: Any) -> float:
    """Seconds until paho's keep-alive has something to do (a ping, or a ping's timeout);
    one second, aiomqtt's own period, where paho's bookkeeping is not there to read."""
    keepalive = float(getattr(client, "_keepalive", 0) or 0)
    try:
        last = min(float(client._last_msg_out), float(client._last_bytes_received))
        ping_t = float(client._ping_t)
    except (AttributeError, TypeError, ValueError):
        return 1.0
    if keepalive <= 0:
        return 1.0
    due = last + keepalive
    if ping_t > 0:
        due = min(due, ping_t + keepalive)
    return min(keepalive, max(0.05, due - paho_time()))


@asynccontextmanager
async def _asyncio_loop() -> AsyncIterator[None]:
    """The trio-asyncio loop: reuse the current one, or open one for the block."""
    if trio_asyncio.current_loop.get() is not None:
        yield
        return
    async with trio_asyncio.open_loop() as loop:
        loop.set_exception_handler(_loop_errors)
        yield


class _Endpoint:
    """One MQTT client kept connected for the life of a nursery, with an ordered outbox."""

    def __init__(
        self,
        broker: BrokerAddress,
        client_id: str,
        subscriptions: list[str],
        *,
        will: aiomqtt.Will | None = None,
        log: Callable[[str], None] | None = None,
    ) -> None:
        self.broker = broker
        self.client_id = client_id
        self.subscriptions = subscriptions
        self.will = will
        self._log = log
        self._epoch = secrets.token_bytes(8)
        self._seq = 0
        self._seen: dict[bytes, set[int]] = {}
        self._out_tx, self._out_rx = trio.open_memory_channel[tuple[str, bytes, bool]](math.inf)
        self._unsent = 0
        self._abandoned = False
        self._client: aiomqtt.Client | None = None
        self._up = trio.Event()
        self._may_publish = trio.Event()
        self._first_connect = trio.Event()
        self.connections = 0
        self.connected_at = 0.0
        self.connect_error: str | None = None

    def log(self, text: str) -> None:
        if self._log is not None:
            self._log(text)

    # -- hooks for subclasses -------------------------------------------------------------
    def on_connected(self) -> list[tuple[str, bytes, bool]]:
        """Raw messages (no envelope) to publish on every (re)connection, before the outbox."""
        return []

    def on_message(self, topic: str, payload: bytes, retained: bool) -> None:
        raise NotImplementedError

    def on_up(self) -> None:
        """Called once connected (again), subscriptions made."""

    def on_down(self, reason: str) -> None:
        """Called when an established connection to the broker is lost."""

    # -- envelope ---------------------------------------------------------------------------
    def _wrap(self, data: bytes) -> bytes:
        self._seq += 1
        return _ENVELOPE.pack(_MAGIC, self._epoch, self._seq) + data

    def _unwrap(self, payload: bytes) -> bytes | None:
        """The payload's data, or None for a duplicate or a payload without an envelope."""
        if len(payload) < _ENVELOPE.size or payload[:1] != _MAGIC:
            return None
        _, epoch, seq = _ENVELOPE.unpack_from(payload)
        seen = self._seen.setdefault(epoch, set())
        if seq in seen:
            return None
        seen.add(seq)
        return payload[_ENVELOPE.size :]

    # -- publishing -------------------------------------------------------------------------
    def publish_nowait(self, topic: str, data: bytes, *, retain: bool = False) -> None:
        """Queue ``data`` for ``topic``; never blocks (the outbox is unbounded and ordered)."""
        self._unsent += 1
        self._out_tx.send_nowait((topic, self._wrap(data), retain))

    async def _publish(self, topic: str, payload: bytes, retain: bool) -> bool:
        client = self._client
        if client is None:
            return False
        try:
            with trio.fail_after(PUBLISH_TIMEOUT):
                await trio_asyncio.aio_as_trio(client.publish)(topic, payload, qos=1, retain=retain)
            return True
        except (aiomqtt.MqttError, trio.TooSlowError) as exc:
            self.log(f"publish to {topic} failed ({exc}); will retry after reconnecting")
            return False

    async def _pump(self) -> None:
        """Publish the outbox in order; a message leaves it only once the broker acknowledged it."""
        await self._may_publish.wait()
        async for topic, payload, retain in self._out_rx:
            while True:
                await self._up.wait()
                if await self._publish(topic, payload, retain):
                    break
                await trio.sleep(0.1)
            self._unsent -= 1

    def abandon(self) -> None:
        """Give up on the broker: closing then waits for nothing (the run ended without it)."""
        self._abandoned = True

    async def flush(self, timeout: float = CLOSE_GRACE) -> bool:
        """Wait (at most ``timeout`` s) until every queued message was acknowledged."""
        if self._abandoned:
            return not self._unsent
        with trio.move_on_after(timeout):
            while self._unsent:
                await trio.sleep(0.01)
            return True
        return False

    # -- connection -------------------------------------------------------------------------
    async def _session_aio(self) -> None:
        """asyncio side: one connection, subscribed, messages handed to :meth:`on_message`."""
        props = Properties(PacketTypes.CONNECT)
        props.SessionExpiryInterval = SESSION_EXPIRY
        client = _TrioSafeClient(
            self.broker.host,
            self.broker.port,
            username=self.broker.username,
            password=self.broker.password,
            identifier=self.client_id,
            protocol=aiomqtt.ProtocolVersion.V5,
            will=self.will,
            keepalive=keepalive(),
            timeout=PUBLISH_TIMEOUT,
            properties=props,
        )
        try:
            await self._connected_aio(client)
        finally:
            _read_outcome(client)

    async def _connected_aio(self, client: _TrioSafeClient) -> None:
        async with client:
            if self.subscriptions:
                # retain as published: a message published retained says so even when it is
                # delivered live, so a node can tell a retained presence from a live beat
                options = SubscribeOptions(qos=1, retainAsPublished=True)
                await client.subscribe([(t, options) for t in self.subscriptions])
            for topic, data, retain in self.on_connected():
                await client.publish(topic, data, qos=1, retain=retain)  # raw: status, presence
            self._client = client
            self.connections += 1
            self.connected_at = trio.current_time()
            self._up.set()
            self._first_connect.set()
            self.on_up()
            async for msg in client.messages:
                payload = msg.payload
                if isinstance(payload, (bytes, bytearray)):
                    self.on_message(str(msg.topic), bytes(payload), bool(msg.retain))

    async def _connection(self) -> None:
        """Stay connected: reconnect with back-off whenever the connection drops."""
        delay = 0.1
        while True:
            try:
                await trio_asyncio.aio_as_trio(self._session_aio)()
                reason = "connection closed"
            except aiomqtt.MqttError as exc:
                reason = str(exc) or type(exc).__name__
            except OSError as exc:
                reason = str(exc)
            was_up = self._client is not None
            self._client = None
            self._up = trio.Event()
            self.connect_error = reason
            if was_up:
                self.log(f"lost the broker {self.broker} ({reason}); reconnecting")
                self.on_down(reason)
                delay = 0.1
            await trio.sleep(delay)
            delay = min(delay * 2, 1.0)

    async def serve(self, *, task_status: trio.TaskStatus[None] = trio.TASK_STATUS_IGNORED) -> None:
        """Run the connection and the outbox; ``started()`` once first connected."""
        async with trio.open_nursery() as nursery:
            nursery.start_soon(self._connection)
            nursery.start_soon(self._pump)
            await self._first_connect.wait()
            task_status.started()


@asynccontextmanager
async def _running(endpoint: _Endpoint, connect_timeout: float) -> AsyncIterator[None]:
    """Connect ``endpoint`` (or fail naming the broker), serve it during the block, flush after."""
    async with _asyncio_loop(), trio.open_nursery() as nursery:
        with trio.move_on_after(connect_timeout) as waited:
            await nursery.start(endpoint.serve)
        if waited.cancelled_caught:
            nursery.cancel_scope.cancel()
            raise ConnectionError(
                f"cannot reach the MQTT broker at {endpoint.broker} within {connect_timeout:g} s"
                f" ({endpoint.connect_error or 'no answer'})"
            )
        grace = CLOSE_GRACE
        try:
            yield
        except BaseException as exc:
            grace = _grace(exc)
            raise
        finally:
            with trio.CancelScope(shield=True):
                await endpoint.flush(grace)
                nursery.cancel_scope.cancel()


def _grace(exc: BaseException) -> float:
    """How long a block that ended with ``exc`` may flush: short if it was cancelled (the
    connection is being cancelled with it), else the full :data:`CLOSE_GRACE`."""
    if isinstance(exc, trio.Cancelled):
        return ABORT_GRACE
    if isinstance(exc, BaseExceptionGroup) and exc.subgroup(trio.Cancelled) is not None:
        return ABORT_GRACE
    return CLOSE_GRACE


# -- node side ------------------------------------------------------------------------------------
class MqttControl(_Endpoint):
    """A node's control channel (implements :class:`node.transport.links.Control`)."""

    def __init__(
        self,
        broker: BrokerAddress,
        run_id: str,
        node: Coord,
        *,
        log: Callable[[str], None] | None = None,
        exclude: frozenset[int] = frozenset(),
    ) -> None:
        """``exclude``: epochs of runs this node has finished (their coordinator may still beat)."""
        root = topic_root(run_id)
        name = _node_name(node)
        self.up_topic = f"{root}/up/{name}"
        self.status_topic = f"{root}/status/{name}"
        self.presence_topic = f"{root}/coordinator"
        self.ask_topic = f"{root}/ask"
        self.ping_topic = f"{root}/ping"
        self.pong_topic = f"{root}/pong/{name}"
        self.exclude = exclude
        self.epoch = 0
        """The epoch of the run this node takes part in (0: no coordinator heard yet)."""
        self.lease = float(defaults.LEASE)
        self.last_beat = 0.0
        self.left: str | None = None
        """Why the node left its run (the coordinator abandoned it, or went silent for its lease)."""
        super().__init__(
            broker,
            f"meshcast-{run_id}-{name}",
            [f"{root}/down/{name}", f"{root}/down/all", self.presence_topic, f"{root}/ping"],
            will=aiomqtt.Will(self.status_topic, b"offline", qos=1, retain=True),
            log=log,
        )
        self._in_tx, self._in_rx = trio.open_memory_channel[bytes](math.inf)
        self._gone = trio.Event()

    def on_connected(self) -> list[tuple[str, bytes, bool]]:
        # retained, as the will: a coordinator that (re)subscribes after this (its own reconnection
        # after a broker restart) still learns the node is back, and the will it may have got
        # while the old broker shut down is superseded
        return [(self.status_topic, b"online", True), (self.ask_topic, self.up_topic.encode(), False)]

    def on_up(self) -> None:
        if self.epoch:  # the lease counts from here again: cut off, nobody's silence meant anything
            self.last_beat = trio.current_time()

    def on_message(self, topic: str, payload: bytes, retained: bool) -> None:
        if topic == self.presence_topic:
            self._presence(payload, retained)
            return
        if topic == self.ping_topic:
            client = self._client
            if not retained and client is not None and len(payload) <= 64:
                with contextlib.suppress(Exception):  # answered from this event loop, at once
                    client._client.publish(self.pong_topic, payload, qos=0)
            return
        data = self._unwrap(payload)
        if data is not None:
            self._in_tx.send_nowait(data)

    def _presence(self, payload: bytes, retained: bool) -> None:
        """A beat or an abandon: a retained one never stands for a live coordinator (ignored)."""
        if retained or not payload:
            return
        try:
            event, epoch = protocol.decode_stamped(payload)
        except protocol.ProtocolError:
            return
        if isinstance(event, protocol.Beat) and epoch:
            if not self.epoch and epoch not in self.exclude:
                self.epoch = epoch
                self.log(f"coordinator present (run epoch {epoch:x}, lease {event.lease:g} s)")
                self._may_publish.set()
            if epoch == self.epoch:
                self.last_beat = trio.current_time()
                self.lease = max(1.0, event.lease)
        elif isinstance(event, protocol.Abandon) and epoch and epoch == self.epoch:
            self._leave("the coordinator ended the run" + (f" ({event.cause})" if event.cause else ""))

    def _leave(self, why: str) -> None:
        if self.left is None:
            self.left = why
            self._gone.set()

    async def coordinator_present(self) -> None:
        """Return once a coordinator of a run this node has not finished beats on the broker
        (nothing is published before); :attr:`epoch` is then its run's."""
        await self._may_publish.wait()

    async def coordinator_gone(self) -> None:
        """Return once the present coordinator has left: it abandoned its run (its end, or its
        will), or it went silent for a lease (see :meth:`watch_lease`)."""
        await self._gone.wait()

    async def watch_lease(self) -> str:
        """Once the coordinator is present: return why the node must leave the run, when the
        coordinator abandons it or has been silent for its lease (while this node was connected)."""
        await self._may_publish.wait()
        while self.left is None:
            due = self.last_beat + self.lease
            with trio.move_on_at(due):
                await self._gone.wait()
            now = trio.current_time()
            if self.left is not None:
                break
            if self._client is None:  # cut off from the broker ourselves: count from the reconnection
                self.last_beat = max(self.last_beat, now - self.lease / 2)
                await trio.sleep(0.1)
                continue
            if now - self.last_beat >= self.lease:
                # a starved process may have beats unread in its socket: let them in before judging
                await trio.sleep(min(1.0, self.lease / 6))
                if trio.current_time() - self.last_beat < self.lease or self.left is not None:
                    continue
                silent = trio.current_time() - self.last_beat
                self._leave(f"the coordinator has been silent for {silent:.1f} s (lease {self.lease:g} s)")
        assert self.left is not None
        return self.left

    async def send(self, data: bytes) -> None:
        self.publish_nowait(self.up_topic, data)

    async def receive(self) -> bytes:
        return await self._in_rx.receive()


@asynccontextmanager
async def open_node_control(
    broker: str | BrokerAddress,
    run_id: str,
    node: Coord,
    *,
    connect_timeout: float = 60.0,
    log: Callable[[str], None] | None = None,
    exclude: frozenset[int] = frozenset(),
) -> AsyncIterator[MqttControl]:
    """A connected node control channel for the block; unsent messages are flushed at the end.
    ``exclude``: epochs of runs the node has finished (it waits for a coordinator of another)."""
    addr = parse_broker(broker) if isinstance(broker, str) else broker
    control = MqttControl(addr, run_id, node, log=log, exclude=exclude)
    async with _running(control, connect_timeout):
        yield control


# -- coordinator side -----------------------------------------------------------------------------
class CoordinatorBus(_Endpoint):
    """The coordinator's end: ``send_to``, ``broadcast`` and ``inbox`` for a Session."""

    def __init__(
        self,
        broker: BrokerAddress,
        run_id: str,
        *,
        log: Callable[[str], None] | None = None,
        epoch: int | None = None,
        lease: float = defaults.LEASE,
    ) -> None:
        """``epoch``: the run's (None: a new one; pass it to the Session); ``lease``: seconds the
        nodes wait for this coordinator when it is silent (it beats every third of it)."""
        root = topic_root(run_id)
        self.root = root
        self.presence_topic = f"{root}/coordinator"
        self.ask_topic = f"{root}/ask"
        self.epoch = epoch or protocol.new_epoch()
        self.lease = float(lease)
        self.end_cause = ""
        """Said in the run's ``abandon`` (e.g. interrupted by a signal)."""
        self._beat = protocol.encode(protocol.Beat(self.lease), self.epoch)
        self._last_beat = -math.inf
        super().__init__(
            broker,
            f"meshcast-{run_id}-coordinator-{secrets.token_hex(3)}",
            [f"{root}/up/+", f"{root}/status/+", self.ask_topic],
            # no will: a broker that shuts down sends every client's will, and a broker restart
            # must not end the run; a coordinator that died is silent, and the lease ends its run
            log=log,
        )
        self._may_publish.set()
        self._in_tx, self.inbox = trio.open_memory_channel[bytes](math.inf)
        self.done: set[Coord] = set()
        self._done_events: dict[Coord, trio.Event] = {}
        self.online: set[Coord] = set()
        self._offline_since: dict[Coord, float] = {}
        self.lost: set[Coord] = set()
        self.broadcasts = 0

    def on_connected(self) -> list[tuple[str, bytes, bool]]:
        # a retained presence (left by an old version, or forged) is cleared: it never stands for us
        return [(self.presence_topic, b"", True), (self.presence_topic, self._beat, False)]

    def beat(self) -> None:
        """Say this run's coordinator is alive (at most every 50 ms: asks may come in a burst).

        Straight to paho, QoS 0, not through the outbox: a publish there waiting for the ack a
        broker restart lost would hold the beats up for longer than a lease."""
        now = trio.current_time()
        client = self._client
        if client is not None and now - self._last_beat >= 0.05:
            self._last_beat = now
            with contextlib.suppress(Exception):
                client._client.publish(self.presence_topic, self._beat, qos=0)

    def abandon_now(self, cause: str) -> None:
        """Tell the nodes now that the run is over (a signal: before its grace ends and the
        connection is cancelled with the run), straight to paho at QoS 0."""
        self.end_cause = cause
        client = self._client
        if client is not None:
            with contextlib.suppress(Exception):
                client._client.publish(
                    self.presence_topic, protocol.encode(protocol.Abandon(cause), self.epoch)
                )

    async def _beats(self) -> None:
        """Beat every third of the lease while the run lasts."""
        while True:
            self.beat()
            await trio.sleep(self.lease / 3)

    def on_up(self) -> None:
        if self.connections > 1:
            self._in_tx.send_nowait(protocol.encode(protocol.BrokerBack(str(self.broker))))

    def on_down(self, reason: str) -> None:
        """Tell the session: it names the broker if the run ends without it."""
        self._in_tx.send_nowait(protocol.encode(protocol.BrokerLost(str(self.broker), reason)))

    def on_message(self, topic: str, payload: bytes, retained: bool) -> None:
        if topic == self.ask_topic:
            if not retained:
                self.beat()
            return
        kind, _, name = topic[len(self.root) + 1 :].partition("/")
        node = _parse_node_name(name)
        if node is None:
            return
        if kind == "status":
            if payload == b"online":
                self.online.add(node)
                self._offline_since.pop(node, None)
            elif payload == b"offline" and node not in self.done:
                self.online.discard(node)
                self._offline_since.setdefault(node, trio.current_time())
            return
        data = self._unwrap(payload)
        if data is None:
            return
        # a node that speaks after its will is back, whatever the order its status messages took
        # (a will can follow the reconnection, when the broker hands a session over)
        self._offline_since.pop(node, None)
        if node not in self.done and _is_done(data):
            self._mark_done(node)
        self._in_tx.send_nowait(data)

    async def _watch_lost(self) -> None:
        """Turn a node that went offline and stayed away into a ``done`` with a lost status."""
        while True:
            await trio.sleep(0.5)
            if self._client is None:  # this bus is cut off itself: nobody's absence means anything
                continue
            now = trio.current_time()
            for node, since in list(self._offline_since.items()):
                after_restart = self.connections > 1 and since - self.connected_at < RESTART_WINDOW
                grace = RESTART_GRACE if after_restart else LOST_GRACE
                if node in self.done or now - since < grace:
                    continue
                del self._offline_since[node]
                self.report_lost(
                    node,
                    "its broker connection died without a goodbye (process or container gone?)"
                    f" and did not return within {grace:g} s",
                )

    def _mark_done(self, node: Coord) -> None:
        self.done.add(node)
        event = self._done_events.pop(node, None)
        if event is not None:
            event.set()

    async def wait_done(self, node: Coord) -> None:
        """Return once ``node``'s final report (or its loss) has come in: an event, not a poll,
        so a thousand node tasks waiting for theirs cost the coordinator nothing."""
        if node not in self.done:
            await self._done_events.setdefault(node, trio.Event()).wait()

    def report_lost(self, node: Coord, why: str) -> None:
        """Tell the session ``node`` is gone: a ``done`` whose status starts with ``lost:``."""
        if node in self.done:
            return
        self.lost.add(node)
        self._mark_done(node)
        self._offline_since.pop(node, None)
        self.log(f"node ({node[0]},{node[1]}) lost: {why}")
        self._in_tx.send_nowait(protocol.encode(protocol.Done(node, f"lost: {why}")))

    async def serve(self, *, task_status: trio.TaskStatus[None] = trio.TASK_STATUS_IGNORED) -> None:
        async with trio.open_nursery() as nursery:
            await nursery.start(super().serve)
            nursery.start_soon(self._watch_lost)
            nursery.start_soon(self._beats)
            task_status.started()

    async def send_to(self, node: Coord, data: bytes) -> None:
        self.publish_nowait(f"{self.root}/down/{_node_name(node)}", data)

    async def broadcast(self, data: bytes) -> None:
        self.broadcasts += 1
        self.publish_nowait(f"{self.root}/down/all", data)

    async def withdraw(self, timeout: float = 2.0) -> None:
        """Tell the nodes the run is over (``abandon``: those still in it leave at once), clear any
        retained presence (a run leaves nothing retained behind for the next), and unsubscribe: the
        broker keeps a gone client's session for :data:`SESSION_EXPIRY` s, and a
        session left subscribed queues every later node report of the run id. Every part of a
        processes run and every run on a deployment has a bus of its own: left subscribed, they
        grew mosquitto to 2.3 GB in 16 minutes of a variation study, each report copied to
        hundreds of gone coordinators."""
        client = self._client
        if client is not None and not self._abandoned:
            # the abandon first, written to the socket at once (when the run was cancelled, the
            # connection may be gone already: see :meth:`abandon_now`)
            abandon = protocol.encode(protocol.Abandon(self.end_cause), self.epoch)
            with contextlib.suppress(Exception):
                client._client.publish(self.presence_topic, abandon, qos=0)
                client._client.loop_write()
            with trio.move_on_after(timeout), contextlib.suppress(aiomqtt.MqttError):
                await trio_asyncio.aio_as_trio(client.publish)(self.presence_topic, b"", qos=1, retain=True)
                await trio_asyncio.aio_as_trio(client.unsubscribe)(list(self.subscriptions))


def _is_done(data: bytes) -> bool:
    """Whether an encoded control message is a ``done``."""
    try:
        return isinstance(protocol.decode(data), protocol.Done)
    except protocol.ProtocolError:
        return False


@asynccontextmanager
async def open_coordinator_bus(
    broker: str | BrokerAddress,
    run_id: str,
    *,
    connect_timeout: float = 30.0,
    log: Callable[[str], None] | None = None,
    epoch: int | None = None,
    lease: float = defaults.LEASE,
) -> AsyncIterator[CoordinatorBus]:
    """A connected coordinator bus for the block, beating for run ``epoch`` (None: a new one;
    Session(epoch=bus.epoch)) every third of ``lease``; the run is abandoned at the end."""
    addr = parse_broker(broker) if isinstance(broker, str) else broker
    bus = CoordinatorBus(addr, run_id, log=log, epoch=epoch, lease=lease)
    async with _running(bus, connect_timeout):
        grace = CLOSE_GRACE
        try:
            yield bus
        except BaseException as exc:  # cancelled: withdraw only if the broker answers at once
            grace = _grace(exc)
            bus.end_cause = bus.end_cause or ("interrupted" if grace == ABORT_GRACE else "failed")
            raise
        finally:
            with trio.CancelScope(shield=True):
                await bus.flush(grace)
                await bus.withdraw(min(grace, 2.0))


async def ping_nodes(
    broker: str | BrokerAddress, run_id: str, nodes: int, timeout: float = 1.0
) -> set[Coord]:
    """The nodes of run ``run_id`` that answer a ping within ``timeout`` s (it returns as soon as
    ``nodes`` have); ConnectionError when the broker itself does not answer within ``timeout``."""
    addr = parse_broker(broker) if isinstance(broker, str) else broker
    root = topic_root(run_id)
    nonce = secrets.token_bytes(8)
    answered: set[Coord] = set()
    connected = trio.Event()

    async def aio() -> None:
        async with aiomqtt.Client(
            addr.host, addr.port, username=addr.username, password=addr.password,
            identifier=f"meshcast-{run_id}-ping-{secrets.token_hex(3)}", timeout=timeout,
        ) as client:  # fmt: skip
            await client.subscribe(f"{root}/pong/+", qos=0)
            connected.set()
            await client.publish(f"{root}/ping", nonce, qos=0)
            async for msg in client.messages:
                node = _parse_node_name(str(msg.topic).rpartition("/")[2])
                if node is not None and msg.payload == nonce:
                    answered.add(node)
                    if len(answered) >= nodes:
                        return

    refused: list[str] = []
    async with _asyncio_loop():
        with trio.move_on_after(timeout):
            try:
                await trio_asyncio.aio_as_trio(aio)()
            except (aiomqtt.MqttError, OSError) as exc:  # raised outside the loop's nursery, below
                refused.append(str(exc))
    if refused:
        raise ConnectionError(f"the broker {addr} does not answer ({refused[0]})")
    if not connected.is_set():
        raise ConnectionError(f"the broker {addr} does not answer within {timeout:g} s")
    return answered
