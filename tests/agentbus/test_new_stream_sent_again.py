"""A message that opens its own stream, sent again with its key, is stored once: one
stream, one message, answered as the first send. The doors that open a stream per call
(MCP ``bus_send`` without a ``stream_id``, ``bus_request``, and ``POST
/api/agentbus/request``) take the key as an append does (``Idempotency-Key``; over MCP
the ``idempotency_key`` argument); it is the sender's own. A request sent again waits for
the first request's reply, not a second one. The same key with another message or
another recipient stores nothing. eve and max are outside agents."""

from __future__ import annotations

import asyncio
import threading

import pytest
from django.contrib.auth.models import AnonymousUser
from mcp import Client

from agentbus import mcp_door, services
from agentbus.models import Chunk, Stream
from markus.agents.auth import Caller

from .conftest import run_threads

pytestmark = pytest.mark.django_db(transaction=True)  # the doors' calls run on other threads


def _mcp_calls(persona, *calls: tuple[str, dict]) -> list[tuple[bool, dict | str]]:
    async def identify(ctx: object) -> Caller:
        return Caller(AnonymousUser(), persona.agent)

    async def scenario() -> list[tuple[bool, dict | str]]:
        answers: list[tuple[bool, dict | str]] = []
        async with Client(mcp_door.build(identify)) as mcp:
            for name, arguments in calls:
                result = await mcp.call_tool(name, arguments)
                answers.append(
                    (True, result.content[0].text) if result.is_error else (False, result.structured_content)
                )
        return answers

    return asyncio.run(scenario())


def _streams_from(persona) -> int:
    return Stream.objects.filter(sender=persona.agent).count()


def test_the_mcp_doors_bus_send_sent_again_with_its_key_opens_one_stream_and_stores_one_message(eve, max_):
    send = {"to": "max", "text": "Is the build green?", "idempotency_key": "k-1"}
    (error, first), (again_error, again) = _mcp_calls(eve, ("bus_send", send), ("bus_send", send))

    assert not error and not again_error, (first, again)
    assert again == {**first, "replayed": True} and first["replayed"] is False
    assert _streams_from(eve) == 1 and Chunk.objects.filter(sender=eve.agent).count() == 1


def test_the_same_key_with_another_message_or_recipient_is_refused_and_stores_nothing(eve, max_, ada):
    first = {"to": "max", "text": "Is the build green?", "idempotency_key": "k-1"}
    answers = _mcp_calls(
        eve,
        ("bus_send", first),
        ("bus_send", {**first, "text": "And the docs?"}),
        ("bus_send", {**first, "to": "ada"}),
    )

    assert [error for error, _ in answers] == [False, True, True]
    assert all("came with another message before" in str(text) for _, text in answers[1:])
    assert _streams_from(eve) == 1 and Chunk.objects.filter(sender=eve.agent).count() == 1


def test_without_a_key_each_send_opens_its_own_stream(eve, max_):
    send = {"to": "max", "text": "hello"}
    answers = _mcp_calls(eve, ("bus_send", send), ("bus_send", send))
    assert [error for error, _ in answers] == [False, False]
    assert _streams_from(eve) == 2


def test_a_bus_request_sent_again_with_its_key_waits_on_the_first_request(eve, max_):
    client = eve.client()
    body = {"sender": "eve", "recipient": "max", "payload": {"text": "May I ship?"}, "timeoutSeconds": 0}

    first = client.post("/api/agentbus/request", body, format="json", HTTP_IDEMPOTENCY_KEY="q-1")
    again = client.post("/api/agentbus/request", body, format="json", HTTP_IDEMPOTENCY_KEY="q-1")
    other = client.post("/api/agentbus/request", body, format="json", HTTP_IDEMPOTENCY_KEY="q-2")

    assert first.status_code == again.status_code == other.status_code == 200, (first.content, again.content)
    assert again.json()["streamId"] == first.json()["streamId"] != other.json()["streamId"]
    assert again.json()["request"] == first.json()["request"] and again["Idempotent-Replayed"] == "true"
    assert "Idempotent-Replayed" not in first
    assert _streams_from(eve) == 2 and Chunk.objects.filter(sender=eve.agent).count() == 2
    (error, mcp_again), *_ = _mcp_calls(
        eve, ("bus_request", {"to": "max", "text": "May I ship?", "timeout_seconds": 0, "idempotency_key": "q-1"})
    )
    assert not error and mcp_again["streamId"] == first.json()["streamId"], mcp_again
    assert Chunk.objects.filter(sender=eve.agent).count() == 2


def test_a_malformed_key_is_refused_stating_the_rule(eve, max_):
    refused = eve.client().post(
        "/api/agentbus/request",
        {"sender": "eve", "recipient": "max", "payload": {"text": "hi"}, "timeoutSeconds": 0},
        format="json",
        HTTP_IDEMPOTENCY_KEY="has a space",
    )
    ((error, text),) = _mcp_calls(eve, ("bus_send", {"to": "max", "text": "hi", "idempotency_key": "has a space"}))

    assert refused.status_code == 400 and "1 to 200 visible ASCII characters" in refused.json()["detail"]
    assert error and "1 to 200 visible ASCII characters" in str(text)
    assert _streams_from(eve) == 0


@pytest.mark.pg
def test_sends_on_a_new_stream_racing_with_one_key_open_one_stream(eve, max_):
    """Four sends of one message with one key at once: one opens the stream and stores
    it, the others answer its message. On SQLite, and on PostgreSQL in the ``pg`` pass."""
    start = threading.Barrier(4)
    answers: list[tuple[str, int, bool]] = []

    def send() -> None:
        start.wait(timeout=10)
        stream, chunk, replayed = services.stream_send_once(
            sender=eve.agent, recipient=max_.agent, payload={"text": "once"}, request_key="k-race"
        )
        answers.append((stream.id, chunk.sequence, replayed))

    errors = run_threads([send] * 4)
    assert not errors, errors
    assert sorted(replayed for _, _, replayed in answers) == [False, True, True, True]
    assert len({stream for stream, _, _ in answers}) == 1 and _streams_from(eve) == 1
    assert Chunk.objects.filter(sender=eve.agent).count() == 1
