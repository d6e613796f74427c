"""wait blocks in an async view, woken through the channel layer when an append
commits; the short poll is only the fallback. The ``redis`` tests use
channels_redis (they fail, never skip, when Redis is unreachable)."""

from __future__ import annotations

import asyncio
import json
import threading
import time
import urllib.request

import pytest
from asgiref.sync import async_to_sync
from channels.layers import get_channel_layer
from django.db import connection
from django.test import AsyncClient

from agentbus import services, wakeup
from agentbus.waiting import inbox_wait

from .conftest import say
from .hub_server import HubServer

pytestmark = pytest.mark.django_db(transaction=True)


def append_later(sender, recipient, text: str, delay: float = 0.3) -> tuple[threading.Thread, list]:
    errors: list[BaseException] = []

    def run():
        try:
            time.sleep(delay)
            say(sender, recipient, text)
        except BaseException as exc:
            errors.append(exc)
        finally:
            connection.close()

    thread = threading.Thread(target=run)
    thread.start()
    return thread, errors


def timed_wait(**kwargs) -> tuple[dict, float]:
    started = time.monotonic()
    result = async_to_sync(inbox_wait)(**kwargs)
    return result, time.monotonic() - started


def test_a_waiter_is_woken_through_the_embedded_channel_layer(long_poll, settings, eve, max_):
    settings.CHANNEL_LAYERS = {"default": {"BACKEND": "markus.core.channel_layer.ThreadSafeInMemoryChannelLayer"}}
    assert wakeup._redis_target() is None
    thread, errors = append_later(max_, eve, "wake up")
    result, elapsed = timed_wait(agent_id="eve", timeout=10)
    thread.join(5)
    assert not errors and [m["payload"]["text"] for m in result["messages"]] == ["wake up"]
    assert elapsed < 3, elapsed
    assert wakeup.registered_waiters() == 0  # the waiter left the registry


def test_channels_stock_in_memory_layer_falls_back_to_the_local_registry(long_poll, settings, eve, max_):
    settings.CHANNEL_LAYERS = {"default": {"BACKEND": "channels.layers.InMemoryChannelLayer"}}
    thread, errors = append_later(max_, eve, "wake up")
    result, elapsed = timed_wait(agent_id="eve", timeout=10)
    thread.join(5)
    assert not errors and [m["payload"]["text"] for m in result["messages"]] == ["wake up"]
    assert elapsed < 3, elapsed
    assert wakeup.registered_waiters() == 0  # the waiter left the registry


def test_the_async_view_blocks_and_is_woken(long_poll, eve, max_):
    async def scenario():
        client = AsyncClient()
        started = time.monotonic()
        response = await client.get(
            "/api/agents/eve/agentbus/inbox", {"timeout_seconds": 10}, headers={"authorization": f"Bearer {eve.token}"}
        )
        return response, time.monotonic() - started

    thread, errors = append_later(max_, eve, "through the view")
    response, elapsed = async_to_sync(scenario)()
    thread.join(5)
    assert not errors and response.status_code == 200
    body = response.json()
    assert [m["payload"]["text"] for m in body["messages"]] == ["through the view"] and not body["timed_out"]
    assert elapsed < 3, elapsed


def test_many_idle_waiters_share_one_event_loop(long_poll, eve, max_, ada):
    """An idle waiter is a coroutine, not a thread: 50 of them wait in one loop. The
    messages are sent once all 50 sleep: Ada is run by the loop, whose mailbox consumes
    her bus messages, so a wait without a cursor that started after hers would rightly
    not see it."""
    appenders: list = []

    async def scenario():
        waits = [asyncio.ensure_future(inbox_wait(agent_id=a, timeout=10)) for a in ["eve", "ada"] * 25]
        while wakeup.parked_waiters() < 50:
            await asyncio.sleep(0.01)
        appenders.extend([append_later(max_, eve, "to eve", delay=0), append_later(max_, ada, "to ada", delay=0)])
        return await asyncio.gather(*waits)

    before = threading.active_count()
    results = async_to_sync(scenario)()
    for thread, errors in appenders:
        thread.join(5)
        assert not errors
    assert all(len(r["messages"]) == 1 for r in results)
    assert threading.active_count() <= before + 4


def test_own_appends_do_not_wake_the_waiter(long_poll, eve, max_):
    def own():
        time.sleep(0.2)
        try:
            say(eve, max_, "mine")
        finally:
            connection.close()

    thread = threading.Thread(target=own)
    thread.start()
    result, elapsed = timed_wait(agent_id="eve", timeout=1.0)
    thread.join(5)
    assert result["timed_out"] is True and result["messages"] == [] and elapsed >= 0.9


def test_a_lost_wake_up_is_repaired_by_the_short_poll(settings, eve, max_, monkeypatch):
    monkeypatch.setitem(settings.MARKUS, "AGENTBUS_POLL_SECONDS", 0.3)
    monkeypatch.setattr(services, "wake_inboxes_on_commit", lambda ids, **wake: None)
    thread, errors = append_later(max_, eve, "silent")
    result, elapsed = timed_wait(agent_id="eve", timeout=10)
    thread.join(5)
    assert not errors and [m["payload"]["text"] for m in result["messages"]] == ["silent"]
    assert elapsed < 2, elapsed


def test_timeout_returns_the_cursor_to_resume_from(eve, max_):
    say(max_, eve, "seen")
    seen = async_to_sync(inbox_wait)(agent_id="eve", timeout=0)
    result, elapsed = timed_wait(agent_id="eve", after_cursor=seen["next_cursor"], timeout=0.3)
    assert result["timed_out"] is True and 0.25 <= elapsed < 2
    say(max_, eve, "after the timeout")
    resumed = async_to_sync(inbox_wait)(agent_id="eve", after_cursor=result["next_cursor"], timeout=0)
    assert [m["payload"]["text"] for m in resumed["messages"]] == ["after the timeout"]


# ------------------------------------------------------------------------ Redis


@pytest.mark.redis
def test_a_waiter_is_woken_through_redis(redis_layer, eve, max_):
    assert type(get_channel_layer()).__name__ == "RedisPubSubChannelLayer"
    thread, errors = append_later(max_, eve, "via redis")
    result, elapsed = timed_wait(agent_id="eve", timeout=10)
    thread.join(5)
    assert not errors and [m["payload"]["text"] for m in result["messages"]] == ["via redis"]
    assert elapsed < 3, elapsed
    assert wakeup._redis_target() is not None and wakeup.registered_waiters() == 0


@pytest.mark.redis
def test_an_append_in_one_process_wakes_a_waiter_on_another_hub(redis_layer, eve, max_):
    """The scale-out case: the waiter blocks in a daphne hub, the append commits in
    this process; only Redis connects the two."""
    server = HubServer(
        connection.settings_dict["NAME"], markus={"AGENTBUS_POLL_SECONDS": 30.0}, env={"REDIS_URL": redis_layer}
    ).start()
    try:
        thread, errors = append_later(max_, eve, "across processes", delay=1.0)
        request = urllib.request.Request(
            f"{server.url}/api/agents/eve/agentbus/inbox?timeout_seconds=15",
            headers={"Authorization": f"Bearer {eve.token}"},
        )
        started = time.monotonic()
        with urllib.request.urlopen(request, timeout=30) as response:
            body = json.loads(response.read())
        elapsed = time.monotonic() - started
        thread.join(5)
    finally:
        server.stop()
    assert not errors and [m["payload"]["text"] for m in body["messages"]] == ["across processes"]
    assert 0.9 < elapsed < 5, elapsed
