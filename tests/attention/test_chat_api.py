"""The chat endpoint's answers when no reply can come, and its input errors. An outside
agent's chat goes to its bus inbox (tests/agentbus/test_outside_agent_chat.py)."""

from __future__ import annotations

import pytest

from agentbus.selectors import pending_count
from attention import services
from mailbox.models import MailboxItem
from markus.agents.services import agent_create


@pytest.mark.django_db
def test_chat_with_a_paused_agent_is_refused_at_once_and_enqueues_nothing(agent, alice_client):
    services.agent_pause(agent)
    r = alice_client.post(f"/api/agents/{agent.id}/chat", {"text": "hi"}, format="json")
    assert r.status_code == 409 and "paused" in r.json()["detail"]
    assert not MailboxItem.objects.filter(agent=agent).exists()


@pytest.mark.django_db
def test_chat_with_an_external_agent_goes_to_its_bus_inbox_and_waits_for_its_answer(
    alice, team, alice_client, settings, monkeypatch
):
    monkeypatch.setitem(settings.MARKUS, "CHAT_TIMEOUT_S", 0.2)
    ext, _ = agent_create(name="Cli", kind="external", owner=alice, team=team, agent_id="cli")
    r = alice_client.post(f"/api/agents/{ext.id}/chat", {"text": "hi"}, format="json")
    assert r.status_code == 202 and r.json()["pending"] is True  # nobody answered in time
    assert pending_count(ext.id) == 1
    assert MailboxItem.objects.get(id=r.json()["mailboxItemId"]).status == "completed"  # delivered


@pytest.mark.django_db
@pytest.mark.parametrize(
    "body,needle",
    [
        (b"{not json", "valid JSON"),
        (b"[1]", "object"),
        (b'{"text": ""}', "text"),
        (b'{"text": 5}', "text"),
        (b'{"text": "hi", "sessionId": 3}', "sessionId"),
    ],
)
def test_bad_chat_bodies_get_a_400_with_a_message(agent, alice_client, body, needle):
    r = alice_client.post(f"/api/agents/{agent.id}/chat", body, content_type="application/json")
    assert r.status_code == 400 and needle in r.json()["detail"]


@pytest.mark.django_db
def test_chat_with_someone_elses_agent_is_404_and_anonymous_is_401(agent, charlie_client, client):
    assert charlie_client.post(f"/api/agents/{agent.id}/chat", {"text": "hi"}, format="json").status_code == 404
    assert (
        client.post(f"/api/agents/{agent.id}/chat", {"text": "hi"}, content_type="application/json").status_code == 401
    )


@pytest.mark.django_db
def test_a_chat_body_over_the_limit_is_413(agent, alice_client, settings):
    settings.DATA_UPLOAD_MAX_MEMORY_SIZE = 100
    r = alice_client.post(f"/api/agents/{agent.id}/chat", {"text": "x" * 500}, format="json")
    assert r.status_code == 413
