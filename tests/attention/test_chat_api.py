"""The chat endpoint's answers when no reply can come, and its input errors."""

from __future__ import annotations

import pytest

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
def test_chat_with_an_external_agent_points_to_the_bus(alice, team, alice_client):
    ext, _ = agent_create(name="Cli", kind="external", owner=alice, team=team, agent_id="cli")
    r = alice_client.post(f"/api/agents/{ext.id}/chat", {"text": "hi"}, format="json")
    assert r.status_code == 409 and "AgentBus" in r.json()["detail"]


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
