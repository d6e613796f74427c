"""A chat's text is bounded (``CHAT_TEXT_MAX_CHARS``): it is stored and sent to the
model on every turn of its session. Longer text answers 400 stating the limit and
stores nothing, whether it comes through the chat or as a human_chat enqueued through
the mailbox API."""

from __future__ import annotations

import pytest

from mailbox.models import MailboxItem
from markus.core.limits import CHAT_TEXT_MAX_CHARS

pytestmark = pytest.mark.django_db


@pytest.fixture
def no_wait(settings, monkeypatch):
    """The chat answers at once (202, pending) instead of waiting for the reply."""
    monkeypatch.setitem(settings.MARKUS, "CHAT_TIMEOUT_S", 0.0)


def assert_over_limit(response, field: str) -> None:
    assert response.status_code == 400, response.content[:300]
    data = response.json()
    assert data["code"] == "invalid"
    assert field in data["detail"] and f"{CHAT_TEXT_MAX_CHARS} characters" in data["detail"], data["detail"]


def test_a_chat_text_over_the_limit_is_refused_and_nothing_is_stored(agent, alice_client, no_wait):
    r = alice_client.post(f"/api/agents/{agent.id}/chat", {"text": "x" * (CHAT_TEXT_MAX_CHARS + 1)}, format="json")
    assert_over_limit(r, "text")
    assert not MailboxItem.objects.filter(agent=agent).exists()


def test_a_megabyte_of_chat_text_is_refused(agent, alice_client, no_wait):
    r = alice_client.post(f"/api/agents/{agent.id}/chat", {"text": "x" * 1_000_000}, format="json")
    assert_over_limit(r, "text")
    assert not MailboxItem.objects.filter(agent=agent).exists()


def test_a_chat_text_at_the_limit_is_taken(agent, alice_client, no_wait):
    r = alice_client.post(f"/api/agents/{agent.id}/chat", {"text": "x" * CHAT_TEXT_MAX_CHARS}, format="json")
    assert r.status_code == 202, r.content[:300]
    assert MailboxItem.objects.get(id=r.json()["mailboxItemId"]).payload["content"] == "x" * CHAT_TEXT_MAX_CHARS


def enqueue(client, agent_id: str, source_type: str, content: str):
    body = {"sourceType": source_type, "payload": {"summary": "s", "content": content}}
    return client.post(f"/api/agents/{agent_id}/mailbox", body, format="json")


def test_a_human_chat_enqueued_over_the_limit_is_refused_and_nothing_is_stored(agent, alice_client):
    r = enqueue(alice_client, agent.id, "human_chat", "x" * (CHAT_TEXT_MAX_CHARS + 1))
    assert_over_limit(r, "payload.content")
    assert not MailboxItem.objects.filter(agent=agent).exists()


def test_a_human_chat_enqueued_at_the_limit_is_taken(agent, alice_client):
    r = enqueue(alice_client, agent.id, "human_chat", "x" * CHAT_TEXT_MAX_CHARS)
    assert r.status_code == 201, r.content[:300]
