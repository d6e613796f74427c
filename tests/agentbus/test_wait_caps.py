"""Concurrent waits are capped per caller (an agent token, or a user) and per server
process: the bus inbox wait, the bus request waiting for its answer, and the chat
waiting for its reply. Past a cap the wait answers 429 at once, with ``Retry-After`` and
the API's error stating the limit, and starts nothing (no stream, no mailbox item); a
wait that ends gives its slot back. In one event loop, through the ASGI stack (the real
server under load: test_long_poll_capacity)."""

from __future__ import annotations

import asyncio
import json
import time

import pytest
from asgiref.sync import async_to_sync, sync_to_async
from django.test import AsyncClient

from agentbus import wakeup
from mailbox.models import MailboxItem
from markus.agents.services import user_token_create

from .conftest import conversations

pytestmark = pytest.mark.django_db(transaction=True)


@pytest.fixture
def caps(settings, monkeypatch):
    def set_caps(*, per_caller: int = 16, per_server: int = 512) -> None:
        monkeypatch.setitem(settings.MARKUS, "WAITS_PER_CALLER", per_caller)
        monkeypatch.setitem(settings.MARKUS, "WAITS_PER_SERVER", per_server)
        monkeypatch.setitem(settings.MARKUS, "WAITS_CHAT_RESERVE", 0)  # the shares: test_wait_shares

    return set_caps


def bearer(persona) -> dict[str, str]:
    return {"authorization": f"Bearer {persona.token}"}


async def inbox(persona, timeout: float = 0):
    return await AsyncClient().get(
        f"/api/agents/{persona.id}/agentbus/inbox", {"timeout_seconds": timeout}, headers=bearer(persona)
    )


async def until(predicate, what: str, timeout: float = 10.0) -> None:
    deadline = time.monotonic() + timeout
    while not await predicate():
        if time.monotonic() > deadline:
            raise AssertionError(f"gave up waiting: {what}")
        await asyncio.sleep(0.02)


async def waiters(n: int) -> None:
    async def enough() -> bool:
        return wakeup.parked_waiters() >= n  # each read once, holds its slot and sleeps

    await until(enough, f"{n} waiters")


def assert_throttled(response, limit: int, per: str) -> None:
    assert response.status_code == 429, response.content[:300]
    assert int(response["Retry-After"]) > 0
    data = json.loads(response.content)
    assert data["code"] == "throttled"
    assert f"at most {limit} " in data["detail"] and per in data["detail"], data["detail"]


def test_a_callers_wait_past_its_cap_answers_429_and_an_ended_wait_gives_its_slot_back(caps, eve):
    caps(per_caller=2)

    async def scenario():
        held = [asyncio.create_task(inbox(eve, timeout=1.5)) for _ in range(2)]
        await waiters(2)
        refused = await inbox(eve, timeout=1.5)
        answered = await asyncio.gather(*held)
        again = await inbox(eve)
        return refused, answered, again

    refused, answered, again = async_to_sync(scenario)()
    assert_throttled(refused, 2, "per caller")
    assert [r.status_code for r in answered] == [200, 200]
    assert again.status_code == 200


def test_another_callers_wait_is_not_counted_against_the_first(caps, eve, max_):
    caps(per_caller=1)

    async def scenario():
        held = asyncio.create_task(inbox(eve, timeout=1.5))
        await waiters(1)
        other = await inbox(max_)
        await held
        return other

    assert async_to_sync(scenario)().status_code == 200


def test_a_wait_past_the_servers_cap_answers_429(caps, eve, max_):
    caps(per_caller=5, per_server=2)

    async def scenario():
        held = [asyncio.create_task(inbox(eve, timeout=1.5)) for _ in range(2)]
        await waiters(2)
        refused = await inbox(max_, timeout=1.5)
        await asyncio.gather(*held)
        return refused

    assert_throttled(async_to_sync(scenario)(), 2, "per server")


def test_a_bus_request_past_the_cap_answers_429_and_opens_no_stream(caps, eve, max_):
    caps(per_caller=1)
    body = json.dumps({"sender": eve.id, "recipient": max_.id, "payload": {"q": "?"}, "timeoutSeconds": 1})

    async def scenario():
        held = asyncio.create_task(inbox(eve, timeout=1.5))
        await waiters(1)
        refused = await AsyncClient().post(
            "/api/agentbus/request", body, content_type="application/json", headers=bearer(eve)
        )
        await held
        return refused

    assert_throttled(async_to_sync(scenario)(), 1, "per caller")
    assert not conversations().exists()


def test_a_streamed_chat_past_the_cap_answers_429_and_stores_nothing(caps, settings, monkeypatch, alice, ada):
    caps(per_caller=1)
    monkeypatch.setitem(settings.MARKUS, "CHAT_TIMEOUT_S", 1.5)
    _, token = user_token_create(alice)

    async def chat(accept: str):
        return await AsyncClient().post(
            f"/api/agents/{ada.id}/chat",
            json.dumps({"text": "hello"}),
            content_type="application/json",
            headers={"authorization": f"Token {token}", "accept": accept},
        )

    async def scenario():
        first = await chat("text/event-stream")
        events = first.streaming_content.__aiter__()
        queued = (await events.__anext__()).decode()  # the stream is open, its wait started
        refused_stream = await chat("text/event-stream")
        refused_json = await chat("application/json")
        rest = b"".join([chunk async for chunk in events]).decode()
        items = await sync_to_async(MailboxItem.objects.filter(agent_id=ada.id).count)()
        after = await chat("text/event-stream")  # the ended stream gave its slot back
        b"".join([chunk async for chunk in after.streaming_content])  # and this one gives its own
        return first, queued, rest, refused_stream, refused_json, items, after

    first, queued, rest, refused_stream, refused_json, items, after = async_to_sync(scenario)()
    assert first.status_code == 200 and "event: queued" in queued and "event: done" in rest
    assert_throttled(refused_stream, 1, "per caller")
    assert_throttled(refused_json, 1, "per caller")
    assert items == 1
    assert after.status_code == 200
