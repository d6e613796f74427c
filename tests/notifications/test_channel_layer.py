"""The embedded channel layer delivers across threads: a worker thread sends, an event
loop in another thread receives."""

from __future__ import annotations

import asyncio
import threading

from markus.core.channel_layer import ThreadSafeInMemoryChannelLayer


def test_a_message_sent_from_another_thread_wakes_the_waiting_receiver():
    layer = ThreadSafeInMemoryChannelLayer()
    got: list[dict] = []
    ready = threading.Event()

    async def receiver():
        channel = await layer.new_channel()
        await layer.group_add("agent.x", channel)
        ready.set()
        # The loop is otherwise idle: only a thread-safe hand-over can wake it.
        got.append(await asyncio.wait_for(layer.receive(channel), timeout=10))

    t = threading.Thread(target=lambda: asyncio.run(receiver()))
    t.start()
    assert ready.wait(5)
    sender = threading.Thread(target=layer.group_send_sync, args=("agent.x", {"type": "markus.event", "n": 1}))
    sender.start()
    sender.join()
    t.join(10)
    assert got == [{"type": "markus.event", "n": 1}]


def test_messages_keep_their_order_and_are_copies():
    layer = ThreadSafeInMemoryChannelLayer()

    async def run():
        channel = await layer.new_channel()
        await layer.group_add("g", channel)
        payload = {"type": "t", "items": [1]}
        layer.group_send_sync("g", payload)
        payload["items"].append(2)
        await layer.group_send("g", {"type": "t", "items": [3]})
        return [await layer.receive(channel), await layer.receive(channel)]

    first, second = asyncio.run(run())
    assert first["items"] == [1] and second["items"] == [3]


def test_sending_to_a_group_nobody_joined_is_harmless():
    ThreadSafeInMemoryChannelLayer().group_send_sync("nobody", {"type": "t"})
