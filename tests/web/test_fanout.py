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
    from notifications import fanout

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
        pump = fanout.pump()
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
    assert max(b - a for a, b in zip(passes, [*passes[1:], len(sent)], strict=True)) <= fanout.FRAMES_PER_PASS


def test_deltas_a_socket_is_behind_on_are_coalesced_per_turn_and_never_reordered():
    from notifications import fanout

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
        pump, socket = fanout.pump(), Socket()
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


def receiving_events(layer, received: list[str]):
    """``layer.receive`` that notes the channel of every event it hands out."""
    real = layer.receive

    async def receive(channel: str) -> dict:
        message = await real(channel)
        if message.get("type") == "markus.event":
            received.append(channel)
        return message

    return receive


def test_a_groups_event_is_received_once_per_process_not_once_per_socket(alice, agent):
    """Ten sockets of this process on one agent: each event leaves the channel layer once
    (one receive, one decode) and is handed to the ten sockets in the process; no
    socket's own receive loop is woken for it."""
    from channels.layers import get_channel_layer

    cookie = session_cookie(alice)
    layer = get_channel_layer()
    received: list[str] = []

    async def go():
        with mock.patch.object(layer, "receive", receiving_events(layer, received)):
            sockets = await open_sockets(f"/ws/agents/{agent.id}/", cookie, 10)
            try:
                await database_sync_to_async(commit_events)(agent.id, 3)
                return await asyncio.gather(*(frames_of(c, 3) for c in sockets))
            finally:
                for c in sockets:
                    await c.disconnect()

    frames = async_to_sync(go)()
    assert [[f["item"]["summary"] for f in got] for got in frames] == [["e0", "e1", "e2"]] * 10
    assert len(received) == 3, f"{len(received)} receives of 3 events by 10 sockets"
    assert len(set(received)) == 1  # one channel of the process for the group


def test_each_socket_of_one_fan_out_gets_only_what_its_reader_may_see(alice, bob, agent):
    """One event about bob's private session, fanned out once in the process to the
    owner's and bob's sockets: bob gets it, the owner its public form, and of an event
    without a public form nothing; both get the next public event, in order."""
    from markus.core.events import agent_group, send_event_on_commit

    group = agent_group(agent.id)

    def send() -> None:
        with transaction.atomic():
            send_event_on_commit(
                group, "probe", {"n": 1, "text": "secret"}, private_to=bob.pk, public={"n": 1, "text": "[private]"}
            )
        with transaction.atomic():
            send_event_on_commit(group, "probe", {"n": 2, "text": "secret too"}, private_to=bob.pk)
        with transaction.atomic():
            send_event_on_commit(group, "probe", {"n": 3, "text": "for all"})

    owner_cookie, person_cookie = session_cookie(alice), session_cookie(bob)

    async def go():
        owner, ok = await ws_connect(f"/ws/agents/{agent.id}/", cookie=owner_cookie)
        person, ok2 = await ws_connect(f"/ws/agents/{agent.id}/", cookie=person_cookie)
        assert ok and ok2
        try:
            await database_sync_to_async(send)()
            got_person = await frames_of(person, 3)
            got_owner = await frames_of(owner, 2)
            assert await owner.receive_nothing(timeout=0.1)
            return got_owner, got_person
        finally:
            await owner.disconnect()
            await person.disconnect()

    got_owner, got_person = async_to_sync(go)()
    assert [(f["n"], f["text"]) for f in got_person] == [(1, "secret"), (2, "secret too"), (3, "for all")]
    assert [(f["n"], f["text"]) for f in got_owner] == [(1, "[private]"), (3, "for all")]


def test_a_socket_that_leaves_stops_getting_frames_and_the_last_one_unsubscribes_the_process(alice, agent):
    from channels.layers import get_channel_layer

    from markus.core.events import agent_group

    cookie = session_cookie(alice)
    layer = get_channel_layer()

    def members() -> int:
        if "_get_layer" in dir(type(layer)):  # Redis pub/sub: the layer of this loop
            inner = layer._get_layer()
            return len(inner.groups.get(inner._get_group_channel_name(agent_group(agent.id)), ()))
        return len(layer.groups.get(agent_group(agent.id), ()))

    async def go():
        sockets = await open_sockets(f"/ws/agents/{agent.id}/", cookie, 4)
        await database_sync_to_async(commit_events)(agent.id, 1)
        for c in sockets:
            await frames_of(c, 1)
        await sockets[0].disconnect()
        await database_sync_to_async(commit_events)(agent.id, 1)
        for c in sockets[1:]:
            assert [f["item"]["summary"] for f in await frames_of(c, 1)] == ["e0"]
        during = members()
        for c in sockets[1:]:
            await c.disconnect()
        await asyncio.sleep(0.05)
        return during, members()

    during, after = async_to_sync(go)()
    assert during >= 1
    assert after == 0


def test_a_socket_that_comes_while_the_groups_last_one_leaves_gets_the_events(alice, agent):
    """The last socket of a group closes the process's feed while a new one opens the
    next: the old feed's unsubscribe must not undo the new one's subscription (on Redis
    both are the same group channel of one connection)."""
    cookie = session_cookie(alice)

    async def go():
        got = []
        for _ in range(5):
            old, ok = await ws_connect(f"/ws/agents/{agent.id}/", cookie=cookie)
            assert ok
            _, (new, ok2) = await asyncio.gather(old.disconnect(), ws_connect(f"/ws/agents/{agent.id}/", cookie=cookie))
            assert ok2
            try:
                await database_sync_to_async(commit_events)(agent.id, 1)
                got.append([f["item"]["summary"] for f in await frames_of(new, 1)])
            finally:
                await new.disconnect()
        return got

    assert async_to_sync(go)() == [["e0"]] * 5
