"""Who may create an agent (issue 35, point 4; the row ``agents_create``): staff, in any
team or none; a team's owner, in a team they own or with no team; nobody else (a member,
an outsider, an agent's owner who owns no team, an agent's token) unless
MARKUS_AGENTS_CREATE=anyone opens it to every signed-in person. The 403 says who may."""

from __future__ import annotations

import pytest
from rest_framework.test import APIClient

from markus.agents.models import Agent, Team
from markus.agents.services import agent_create
from tests.conftest import client_for

pytestmark = pytest.mark.django_db


@pytest.fixture
def root(django_user_model):
    return django_user_model.objects.create_user("root", password="x", is_staff=True)


@pytest.fixture
def other_team(charlie, alice):
    """charlie's team, alice a member of it."""
    team = Team.objects.create(name="Other", owner=charlie)
    team.members.add(alice)
    return team


def create(client: APIClient, team: Team | None = None):
    body = {"name": "New", **({"teamId": team.id} if team else {})}
    return client.post("/api/agents/", body, format="json")


def refused(response) -> bool:
    return response.status_code == 403 and "Only staff and team owners" in response.json()["detail"]


def test_a_team_owner_creates_agents_in_the_team_they_own_or_with_no_team(alice, team):
    client = client_for(alice)
    assert create(client, team).status_code == 201
    assert create(client).status_code == 201
    assert sorted(Agent.objects.filter(owner=alice).values_list("team_id", flat=True), key=str) == sorted(
        [team.id, None], key=str
    )


def test_a_team_owner_may_not_create_agents_in_a_team_they_only_belong_to(alice, team, other_team):
    response = create(client_for(alice), other_team)
    assert refused(response), response.content
    assert not Agent.objects.filter(team=other_team).exists()


def test_a_member_an_outsider_and_an_agents_owner_without_a_team_may_not_create_agents(bob, charlie, team):
    agent_create(name="Zed", owner=charlie, agent_id="zed")  # charlie owns an agent, no team
    assert refused(create(client_for(bob), team))  # a member of the team
    assert refused(create(client_for(bob)))
    assert refused(create(client_for(charlie)))
    assert Agent.objects.filter(name="New").count() == 0


def test_staff_create_agents_in_any_team_or_none(root, team):
    assert create(client_for(root), team).status_code == 201
    assert create(client_for(root)).status_code == 201


def test_an_agent_token_may_not_create_agents_even_with_the_setting_open(agent_with_token, settings, monkeypatch):
    monkeypatch.setitem(settings.MARKUS, "AGENTS_CREATE", "anyone")
    client = APIClient()
    client.credentials(HTTP_AUTHORIZATION=f"Bearer {agent_with_token[1]}")
    assert create(client).status_code == 403
    assert not Agent.objects.filter(name="New").exists()


def test_the_setting_anyone_lets_every_signed_in_person_create_agents(bob, charlie, team, settings, monkeypatch):
    monkeypatch.setitem(settings.MARKUS, "AGENTS_CREATE", "anyone")
    assert create(client_for(bob), team).status_code == 201  # a member, in his team
    assert create(client_for(charlie)).status_code == 201  # an outsider, teamless
    foreign = create(client_for(charlie), team)  # a team he does not belong to: as before
    assert foreign.status_code == 400 and "no such team" in foreign.json()["detail"]
    assert APIClient().post("/api/agents/", {"name": "New"}, format="json").status_code in (401, 403)
