"""A REST inbox wait subscribes its wake-up only once the caller is known to be allowed
to read that inbox and has a wait slot: an outsider, an unknown agent, a bad token or a
caller past its cap is refused (404 / 401 / 429) and leaves no subscription behind, in
the process's hub or on Redis. An allowed wait still subscribes before it reads for
the wait (never lost: test_wait_never_lost)."""

from __future__ import annotations

import asyncio

import pytest
from asgiref.sync import async_to_sync
from django.test import AsyncClient

from agentbus import wakeup

from .conftest import say
from .test_idle_waits import parked

pytestmark = pytest.mark.django_db(transaction=True)


def bearer(token: str) -> dict[str, str]:
    return {"authorization": f"Bearer {token}"}


async def wait_on(agent_id: str, token: str, timeout: float = 5):
    return await AsyncClient().get(
        f"/api/agents/{agent_id}/agentbus/inbox", {"timeout_seconds": timeout}, headers=bearer(token)
    )


@pytest.fixture
def joined(monkeypatch) -> list[str]:
    """The inboxes whose wake-up a hub was asked to register: the process's own, or the
    Redis one a channels_redis layer selects (REDIS_URL set): whichever the waits use."""
    seen: list[str] = []

    def spy(hub_class: type) -> None:
        real_join = hub_class.join

        async def join(hub, waiter):
            seen.append(waiter.agent_id)
            await real_join(hub, waiter)

        monkeypatch.setattr(hub_class, "join", join)

    spy(wakeup._LocalHub)
    spy(wakeup._RedisHub)
    return seen


def test_an_outsiders_wait_is_refused_without_subscribing(long_poll, joined, eve, zed):
    """Zed (Charlie's agent) may not read Eve's inbox: 404, and Eve's wake-up was never
    registered on his behalf; the same for an inbox that does not exist and a bad token."""

    async def scenario():
        return (
            await wait_on("eve", zed.token),
            await wait_on("nobody", zed.token),
            await wait_on("eve", "mk_not_a_token"),
        )

    outsider, unknown, bad_token = async_to_sync(scenario)()
    assert outsider.status_code == 404 and unknown.status_code == 404, (outsider.content, unknown.content)
    assert bad_token.status_code == 401, bad_token.content
    assert joined == []
    assert wakeup.registered_waiters() == 0


def test_a_wait_past_the_callers_cap_is_refused_without_subscribing(long_poll, joined, settings, monkeypatch, eve):
    monkeypatch.setitem(settings.MARKUS, "WAITS_PER_CALLER", 1)

    async def scenario():
        held = asyncio.ensure_future(wait_on("eve", eve.token, timeout=2))
        await parked(1)
        refused = await wait_on("eve", eve.token, timeout=2)
        return refused, await held

    refused, held = async_to_sync(scenario)()
    assert refused.status_code == 429, refused.content
    assert held.status_code == 200 and held.json()["timed_out"]
    assert joined == ["eve"], joined  # the wait that was allowed, only


def test_an_allowed_wait_subscribes_and_answers(long_poll, joined, eve, max_):
    say(max_, eve, "already here")

    async def scenario():
        at_once = await wait_on("eve", eve.token)
        cursor = at_once.json()["next_cursor"]
        parked = asyncio.ensure_future(
            AsyncClient().get(
                "/api/agents/eve/agentbus/inbox",
                {"timeout_seconds": 0.5, "after_cursor": cursor},
                headers=bearer(eve.token),
            )
        )
        return at_once, await parked

    at_once, parked = async_to_sync(scenario)()
    assert [m["payload"]["text"] for m in at_once.json()["messages"]] == ["already here"]
    assert parked.status_code == 200 and parked.json()["timed_out"]
    assert "eve" in joined


@pytest.mark.redis
def test_on_redis_an_outsiders_wait_leaves_no_subscription(redis_layer, eve, zed):
    """On Redis a subscription outlives its last waiter (``LINGER_SECONDS``): an
    outsider's refused wait must not have made one. Eve's own wait does."""
    import redis

    target = wakeup._redis_target()
    assert target is not None
    url, prefix = target
    client = redis.Redis.from_url(url)

    def subscribers() -> int:
        return dict(client.pubsub_numsub(prefix + "eve")).get((prefix + "eve").encode(), 0)

    async def scenario():
        refused = await wait_on("eve", zed.token)
        after_outsider = await asyncio.to_thread(subscribers)
        own = await wait_on("eve", eve.token, timeout=0.3)
        after_own = await asyncio.to_thread(subscribers)
        return refused, after_outsider, own, after_own

    refused, after_outsider, own, after_own = async_to_sync(scenario)()
    assert refused.status_code == 404
    assert after_outsider == 0
    assert own.status_code == 200 and after_own == 1  # the control: an allowed wait subscribes (and lingers)


def mcp_wait(caller, arguments: dict) -> object:
    from mcp import Client

    from agentbus.mcp_door import build

    async def identify(ctx: object):
        return caller

    async def scenario():
        async with Client(build(identify)) as client:
            return await client.call_tool("inbox_wait", arguments)

    return async_to_sync(scenario)()


def test_an_outsiders_mcp_wait_is_refused_without_subscribing(long_poll, joined, eve, zed, charlie):
    """Through the MCP door: Charlie names Eve's inbox, Zed names it too; both are
    refused and neither registered Eve's wake-up."""
    from django.contrib.auth.models import AnonymousUser

    from markus.agents.auth import Caller

    as_user = mcp_wait(Caller(charlie, None), {"agent_id": "eve", "timeout_seconds": 5})
    as_agent = mcp_wait(Caller(AnonymousUser(), zed.agent), {"agent_id": "eve", "timeout_seconds": 5})
    assert as_user.is_error and as_agent.is_error, (as_user.content, as_agent.content)
    assert joined == []


def test_an_mcp_wait_past_the_callers_cap_is_refused_without_subscribing(long_poll, joined, settings, monkeypatch, eve):
    from django.contrib.auth.models import AnonymousUser
    from mcp import Client

    from agentbus.mcp_door import build
    from markus.agents.auth import Caller

    monkeypatch.setitem(settings.MARKUS, "WAITS_PER_CALLER", 1)
    caller = Caller(AnonymousUser(), eve.agent)

    async def identify(ctx: object):
        return caller

    async def scenario():
        async with Client(build(identify)) as client:
            held = asyncio.ensure_future(client.call_tool("inbox_wait", {"timeout_seconds": 2}))
            await parked(1)
            refused = await client.call_tool("inbox_wait", {"timeout_seconds": 2})
            return refused, await held

    refused, held = async_to_sync(scenario)()
    assert refused.is_error and "too many waits" in refused.content[0].text, refused.content
    assert not held.is_error and held.structured_content["timed_out"]
    assert joined == ["eve"], joined
