"""Agents over the API: create (token shown once), list, show; agent bearer tokens act
only as their agent; what a caller may not see answers 404."""

from __future__ import annotations

import pytest
from rest_framework.test import APIClient

from markus.agents.models import Agent, Team, hash_token
from markus.agents.services import user_token_create

from .conftest import client_for

pytestmark = pytest.mark.django_db


def bearer(token: str) -> APIClient:
    client = APIClient()
    client.credentials(HTTP_AUTHORIZATION=f"Bearer {token}")
    return client


def test_creating_an_agent_returns_it_with_a_token_once(alice_client, team):  # alice owns a team
    response = alice_client.post("/api/agents/", {"name": "Bea", "role": "writer"}, format="json")
    assert response.status_code == 201
    body = response.json()
    assert body["name"] == "Bea" and body["role"] == "writer" and body["kind"] == Agent.Kind.INTERNAL
    assert body["token"].startswith("mk_")
    agent = Agent.objects.get(id=body["id"])
    assert agent.token_hash == hash_token(body["token"]) and body["token"] not in agent.token_hash
    shown = alice_client.get(f"/api/agents/{body['id']}/")
    assert shown.status_code == 200 and "token" not in shown.json()
    assert all("token" not in a for a in alice_client.get("/api/agents/").json())


def test_an_agent_can_be_created_with_an_id_a_kind_and_a_team(alice_client, team):
    response = alice_client.post(
        "/api/agents/", {"name": "Cli", "id": "cli-1", "kind": "external", "teamId": team.id}, format="json"
    )
    assert response.status_code == 201
    body = response.json()
    assert (body["id"], body["kind"], body["teamId"], body["ownerId"]) == ("cli-1", "external", team.id, team.owner_id)


@pytest.mark.parametrize(
    "body,message",
    [
        ({}, "name is required"),
        ({"name": "  "}, "name is required"),
        ({"name": "X", "kind": "robot"}, "kind must be one of"),
        ({"name": "X", "id": "bad id!"}, "id may hold"),
        ({"name": 3}, "name must be a string"),
        ({"name": "X", "teamId": "team_missing"}, "no such team"),
    ],
)
def test_creating_an_agent_with_bad_input_answers_400_with_a_message(alice_client, team, body, message):
    response = alice_client.post("/api/agents/", body, format="json")
    assert response.status_code == 400
    assert message in response.json()["detail"]


def test_creating_an_agent_with_a_taken_id_answers_409_id_not_available(alice_client, agent):
    response = alice_client.post("/api/agents/", {"name": "Dup", "id": agent.id}, format="json")
    assert response.status_code == 409 and "id not available" in response.json()["detail"]


def test_creating_an_agent_in_someone_elses_team_answers_400(charlie_client, team):
    response = charlie_client.post("/api/agents/", {"name": "Sneak", "teamId": team.id}, format="json")
    assert response.status_code == 400
    assert not Agent.objects.filter(name="Sneak").exists()


def test_a_body_that_is_not_an_object_answers_400(alice_client):
    assert alice_client.post("/api/agents/", ["Bea"], format="json").status_code == 400


def test_owner_and_teammate_see_the_agent_and_an_outsider_does_not(agent, alice_client, bob, charlie_client):
    assert [a["id"] for a in alice_client.get("/api/agents/").json()] == [agent.id]
    assert [a["id"] for a in client_for(bob).get("/api/agents/").json()] == [agent.id]
    assert charlie_client.get("/api/agents/").json() == []
    assert client_for(bob).get(f"/api/agents/{agent.id}/").status_code == 200


def test_an_outsiders_agent_and_a_missing_agent_both_answer_404(agent, charlie_client):
    foreign = charlie_client.get(f"/api/agents/{agent.id}/")
    missing = charlie_client.get("/api/agents/nobody/")
    assert foreign.status_code == missing.status_code == 404
    assert foreign.json() == missing.json()


def test_an_agent_token_authenticates_as_that_agent_only(agent, agent_with_token):
    own, token = agent_with_token
    client = bearer(token)
    assert [a["id"] for a in client.get("/api/agents/").json()] == [own.id]
    shown = client.get(f"/api/agents/{own.id}/")
    assert shown.status_code == 200 and shown.json()["id"] == own.id and "token" not in shown.json()
    assert client.get(f"/api/agents/{agent.id}/").status_code == 404


def test_an_agent_token_cannot_create_agents(agent_with_token):
    _, token = agent_with_token
    response = bearer(token).post("/api/agents/", {"name": "Spawn"}, format="json")
    assert response.status_code == 403
    assert not Agent.objects.filter(name="Spawn").exists()


def test_a_wrong_agent_token_answers_401(agent):
    response = bearer("mk_not-a-real-token").get("/api/agents/")
    assert response.status_code == 401


def test_an_anonymous_caller_is_refused(agent):
    response = APIClient().get(f"/api/agents/{agent.id}/")
    assert response.status_code in (401, 403)
    assert "name" not in response.json()


def test_a_user_token_authenticates_too(alice, agent):
    client = APIClient()
    client.credentials(HTTP_AUTHORIZATION=f"Token {user_token_create(alice)[1]}")
    assert [a["id"] for a in client.get("/api/agents/").json()] == [agent.id]


def test_a_staff_user_sees_every_agent(agent, django_user_model):
    staff = django_user_model.objects.create_user("operator", is_staff=True)
    Team.objects.create(name="Other", owner=staff)
    assert agent.id in [a["id"] for a in client_for(staff).get("/api/agents/").json()]
