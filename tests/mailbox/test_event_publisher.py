"""On the Redis pub/sub channel layer, events reach the group's subscribers in order
through the per-process publisher: one socket write on the sending thread's connection,
no event loop started per event (``async_to_sync(group_send)`` cost milliseconds)."""

from __future__ import annotations

import asyncio
import threading

import pytest
from channels.layers import get_channel_layer

from markus.core import events
from markus.core.channel_layer import event_of

pytestmark = pytest.mark.redis


def test_events_reach_a_redis_subscriber_in_order_without_an_event_loop_per_send(monkeypatch):
    layer = get_channel_layer()
    assert type(layer).__name__ == "RedisPubSubChannelLayer"

    def no_event_loop_per_send(*args, **kwargs):
        raise AssertionError("async_to_sync used to send an event")

    monkeypatch.setattr(events, "async_to_sync", no_event_loop_per_send)
    group = "agent.publisher-test"
    sent = [{"type": "agent:mailbox", "n": i, "item": {"payload": {"text": "é"}}} for i in range(5)]

    def writer() -> None:  # a worker thread, as a service's on-commit callback runs
        for event in sent:
            events._send(group, event)

    async def scenario() -> list[dict]:
        channel = await layer.new_channel()
        await layer.group_add(group, channel)
        await asyncio.sleep(0.2)  # the subscription is in place
        thread = threading.Thread(target=writer)
        thread.start()
        await asyncio.to_thread(thread.join, 10)
        received = [await asyncio.wait_for(layer.receive(channel), 10) for _ in sent]
        await layer.group_discard(group, channel)
        return received

    received = asyncio.run(scenario())
    assert events.flush(5)
    assert [m["type"] for m in received] == ["markus.event"] * len(sent)
    assert [event_of(m) for m in received] == sent


def test_a_publish_that_fails_is_logged_and_does_not_reach_the_writer(monkeypatch, caplog):
    """The write that caused the event has committed: a failed send is logged, never
    raised, and the next event goes out on a new connection."""
    layer = get_channel_layer()
    events._send("agent.warm", {"type": "x"})  # the publisher exists
    publisher = events._publishers[layer]
    assert publisher is not None and publisher.flush(5)

    def down(*args, **kwargs):
        raise ConnectionError("redis down")

    monkeypatch.setattr(publisher, "_serialize", down)
    events._send("agent.down", {"type": "x"})  # returns; the failure is logged
    assert "event send failed for agent.down" in caplog.text
    monkeypatch.undo()
    events._send("agent.up", {"type": "x"})
    assert publisher.flush(5)
