"""A group's events to this process's sockets: received once per process, written by
one frame pump per event loop.

**Once per process** (``join`` / ``leave``). A socket of ``/ws/agents/<id>/`` or
``/ws/notifications/`` does not put its own channel into its group. The first socket
of a group in this event loop opens one channel of the layer for the group
(``_GroupFeed``), the last one to leave closes it; one task receives on it and hands
each event to every member socket in the process (``deliver``: the socket picks its
frame, ``frame_for``, and gives it to the loop's pump, looked up once per event). An
event thus leaves the layer once per process, not once per socket (on Redis: one message off the pub/sub connection and
one decode, where there were one queue, one decode and one wake-up of the socket's
receive loop per socket), and its ``N`` frames are made in one pass without waking
``N`` consumers. Each socket still gets its group's events in the order the layer
delivered them (one channel, one task). A message of another type sent to the group is
forwarded to each member's own channel, as before.

**The pump** (``FramePump``): the loop's outgoing event frames in the order they were
handed over, ``FRAMES_PER_PASS`` per pass of the loop, ``agent:delta`` frames
coalesced per socket (see the class).
"""

from __future__ import annotations

import asyncio
import json
import logging
import weakref
from collections import deque
from typing import Any, Protocol

from markus.core.channel_layer import EVENT

log = logging.getLogger(__name__)


class Socket(Protocol):
    """What the pump and the feeds need of a socket (``EventStreamConsumer``)."""

    channel_name: str
    closed: bool

    async def send(self, text_data: str) -> None: ...

    def deliver(self, message: dict[str, Any], pump: FramePump) -> None: ...


# ---------------------------------------------------------------------------- the pump

# Frames sent per pass of the event loop (see FramePump).
FRAMES_PER_PASS = 16
# How an ``agent:delta`` frame begins (events are encoded with their type first).
_DELTA_PREFIX = '{"type": "agent:delta"'
_TURN_KEYS = ("agentId", "mailboxItemIds", "activityId", "turn")


def _coalesced(first: str, then: str) -> str | None:
    """One delta frame of two of the same turn (the text of ``then`` after that of
    ``first``), or None when they are not of one turn."""
    a, b = json.loads(first), json.loads(then)
    if any(a.get(k) != b.get(k) for k in _TURN_KEYS) or not isinstance(a.get("text"), str):
        return None
    a["text"] += str(b.get("text") or "")
    if "seq" in b:  # a chat's piece: the frame ends with the later one (a resume goes on after it)
        a["seq"] = b["seq"]
    return json.dumps(a)


class FramePump:
    """One event loop's outgoing event frames, sent in the order they were handed
    over, ``FRAMES_PER_PASS`` per pass of the loop.

    The server writes a frame to its socket when the loop next polls. Without the pump
    no frame of a fan-out would leave before the last subscriber's frame was made; with
    it the first subscribers' frames are on the wire while the rest are still being
    sent. One queue per loop keeps each socket's frames in order.

    ``agent:delta`` frames are coalesced per socket: a delta pushed while the socket's
    last frame still waits in the queue, and is a delta of the same turn, is appended to
    that frame's text instead of queued as one more. A socket the pump is behind on (a
    slow client, a large audience) gets fewer, longer pieces, never more frames than
    the agent produced, and the queue grows by at most one delta per socket per turn."""

    def __init__(self) -> None:
        self.pending: deque[list[Any]] = deque()  # [socket, text]
        self.last: dict[Socket, list[Any]] = {}  # each socket's last queued frame
        self.task: asyncio.Task[None] | None = None

    def push(self, socket: Socket, text: str) -> None:
        last = self.last.get(socket)
        if last is not None and text.startswith(_DELTA_PREFIX) and last[1].startswith(_DELTA_PREFIX):
            merged = _coalesced(last[1], text)
            if merged is not None:
                last[1] = merged
                return
        entry = [socket, text]
        self.pending.append(entry)
        self.last[socket] = entry
        if self.task is None:
            self.task = asyncio.get_running_loop().create_task(self.run())

    async def run(self) -> None:
        try:
            while self.pending:
                for _ in range(min(FRAMES_PER_PASS, len(self.pending))):
                    entry = self.pending.popleft()
                    socket, text = entry
                    if self.last.get(socket) is entry:
                        del self.last[socket]
                    if socket.closed:  # went away mid-fan-out: its frames are dropped quietly
                        continue
                    try:
                        await socket.send(text_data=text)
                    except Exception as exc:  # one closed socket must not stop the others' frames
                        socket.closed = True
                        log.info("socket %s closed mid-fan-out (%s): its frames dropped", socket.channel_name, exc)
                await asyncio.sleep(0)  # a pass of the loop: it writes these frames out
        finally:
            self.task = None


_pumps: weakref.WeakKeyDictionary[asyncio.AbstractEventLoop, FramePump] = weakref.WeakKeyDictionary()


def pump() -> FramePump:
    """The running loop's frame pump."""
    loop = asyncio.get_running_loop()
    found = _pumps.get(loop)
    if found is None:
        found = _pumps[loop] = FramePump()
    return found


# ---------------------------------------------------------------------------- the feeds


class _GroupFeed:
    """One group's events for one loop's sockets: a channel of the layer in the group,
    one task receiving on it, each event handed to every member."""

    def __init__(self, layer: Any, group: str) -> None:
        self.layer, self.group = layer, group
        self.members: dict[Socket, None] = {}  # insertion order: the first to join get their frames first
        self.channel = ""
        self.task: asyncio.Task[None] | None = None
        self.started: asyncio.Task[None] = asyncio.get_running_loop().create_task(self._start())

    async def _start(self) -> None:
        self.channel = await self.layer.new_channel()
        await self.layer.group_add(self.group, self.channel)
        self.task = asyncio.get_running_loop().create_task(self._run())

    async def _run(self) -> None:
        while True:
            try:
                message = await self.layer.receive(self.channel)
            except asyncio.CancelledError:
                raise
            except Exception:  # the layer's connection: it reconnects itself; try again shortly
                log.exception("receiving the events of %s failed", self.group)
                await asyncio.sleep(1.0)
                continue
            self.hand_out(message)

    def hand_out(self, message: dict[str, Any]) -> None:
        if message.get("type") != EVENT:  # not ours to read: to each member's own channel
            for socket in list(self.members):
                _in_background(self.layer.send(socket.channel_name, message))
            return
        to = pump()
        for socket in list(self.members):
            if socket.closed:  # went away without leaving (a failed send): not served again
                self.members.pop(socket, None)
                continue
            try:
                socket.deliver(message, to)
            except Exception:  # one socket's frame must not cost the others theirs
                log.exception("an event of %s for socket %s failed", self.group, socket.channel_name)

    async def close(self) -> None:
        try:
            await asyncio.shield(self.started)
        except Exception:
            return  # it never subscribed
        try:
            await self.layer.group_discard(self.group, self.channel)
        finally:
            if self.task is not None:
                self.task.cancel()


# Each loop's feeds by layer and group.
_feeds: weakref.WeakKeyDictionary[asyncio.AbstractEventLoop, dict[tuple[int, str], _GroupFeed]] = (
    weakref.WeakKeyDictionary()
)


def _loop_feeds() -> dict[tuple[int, str], _GroupFeed]:
    loop = asyncio.get_running_loop()
    feeds = _feeds.get(loop)
    if feeds is None:
        feeds = _feeds[loop] = {}
    return feeds


# Closings and forwardings under way (a task is kept only while something refers to it).
_background: set[asyncio.Task[Any]] = set()


def _in_background(work: Any) -> None:
    task = asyncio.get_running_loop().create_task(work)
    _background.add(task)
    task.add_done_callback(_background.discard)


async def join(layer: Any, group: str, socket: Socket) -> None:
    """``socket`` gets ``group``'s events (``socket.deliver``) from when this returns:
    through the process's feed of the group, opened now if it is the first."""
    feeds, key = _loop_feeds(), (id(layer), group)
    feed = feeds.get(key)
    first = feed is None
    if feed is None:
        feed = feeds[key] = _GroupFeed(layer, group)
    feed.members[socket] = None
    try:
        await asyncio.shield(feed.started)
        if not first:  # the membership is renewed by every socket that joins (a layer may expire it)
            await layer.group_add(group, feed.channel)
    except BaseException:
        started = feed.started
        failed = started.done() and (started.cancelled() or started.exception() is not None)
        feed.members.pop(socket, None)
        if feeds.get(key) is feed and (failed or not feed.members):
            del feeds[key]
            if not failed:
                _in_background(feed.close())
        raise


async def leave(layer: Any, group: str, socket: Socket) -> None:
    """``socket`` gets no more of ``group``'s events; the last to leave closes the feed."""
    feeds, key = _loop_feeds(), (id(layer), group)
    feed = feeds.get(key)
    if feed is None or socket not in feed.members:
        return
    del feed.members[socket]
    if not feed.members:
        del feeds[key]
        await feed.close()
