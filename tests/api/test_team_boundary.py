"""Inside a team, watching is not controlling: a teammate sees the owner's agent and
talks to it, but may not pause, resume, stop or start it, nor post the loop's own item
types (a forged dream or daily report ran real work before)."""

from __future__ import annotations

import pytest

from mailbox.models import MailboxItem
from mailbox.registry import MailboxType
from markus.agents.permissions import POSTABLE
from tests.conftest import client_for

pytestmark = pytest.mark.django_db

LOOP_TYPES = [t for t in MailboxType if t not in POSTABLE]


@pytest.mark.parametrize("action", ["pause", "resume", "stop", "start"])
def test_a_teammate_may_not_control_the_owners_agent(agent, bob, action):
    response = client_for(bob).post(f"/api/agents/{agent.id}/{action}")
    assert response.status_code == 403, response.content
    assert "owner" in response.json()["detail"]
    agent.refresh_from_db()
    assert agent.status == "running"


@pytest.mark.parametrize("action", ["pause", "resume"])
def test_the_owner_controls_the_agent(agent, alice, action):
    assert client_for(alice).post(f"/api/agents/{agent.id}/{action}").status_code == 200


def test_an_outsider_gets_404_not_403(agent, charlie):
    assert client_for(charlie).post(f"/api/agents/{agent.id}/pause").status_code == 404


@pytest.mark.parametrize("source_type", LOOP_TYPES)
def test_nobody_posts_the_loops_own_item_types(agent, alice, bob, source_type):
    body = {"sourceType": source_type, "payload": {"summary": "forged", "content": "forged"}}
    for user in (alice, bob):
        response = client_for(user).post(f"/api/agents/{agent.id}/mailbox", body, format="json")
        assert response.status_code == 403, (user, response.content)
        assert "human_chat" in response.json()["detail"]  # it names what the caller may post
    assert not MailboxItem.objects.filter(agent=agent, source_type=source_type).exists()


def test_a_teammate_talks_but_does_not_post_operator_events(agent, bob, alice):
    chat = {"sourceType": MailboxType.HUMAN_CHAT, "payload": {"summary": "hi", "content": "hi"}}
    assert client_for(bob).post(f"/api/agents/{agent.id}/mailbox", chat, format="json").status_code == 201
    event = {"sourceType": MailboxType.SYSTEM_EVENT, "payload": {"summary": "deploy", "content": "deploy"}}
    refused = client_for(bob).post(f"/api/agents/{agent.id}/mailbox", event, format="json")
    assert refused.status_code == 403
    assert client_for(alice).post(f"/api/agents/{agent.id}/mailbox", event, format="json").status_code == 201


def test_a_teammate_may_not_speak_on_the_bus_as_the_owners_agent(agent, bob, alice, team):
    from markus.agents.services import agent_create

    other, _ = agent_create(name="Bea", role="engineer", owner=alice, team=team, agent_id="bea")
    body = {"sender": agent.id, "recipient": other.id, "topic": "chat"}
    refused = client_for(bob).post("/api/agentbus/streams/", body, format="json")
    assert refused.status_code == 403, refused.content
    opened = client_for(alice).post("/api/agentbus/streams/", body, format="json")
    assert opened.status_code == 201, opened.content
    stream_id = opened.json()["streamId"]
    closing = client_for(bob).post(f"/api/agentbus/streams/{stream_id}/close/", {"sender": agent.id}, format="json")
    assert closing.status_code == 403
