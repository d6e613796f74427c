"""Wake-ups for inbox waiters: one process-local registry of waiters per agent, woken
directly in the embedded case and through one Redis pub/sub connection per process
otherwise.

An append sends a wake-up to every agent in its audience after commit, carrying the
chunk's inbox position and, when small, the message itself (see ``Wake``); a close
sends a bare one. How it travels depends on the channel layer configured:
- channels_redis (a scale-out deployment): one ``PUBLISH`` per agent on the channel
  ``<prefix>:agentbus.wake:<agent>`` of the layer's Redis (``redis_wire.Publisher``).
  Each event loop that has waiters (a daphne process has one) holds one subscriber
  connection (``_RedisHub``, read by a task in that loop) with one subscription per
  agent that has a waiter there, and hands a message to those waiters with no thread
  hop. The Channels group machinery is not used: it cost a channel, a task and a
  round of group bookkeeping per waiter, and did not wait for the subscription to be
  confirmed before the waiter read the database.
- anything else (the embedded in-memory layer, or none): the appending thread wakes the
  waiters of this process directly with ``call_soon_threadsafe``.

Never lost: a waiter registers, and its subscription is confirmed by Redis, *before*
it reads the database; an append its read did not see commits later and publishes
later, so it reaches the waiter. A subscription is kept for ``LINGER_SECONDS`` after
its last waiter leaves, so a watcher that waits again at once does not pay for it.
When the connection drops, the hub reconnects; after it has subscribed again it wakes
every local waiter once, so what was published meanwhile is read from the database. A
waiter whose process dies is simply gone (its subscriptions die with the connection).

The backstop, for a wake-up lost anyway (Redis down, an appending process killed
between its commit and its publish): a parked waiter says up to which inbox position
it has read (``wait(timeout, position=...)``), and one task per event loop (``_Backstop``;
a daphne process has one loop) reads the database for all of them together every
``MARKUS["AGENTBUS_POLL_SECONDS"]`` (``selectors.inbox_news``: on an idle server one
statement, the inbox clock, whatever the number of waits), then wakes only the waiters
whose inbox has something after their position. A parked wait does no read of its own:
512 idle waits cost one small query per period, not 512. A parked bus request
(``waiting.stream_request``, ``wait(timeout, reply_to=...)``) waits for its reply's close,
which moves no inbox position: the same task reads, in the same period and the same
thread hop, which of the parked requests have a closed reply (``selectors.replies_closed``,
one statement for all of them) and wakes those.
"""

from __future__ import annotations

import asyncio
import contextvars
import json
import logging
import math
import os
import threading
import time
import weakref
from collections.abc import Iterable
from dataclasses import dataclass
from functools import partial
from typing import Any

from asgiref.sync import sync_to_async
from django.conf import settings
from django.db import close_old_connections, transaction

from . import selectors
from .redis_wire import TIMEOUT, Publisher, Subscriber, command, open_subscriber

log = logging.getLogger(__name__)

SEND_TIMEOUT = TIMEOUT  # connect, publish, subscribe confirmation; past it the backstop covers the waiter
LINGER_SECONDS = 30.0  # a subscription outlives its last waiter this long
TICK_SECONDS = 1.0  # the subscriber's housekeeping period
HEARTBEAT_SECONDS = 10.0  # a silent connection is PINGed, and dropped if still silent
WAKE_MESSAGE_LIMIT = 8 * 1024  # a larger message is left for the waiter to read


@dataclass(frozen=True, slots=True)
class Wake:
    """What a wake-up says: the inbox position of the chunk that caused it and the
    message (``selectors.chunk_data``) when it was small enough to carry; a close, or
    a reconnect, wakes with neither."""

    position: int | None = None
    message: dict[str, Any] | None = None


def _plain(value: object) -> bool:
    """True when ``value`` reads back from either database exactly as it is: PostgreSQL's
    jsonb rewrites a large float (1e20 comes back as an integer)."""
    if isinstance(value, float):
        return math.isfinite(value) and abs(value) < 1e15
    if isinstance(value, dict):
        return all(_plain(v) for v in value.values())
    if isinstance(value, list):
        return all(_plain(v) for v in value)
    return True


def encode_wake(position: int | None = None, message: dict[str, Any] | None = None) -> bytes:
    doc: dict[str, Any] = {}
    if position is not None:
        doc["p"] = int(position)
        if message is not None and _plain(message):
            try:
                with_message = json.dumps({**doc, "m": message}, separators=(",", ":")).encode()
            except (TypeError, ValueError):
                with_message = b""
            if with_message and len(with_message) <= WAKE_MESSAGE_LIMIT:
                return with_message
    return json.dumps(doc, separators=(",", ":")).encode()


def decode_wake(data: bytes) -> Wake:
    """Anything unexpected decodes to a bare wake-up (the waiter reads the database)."""
    try:
        doc = json.loads(data)
    except ValueError:
        return Wake()
    if not isinstance(doc, dict):
        return Wake()
    position, message = doc.get("p"), doc.get("m")
    if isinstance(position, bool) or not isinstance(position, int):
        return Wake()
    return Wake(position, message if isinstance(message, dict) else None)


class _Channel:
    """One agent's waiters in this process, and (Redis) the state of its subscription."""

    __slots__ = ("awaiting", "idle_since", "state", "waiters")

    def __init__(self) -> None:
        self.waiters: set[InboxWaiter] = set()
        self.state = _NONE
        self.awaiting: list[tuple[asyncio.AbstractEventLoop, asyncio.Future[bool]]] = []
        self.idle_since = 0.0


_NONE, _SUBSCRIBING, _SUBSCRIBED, _UNSUBSCRIBING = range(4)


def _deliver(waiters: list[InboxWaiter], wake: Wake) -> None:
    for waiter in waiters:
        waiter._deliver(wake)


def _resolve_none(future: asyncio.Future[None]) -> None:
    if not future.done():
        future.set_result(None)


def _resolve(future: asyncio.Future[bool], value: bool) -> None:
    if not future.done():
        future.set_result(value)


class _LocalHub:
    """The process-local registry; wakes its waiters from the appending thread."""

    def __init__(self) -> None:
        self._lock = threading.Lock()
        self._channels: dict[str, _Channel] = {}

    def waiter_count(self) -> int:
        with self._lock:
            return sum(len(c.waiters) for c in self._channels.values())

    def _dispatch(self, agent_id: str, wake: Wake) -> None:
        with self._lock:
            channel = self._channels.get(agent_id)
            waiters = list(channel.waiters) if channel is not None else []
        by_loop: dict[asyncio.AbstractEventLoop, list[InboxWaiter]] = {}
        for waiter in waiters:
            by_loop.setdefault(waiter.loop, []).append(waiter)
        for loop, group in by_loop.items():
            try:
                loop.call_soon_threadsafe(_deliver, group, wake)
            except RuntimeError:  # the waiter's loop has closed: it is gone
                for waiter in group:
                    self.leave(waiter)

    def publish(self, agent_ids: list[str], data: bytes) -> None:
        wake = decode_wake(data)
        for agent_id in agent_ids:
            self._dispatch(agent_id, wake)

    async def join(self, waiter: InboxWaiter) -> None:
        with self._lock:
            self._channels.setdefault(waiter.agent_id, _Channel()).waiters.add(waiter)

    def leave(self, waiter: InboxWaiter) -> None:
        with self._lock:
            channel = self._channels.get(waiter.agent_id)
            if channel is not None:
                channel.waiters.discard(waiter)
                if not channel.waiters:
                    del self._channels[waiter.agent_id]


class _RedisHub:
    """The subscriber connection of one event loop (a daphne process has one loop, so
    one connection), read by a task in that loop: a wake-up reaches its waiters with no
    thread hop. Everything here runs in that loop; no lock is needed.

    The task is cancelled with its loop (``asyncio.run`` and ``async_to_sync`` cancel
    what is left), which closes the connection.
    """

    def __init__(self, url: str, prefix: str, loop: asyncio.AbstractEventLoop) -> None:
        self.url = url
        self.prefix = prefix
        self.loop = loop
        self._channels: dict[str, _Channel] = {}
        self._transport: asyncio.Transport | None = None
        self._down = False  # the last connection attempt failed: do not wait for one
        self._ping_at: float | None = None
        self._task: asyncio.Task[None] | None = None

    def waiter_count(self) -> int:  # from any thread: a snapshot
        return sum(len(c.waiters) for c in list(self._channels.values()))

    async def join(self, waiter: InboxWaiter) -> None:
        if self._task is None or self._task.done():
            self._task = self.loop.create_task(self._main())
        channel = self._channels.setdefault(waiter.agent_id, _Channel())
        channel.waiters.add(waiter)
        if channel.state == _SUBSCRIBED or (self._transport is None and self._down):
            return  # covered already, or Redis is down: the backstop covers the waiter
        future: asyncio.Future[bool] = self.loop.create_future()
        channel.awaiting.append((self.loop, future))
        if channel.state != _SUBSCRIBING and self._transport is not None:
            channel.state = _SUBSCRIBING
            self._transport.write(command(b"SUBSCRIBE", (self.prefix + waiter.agent_id).encode()))
        try:
            if not await asyncio.wait_for(future, SEND_TIMEOUT):
                log.info("agentbus: no wake-up subscription for %s; the backstop covers it", waiter.agent_id)
        except TimeoutError:
            log.warning(
                "agentbus: the wake-up subscription of %s was not confirmed; the backstop covers it", waiter.agent_id
            )

    def leave(self, waiter: InboxWaiter) -> None:
        channel = self._channels.get(waiter.agent_id)
        if channel is None:
            return
        channel.waiters.discard(waiter)
        if not channel.waiters:
            channel.idle_since = time.monotonic()
            if channel.state == _NONE:
                del self._channels[waiter.agent_id]

    def _dispatch(self, agent_id: str, wake: Wake) -> None:
        channel = self._channels.get(agent_id)
        if channel is not None:
            _deliver(list(channel.waiters), wake)

    async def _main(self) -> None:
        try:
            await self._serve()
        finally:  # cancelled with its loop: let the loop and this hub be collected
            with _hubs_lock:
                hubs = _loop_hubs.get(self.loop)
                if hubs is not None and hubs.get((self.url, self.prefix)) is self:
                    del hubs[(self.url, self.prefix)]
                    if not hubs:
                        del _loop_hubs[self.loop]

    async def _serve(self) -> None:
        reconnect = False
        delay = 0.05
        while True:
            lost: asyncio.Future[None] = self.loop.create_future()
            try:
                transport, protocol = await asyncio.wait_for(
                    open_subscriber(self.url, self._on_reply, partial(_resolve_none, lost)), SEND_TIMEOUT
                )
            except Exception as exc:
                if not self._down:
                    log.warning(
                        "agentbus: wake-up subscriber cannot reach Redis (%s); the backstop covers the waiters", exc
                    )
                self._lost()
                self._down = reconnect = True
                await asyncio.sleep(delay)
                delay = min(delay * 2, 2.0)
                continue
            delay = 0.05
            try:
                self._connected(transport, reconnect)
                while not lost.done():
                    await asyncio.wait([lost], timeout=TICK_SECONDS)
                    self._tick(transport, protocol)
                log.warning("agentbus: wake-up subscriber lost Redis; the backstop covers the waiters until it is back")
            finally:
                transport.close()
                self._lost()
            reconnect = True

    def _connected(self, transport: asyncio.Transport, reconnect: bool) -> None:
        self._transport, self._down, self._ping_at = transport, False, None
        names = []
        for agent_id, channel in self._channels.items():
            if channel.waiters:
                channel.state = _SUBSCRIBING
                names.append((self.prefix + agent_id).encode())
        if names:
            transport.write(command(b"SUBSCRIBE", *names))
        if reconnect:  # answered after the subscriptions: then everyone re-reads
            transport.write(command(b"PING", b"resync"))

    def _lost(self) -> None:
        self._transport = None
        for agent_id, channel in list(self._channels.items()):
            channel.state = _NONE
            for _, future in channel.awaiting:
                _resolve(future, False)
            channel.awaiting = []
            if not channel.waiters:
                del self._channels[agent_id]

    def _tick(self, transport: asyncio.Transport, protocol: Subscriber) -> None:
        now = time.monotonic()
        idle = [
            agent_id
            for agent_id, channel in self._channels.items()
            if channel.state == _SUBSCRIBED and not channel.waiters and now - channel.idle_since > LINGER_SECONDS
        ]
        for agent_id in idle:
            self._channels[agent_id].state = _UNSUBSCRIBING
        if idle:
            transport.write(command(b"UNSUBSCRIBE", *[(self.prefix + a).encode() for a in idle]))
        if now - protocol.received_at <= HEARTBEAT_SECONDS:
            self._ping_at = None
        elif self._ping_at is None:
            self._ping_at = now
            transport.write(command(b"PING", b"markus-keepalive"))
        elif now - self._ping_at > HEARTBEAT_SECONDS:
            log.warning("agentbus: Redis did not answer a PING in %.0f s; reconnecting", HEARTBEAT_SECONDS)
            transport.abort()

    def _on_reply(self, reply: Any) -> None:
        if not isinstance(reply, list) or len(reply) < 2:
            if reply == b"resync":  # PING answered outside subscribed mode
                self._resync()
            return
        kind, name = reply[0], reply[1]
        if kind == b"message" and len(reply) == 3:
            self._dispatch(name.decode()[len(self.prefix) :], decode_wake(reply[2]))
        elif kind == b"subscribe":
            channel = self._channels.get(name.decode()[len(self.prefix) :])
            if channel is not None and channel.state == _SUBSCRIBING:
                channel.state = _SUBSCRIBED
                for _, future in channel.awaiting:
                    _resolve(future, True)
                channel.awaiting = []
        elif kind == b"unsubscribe":
            agent_id = name.decode()[len(self.prefix) :]
            channel = self._channels.get(agent_id)
            if channel is not None and channel.state == _UNSUBSCRIBING:
                del self._channels[agent_id]
        elif kind == b"pong" and name == b"resync":
            self._resync()

    def _resync(self) -> None:
        for agent_id in [a for a, c in self._channels.items() if c.waiters]:
            self._dispatch(agent_id, Wake())


def backstop_seconds() -> float:
    """The backstop's period (``MARKUS["AGENTBUS_POLL_SECONDS"]``): how late, at worst, a
    message whose wake-up was lost reaches its parked waiter."""
    return float(settings.MARKUS["AGENTBUS_POLL_SECONDS"])


def _backstop_read(positions: dict[str, int], requests: dict[str, str]) -> tuple[int, set[str], set[str]]:
    """The inbox clock and the agents with news (``selectors.inbox_news``) when waits
    are parked on positions, the answered requests (``selectors.replies_closed``) when
    requests are parked: at most one statement each while nothing happens."""
    if not transaction.get_connection().in_atomic_block:  # never a caller's open transaction
        close_old_connections()  # a connection that died since the last period is replaced
    clock, news = selectors.inbox_news(positions) if positions else (0, set())
    return clock, news, selectors.replies_closed(requests) if requests else set()


class _Backstop:
    """The one backstop read of an event loop's parked waiters (see the module's
    docstring). It runs while the loop has parked waiters, in a context of its own (never
    a request's, which ends before it does); everything but the read runs in the loop."""

    def __init__(self, loop: asyncio.AbstractEventLoop) -> None:
        self.loop = loop
        self.parked: set[InboxWaiter] = set()
        self._task: asyncio.Task[None] | None = None
        self.reads = 0  # how many backstop reads this loop has made

    def park(self, waiter: InboxWaiter) -> None:
        self.parked.add(waiter)
        if self._task is None or self._task.done():
            self._task = self.loop.create_task(self._run(), context=contextvars.Context())

    def unpark(self, waiter: InboxWaiter) -> None:
        self.parked.discard(waiter)

    async def _run(self) -> None:
        try:
            while self.parked:
                await asyncio.sleep(backstop_seconds())
                await self.check()
        finally:
            with _hubs_lock:
                if _backstops.get(self.loop) is self and not self.parked:
                    del _backstops[self.loop]

    async def check(self) -> None:
        """One read for every parked waiter; wake those with news."""
        watched = {w: w.position for w in self.parked if w.position is not None}
        positions: dict[str, int] = {}
        for waiter, position in watched.items():
            assert position is not None
            positions[waiter.agent_id] = min(position, positions.get(waiter.agent_id, position))
        asking = {w: stream for w in self.parked if (stream := w.reply_to) is not None}
        requests = {stream: w.agent_id for w, stream in asking.items()}
        if not positions and not requests:
            return
        self.reads += 1
        try:
            clock, news, answered = await sync_to_async(_backstop_read)(positions, requests)
        except Exception as exc:
            log.warning("agentbus: the wake-up backstop could not read the inboxes (%s)", exc)
            return
        for waiter, stream in asking.items():
            if waiter.reply_to == stream and stream in answered:
                waiter._deliver(Wake())
        for waiter, position in watched.items():
            if waiter.position != position:
                continue  # woken meanwhile: it reads for itself
            if waiter.agent_id in news:
                waiter._deliver(Wake())
            elif position is not None and position < clock:
                waiter.position = clock  # nothing for it up to the clock: not asked again


_hubs_lock = threading.Lock()
_backstops: weakref.WeakKeyDictionary[asyncio.AbstractEventLoop, _Backstop] = weakref.WeakKeyDictionary()
_local_hub = _LocalHub()
_publishers: dict[tuple[str, str], Publisher] = {}
_loop_hubs: weakref.WeakKeyDictionary[asyncio.AbstractEventLoop, dict[tuple[str, str], _RedisHub]] = (
    weakref.WeakKeyDictionary()
)


def _reset_after_fork() -> None:
    global _hubs_lock, _local_hub, _publishers, _loop_hubs, _backstops
    _hubs_lock, _local_hub, _publishers, _loop_hubs = threading.Lock(), _LocalHub(), {}, weakref.WeakKeyDictionary()
    _backstops = weakref.WeakKeyDictionary()


os.register_at_fork(after_in_child=_reset_after_fork)


def _redis_target() -> tuple[str, str] | None:
    """The Redis of a channels_redis layer, and the wake-up channels' prefix there;
    None for any other layer."""
    config = settings.CHANNEL_LAYERS.get("default") or {}
    if not str(config.get("BACKEND", "")).startswith("channels_redis."):
        return None
    options = config.get("CONFIG") or {}
    hosts = options.get("hosts") or [("localhost", 6379)]
    host = hosts[0]
    if isinstance(host, dict):
        host = host.get("address", "redis://localhost:6379")
    if isinstance(host, (tuple, list)):
        host = f"redis://{host[0]}:{host[1]}"
    return str(host), f"{options.get('prefix', 'asgi')}:agentbus.wake:"


def _hub_for(loop: asyncio.AbstractEventLoop) -> _LocalHub | _RedisHub:
    target = _redis_target()
    if target is None:
        return _local_hub
    with _hubs_lock:
        hubs = _loop_hubs.setdefault(loop, {})
        hub = hubs.get(target)
        if hub is None:
            hub = hubs[target] = _RedisHub(*target, loop)
        return hub


def _backstop_for(loop: asyncio.AbstractEventLoop) -> _Backstop:
    with _hubs_lock:
        backstop = _backstops.get(loop)
        if backstop is None:
            backstop = _backstops[loop] = _Backstop(loop)
        return backstop


def parked_waiters() -> int:
    """How many waiters of this process sleep under the backstop's watch (parked)."""
    with _hubs_lock:
        backstops = list(_backstops.values())
    return sum(len(b.parked) for b in backstops)


def backstop_reads() -> int:
    """How many backstop reads the loops of this process have made (live loops only)."""
    with _hubs_lock:
        return sum(b.reads for b in _backstops.values())


def registered_waiters() -> int:
    """How many waiters this process holds (in every loop)."""
    with _hubs_lock:
        hubs = [h for by_target in _loop_hubs.values() for h in by_target.values()]
    return _local_hub.waiter_count() + sum(h.waiter_count() for h in hubs)


def _publish(agent_ids: list[str], data: bytes) -> None:
    try:
        target = _redis_target()
        if target is None:
            _local_hub.publish(agent_ids, data)
            return
        with _hubs_lock:
            publisher = _publishers.get(target)
            if publisher is None:
                publisher = _publishers[target] = Publisher(*target)
        publisher.publish(agent_ids, data)
    except Exception as exc:
        log.warning("agentbus: wake-up for %s failed (%s); the backstop will find it", agent_ids, exc)


def wake_inboxes(
    agent_ids: Iterable[str], *, position: int | None = None, message: dict[str, Any] | None = None
) -> None:
    """Wake every waiter on these inboxes now. Never raises: a lost wake-up costs at
    most one backstop period."""
    ids = sorted({a for a in agent_ids if a})
    if ids:
        _publish(ids, encode_wake(position, message))


def wake_inboxes_on_commit(
    agent_ids: Iterable[str], *, position: int | None = None, message: dict[str, Any] | None = None
) -> None:
    """``wake_inboxes`` once the transaction commits (the wake-up is encoded now)."""
    ids = sorted({a for a in agent_ids if a})
    if ids:
        data = encode_wake(position, message)
        transaction.on_commit(lambda: _publish(ids, data))


class InboxWaiter:
    """``async with InboxWaiter(agent_id) as w: ... wakes = await w.wait(seconds)``.

    Entering registers the waiter (and, on Redis, waits for its subscription to be
    confirmed), so it must be entered *before* the caller reads the database. ``wait``
    returns the wake-ups received since the last call, at once if there are some, else
    after the first one or the timeout (then an empty list). ``position``: the inbox
    position the caller has read up to; the loop's backstop then watches it while it
    sleeps (and wakes it with a bare ``Wake`` when a message after it is found).
    ``reply_to``: the request stream whose reply the caller (the inbox's agent) waits
    for; the backstop wakes it with a bare ``Wake`` when that reply is closed.
    """

    # A parked waiter costs little.
    __slots__ = ("_future", "_hub", "_wakes", "agent_id", "loop", "position", "reply_to")

    def __init__(self, agent_id: str) -> None:
        self.agent_id = agent_id
        self.loop = asyncio.get_running_loop()
        self._hub: _LocalHub | _RedisHub | None = None
        self._wakes: list[Wake] = []
        self._future: asyncio.Future[None] | None = None
        self.position: int | None = None  # while parked with a position: watched by the backstop
        self.reply_to: str | None = None  # while parked on a request's reply: watched by the backstop

    async def __aenter__(self) -> InboxWaiter:
        hub = self._hub = _hub_for(self.loop)
        try:
            await hub.join(self)
        except BaseException:
            hub.leave(self)
            raise
        return self

    async def __aexit__(self, *exc: object) -> None:
        if self._hub is not None:
            self._hub.leave(self)
            self._hub = None

    def _deliver(self, wake: Wake) -> None:
        """In the waiter's loop."""
        self._wakes.append(wake)
        if self._future is not None and not self._future.done():
            self._future.set_result(None)

    async def wait(self, timeout: float, *, position: int | None = None, reply_to: str | None = None) -> list[Wake]:
        if not self._wakes and timeout > 0:
            future = self._future = self.loop.create_future()
            timer = self.loop.call_later(timeout, _resolve_none, future)
            backstop = None
            if position is not None or reply_to is not None:
                self.position, self.reply_to = position, reply_to
                backstop = _backstop_for(self.loop)
                backstop.park(self)
            try:
                await future
            finally:
                timer.cancel()
                self._future = None
                self.position = self.reply_to = None
                if backstop is not None:
                    backstop.unpark(self)
        wakes, self._wakes = self._wakes, []
        return wakes
