"""One agent's events fanned out to many sockets: every subscriber gets every event,
once, in order, as the JSON text the layer encoded once; on the embedded in-memory
layer and (second pass) on Redis pub/sub. The events are sent the way the product
sends them: by commits in another thread (the ORM's sync thread)."""

from __future__ import annotations

import asyncio
import json
from unittest import mock

import pytest
from asgiref.sync import async_to_sync
from channels.db import database_sync_to_async
from django.db import transaction

from mailbox.registry import MailboxType
from mailbox.services import mailbox_enqueue

from .conftest import session_cookie, ws_connect

pytestmark = [
    pytest.mark.pg,  # also on PostgreSQL with the Redis channel layer
    pytest.mark.django_db(transaction=True),
]

SUBSCRIBERS = 100


def commit_events(agent_id: str, k: int) -> None:
    for i in range(k):
        with transaction.atomic():
            mailbox_enqueue(
                agent_id=agent_id, source_type=MailboxType.SYSTEM_EVENT, payload={"summary": f"e{i}", "content": "x"}
            )


async def open_sockets(path: str, cookie: bytes, n: int) -> list:
    sockets = []
    for _ in range(n):
        communicator, connected = await ws_connect(path, cookie=cookie)
        assert connected
        sockets.append(communicator)
    return sockets


async def frames_of(communicator, k: int) -> list[dict]:
    return [json.loads(await communicator.receive_from(timeout=20)) for _ in range(k)]


@pytest.fixture(autouse=True)
def many_sockets_per_caller(settings):
    """One user opens all the subscribers here: the per-caller cap is lifted."""
    settings.MARKUS = {**settings.MARKUS, "SOCKETS_PER_CALLER": SUBSCRIBERS + 8}


@pytest.mark.parametrize("k", [5, 20])
def test_every_subscriber_gets_every_event_once_and_in_order(alice, agent, k):
    cookie = session_cookie(alice)

    async def go():
        sockets = await open_sockets(f"/ws/agents/{agent.id}/", cookie, SUBSCRIBERS)
        try:
            sending = asyncio.ensure_future(database_sync_to_async(commit_events)(agent.id, k))
            received = await asyncio.gather(*(frames_of(c, k) for c in sockets))
            await sending
            assert all([await c.receive_nothing(timeout=0.05) for c in sockets[:5]])  # nothing twice
            return received
        finally:
            for c in sockets:
                await c.disconnect()

    received = async_to_sync(go)()
    assert len(received) == SUBSCRIBERS
    for frames in received:
        assert [(f["type"], f["item"]["summary"]) for f in frames] == [("agent:mailbox", f"e{i}") for i in range(k)]


def test_an_event_reaches_the_socket_without_a_thread_hop_per_subscriber(alice, agent):
    """Channels closes stale database connections in the sync thread before every message
    it dispatches: for a fan-out, one hop per subscriber, all queued on one thread."""
    cookie = session_cookie(alice)
    hops = mock.AsyncMock()

    async def go():
        sockets = await open_sockets(f"/ws/agents/{agent.id}/", cookie, 10)
        try:
            with mock.patch("channels.consumer.aclose_old_connections", hops):
                await database_sync_to_async(commit_events)(agent.id, 3)
                for c in sockets:
                    await frames_of(c, 3)
        finally:
            for c in sockets:
                await c.disconnect()

    async_to_sync(go)()
    assert hops.await_count == 0


def test_the_frame_pump_sends_in_order_in_passes_and_survives_a_failing_socket():
    from notifications import consumers

    sent: list[tuple[str, str]] = []

    tries: list[str] = []

    class Socket:
        channel_name = "fake"
        closed = False

        def __init__(self, name: str, broken: bool = False) -> None:
            self.name, self.broken = name, broken

        async def send(self, text_data: str) -> None:
            tries.append(self.name)
            if self.broken:
                raise RuntimeError("socket closed")
            sent.append((self.name, text_data))

    async def go() -> list[int]:
        pump = consumers._pump()
        sockets = [Socket(f"s{i}", broken=(i == 3)) for i in range(40)]
        passes = []
        for event in ("a", "b"):
            for socket in sockets:
                pump.push(socket, event)
        while pump.task is not None:
            passes.append(len(sent))
            await asyncio.sleep(0)
        return passes

    passes = asyncio.run(go())
    assert [text for name, text in sent if name == "s0"] == ["a", "b"]
    assert len(sent) == 2 * 39  # all but the broken socket's, which was skipped
    assert tries.count("s3") == 1  # once it failed its next frames were dropped, not tried
    assert sent[:39] == [(f"s{i}", "a") for i in range(40) if i != 3]
    assert max(b - a for a, b in zip(passes, [*passes[1:], len(sent)], strict=True)) <= consumers.FRAMES_PER_PASS


def test_deltas_a_socket_is_behind_on_are_coalesced_per_turn_and_never_reordered():
    from notifications import consumers

    got: list[dict] = []

    class Socket:
        channel_name = "fake"
        closed = False

        async def send(self, text_data: str) -> None:
            got.append(json.loads(text_data))

    def delta(turn: int, text: str) -> str:
        return json.dumps(
            {
                "type": "agent:delta",
                "agentId": "a",
                "mailboxItemIds": ["i"],
                "activityId": "x",
                "turn": turn,
                "text": text,
            }
        )

    async def go() -> None:
        pump, socket = consumers._pump(), Socket()
        words = [f"w{n} " for n in range(30)]
        for word in words:  # all pushed before the pump's first pass: the socket is behind
            pump.push(socket, delta(1, word))
        pump.push(socket, json.dumps({"type": "agent:focus", "agentId": "a"}))
        pump.push(socket, delta(1, "after "))
        pump.push(socket, delta(2, "next"))
        while pump.task is not None:
            await asyncio.sleep(0)

    asyncio.run(go())
    assert [(f["type"], f.get("turn"), f.get("text")) for f in got] == [
        ("agent:delta", 1, "".join(f"w{n} " for n in range(30))),  # 30 frames became one
        ("agent:focus", None, None),  # another event is never merged, nor jumped over
        ("agent:delta", 1, "after "),
        ("agent:delta", 2, "next"),  # another turn is a frame of its own
    ]
