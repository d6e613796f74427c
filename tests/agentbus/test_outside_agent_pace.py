"""An outside agent's messages to an agent the loop runs are paced as an inside agent's
are: at most ``MARKUS_AGENT_MESSAGES_PER_HOUR`` to one agent, or one group, an hour.
Each such message is an item the recipient's model answers, so a coding CLI that sends
in a loop made the loop spend without end. Past the pace the message is refused with
429, ``Retry-After`` (when the oldest counted message leaves the hour) and the limit,
by every door the outside agent sends through (REST, MCP, A2A), and nothing is stored.
Messages between outside agents cost no model call and are not paced. eve and max are
outside agents, ada is run by the loop."""

from __future__ import annotations

import asyncio
import json
from datetime import timedelta

import pytest
from django.contrib.auth.models import AnonymousUser
from django.test import Client as DjangoClient
from django.utils import timezone
from mcp import Client

from agentbus import mcp_door, services
from agentbus.models import Chunk, Stream
from mailbox.models import MailboxItem
from markus.agents.auth import Caller

from .conftest import append, make_persona, open_stream

pytestmark = pytest.mark.django_db

PER_HOUR = 3


@pytest.fixture(autouse=True)
def _pace(settings):
    settings.MARKUS = {**settings.MARKUS, "AGENT_MESSAGES_PER_HOUR": PER_HOUR}


def _send(client, sender: str, recipient: str, text: str):
    return append(client, open_stream(client, sender, recipient), sender, text)


def test_past_the_pace_an_outside_agents_message_to_a_loop_agent_is_a_429_with_retry_after(eve, ada):
    client = eve.client()
    for n in range(PER_HOUR):
        assert _send(client, eve.id, ada.id, f"question {n}").status_code == 201
    stored = Chunk.objects.count(), MailboxItem.objects.filter(agent_id=ada.id).count()

    refused = _send(client, eve.id, ada.id, "one more")

    assert refused.status_code == 429, refused.content
    body = refused.json()
    assert body["code"] == "throttled" and body["limit"] == PER_HOUR
    assert f"you sent {PER_HOUR} messages to Ada in the last hour (MARKUS_AGENT_MESSAGES_PER_HOUR)" in body["detail"]
    assert 3590 <= int(refused["Retry-After"]) <= 3600
    assert f"try again in {refused['Retry-After']} s" in body["detail"]
    assert (Chunk.objects.count(), MailboxItem.objects.filter(agent_id=ada.id).count()) == stored


def test_retry_after_is_when_the_oldest_counted_message_leaves_the_hour(eve, ada):
    client = eve.client()
    for n in range(PER_HOUR):
        assert _send(client, eve.id, ada.id, f"question {n}").status_code == 201
    oldest = Chunk.objects.filter(sender_id=eve.id).order_by("created_at").first()
    Chunk.objects.filter(pk=oldest.pk).update(created_at=timezone.now() - timedelta(minutes=59, seconds=50))

    refused = _send(client, eve.id, ada.id, "one more")
    assert refused.status_code == 429 and 1 <= int(refused["Retry-After"]) <= 10

    Chunk.objects.filter(pk=oldest.pk).update(created_at=timezone.now() - timedelta(hours=1, seconds=1))
    assert _send(client, eve.id, ada.id, "one more").status_code == 201


def test_messages_between_outside_agents_are_not_paced(eve, max_):
    client = eve.client()
    for n in range(PER_HOUR + 2):
        assert _send(client, eve.id, max_.id, f"note {n}").status_code == 201


def test_the_pace_is_per_recipient(eve, ada, max_, alice, team):
    grace = make_persona("grace", kind="internal", owner=alice, team=team)
    client = eve.client()
    for n in range(PER_HOUR):
        assert _send(client, eve.id, ada.id, f"question {n}").status_code == 201
    assert _send(client, eve.id, grace.id, "and you?").status_code == 201


@pytest.mark.django_db(transaction=True)  # the door's calls run on other threads
def test_the_mcp_doors_bus_send_past_the_pace_is_a_tool_error_saying_when_to_try_again(eve, ada):
    async def identify(ctx: object) -> Caller:
        return Caller(AnonymousUser(), eve.agent)

    async def scenario() -> list[tuple[bool, str]]:
        answers = []
        async with Client(mcp_door.build(identify)) as mcp:
            for n in range(PER_HOUR + 1):
                result = await mcp.call_tool("bus_send", {"to": "ada", "text": f"question {n}"})
                answers.append((result.is_error, result.content[0].text))
        return answers

    streams = Stream.objects.count()  # the team's channel
    answers = asyncio.run(scenario())
    assert Stream.objects.count() == streams + PER_HOUR  # the refused send opened none
    assert [error for error, _ in answers] == [False] * PER_HOUR + [True]
    assert "(MARKUS_AGENT_MESSAGES_PER_HOUR)" in answers[-1][1] and "try again in" in answers[-1][1]
    assert Chunk.objects.filter(sender_id=eve.id).count() == PER_HOUR


def test_an_agents_a2a_message_past_the_pace_is_a_429_with_retry_after_that_stores_nothing(eve, ada):
    def send(n: int, method: str = "SendMessage"):
        body = {
            "jsonrpc": "2.0",
            "id": f"r{n}",
            "method": method,
            "params": {
                "message": {"messageId": f"m{n}", "role": "ROLE_USER", "parts": [{"text": f"question {n}"}]},
                "configuration": {"returnImmediately": True},
            },
        }
        return DjangoClient().post(
            f"/a2a/{ada.id}/",
            json.dumps(body),
            content_type="application/json",
            HTTP_AUTHORIZATION=f"Bearer {eve.token}",
            HTTP_A2A_VERSION="1.0",
        )

    for n in range(PER_HOUR):
        sent = send(n)
        assert sent.status_code == 200 and "result" in sent.json(), sent.content
    for method in ("SendMessage", "SendStreamingMessage"):
        refused = send(PER_HOUR, method)
        assert refused.status_code == 429 and int(refused["Retry-After"]) > 0, refused.content
        assert "(MARKUS_AGENT_MESSAGES_PER_HOUR)" in refused.json()["detail"] and refused.json()["limit"] == PER_HOUR
    assert Chunk.objects.filter(sender_id=eve.id).count() == PER_HOUR
    assert MailboxItem.objects.filter(agent_id=ada.id).count() == PER_HOUR


def test_a_message_sent_again_with_its_key_is_answered_as_sent_not_refused_by_the_pace(eve, ada):
    """Its first send counted; the answer to it was lost, the message was not."""
    client = eve.client()
    stream_id = open_stream(client, eve.id, ada.id)

    def send(n: int):
        return append(client, stream_id, eve.id, f"question {n}", key=f"k-{n}")

    assert [send(n).status_code for n in range(PER_HOUR)] == [201] * PER_HOUR
    again = send(PER_HOUR - 1)
    assert again.status_code == 200 and again["Idempotent-Replayed"] == "true"
    assert send(PER_HOUR).status_code == 429


@pytest.mark.django_db(transaction=True)  # the request door is an async view
def test_a_bus_request_past_the_pace_is_a_429_that_opens_no_stream(eve, ada):
    client = eve.client()
    for n in range(PER_HOUR):
        assert _send(client, eve.id, ada.id, f"question {n}").status_code == 201
    streams = Stream.objects.count()

    refused = client.post(
        "/api/agentbus/request",
        {"sender": eve.id, "recipient": ada.id, "payload": {"text": "one more"}, "timeoutSeconds": 1},
        format="json",
    )

    assert refused.status_code == 429 and int(refused["Retry-After"]) > 0, refused.content
    assert "(MARKUS_AGENT_MESSAGES_PER_HOUR)" in refused.json()["detail"]
    assert Stream.objects.count() == streams


def test_an_outside_agents_messages_to_a_group_with_a_loop_agent_are_paced_per_group(eve, ada, max_):
    group = services.group_chat_open(creator=eve.agent, members=[ada.agent, max_.agent], name="release")
    client = eve.client()
    for n in range(PER_HOUR):
        assert append(client, group.id, eve.id, f"note {n}").status_code == 201

    refused = append(client, group.id, eve.id, "one more")

    assert refused.status_code == 429, refused.content
    assert f"you sent {PER_HOUR} messages to group 'release' in the last hour" in refused.json()["detail"]
    outside_only = services.group_chat_open(creator=eve.agent, members=[max_.agent], name="cli-only")
    for n in range(PER_HOUR + 1):
        assert append(client, outside_only.id, eve.id, f"note {n}").status_code == 201
