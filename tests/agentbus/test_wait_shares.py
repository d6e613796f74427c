"""Fair shares of the waits (issue 35): an agent token's waits count against its owner
(a person's cap, besides the caller's), and a person's chat has a reserve of the
server's waits that bus waits cannot take. alice owns eve, max and kai (external
harnesses, a token each) and ada; charlie owns zed (external) and zoe (internal); bob is
a teammate on ada. Through the real async views (and the MCP and A2A doors), in one
event loop; every 429 names its cap and its limit."""

from __future__ import annotations

import asyncio
import json

import pytest
from asgiref.sync import async_to_sync, sync_to_async
from django.contrib.auth.models import AnonymousUser
from django.test import AsyncClient
from mcp import Client

from agentbus import mcp_door
from attention.loop import run_attention
from markus.agents.auth import Caller, waiter_for
from markus.agents.models import Agent, Team
from markus.agents.services import agent_create, user_token_create
from markus.core.waits import WAITS

from .conftest import Persona, make_persona, say
from .test_wait_caps import assert_throttled, bearer, inbox, waiters

pytestmark = pytest.mark.django_db(transaction=True)


@pytest.fixture
def caps(settings, monkeypatch):
    def set_caps(*, per_caller: int, per_person: int, per_server: int, chat_reserve: int) -> None:
        for name, value in [
            ("WAITS_PER_CALLER", per_caller),
            ("WAITS_PER_PERSON", per_person),
            ("WAITS_PER_SERVER", per_server),
            ("WAITS_CHAT_RESERVE", chat_reserve),
        ]:
            monkeypatch.setitem(settings.MARKUS, name, value)

    return set_caps


@pytest.fixture
def kai(alice, team):
    return make_persona("kai", kind=Agent.Kind.EXTERNAL, owner=alice, team=team)


@pytest.fixture
def zoe(charlie):
    return make_persona("zoe", kind=Agent.Kind.INTERNAL, owner=charlie)


def user_inbox(token: str, agent_id: str, timeout: float):
    return AsyncClient().get(
        f"/api/agents/{agent_id}/agentbus/inbox",
        {"timeout_seconds": timeout},
        headers={"authorization": f"Token {token}"},
    )


def chat(token: str, agent_id: str):
    return AsyncClient().post(
        f"/api/agents/{agent_id}/chat",
        json.dumps({"text": "are you there?"}),
        content_type="application/json",
        headers={"authorization": f"Token {token}", "accept": "text/event-stream"},
    )


async def events_of(response) -> tuple[str, object]:
    """The stream's first event (``queued``: the wait was admitted), and the rest to read later."""
    events = response.streaming_content.__aiter__()
    return (await events.__anext__()).decode(), events


async def rest_of(events) -> str:
    return b"".join([chunk async for chunk in events]).decode()


def assert_refused(response, limit: int, cap: str) -> None:
    """A 429 with Retry-After that names its cap and limit, in words and as fields."""
    assert_throttled(response, limit, cap)
    data = json.loads(response.content)
    assert (data["cap"], data["limit"]) == (cap, limit), data


async def wake(*inboxes: Persona, sender: Persona) -> None:
    """A message to each inbox: the waits on it answer."""
    for persona in inboxes:
        await sync_to_async(say)(sender, persona, "that is all")


def test_an_agent_counts_against_its_owner_else_its_teams_owner_else_only_itself(alice, bob, charlie):
    team = Team.objects.create(name="Ops", owner=bob)
    owned, _ = agent_create(name="Owned", owner=alice, team=team, agent_id="owned")
    teams, _ = agent_create(name="Teams", owner=None, team=team, agent_id="teams")
    alone, _ = agent_create(name="Alone", owner=None, agent_id="alone")
    assert waiter_for(Caller(AnonymousUser(), owned)) == ("agent:owned", f"person:{alice.pk}")
    assert waiter_for(Caller(AnonymousUser(), teams)) == ("agent:teams", f"person:{bob.pk}")
    assert waiter_for(Caller(AnonymousUser(), alone)) == ("agent:alone", "agent:alone")
    assert waiter_for(Caller(charlie, None)) == (f"user:{charlie.pk}", f"person:{charlie.pk}")


def test_a_persons_agents_share_the_persons_cap_at_every_door_and_another_persons_wait_is_admitted(
    caps, alice, charlie, ada, eve, max_, kai, zed
):
    caps(per_caller=2, per_person=4, per_server=512, chat_reserve=64)
    charlie_token = user_token_create(charlie)[1]

    before = WAITS.in_flight()

    async def as_kai(ctx: object) -> Caller:
        return Caller(AnonymousUser(), kai.agent)

    async def scenario():
        held = [asyncio.create_task(inbox(p, timeout=30)) for p in (eve, eve, max_, max_)]
        await waiters(4)
        refused = {"inbox": await inbox(kai, timeout=30)}
        refused["request"] = await AsyncClient().post(
            "/api/agentbus/request",
            json.dumps({"sender": kai.id, "recipient": eve.id, "payload": {"q": "?"}, "timeoutSeconds": 30}),
            content_type="application/json",
            headers=bearer(kai),
        )
        refused["a2a"] = await AsyncClient().post(
            f"/a2a/{ada.id}/",
            json.dumps(
                {
                    "jsonrpc": "2.0",
                    "id": "r1",
                    "method": "SendMessage",
                    "params": {"message": {"messageId": "m-1", "role": "ROLE_USER", "parts": [{"text": "hi"}]}},
                }
            ),
            content_type="application/json",
            headers={**bearer(kai), "a2a-version": "1.0"},
        )
        async with Client(mcp_door.build(as_kai)) as mcp:
            mcp_refused = await mcp.call_tool("inbox_wait", {"timeout_seconds": 30})
        others = asyncio.create_task(user_inbox(charlie_token, zed.id, timeout=30))
        await waiters(5)  # charlie's wait is admitted while alice is at her cap
        admitted_while_full = WAITS.in_flight(f"user:{charlie.pk}")
        await wake(eve, max_, zed, sender=kai)
        return refused, mcp_refused, admitted_while_full, await asyncio.gather(*held, others)

    refused, mcp_refused, admitted_while_full, answered = async_to_sync(scenario)()
    for answer in refused.values():
        assert_refused(answer, 4, "per person")
    assert mcp_refused.is_error and "at most 4 per person" in mcp_refused.content[0].text
    assert admitted_while_full == 1
    assert [r.status_code for r in answered] == [200] * 5
    assert WAITS.in_flight() == before  # every slot given back


def test_while_bus_waits_hold_all_they_may_a_persons_chat_is_still_admitted_and_answered(
    caps, alice, bob, charlie, ada, eve, max_, zed, zoe
):
    caps(per_caller=2, per_person=4, per_server=7, chat_reserve=2)  # bus waits: at most 5
    alice_token, bob_token, charlie_token = (user_token_create(u)[1] for u in (alice, bob, charlie))
    before = WAITS.in_flight()

    async def scenario():
        held = [asyncio.create_task(inbox(p, timeout=30)) for p in (eve, eve, max_, max_)]
        held.append(asyncio.create_task(user_inbox(charlie_token, zed.id, timeout=30)))
        await waiters(5)
        bus_refused = await user_inbox(charlie_token, zed.id, timeout=30)
        charlies_chat, charlies_rest = await events_of(await chat(charlie_token, zoe.id))
        alices_chat, alices_rest = await events_of(await chat(alice_token, ada.id))  # her agents fill her cap
        chat_refused = await chat(bob_token, ada.id)
        await sync_to_async(run_attention)(zoe.id)
        await sync_to_async(run_attention)(ada.id)
        chats = [charlies_chat + await rest_of(charlies_rest), alices_chat + await rest_of(alices_rest)]
        await wake(eve, max_, zed, sender=ada)
        return bus_refused, chats, chat_refused, await asyncio.gather(*held)

    bus_refused, chats, chat_refused, answered = async_to_sync(scenario)()
    assert_refused(bus_refused, 5, "chat reserve")
    for text in chats:
        assert "event: queued" in text and "event: done" in text
        done = json.loads(text.split("event: done\ndata: ", 1)[1].split("\n", 1)[0])
        assert "offline brain" in done["reply"]
    assert_refused(chat_refused, 7, "per server")
    assert [r.status_code for r in answered] == [200] * 5
    assert WAITS.in_flight() == before  # every slot given back
