"""The embedded channel layer, and the wire form in which an event crosses any layer:
encoded once per fan-out, not once per subscriber.

The wire form of an event. ``markus.core.events`` sends ``{"type": "markus.event",
"event": {...}}`` to a group. ``wire_form`` turns it into ``{"type": "markus.event",
"text": "<the event as JSON>"}``, once per fan-out (the embedded layer does it in
``group_send``; a sender may send the wire form itself): every subscriber gets the same
immutable text, which the JSON stream forwards as the frame as it is (``event_text``)
and the mind stream decodes when it needs the fields (``event_of``). A message already
carrying ``text``, or of another type, passes as is; consumers read both forms.

The embedded layer (``ThreadSafeInMemoryChannelLayer``): Channels' in-memory layer,
made safe for the way Markus uses it, where Celery worker threads send and daphne's
event loop receives. The stock layer wakes a waiting receiver by resolving a future
from the sender's thread, which asyncio does not allow across threads. Here a receiver
records its loop, and a fan-out from any other thread is handed to each loop with
*one* ``call_soon_threadsafe`` (one wake-up of the loop, not one per subscriber), into
that loop's pump, which puts ``CHUNK`` messages per pass of the loop (the loop writes
the first subscribers' frames while it serves the rest: ``_Pump``). A
subscribed channel keeps its queue and its loop between receives, so two events for it
always take the same path and arrive in the order they were sent. Expired messages are
swept at most once a second, not on every receive (the stock layer walks every
channel and group each time a consumer receives: quadratic in a fan-out).

On Redis (channels_redis' pub/sub layer) a group is one PUBLISH, fanned out inside
each server process; an event sent in its wire form is decoded there as two strings
and forwarded without re-encoding. The event sockets (``notifications.fanout``) put
one channel per group and process into the group, not one per socket, so either layer
hands a fan-out over once per process and the sockets' frames are made there.
"""

from __future__ import annotations

import asyncio
import json
import threading
import time
import weakref
from collections import deque
from collections.abc import Callable
from copy import deepcopy
from typing import Any

from channels.exceptions import ChannelFull
from channels.layers import InMemoryChannelLayer

EVENT = "markus.event"
SWEEP_EVERY = 1.0  # seconds between sweeps of expired messages
CHUNK = 16  # deliveries per pass of a receiving loop (see _Pump)

Message = dict[str, Any]


def wire_form(message: Message) -> Message:
    """An event message with its event encoded as JSON text, once for the whole fan-out."""
    if message.get("type") == EVENT and "event" in message and "text" not in message:
        return {"type": EVENT, "text": json.dumps(message["event"])}
    return message


# A private event (about a private chat session) carries, beside its text, the person
# it is private to and the text everybody else gets (None: they get nothing). Each
# socket picks its frame with ``frame_for``: still one encoding per fan-out.
PRIVATE_TO = "privateTo"
PUBLIC_TEXT = "publicText"


def private_form(message: Message, private_to: int, public: dict[str, Any] | None) -> Message:
    """The wire form of a private event: ``public`` is what a reader who may not read
    the private conversation gets instead (None: nothing at all)."""
    return {**wire_form(message), PRIVATE_TO: private_to, PUBLIC_TEXT: None if public is None else json.dumps(public)}


def frame_for(message: Message, sees: Callable[[int | None], bool]) -> str | None:
    """The text frame of an event for a reader (``sees(private_to)``): the event, or
    its public form, or None when the reader gets nothing of it."""
    private_to = message.get(PRIVATE_TO)
    if private_to is None or sees(private_to):
        return event_text(message)
    public = message.get(PUBLIC_TEXT)
    return public if isinstance(public, str) else None


def event_text(message: Message) -> str:
    """The event of a ``markus.event`` message as a JSON text frame."""
    text = message.get("text")
    return text if isinstance(text, str) else json.dumps(message["event"])


def event_of(message: Message) -> dict[str, Any]:
    """The event of a ``markus.event`` message as a dict (this subscriber's own copy)."""
    if "event" in message:
        event: dict[str, Any] = message["event"]
        return event
    decoded: dict[str, Any] = json.loads(message["text"])
    return decoded


def _copy(message: Message) -> Message:
    """A subscriber's own copy. The wire form holds only strings: a shallow copy is a
    full one."""
    if message.get("type") == EVENT and "text" in message and "event" not in message:
        return dict(message)
    return deepcopy(message)


class ThreadSafeInMemoryChannelLayer(InMemoryChannelLayer):
    def __init__(self, **kwargs: Any) -> None:
        super().__init__(**kwargs)
        self._loops: dict[str, asyncio.AbstractEventLoop] = {}
        self._memberships: dict[str, int] = {}  # channel -> how many groups it is in
        self._swept = 0.0
        self._lock = threading.Lock()  # group membership, read by senders in other threads
        self._pumps: weakref.WeakKeyDictionary[asyncio.AbstractEventLoop, _Pump] = weakref.WeakKeyDictionary()

    # -------------------------------------------------------------------- queues

    def _queue(self, channel: str) -> asyncio.Queue[tuple[float, Message]]:
        queue = self.channels.get(channel)
        if queue is None:
            queue = self.channels.setdefault(channel, asyncio.Queue(maxsize=self.get_capacity(channel)))
        return queue

    def _put(self, channel: str, message: Message, expires: float) -> None:
        try:
            self._queue(channel).put_nowait((expires, _copy(message)))
        except asyncio.QueueFull:
            pass  # a receiver that stopped reading: drop rather than block the sender

    def _feed(self, channels: list[str], message: Message) -> None:
        """Runs in the receivers' loop: a fan-out's share, into that loop's pump."""
        loop = asyncio.get_running_loop()
        pump = self._pumps.get(loop)
        if pump is None:
            pump = self._pumps[loop] = _Pump(self, loop)
        pump.feed(channels, message, time.time() + self.expiry)

    def _target_loop(self, channel: str) -> asyncio.AbstractEventLoop | None:
        """The loop that receives on ``channel``, or None to put a message directly
        (nobody receives on the channel yet, or its loop is gone). Under ``_lock``, with
        the direct put: a receiver that starts waiting in between would be woken from
        the sender's thread, which does not wake its loop."""
        loop = self._loops.get(channel)
        return None if loop is None or loop.is_closed() else loop

    def _hand_over(self, loop: asyncio.AbstractEventLoop, channels: list[str], message: Message) -> None:
        try:
            running = asyncio.get_running_loop()
        except RuntimeError:
            running = None
        if loop is running:
            self._feed(channels, message)
        else:
            loop.call_soon_threadsafe(self._feed, channels, message)

    # -------------------------------------------------------------------- channel API

    async def send(self, channel: str, message: Message) -> None:
        assert isinstance(message, dict), "message is not a dict"
        self.require_valid_channel_name(channel)
        assert "__asgi_channel__" not in message
        with self._lock:
            loop = self._target_loop(channel)
            if loop is None:
                try:
                    self._queue(channel).put_nowait((time.time() + self.expiry, deepcopy(message)))
                except asyncio.QueueFull:
                    raise ChannelFull(channel) from None
                return
        self._hand_over(loop, [channel], deepcopy(message))

    async def receive(self, channel: str) -> Message:
        self.require_valid_channel_name(channel)
        with self._lock:
            # From here on a sender hands this channel's messages to this loop; one that
            # looked before has already put its message into the queue.
            self._loops[channel] = asyncio.get_running_loop()
            queue = self._queue(channel)
        self._sweep()
        try:
            _, message = await queue.get()
        finally:
            self._forget_if_drained(channel, queue)
        return message

    def _forget_if_drained(self, channel: str, queue: asyncio.Queue[tuple[float, Message]]) -> None:
        """A subscribed channel keeps its queue and loop (see the module docstring); one
        in no group is forgotten once drained, as in the stock layer. Under ``_lock``:
        a sender that finds no loop afterwards puts into a new queue, read by the next
        receive."""
        with self._lock:
            if queue.empty() and not self._memberships.get(channel):
                self.channels.pop(channel, None)
                self._loops.pop(channel, None)

    def _sweep(self) -> None:
        now = time.monotonic()
        if now - self._swept >= SWEEP_EVERY:
            self._swept = now
            self._clean_expired()

    def _remove_from_groups(self, channel: str) -> None:
        with self._lock:
            for group in [g for g, members in self.groups.items() if channel in members]:
                self._discard(group, channel)

    def _clean_expired(self) -> None:
        """The stock sweep (expired messages drop their channel from every group; group
        memberships expire after ``group_expiry``), keeping the membership counts."""
        now = time.time()
        for channel, queue in list(self.channels.items()):
            while not queue.empty() and queue._queue[0][0] < now:
                queue.get_nowait()
                self._remove_from_groups(channel)
                self._forget_if_drained(channel, queue)
        timeout = int(now) - self.group_expiry
        with self._lock:
            for group, members in list(self.groups.items()):
                for channel, joined in list(members.items()):
                    if joined and joined < timeout:
                        self._discard(group, channel)

    async def flush(self) -> None:
        await super().flush()
        with self._lock:
            self._loops = {}
            self._memberships = {}

    # -------------------------------------------------------------------- groups

    async def group_add(self, group: str, channel: str) -> None:
        self.require_valid_group_name(group)
        self.require_valid_channel_name(channel)
        with self._lock:
            members = self.groups.setdefault(group, {})
            if channel not in members:
                self._memberships[channel] = self._memberships.get(channel, 0) + 1
            members[channel] = time.time()

    async def group_discard(self, group: str, channel: str) -> None:
        self.require_valid_channel_name(channel)
        self.require_valid_group_name(group)
        with self._lock:
            self._discard(group, channel)

    def _discard(self, group: str, channel: str) -> None:
        """Under ``_lock``."""
        members = self.groups.get(group)
        if members and members.pop(channel, None) is not None:
            left = self._memberships.get(channel, 1) - 1
            if left > 0:
                self._memberships[channel] = left
            else:
                self._memberships.pop(channel, None)
            if not members:
                self.groups.pop(group, None)

    async def group_send(self, group: str, message: Message) -> None:
        self.group_send_sync(group, message)

    def group_send_sync(self, group: str, message: Message) -> None:
        """Send to every member of ``group`` from any thread, with or without a loop."""
        assert isinstance(message, dict), "message is not a dict"
        self.require_valid_group_name(group)
        if not self.groups.get(group):
            return
        wire = wire_form(message)
        if wire is message:  # the sender's own dict, which it may change later
            wire = _copy(message)
        by_loop: dict[asyncio.AbstractEventLoop, list[str]] = {}
        with self._lock:
            for channel in self.groups.get(group, ()):
                loop = self._target_loop(channel)
                if loop is None:
                    self._put(channel, wire, time.time() + self.expiry)
                else:
                    by_loop.setdefault(loop, []).append(channel)
        for loop, channels in by_loop.items():
            self._hand_over(loop, channels, wire)


class _Pump:
    """One receiving loop's deliveries, in the order they were handed over, ``CHUNK`` per
    pass of the loop. Between passes the loop polls its sockets, so the first
    subscribers' frames are on the wire while later subscribers are still being served
    (all at once, no frame would leave before every subscriber's handler had run)."""

    def __init__(self, layer: ThreadSafeInMemoryChannelLayer, loop: asyncio.AbstractEventLoop) -> None:
        self.layer = layer
        self.loop = loop
        self.pending: deque[tuple[str, Message, float]] = deque()
        self.scheduled = False

    def feed(self, channels: list[str], message: Message, expires: float) -> None:
        self.pending.extend((channel, message, expires) for channel in channels)
        if not self.scheduled:
            self.step()

    def step(self) -> None:
        pending, put = self.pending, self.layer._put
        for _ in range(min(CHUNK, len(pending))):
            put(*pending.popleft())
        self.scheduled = bool(pending)
        if self.scheduled:
            self.loop.call_soon(self.step)
