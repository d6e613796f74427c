"""Wake-ups for inbox waiters: one channel-layer group per agent inbox.

An append (and a close) sends ``agentbus.wake`` to the group of every agent in the
audience, after commit. A waiter subscribes *before* it reads the database, so a
wake-up that lands between its read and its sleep is not lost; it clears its flag
before each read, so a wake-up it consumed always refers to a commit that read sees.

How a wake-up is sent depends on the layer:
- the embedded default (``markus.core.channel_layer.ThreadSafeInMemoryChannelLayer``):
  ``group_send_sync`` from the appending thread, handed to the waiter's loop;
- another layer (channels_redis): ``group_send`` on one long-lived sender loop, so a
  synchronous appender does not open a Redis connection per wake-up; it reaches
  waiters in every process;
- Channels' stock in-memory layer, which cannot wake a loop from another thread, or
  no layer at all: a process-local registry woken with ``call_soon_threadsafe``
  stands in for it (both are process-local, so nothing is lost).
"""

from __future__ import annotations

import asyncio
import logging
import os
import threading
import weakref
from collections import defaultdict
from collections.abc import Iterable

from channels.layers import BaseChannelLayer, InMemoryChannelLayer, get_channel_layer
from django.db import transaction

log = logging.getLogger(__name__)

WAKE_TYPE = "agentbus.wake"
SEND_TIMEOUT = 2.0  # a wake-up not sent by then is left to the waiter's poll
_local_lock = threading.Lock()
_local_waiters: dict[str, set[tuple[asyncio.AbstractEventLoop, asyncio.Event]]] = defaultdict(set)


# layer -> the event loops that hold an anchor subscription on it (see _anchor)
_anchored: weakref.WeakKeyDictionary[BaseChannelLayer, weakref.WeakSet[asyncio.AbstractEventLoop]] = (
    weakref.WeakKeyDictionary()
)


def inbox_group(agent_id: str) -> str:
    return f"agentbus.inbox.{agent_id}"


def _uses_local_registry(layer: BaseChannelLayer | None) -> bool:
    """Channels' stock in-memory layer resolves a waiter's future from the sender's
    thread, which does not wake the waiter's loop: use the registry instead."""
    if layer is None:
        return True
    return isinstance(layer, InMemoryChannelLayer) and not hasattr(layer, "group_send_sync")


def _sends_synchronously(layer: BaseChannelLayer | None) -> bool:
    # isinstance first: hasattr on channels_redis' pub/sub layer needs a running loop.
    return isinstance(layer, InMemoryChannelLayer) and hasattr(layer, "group_send_sync")


def _wake_local(agent_ids: list[str]) -> None:
    with _local_lock:
        targets = [entry for agent_id in agent_ids for entry in _local_waiters.get(agent_id, ())]
    for loop, event in targets:
        try:
            loop.call_soon_threadsafe(event.set)
        except RuntimeError:  # the waiter's loop has closed: it is gone
            pass


async def _group_send_all(layer: BaseChannelLayer, agent_ids: list[str]) -> None:
    for agent_id in agent_ids:
        await layer.group_send(inbox_group(agent_id), {"type": WAKE_TYPE})


class _SenderLoop:
    """One event loop in a daemon thread that sends wake-ups for synchronous callers.

    ``async_to_sync`` from a plain thread (a WSGI worker, Celery, the CLI) would make
    a new loop per call, and channels_redis a new connection per loop: several ms per
    append. This loop keeps one connection. Re-created after a fork.
    """

    def __init__(self) -> None:
        self._lock = threading.Lock()
        self._loop: asyncio.AbstractEventLoop | None = None
        self._pid = 0

    def loop(self) -> asyncio.AbstractEventLoop:
        with self._lock:
            if self._loop is None or self._pid != os.getpid():
                self._loop = asyncio.new_event_loop()
                self._pid = os.getpid()
                threading.Thread(target=self._loop.run_forever, name="agentbus-wakeups", daemon=True).start()
            return self._loop

    def send(self, layer: BaseChannelLayer, agent_ids: list[str], timeout: float = SEND_TIMEOUT) -> None:
        future = asyncio.run_coroutine_threadsafe(_group_send_all(layer, agent_ids), self.loop())
        future.result(timeout)


_sender = _SenderLoop()


def wake_inboxes(agent_ids: Iterable[str]) -> None:
    """Wake every waiter on these inboxes now. Never raises: a lost wake-up costs at
    most one poll interval."""
    ids = sorted({a for a in agent_ids if a})
    if not ids:
        return
    layer = get_channel_layer()
    if _uses_local_registry(layer):
        _wake_local(ids)
        return
    try:
        if _sends_synchronously(layer):
            for agent_id in ids:
                layer.group_send_sync(inbox_group(agent_id), {"type": WAKE_TYPE})
        else:
            _sender.send(layer, ids)
    except Exception:
        log.exception("agentbus: wake-up through the channel layer failed for %s", ids)


def wake_inboxes_on_commit(agent_ids: Iterable[str]) -> None:
    ids = list(agent_ids)
    transaction.on_commit(lambda: wake_inboxes(ids))


async def _anchor(layer: BaseChannelLayer) -> None:
    """Keep one idle subscription per event loop on a channels_redis pub/sub layer.

    Its receiver sleeps 100 ms whenever the connection holds no subscription, so a
    lone watcher that subscribes afresh each round (the restart convention) would
    pay up to 100 ms on every wake-up. With the anchor it keeps reading instead.
    """
    if not type(layer).__module__.startswith("channels_redis.pubsub"):
        return
    loop = asyncio.get_running_loop()
    loops = _anchored.setdefault(layer, weakref.WeakSet())
    if loop in loops:
        return
    loops.add(loop)
    await layer.new_channel(prefix="agentbus-anchor.")


class InboxWaiter:
    """``async with InboxWaiter(agent_id) as w: ... await w.wait(seconds)``.

    ``wait`` returns True when woken, False when the timeout passed; either way the
    caller reads the database next.
    """

    def __init__(self, agent_id: str) -> None:
        self.agent_id = agent_id
        self.event = asyncio.Event()
        self._entry: tuple[asyncio.AbstractEventLoop, asyncio.Event] | None = None
        self._layer: BaseChannelLayer | None = None
        self._channel: str | None = None
        self._pump: asyncio.Task[None] | None = None

    async def __aenter__(self) -> InboxWaiter:
        layer = get_channel_layer()
        if _uses_local_registry(layer):
            self._entry = (asyncio.get_running_loop(), self.event)
            with _local_lock:
                _local_waiters[self.agent_id].add(self._entry)
            return self
        try:
            await _anchor(layer)
            self._channel = await layer.new_channel()
            await layer.group_add(inbox_group(self.agent_id), self._channel)
            self._layer = layer
            self._pump = asyncio.create_task(self._receive_forever())
        except Exception:  # the layer is down: the poll still finds the messages
            log.exception("agentbus: could not subscribe %s to wake-ups", self.agent_id)
        return self

    async def _receive_forever(self) -> None:
        assert self._layer is not None and self._channel is not None
        try:
            while True:
                await self._layer.receive(self._channel)
                self.event.set()
        except asyncio.CancelledError:
            raise
        except Exception:
            log.exception("agentbus: wake-up channel of %s failed; polling", self.agent_id)

    async def wait(self, timeout: float) -> bool:
        try:
            await asyncio.wait_for(self.event.wait(), timeout=max(timeout, 0.0))
            woken = True
        except TimeoutError:
            woken = False
        self.event.clear()
        return woken

    async def __aexit__(self, *exc: object) -> None:
        if self._entry is not None:
            with _local_lock:
                waiters = _local_waiters.get(self.agent_id)
                if waiters is not None:
                    waiters.discard(self._entry)
                    if not waiters:
                        del _local_waiters[self.agent_id]
        if self._pump is not None:
            self._pump.cancel()
            try:
                await self._pump
            except (asyncio.CancelledError, Exception):
                pass
        if self._layer is not None and self._channel is not None:
            try:
                await self._layer.group_discard(inbox_group(self.agent_id), self._channel)
            except Exception:
                log.warning("agentbus: group_discard failed for %s", self.agent_id)
