"""An agent's token can be rotated (a new one, shown once) or revoked (none), by whoever
controls the agent: its owner, its team's owner, staff (issue 36, point 3). The old
token is refused at the next request. A teammate gets 403, an outsider 404 (like a
missing agent). The agent's own token may do neither: a leaked token must not be able
to mint its successor and lock its people out.

alice owns team Core (bob a member); owen owns the outside agent claude in it; charlie
is an outsider, root is staff."""

from __future__ import annotations

import pytest
from rest_framework.test import APIClient

from markus.agents.models import Agent
from markus.agents.services import agent_create
from tests.conftest import client_for

pytestmark = pytest.mark.django_db


@pytest.fixture
def owen(django_user_model, team):
    user = django_user_model.objects.create_user("owen", password="x")
    team.members.add(user)
    return user


@pytest.fixture
def root(django_user_model):
    return django_user_model.objects.create_user("root", password="x", is_staff=True)


@pytest.fixture
def claude(owen, team):
    return agent_create(name="Claude", kind=Agent.Kind.EXTERNAL, owner=owen, team=team, agent_id="claude")


def bearer(token: str) -> APIClient:
    client = APIClient()
    client.credentials(HTTP_AUTHORIZATION=f"Bearer {token}")
    return client


def rotate(client: APIClient, agent_id: str = "claude"):
    return client.post(f"/api/agents/{agent_id}/token/rotate", format="json")


def revoke(client: APIClient, agent_id: str = "claude"):
    return client.delete(f"/api/agents/{agent_id}/token")


def test_rotating_refuses_the_old_token_at_once_and_the_new_one_acts_as_the_agent(owen, claude):
    _, old = claude
    assert bearer(old).get("/api/agents/claude/").status_code == 200
    response = rotate(client_for(owen))
    assert response.status_code == 200, response.content
    body = response.json()
    assert body["id"] == "claude" and body["token"].startswith("mk_") and body["token"] != old
    assert bearer(old).get("/api/agents/claude/").status_code == 401
    assert bearer(body["token"]).get("/api/agents/claude/").json()["id"] == "claude"


def test_revoking_leaves_the_agent_without_a_token_until_one_is_rotated_in(owen, claude):
    _, old = claude
    revoked = revoke(client_for(owen))
    assert revoked.status_code == 200 and revoked.json() == {"id": "claude", "revoked": True}
    assert bearer(old).get("/api/agents/claude/").status_code == 401
    assert Agent.objects.get(id="claude").token_hash is None
    assert revoke(client_for(owen)).status_code == 200  # nothing left to revoke: still done
    fresh = rotate(client_for(owen)).json()["token"]
    assert bearer(fresh).get("/api/agents/claude/").status_code == 200


@pytest.mark.parametrize("who", ["owen", "alice", "root"])
def test_its_owner_its_teams_owner_and_staff_may_rotate_and_revoke(request, who, claude):
    client = client_for(request.getfixturevalue(who))
    assert rotate(client).status_code == 200
    assert revoke(client).status_code == 200


@pytest.mark.parametrize("who,status", [("bob", 403), ("charlie", 404)])
def test_a_teammate_is_refused_and_an_outsider_finds_no_agent(request, who, status, claude):
    _, old = claude
    client = client_for(request.getfixturevalue(who))
    assert rotate(client).status_code == status
    assert revoke(client).status_code == status
    assert bearer(old).get("/api/agents/claude/").status_code == 200


def test_the_agents_own_token_may_neither_rotate_nor_revoke_it(claude, alice):
    _, old = claude
    response = rotate(bearer(old))
    assert response.status_code == 403 and "its owner, its team's owner and staff" in response.json()["detail"]
    assert revoke(bearer(old)).status_code == 403
    other = agent_create(name="Zed", owner=alice, agent_id="zed")[1]
    assert rotate(bearer(other)).status_code == 404
    assert bearer(old).get("/api/agents/claude/").status_code == 200
