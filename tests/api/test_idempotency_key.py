"""A message sent again with its ``Idempotency-Key`` is stored once.

A person's chat (``POST /api/agents/{id}/chat``) and a posted item
(``POST /api/agents/{id}/mailbox``) whose answer was lost (a cut connection, a 503 after
the commit) are sent again by the client with the same key: the agent gets one item,
and the second send is answered as the first would be (the chat's reply, or pending;
the item as it stands now), marked ``Idempotent-Replayed: true``. The same key with a
different request is a 422 that stores nothing; a key is the caller's own (another
person's same key is another message); a malformed key is a 400 that states the rule.
alice owns ada (team Core, bob a member)."""

from __future__ import annotations

import json
import threading

import pytest
from asgiref.sync import async_to_sync
from django.conf import settings
from django.db import connection
from django.test import AsyncClient

from attention import loop, services
from mailbox.models import MailboxItem
from markus.agents.models import ChatMessage
from markus.agents.services import user_token_create
from markus.core.limits import IDEMPOTENCY_KEY_MAX_CHARS

from ..conftest import client_for

pytestmark = pytest.mark.pg

KEY = "5f0c9a3e-2b1d-4f7a-9c1e-8d2b3a4c5e6f"


def chat(client, agent, text: str, key: str | None = KEY, **headers):
    if key is not None:
        headers["HTTP_IDEMPOTENCY_KEY"] = key
    return client.post(f"/api/agents/{agent.id}/chat", {"text": text}, format="json", **headers)


def post_item(client, agent, content: str, key: str | None = KEY):
    body = {"sourceType": "human_chat", "payload": {"summary": content, "content": content}}
    headers = {"HTTP_IDEMPOTENCY_KEY": key} if key is not None else {}
    return client.post(f"/api/agents/{agent.id}/mailbox", body, format="json", **headers)


@pytest.mark.django_db(transaction=True)
def test_a_chat_sent_again_with_its_key_is_stored_once_and_answered_as_the_first(agent, alice_client, monkeypatch):
    monkeypatch.setitem(settings.MARKUS, "CHAT_TIMEOUT_S", 0.1)  # no worker here: the test runs the item
    first = chat(alice_client, agent, "is the build green?")
    assert first.status_code == 202, first.content
    assert "Idempotent-Replayed" not in first.headers
    again = chat(alice_client, agent, "is the build green?")  # its answer was lost: sent again
    assert again.status_code == 202, again.content
    assert again.headers["Idempotent-Replayed"] == "true"
    assert again.json()["mailboxItemId"] == first.json()["mailboxItemId"]
    assert again.json()["sessionId"] == first.json()["sessionId"]
    assert MailboxItem.objects.filter(agent=agent).count() == 1

    loop.run_attention(agent.id)
    answered = chat(alice_client, agent, "is the build green?")
    assert answered.status_code == 200 and answered.headers["Idempotent-Replayed"] == "true"
    assert answered.json()["mailboxItemId"] == first.json()["mailboxItemId"]
    reply = ChatMessage.objects.get(session_id=first.json()["sessionId"], role="assistant")
    assert answered.json()["reply"] == reply.content  # the one reply the agent wrote, not a second
    assert MailboxItem.objects.filter(agent=agent).count() == 1
    assert ChatMessage.objects.filter(session_id=first.json()["sessionId"], role="user").count() == 1


@pytest.mark.django_db(transaction=True)
def test_a_chat_stream_sent_again_with_its_key_streams_the_first_items_reply(agent, alice, alice_client, monkeypatch):
    monkeypatch.setitem(settings.MARKUS, "CHAT_TIMEOUT_S", 0.1)
    first = chat(alice_client, agent, "hello")
    loop.run_attention(agent.id)
    _, raw = user_token_create(alice)

    async def stream_again() -> tuple[int, str | None, str]:  # the stream read in one event loop
        r = await AsyncClient().post(
            f"/api/agents/{agent.id}/chat",
            json.dumps({"text": "hello"}),
            content_type="application/json",
            headers={"authorization": f"Token {raw}", "accept": "text/event-stream", "idempotency-key": KEY},
        )
        return (
            r.status_code,
            r.headers.get("Idempotent-Replayed"),
            b"".join([c async for c in r.streaming_content]).decode(),
        )

    status, replayed, body = async_to_sync(stream_again)()
    assert status == 200 and replayed == "true"
    item_id = first.json()["mailboxItemId"]
    assert body.startswith(f"id: {item_id}:0\nevent: queued\n") and "event: done" in body
    reply = ChatMessage.objects.get(session_id=first.json()["sessionId"], role="assistant").content
    done = body.split("event: done\ndata: ")[1].split("\n")[0]
    assert json.loads(done)["reply"] == reply  # the one reply the agent wrote
    assert MailboxItem.objects.filter(agent=agent).count() == 1


@pytest.mark.django_db(transaction=True)
def test_a_chat_sent_again_after_its_agent_was_paused_is_answered_pending_not_refused(agent, alice_client, monkeypatch):
    monkeypatch.setitem(settings.MARKUS, "CHAT_TIMEOUT_S", 0.0)
    first = chat(alice_client, agent, "hold the release")
    services.agent_pause(agent)
    again = chat(alice_client, agent, "hold the release")  # stored before the pause: no 409
    assert again.status_code == 202 and again.headers["Idempotent-Replayed"] == "true"
    assert again.json()["mailboxItemId"] == first.json()["mailboxItemId"]
    assert chat(alice_client, agent, "a new message", key="another-key").status_code == 409


@pytest.mark.django_db(transaction=True)
def test_the_same_key_with_another_message_is_a_422_and_stores_nothing(agent, alice_client, monkeypatch):
    monkeypatch.setitem(settings.MARKUS, "CHAT_TIMEOUT_S", 0.0)
    assert chat(alice_client, agent, "deploy on Friday").status_code == 202
    other = chat(alice_client, agent, "deploy on Monday")
    assert other.status_code == 422, other.content
    assert other.json()["code"] == "idempotency_key_reused"
    assert "Idempotency-Key" in other.json()["detail"] and "new key" in other.json()["detail"]
    item = post_item(alice_client, agent, "deploy on Friday")  # the mailbox's door: another request too
    assert item.status_code == 422
    assert MailboxItem.objects.filter(agent=agent).count() == 1


@pytest.mark.django_db(transaction=True)
def test_a_key_is_the_callers_own(agent, alice_client, bob, monkeypatch):
    monkeypatch.setitem(settings.MARKUS, "CHAT_TIMEOUT_S", 0.0)
    mine = chat(alice_client, agent, "hi")
    theirs = chat(client_for(bob), agent, "hi")  # bob picked the same key: his own message
    assert theirs.status_code == 202 and "Idempotent-Replayed" not in theirs.headers
    assert theirs.json()["mailboxItemId"] != mine.json()["mailboxItemId"]
    assert MailboxItem.objects.filter(agent=agent).count() == 2


@pytest.mark.django_db
@pytest.mark.parametrize("key", ["", " ", "a b", "é", "x" * (IDEMPOTENCY_KEY_MAX_CHARS + 1)])
def test_a_malformed_key_is_a_400_that_states_the_rule(agent, alice_client, key, monkeypatch):
    monkeypatch.setitem(settings.MARKUS, "CHAT_TIMEOUT_S", 0.0)  # (today's code waits for a reply)
    for r in (chat(alice_client, agent, "hi", key), post_item(alice_client, agent, "hi", key)):
        assert r.status_code == 400, r.content
        assert f"1 to {IDEMPOTENCY_KEY_MAX_CHARS}" in r.json()["detail"]
        assert r.json()["fields"] == {"Idempotency-Key": [r.json()["detail"]]}
    assert not MailboxItem.objects.filter(agent=agent).exists()


@pytest.mark.django_db(transaction=True)
def test_an_item_posted_again_with_its_key_answers_the_stored_item(agent, alice_client):
    first = post_item(alice_client, agent, "the release is on Friday")
    assert first.status_code == 201 and "Idempotent-Replayed" not in first.headers
    again = post_item(alice_client, agent, "the release is on Friday")
    assert again.status_code == 200 and again.headers["Idempotent-Replayed"] == "true"
    assert again.json()["id"] == first.json()["id"]
    unkeyed = [post_item(alice_client, agent, "the release is on Friday", key=None) for _ in range(2)]
    assert all(r.status_code == 201 for r in unkeyed)  # without a key, each send is a message
    assert MailboxItem.objects.filter(agent=agent).exclude(id__in=[r.json()["id"] for r in unkeyed]).count() == 1


@pytest.mark.django_db(transaction=True)
def test_sends_racing_with_one_key_store_one_item(agent, alice):
    answers: list[int] = []
    errors: list[BaseException] = []
    start = threading.Barrier(6)

    def send() -> None:
        try:
            client = client_for(alice)
            start.wait()
            answers.append(post_item(client, agent, "one message, six sends").status_code)
        except BaseException as exc:  # reported by the test, not lost in a thread
            errors.append(exc)
        finally:
            connection.close()

    threads = [threading.Thread(target=send) for _ in range(6)]
    for t in threads:
        t.start()
    for t in threads:
        t.join()
    assert errors == []
    assert sorted(answers) == [200] * 5 + [201]
    assert MailboxItem.objects.filter(agent=agent).count() == 1
