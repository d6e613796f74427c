"""The embedded default's channel layer: Channels' in-memory layer, made safe for the
way Markus uses it, where Celery worker threads send and daphne's event loop receives.

The stock layer wakes a waiting receiver by resolving a future from the sender's
thread, which asyncio does not allow across threads (the receiver may not notice until
its loop wakes for another reason). Here a receiver records its loop, and a message
for it from any other thread is handed over with ``call_soon_threadsafe``.
``group_send_sync`` lets synchronous code (the event helper) send without starting an
event loop per event.
"""

from __future__ import annotations

import asyncio
import time
from copy import deepcopy
from typing import Any

from channels.exceptions import ChannelFull
from channels.layers import InMemoryChannelLayer


class ThreadSafeInMemoryChannelLayer(InMemoryChannelLayer):
    def __init__(self, **kwargs: Any) -> None:
        super().__init__(**kwargs)
        self._loops: dict[str, asyncio.AbstractEventLoop] = {}

    def _queue(self, channel: str) -> asyncio.Queue[tuple[float, dict[str, Any]]]:
        return self.channels.setdefault(channel, asyncio.Queue(maxsize=self.get_capacity(channel)))

    def _put(self, channel: str, message: dict[str, Any]) -> None:
        try:
            self._queue(channel).put_nowait((time.time() + self.expiry, message))
        except asyncio.QueueFull:
            pass  # a receiver that stopped reading: drop rather than block the sender

    def _deliver(self, channel: str, message: dict[str, Any]) -> None:
        message = deepcopy(message)
        loop = self._loops.get(channel)
        try:
            running = asyncio.get_running_loop()
        except RuntimeError:
            running = None
        if loop is not None and loop is not running and not loop.is_closed():
            loop.call_soon_threadsafe(self._put, channel, message)
        else:
            queue = self._queue(channel)
            if queue.full():
                raise ChannelFull(channel)
            queue.put_nowait((time.time() + self.expiry, message))

    async def send(self, channel: str, message: dict[str, Any]) -> None:
        assert isinstance(message, dict), "message is not a dict"
        self.require_valid_channel_name(channel)
        assert "__asgi_channel__" not in message
        self._deliver(channel, message)

    async def receive(self, channel: str) -> dict[str, Any]:
        self._loops[channel] = asyncio.get_running_loop()
        try:
            return await super().receive(channel)
        finally:
            if channel not in self.channels:
                self._loops.pop(channel, None)

    async def group_send(self, group: str, message: dict[str, Any]) -> None:
        self.group_send_sync(group, message)

    def group_send_sync(self, group: str, message: dict[str, Any]) -> None:
        assert isinstance(message, dict), "message is not a dict"
        self.require_valid_group_name(group)
        for channel in list(self.groups.get(group, {})):
            try:
                self._deliver(channel, message)
            except ChannelFull:
                pass
