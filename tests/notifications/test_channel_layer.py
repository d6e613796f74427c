"""The embedded channel layer delivers across threads: a worker thread sends, an event
loop in another thread receives; a fan-out is one hand-over per loop and one encoding of
the event, and every subscriber gets every event in order."""

from __future__ import annotations

import asyncio
import json
import threading
import time
from unittest import mock

from markus.core.channel_layer import ThreadSafeInMemoryChannelLayer, event_of, event_text, wire_form


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


def test_a_message_put_as_the_receiver_begins_to_wait_wakes_it_from_the_receivers_loop():
    """A sender that found nobody receiving puts the message straight into the queue.
    If the receiver began to wait in between, that put resolved its waiter from the
    sender's thread, which schedules the receiver on its loop without waking the loop:
    a loop that nothing else wakes slept on. The sender's look and its put are one step
    against the receiver's start, so the receiver either finds the message or is
    handed it through its loop."""
    layer = ThreadSafeInMemoryChannelLayer()
    deciding, foreign, got = threading.Event(), [], []
    put = layer._put

    def put_once_the_receiver_waits(channel, message, expires):
        if threading.current_thread() is sender:  # it found nobody receiving
            deciding.set()
            deadline = time.monotonic() + 1.0  # with the look and the put one step, it never does
            while not layer.channels[channel]._getters and time.monotonic() < deadline:
                time.sleep(0.001)
        put(channel, message, expires)

    async def receiver():
        loop = asyncio.get_running_loop()
        call_soon, home = loop.call_soon, threading.get_ident()

        def call_soon_noting_the_thread(*args, **kwargs):
            if threading.get_ident() != home:  # what asyncio's debug mode refuses
                foreign.append(args[0])
                loop.call_soon_threadsafe(lambda: None)  # wake the loop, so the test ends
            return call_soon(*args, **kwargs)

        loop.call_soon = call_soon_noting_the_thread
        channel = await layer.new_channel()
        await layer.group_add("g", channel)
        layer._queue(channel)  # the queue exists, nobody receives on it yet
        with mock.patch.object(layer, "_put", put_once_the_receiver_waits):
            sender.start()
            await asyncio.to_thread(deciding.wait, 5)
            got.append(await asyncio.wait_for(layer.receive(channel), timeout=10))
            await asyncio.to_thread(sender.join, 5)

    sender = threading.Thread(target=layer.group_send_sync, args=("g", {"type": "t", "n": 1}))
    asyncio.run(receiver())
    assert got == [{"type": "t", "n": 1}] and foreign == []


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


# ---------------------------------------------------------------------- one fan-out, one hand-over


def _subscribed_receivers(layer, group: str, n: int):
    """n channels of ``group`` receiving on one event loop in a thread. Returns (got,
    loop, ready, done): ``got[i]`` fills with channel i's messages."""
    got: list[list[dict]] = [[] for _ in range(n)]
    ready, box = threading.Event(), {}

    async def receive_all(channel: str, mine: list[dict], count: int) -> None:
        for _ in range(count):
            mine.append(await asyncio.wait_for(layer.receive(channel), timeout=20))

    async def main(count: int) -> None:
        box["loop"] = asyncio.get_running_loop()
        channels = [await layer.new_channel() for _ in range(n)]
        for channel in channels:
            await layer.group_add(group, channel)
        tasks = [asyncio.ensure_future(receive_all(c, got[i], count)) for i, c in enumerate(channels)]
        await asyncio.sleep(0.05)  # every receiver is waiting
        ready.set()
        await asyncio.gather(*tasks)

    def start(count: int) -> threading.Thread:
        t = threading.Thread(target=lambda: asyncio.run(main(count)))
        t.start()
        assert ready.wait(10)
        return t

    return got, box, start


def test_a_fan_out_from_another_thread_wakes_the_loop_once_and_encodes_the_event_once():
    layer = ThreadSafeInMemoryChannelLayer()
    got, box, start = _subscribed_receivers(layer, "agent.x", 50)
    receiving = start(1)
    loop = box["loop"]
    handovers = []
    original = loop.call_soon_threadsafe

    def counting(*args, **kwargs):
        handovers.append(args[0])
        return original(*args, **kwargs)

    loop.call_soon_threadsafe = counting
    with mock.patch("markus.core.channel_layer.json.dumps", wraps=json.dumps) as dumps:
        layer.group_send_sync("agent.x", {"type": "markus.event", "event": {"type": "agent:mailbox", "n": [1]}})
    receiving.join(20)
    loop.call_soon_threadsafe = original
    assert len(handovers) == 1  # one wake-up of the loop for 50 subscribers, not 50
    assert dumps.call_count == 1  # the event is encoded once for the whole fan-out
    texts = [mine[0]["text"] for mine in got]
    assert texts == [json.dumps({"type": "agent:mailbox", "n": [1]})] * 50
    assert len({id(mine[0]) for mine in got}) == 50  # each subscriber its own message


def test_events_from_a_busy_thread_arrive_complete_and_in_order_at_every_subscriber():
    layer = ThreadSafeInMemoryChannelLayer(capacity=100_000)
    n, k = 20, 3000
    got, _, start = _subscribed_receivers(layer, "agent.y", n)
    receiving = start(k)
    for i in range(k):
        layer.group_send_sync("agent.y", {"type": "markus.event", "event": {"i": i}})
    receiving.join(60)
    for mine in got:
        assert [event_of(m)["i"] for m in mine] == list(range(k))


def test_the_wire_form_reads_back_as_the_event_and_leaves_other_messages_alone():
    event = {"type": "agent:mailbox", "item": {"id": "m1", "summary": "Ünïcode ✓"}}
    wire = wire_form({"type": "markus.event", "event": event})
    assert wire == {"type": "markus.event", "text": json.dumps(event)}
    assert event_of(wire) == event and event_text(wire) == json.dumps(event)
    legacy = {"type": "markus.event", "event": event}  # sent by code that bypasses the layer
    assert event_of(legacy) is event and event_text(legacy) == json.dumps(event)
    other = {"type": "t", "items": [1]}
    assert wire_form(other) is other


def test_a_channel_that_leaves_its_group_is_forgotten_once_drained():
    layer = ThreadSafeInMemoryChannelLayer()

    async def run():
        channel = await layer.new_channel()
        await layer.group_add("g", channel)
        await layer.group_send("g", {"type": "markus.event", "event": {"n": 1}})
        await layer.receive(channel)
        kept = channel in layer.channels and channel in layer._loops
        await layer.group_discard("g", channel)
        await layer.send(channel, {"type": "t"})
        await layer.receive(channel)
        return kept, channel in layer.channels, channel in layer._loops, layer.groups

    kept, queue_left, loop_left, groups = asyncio.run(run())
    assert kept and not queue_left and not loop_left and groups == {}


def test_an_event_handed_to_a_slow_loop_is_not_overtaken_by_the_next():
    """The loop runs the hand-over of event 1 late (it is busy); meanwhile its receiver
    drains event 0. Event 2 must still queue behind event 1, not be put straight in."""
    layer = ThreadSafeInMemoryChannelLayer()
    got: list[dict] = []
    ready, drained, box = threading.Event(), threading.Event(), {}

    async def main() -> None:
        box["loop"] = loop = asyncio.get_running_loop()
        channel = await layer.new_channel()
        await layer.group_add("g", channel)
        held: list = []
        original = loop.call_soon_threadsafe

        def slow(callback, *args):  # after the first, hand-overs wait until released, in order
            if box.get("hold"):
                held.append((callback, args))
                return original(lambda: None)
            return original(callback, *args)

        box["release"] = lambda: [callback(*args) for callback, args in held]
        loop.call_soon_threadsafe = slow
        ready.set()
        got.append(await asyncio.wait_for(layer.receive(channel), timeout=10))
        drained.set()
        await asyncio.sleep(0.2)  # the sender sends event 2 now
        box["release"]()
        for _ in range(2):
            got.append(await asyncio.wait_for(layer.receive(channel), timeout=10))

    t = threading.Thread(target=lambda: asyncio.run(main()))
    t.start()
    assert ready.wait(5)
    layer.group_send_sync("g", {"type": "markus.event", "event": {"i": 0}})
    box["hold"] = True
    layer.group_send_sync("g", {"type": "markus.event", "event": {"i": 1}})
    assert drained.wait(5)
    layer.group_send_sync("g", {"type": "markus.event", "event": {"i": 2}})
    t.join(20)
    assert [event_of(m)["i"] for m in got] == [0, 1, 2]
