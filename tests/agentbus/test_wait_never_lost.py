"""Never lost: many appends race many waiters, and each waiter gets every append it
should, exactly once, in order, counted.

Each watcher follows the restart convention (a new ``wait`` per answer, resumed from
the last ``next_cursor``), so it subscribes afresh every round: the race between its
read and its subscription is exercised hundreds of times. The fallback poll is longer
than the test's patience, so only a wake-up can deliver in time; a lost one shows up
as a watcher short of its count.
"""

from __future__ import annotations

import asyncio
import threading
import time

import pytest
from asgiref.sync import async_to_sync
from django.db import connection

from agentbus import services
from agentbus.waiting import inbox_wait
from markus.agents.models import Agent
from markus.agents.services import agent_create

pytestmark = pytest.mark.django_db(transaction=True)

RECIPIENTS = 4
WATCHERS_PER_RECIPIENT = 3
APPENDERS = 3
PER_APPENDER_PER_RECIPIENT = 12  # 3 x 4 x 12 = 144 appends, each expected by 3 watchers
PATIENCE = 25.0  # shorter than the fallback poll (long_poll: 30 s)


def agents(alice, team) -> tuple[list[Agent], list[Agent]]:
    def make(agent_id: str) -> Agent:
        return agent_create(
            name=agent_id, role="engineer", kind=Agent.Kind.EXTERNAL, owner=alice, team=team, agent_id=agent_id
        )[0]

    return [make(f"snd{i}") for i in range(APPENDERS)], [make(f"rcv{i}") for i in range(RECIPIENTS)]


def append_all(sender: Agent, recipients: list[Agent], start: threading.Event, errors: list[BaseException]) -> None:
    try:
        streams = {r.id: services.stream_open(sender=sender, recipient=r).id for r in recipients}
        start.wait(10)
        for n in range(PER_APPENDER_PER_RECIPIENT):
            for r in recipients:
                services.stream_append(stream_id=streams[r.id], sender=sender, payload={"from": sender.id, "n": n})
    except BaseException as exc:
        errors.append(exc)
    finally:
        connection.close()


async def watch(agent_id: str, expected: int, deadline: float) -> list[tuple[str, int]]:
    got: list[tuple[str, int]] = []
    cursor = None
    loop = asyncio.get_running_loop()
    while len(got) < expected and loop.time() < deadline:
        result = await inbox_wait(agent_id=agent_id, after_cursor=cursor, timeout=max(0.0, deadline - loop.time()))
        got += [(m["payload"]["from"], m["payload"]["n"]) for m in result["messages"]]
        cursor = result["next_cursor"]
    return got


def hammer(alice, team) -> None:
    senders, recipients = agents(alice, team)
    expected = APPENDERS * PER_APPENDER_PER_RECIPIENT
    start = threading.Event()
    errors: list[BaseException] = []
    threads = [threading.Thread(target=append_all, args=(s, recipients, start, errors)) for s in senders]

    async def scenario() -> list[list[tuple[str, int]]]:
        deadline = asyncio.get_running_loop().time() + PATIENCE
        watchers = [
            asyncio.ensure_future(watch(r.id, expected, deadline))
            for r in recipients
            for _ in range(WATCHERS_PER_RECIPIENT)
        ]
        await asyncio.sleep(0.3)  # every watcher parked on its first wait
        start.set()
        return await asyncio.gather(*watchers)

    for thread in threads:
        thread.start()
    started = time.monotonic()
    results = async_to_sync(scenario)()
    for thread in threads:
        thread.join(30)
    assert not errors, errors
    for got in results:
        assert len(got) == expected, f"{expected - len(got)} of {expected} appends never reached a watcher"
        assert len(set(got)) == expected, "an append was delivered twice"
        for sender in senders:  # in each sender's order
            mine = [n for s, n in got if s == sender.id]
            assert mine == list(range(PER_APPENDER_PER_RECIPIENT))
    assert time.monotonic() - started < PATIENCE


def test_racing_appends_reach_every_waiter_through_the_embedded_layer(long_poll, settings, alice, team):
    settings.CHANNEL_LAYERS = {"default": {"BACKEND": "markus.core.channel_layer.ThreadSafeInMemoryChannelLayer"}}
    hammer(alice, team)


@pytest.mark.redis
def test_racing_appends_reach_every_waiter_through_redis(long_poll, redis_layer, alice, team):
    hammer(alice, team)
