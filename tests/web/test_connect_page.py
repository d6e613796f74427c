"""Adding an outside agent from the pages and its connect page (issue 36, point 3): the
form offers only the teams where the caller may create agents; the token is on the page
right after create or rotate, once; who controls the agent rotates and revokes it, a
teammate gets 403, an outsider 404; an internal agent has no connect page.

alice owns team Core (bob a member); charlie is an outsider."""

from __future__ import annotations

import pytest
from django.test import Client
from django.utils.html import escape

from markus.agents.auth import agent_for_token
from markus.agents.connect import TOKEN_PLACEHOLDER
from markus.agents.models import Agent, Team
from markus.agents.services import agent_create

from .conftest import signed_in

pytestmark = pytest.mark.django_db


@pytest.fixture
def claude(alice, team):
    return agent_create(name="Claude", kind=Agent.Kind.EXTERNAL, owner=alice, team=team, agent_id="claude")


def add(client: Client, **fields):
    return client.post("/agents/new/", {"name": "Claude", "role": "coding agent", **fields})


def test_the_agents_page_links_the_form_for_those_who_may_create_agents(alice, bob, team):
    assert 'id="add-outside-agent"' in signed_in(alice).get("/agents/").content.decode()
    assert 'id="add-outside-agent"' not in signed_in(bob).get("/agents/").content.decode()
    assert signed_in(bob).get("/agents/new/").status_code == 403
    assert Client().get("/agents/new/").status_code == 302  # to the login page


def test_the_form_offers_only_teams_where_the_caller_may_create(alice, charlie, team):
    other = Team.objects.create(name="Other", owner=charlie)
    other.members.add(alice)
    page = signed_in(alice).get("/agents/new/").content.decode()
    assert f'value="{team.id}"' in page and f'value="{other.id}"' not in page
    refused = add(signed_in(alice), teamId=other.id)  # a team she only belongs to
    assert refused.status_code == 403 and "Only staff and team owners" in refused.content.decode()
    assert not Agent.objects.filter(name="Claude").exists()


def test_adding_one_shows_its_token_once_on_its_connect_page(alice, team):
    client = signed_in(alice)
    response = add(client, teamId=team.id, id="claude")
    assert response.status_code == 302 and response["Location"] == "/agents/claude/connect/"
    agent = Agent.objects.get(id="claude")
    assert (agent.kind, agent.owner, agent.team, agent.role) == (Agent.Kind.EXTERNAL, alice, team, "coding agent")
    first = client.get("/agents/claude/connect/")
    assert "no-store" in first["Cache-Control"]
    token = first.context["token"]
    assert agent_for_token(token) == agent
    page = first.content.decode()
    assert 'id="token-once"' in page and f"Bearer {token}" in page and "http://testserver/mcp/" in page
    again = client.get("/agents/claude/connect/").content.decode()
    assert token not in again and f"Bearer {escape(TOKEN_PLACEHOLDER)}" in again


def test_a_refused_form_is_shown_again_with_the_refusal_and_the_input(alice, team, claude):
    taken = add(signed_in(alice), teamId=team.id, id="claude")
    assert taken.status_code == 409 and "id not available" in taken.content.decode()
    nameless = add(signed_in(alice), name="  ", role="kept")
    assert nameless.status_code == 400 and "name is required" in nameless.content.decode()
    assert 'value="kept"' in nameless.content.decode()


def test_rotating_from_the_page_shows_the_new_token_once_and_the_old_one_stops(alice, claude):
    _, old = claude
    client = signed_in(alice)
    assert client.post("/agents/claude/connect/rotate/")["Location"] == "/agents/claude/connect/"
    token = client.get("/agents/claude/connect/").context["token"]
    assert agent_for_token(old) is None and agent_for_token(token).id == "claude"
    assert client.post("/agents/claude/connect/revoke/").status_code == 302
    page = client.get("/agents/claude/connect/")
    assert agent_for_token(token) is None and page.context["token"] is None and "none: revoked" in page.content.decode()


@pytest.mark.parametrize("who,status", [("bob", 403), ("charlie", 404)])
def test_a_teammate_is_refused_the_connect_page_and_an_outsider_finds_no_agent(request, who, status, claude):
    client = signed_in(request.getfixturevalue(who))
    assert client.get("/agents/claude/connect/").status_code == status
    assert client.post("/agents/claude/connect/rotate/").status_code == status
    assert client.post("/agents/claude/connect/revoke/").status_code == status
    assert agent_for_token(claude[1]).id == "claude"


def test_an_internal_agent_has_no_connect_page_and_the_mind_view_links_an_outside_ones(alice, agent, claude):
    client = signed_in(alice)
    assert client.get(f"/agents/{agent.id}/connect/").status_code == 404
    assert 'id="connect-link"' not in client.get(f"/agents/{agent.id}/mind/").content.decode()
    assert 'href="/agents/claude/connect/"' in client.get("/agents/claude/mind/").content.decode()


def test_the_hook_script_is_served_for_curl():
    response = Client().get("/hooks/claude_code.py")
    assert response.status_code == 200 and b"MARKUS_AGENT_ID" in b"".join(response.streaming_content)
