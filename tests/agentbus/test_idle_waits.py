"""Idle is free: parked inbox waits cost no database reads of their own. They are woken
by the event; one shared backstop read per event loop (one query for every parked
wait's position, every ``AGENTBUS_POLL_SECONDS``) delivers what a lost event did not,
and wakes only the waits whose inbox has something new.

Statements are counted on every thread (the cursor class itself is wrapped), so a read
done through ``sync_to_async`` anywhere is counted too.
"""

from __future__ import annotations

import asyncio
import threading
import time

import pytest
from asgiref.sync import async_to_sync
from django.db import connection
from django.db.backends import utils as db_utils

from agentbus import selectors, services, wakeup
from agentbus.waiting import inbox_wait

from .conftest import say

pytestmark = pytest.mark.django_db(transaction=True)

PARKED = 50
WINDOW = 2.0  # seconds the parked waits are watched
BACKSTOP = 0.2  # the backstop period in these tests (AGENTBUS_POLL_SECONDS)


class Statements:
    """Counts every SQL statement any thread executes while it is on."""

    def __init__(self, monkeypatch) -> None:
        self.count = 0
        self.on = False
        self._lock = threading.Lock()
        real_execute = db_utils.CursorWrapper.execute

        def execute(cursor, sql, params=None):
            if self.on:
                with self._lock:
                    self.count += 1
            return real_execute(cursor, sql, params)

        monkeypatch.setattr(db_utils.CursorWrapper, "execute", execute)


async def counted_then_cancelled(statements: Statements, tasks: list[asyncio.Future], seconds: float) -> None:
    """Counts the statements of ``seconds`` while ``tasks`` stay parked, then cancels them."""
    statements.on = True
    await asyncio.sleep(seconds)
    statements.on = False
    await cancelled(tasks)


async def cancelled(tasks: list[asyncio.Future]) -> None:
    for task in tasks:
        task.cancel()
    await asyncio.gather(*tasks, return_exceptions=True)


async def parked(n: int) -> None:
    """Until ``n`` waits have read once and sleep."""
    while wakeup.parked_waiters() < n:
        await asyncio.sleep(0.01)


def test_parked_waits_on_an_idle_server_share_one_backstop_read(settings, monkeypatch, eve, max_, ada):
    """50 waits on three inboxes, parked for 2 s with a 0.2 s backstop: about 10
    backstop reads in all (one per period), not one per wait per period (500)."""
    monkeypatch.setitem(settings.MARKUS, "AGENTBUS_POLL_SECONDS", BACKSTOP)
    statements = Statements(monkeypatch)
    owners = ["eve", "max", "ada"]

    async def scenario() -> None:
        waits = [asyncio.ensure_future(inbox_wait(agent_id=owners[i % 3], timeout=WINDOW + 30)) for i in range(PARKED)]
        await parked(PARKED)
        await counted_then_cancelled(statements, waits, WINDOW)

    async_to_sync(scenario)()
    periods = WINDOW / BACKSTOP
    assert statements.count <= periods + 3, f"{statements.count} statements for {PARKED} idle waits"


def test_news_for_another_inbox_does_not_make_the_parked_waits_read(settings, monkeypatch, eve, max_, ada):
    """Messages keep arriving for Ada (each one moves the inbox clock); Eve's parked
    waits neither read nor are woken: the backstop knows her inbox has nothing new."""
    monkeypatch.setitem(settings.MARKUS, "AGENTBUS_POLL_SECONDS", BACKSTOP)
    reads: list[str] = []
    real_read = selectors.inbox_read_from

    def counted_read(agent_id, position, **kwargs):
        reads.append(agent_id)
        return real_read(agent_id, position, **kwargs)

    monkeypatch.setattr(selectors, "inbox_read_from", counted_read)
    stop = threading.Event()

    def chatter() -> None:
        try:
            stream = services.stream_open(sender=max_.agent, recipient=ada.agent)
            while not stop.is_set():
                services.stream_append(stream_id=stream.id, sender=max_.agent, payload={"text": "busy"})
                time.sleep(0.05)
        finally:
            connection.close()

    async def scenario() -> None:
        waits = [asyncio.ensure_future(inbox_wait(agent_id="eve", timeout=WINDOW + 30)) for _ in range(20)]
        await parked(20)
        reads.clear()
        thread = threading.Thread(target=chatter)
        thread.start()
        await asyncio.sleep(WINDOW)
        stop.set()
        await asyncio.to_thread(thread.join, 10)
        await cancelled(waits)

    async_to_sync(scenario)()
    assert reads.count("eve") == 0, f"Eve's idle waits read {reads.count('eve')} times"


def test_a_message_whose_wake_up_was_lost_is_delivered_by_the_backstop(settings, monkeypatch, eve, max_):
    """The event is lost (its publication does nothing): the backstop still finds the
    message and the wait answers with it within a period or two."""
    monkeypatch.setitem(settings.MARKUS, "AGENTBUS_POLL_SECONDS", 0.3)
    monkeypatch.setattr(services, "wake_inboxes_on_commit", lambda ids, **wake: None)

    async def scenario() -> tuple[dict, float]:
        wait = asyncio.ensure_future(inbox_wait(agent_id="eve", timeout=20))
        await parked(1)
        started = time.monotonic()
        await asyncio.to_thread(lambda: (say(max_, eve, "lost event"), connection.close()))
        result = await wait
        return result, time.monotonic() - started

    result, elapsed = async_to_sync(scenario)()
    assert [m["payload"]["text"] for m in result["messages"]] == ["lost event"]
    assert elapsed < 2, elapsed


def test_a_group_message_whose_wake_up_was_lost_is_delivered_by_the_backstop(settings, monkeypatch, eve, max_, ada):
    monkeypatch.setitem(settings.MARKUS, "AGENTBUS_POLL_SECONDS", 0.3)
    monkeypatch.setattr(services, "wake_inboxes_on_commit", lambda ids, **wake: None)
    group = services.group_chat_open(creator=max_.agent, members=[eve.agent, ada.agent], name="ops")

    def post() -> None:
        services.stream_append(stream_id=group.id, sender=max_.agent, payload={"text": "to the group"})
        connection.close()

    async def scenario() -> tuple[dict, float]:
        wait = asyncio.ensure_future(inbox_wait(agent_id="eve", timeout=20))
        await parked(1)
        started = time.monotonic()
        await asyncio.to_thread(post)
        result = await wait
        return result, time.monotonic() - started

    result, elapsed = async_to_sync(scenario)()
    assert [m["payload"]["text"] for m in result["messages"]] == ["to the group"]
    assert elapsed < 2, elapsed


@pytest.mark.redis
def test_on_redis_a_message_whose_publish_was_lost_is_delivered_by_the_backstop(
    redis_layer, settings, monkeypatch, eve, max_
):
    """Subscribed on Redis, but the writer's publish never happens (as if it died
    between its commit and its PUBLISH): the backstop reads the message."""
    monkeypatch.setitem(settings.MARKUS, "AGENTBUS_POLL_SECONDS", 0.3)
    monkeypatch.setattr(wakeup, "_publish", lambda agent_ids, data: None)

    async def scenario() -> tuple[dict, float]:
        wait = asyncio.ensure_future(inbox_wait(agent_id="eve", timeout=20))
        await parked(1)
        started = time.monotonic()
        await asyncio.to_thread(lambda: (say(max_, eve, "never published"), connection.close()))
        result = await wait
        return result, time.monotonic() - started

    result, elapsed = async_to_sync(scenario)()
    assert wakeup._redis_target() is not None
    assert [m["payload"]["text"] for m in result["messages"]] == ["never published"]
    assert elapsed < 2, elapsed
