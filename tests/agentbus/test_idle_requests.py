"""Idle is free for a bus request too: a ``stream_request`` waiting for its reply does
no read of its own while nothing happens. The reply's close wakes it (in-process, or
through Redis pub/sub); the event loop's one shared backstop read (one statement for
every parked request, every ``AGENTBUS_POLL_SECONDS``) answers it when that event was
lost. Messages to the requester's inbox that are not the reply's close do not make it
read either.

Statements are counted on every thread (``Statements``), so a read done through
``sync_to_async`` anywhere is counted too.
"""

from __future__ import annotations

import asyncio
import threading
import time

import pytest
from asgiref.sync import async_to_sync
from django.db import connection

from agentbus import selectors, services, wakeup
from agentbus.models import Stream
from agentbus.waiting import stream_request

from .test_idle_waits import Statements, cancelled, counted_then_cancelled

pytestmark = pytest.mark.django_db(transaction=True)

PARKED = 50
WINDOW = 2.0  # seconds the parked requests are watched
BACKSTOP = 0.2  # the backstop period in these tests (AGENTBUS_POLL_SECONDS)


async def registered(n: int) -> None:
    """Until ``n`` requests wait for their reply, each having read it once: parked
    under the backstop's watch (given up after 10 s, so that a request that never
    parks there is counted rather than waited for)."""
    give_up = time.monotonic() + 10
    while wakeup.parked_waiters() < n and time.monotonic() < give_up:
        await asyncio.sleep(0.01)
    while wakeup.registered_waiters() < n:
        await asyncio.sleep(0.01)


async def eve_asks_ada(eve, ada, timeout: float) -> asyncio.Future:
    """Eve's request to Ada ("ship?"), once it waits for its reply."""
    request = asyncio.ensure_future(
        stream_request(sender=eve.agent, recipient=ada.agent, payload={"text": "ship?"}, timeout=timeout)
    )
    await registered(1)
    return request


def answer_each(requests: list[str], responder, text: str = "yes") -> None:
    """The recipient answers every request stream (a reply stream, closed)."""
    try:
        for stream_id in requests:
            services.stream_reply(responder=responder, stream_id=stream_id, payload={"text": text})
    finally:
        connection.close()


def asked(sender) -> list[str]:
    try:
        return list(Stream.objects.filter(sender=sender, reply_to__isnull=True).values_list("id", flat=True))
    finally:
        connection.close()


def test_parked_requests_on_an_idle_server_share_one_backstop_read(settings, monkeypatch, eve, max_, ada):
    """50 requests parked for 2 s with a 0.2 s backstop: about 10 statements in all
    (one backstop read per period), not a read of every reply per period (1,500)."""
    monkeypatch.setitem(settings.MARKUS, "AGENTBUS_POLL_SECONDS", BACKSTOP)
    statements = Statements(monkeypatch)
    senders = [eve, max_]

    async def scenario() -> None:
        requests = [
            asyncio.ensure_future(
                stream_request(sender=senders[i % 2].agent, recipient=ada.agent, payload={"n": i}, timeout=WINDOW + 30)
            )
            for i in range(PARKED)
        ]
        await registered(PARKED)
        await counted_then_cancelled(statements, requests, WINDOW)

    async_to_sync(scenario)()
    periods = WINDOW / BACKSTOP
    assert statements.count <= periods + 3, f"{statements.count} statements for {PARKED} idle requests"


def test_messages_to_the_requester_that_are_not_its_reply_do_not_make_it_read(settings, monkeypatch, eve, max_, ada):
    """Max keeps writing to Eve while her request waits for Ada: each message wakes
    Eve's inbox, but only a close can complete the request, so it does not re-read."""
    monkeypatch.setitem(settings.MARKUS, "AGENTBUS_POLL_SECONDS", 30.0)
    reads: list[str] = []
    real_read = selectors.reply_state

    def counted_read(stream_id, requester_id):
        reads.append(requester_id)
        return real_read(stream_id, requester_id)

    monkeypatch.setattr(selectors, "reply_state", counted_read)
    stop = threading.Event()

    def chatter() -> None:
        try:
            stream = services.stream_open(sender=max_.agent, recipient=eve.agent)
            while not stop.is_set():
                services.stream_append(stream_id=stream.id, sender=max_.agent, payload={"text": "busy"})
                time.sleep(0.05)
        finally:
            connection.close()

    async def scenario() -> dict:
        request = await eve_asks_ada(eve, ada, timeout=30)
        reads.clear()
        thread = threading.Thread(target=chatter)
        thread.start()
        await asyncio.sleep(1.0)
        stop.set()
        await asyncio.to_thread(thread.join, 10)
        chatty = len(reads)
        await asyncio.to_thread(answer_each, await asyncio.to_thread(asked, eve.agent), ada.agent)
        result = await request
        assert chatty == 0, f"the request read its reply {chatty} times while Max wrote to Eve"
        return result

    result = async_to_sync(scenario)()
    assert not result["timed_out"] and [m["payload"]["text"] for m in result["reply"]] == ["yes"]


def _answered_promptly(eve, ada) -> tuple[dict, float]:
    async def scenario() -> tuple[dict, float]:
        request = await eve_asks_ada(eve, ada, timeout=20)
        started = time.monotonic()
        await asyncio.to_thread(answer_each, await asyncio.to_thread(asked, eve.agent), ada.agent, "ship it")
        result = await request
        return result, time.monotonic() - started

    return async_to_sync(scenario)()


def test_a_request_answers_when_its_reply_closes(long_poll, eve, ada):
    """The backstop's period is 30 s: an answer well before it is the close's event."""
    result, elapsed = _answered_promptly(eve, ada)
    assert not result["timed_out"] and [m["payload"]["text"] for m in result["reply"]] == ["ship it"]
    assert Stream.objects.get(id=result["replyStreamId"]).reply_to == result["streamId"]
    assert elapsed < 5, elapsed


@pytest.mark.redis
def test_on_redis_a_request_answers_when_its_reply_closes(redis_layer, eve, ada):
    result, elapsed = _answered_promptly(eve, ada)
    assert wakeup._redis_target() is not None
    assert not result["timed_out"] and [m["payload"]["text"] for m in result["reply"]] == ["ship it"]
    assert elapsed < 5, elapsed


def test_a_reply_whose_close_event_was_lost_is_found_by_the_backstop(settings, monkeypatch, eve, ada):
    """No wake-up is published at all: the backstop finds the closed reply within a
    period or two."""
    monkeypatch.setitem(settings.MARKUS, "AGENTBUS_POLL_SECONDS", 0.3)
    monkeypatch.setattr(services, "wake_inboxes_on_commit", lambda ids, **wake: None)
    result, elapsed = _answered_promptly(eve, ada)
    assert not result["timed_out"] and [m["payload"]["text"] for m in result["reply"]] == ["ship it"]
    assert elapsed < 2, elapsed


@pytest.mark.redis
def test_on_redis_a_reply_whose_publish_was_lost_is_found_by_the_backstop(redis_layer, settings, monkeypatch, eve, ada):
    monkeypatch.setitem(settings.MARKUS, "AGENTBUS_POLL_SECONDS", 0.3)
    monkeypatch.setattr(wakeup, "_publish", lambda agent_ids, data: None)
    result, elapsed = _answered_promptly(eve, ada)
    assert not result["timed_out"] and [m["payload"]["text"] for m in result["reply"]] == ["ship it"]
    assert elapsed < 2, elapsed


def test_a_request_that_times_out_carries_the_reply_so_far(settings, monkeypatch, eve, ada):
    """Ada has begun her answer but not closed it: the request times out with it."""
    monkeypatch.setitem(settings.MARKUS, "AGENTBUS_POLL_SECONDS", 30.0)

    def begin(stream_id: str) -> None:
        try:
            services.send_agent_message(
                sender=ada.agent, recipient=eve.agent, text="working on it", stream_id=stream_id
            )
        finally:
            connection.close()

    async def scenario() -> dict:
        request = await eve_asks_ada(eve, ada, timeout=1.5)
        (stream_id,) = await asyncio.to_thread(asked, eve.agent)
        await asyncio.to_thread(begin, stream_id)
        return await request

    result = async_to_sync(scenario)()
    assert result["timed_out"] and [m["payload"]["text"] for m in result["reply"]] == ["working on it"]
    assert result["replyStreamId"] is not None
    assert Stream.objects.get(id=result["streamId"]).closed_at is not None


def test_a_request_still_waiting_is_parked_without_a_thread(long_poll, eve, ada):
    """Parked requests hold no thread: 20 of them leave the process's thread count as it was."""

    async def scenario() -> int:
        before = threading.active_count()
        requests = [
            asyncio.ensure_future(stream_request(sender=eve.agent, recipient=ada.agent, payload={"n": i}, timeout=30))
            for i in range(20)
        ]
        await registered(20)
        during = threading.active_count()
        await cancelled(requests)
        return during - before

    assert async_to_sync(scenario)() <= 2


@pytest.mark.django_db(transaction=False)
def test_the_backstop_never_closes_the_callers_open_transaction(settings, monkeypatch, eve, ada):
    """A request made inside a transaction (here the test's own): nothing commits, so
    no wake-up is sent and the backstop, reading on the caller's connection, finds the
    reply; it must not close that connection (Django drops a connection whose
    autocommit is off) on its way."""
    from asgiref.sync import sync_to_async

    monkeypatch.setitem(settings.MARKUS, "AGENTBUS_POLL_SECONDS", 0.02)

    def answer() -> None:
        (stream_id,) = Stream.objects.filter(sender=eve.agent, reply_to__isnull=True).values_list("id", flat=True)
        services.stream_reply(responder=ada.agent, stream_id=stream_id, payload={"text": "later"})

    async def scenario() -> dict:
        request = asyncio.ensure_future(
            stream_request(sender=eve.agent, recipient=ada.agent, payload={"text": "ship?"}, timeout=20)
        )
        await asyncio.sleep(0.3)  # several backstop periods before the answer
        await sync_to_async(answer)()
        return await request

    result = async_to_sync(scenario)()
    assert not result["timed_out"] and [m["payload"]["text"] for m in result["reply"]] == ["later"]
