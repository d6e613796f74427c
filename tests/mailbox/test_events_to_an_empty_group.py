"""On the embedded channel layer an event for a group nobody is in is not encoded for
the wire (the layer would drop it; the loop sends about fifteen an item, most while no
view of the agent is open); the test hook's listeners still get it, and a group with a
member still gets every event, in order, as before."""

from __future__ import annotations

import asyncio

from asgiref.sync import async_to_sync
from channels.layers import get_channel_layer

from markus.core import channel_layer, events


def test_an_event_for_an_empty_group_is_not_encoded_but_reaches_the_listeners(monkeypatch):
    layer = get_channel_layer()
    assert type(layer) is channel_layer.ThreadSafeInMemoryChannelLayer
    encoded: list[dict] = []
    real_wire_form = events.wire_form

    def counting(message):
        encoded.append(message)
        return real_wire_form(message)

    monkeypatch.setattr(events, "wire_form", counting)
    heard: list[tuple[str, dict]] = []

    def listener(group, event):
        heard.append((group, event))

    events.add_listener(listener)
    try:
        events._send("agent.nobody-listens", {"type": "agent:delta", "text": "a"})
        events._send("agent.nobody-listens", {"type": "agent:delta", "text": "b"}, (7, None))
    finally:
        events.remove_listener(listener)
    assert encoded == []
    assert [e["text"] for _, e in heard] == ["a", "b"]


def test_a_group_with_a_member_gets_every_event_in_order():
    layer = get_channel_layer()
    group = "agent.someone-listens"

    async def scenario() -> list[dict]:
        channel = await layer.new_channel()
        await layer.group_add(group, channel)
        for i in range(3):
            events._send(group, {"type": "agent:delta", "n": i})
        got = [await asyncio.wait_for(layer.receive(channel), 5) for _ in range(3)]
        await layer.group_discard(group, channel)
        events._send(group, {"type": "agent:delta", "n": 99})  # left: nobody to send to
        return got

    received = async_to_sync(scenario)()
    assert [channel_layer.event_of(m)["n"] for m in received] == [0, 1, 2]
    assert all(isinstance(m.get("text"), str) for m in received)  # the wire form, encoded once
