"""An agent's settings page (issue 37, point 4): whoever controls the agent changes its
name and role and ticks the tool servers attached to it, from those the API lets the
caller attach (offered to all or to its team, attached already; staff: any); a teammate
gets 403, an outsider 404; a refusal keeps the input and says the API's message.

alice owns team Core and its agent ada; bob is a member; charlie an outsider; sam staff."""

from __future__ import annotations

import pytest
from django.test import Client

from markus.agents.models import Agent, Team
from markus.agents.services import agent_create
from markus.toolservers.models import ToolServer
from markus.toolservers.services import attached_names

from .conftest import signed_in

pytestmark = pytest.mark.django_db
PATH = "/agents/ada/settings/"


@pytest.fixture
def sam(django_user_model):
    return django_user_model.objects.create_user("sam", password="pw-sam", is_staff=True)


@pytest.fixture
def servers(team):
    """git is offered to Core, docs to all, vault to nobody."""
    git = ToolServer.objects.create(name="git", transport="stdio", command="mcp-server-git")
    git.offered_to.add(team)
    ToolServer.objects.create(name="docs", transport="stdio", command="docs", offered_to_all=True)
    ToolServer.objects.create(name="vault", transport="stdio", command="vault")


def save(client: Client, **fields):
    """The form as sent: its team as it is unless ``teamId`` is given."""
    team_id = Agent.objects.get(id="ada").team_id or ""
    return client.post(PATH, {"name": "Ada", "role": "engineer", "teamId": team_id, **fields})


def test_the_mind_view_links_the_settings_for_whoever_controls_the_agent(alice, bob, agent):
    assert f'href="{PATH}"' in signed_in(alice).get("/agents/ada/mind/").content.decode()
    assert f'href="{PATH}"' not in signed_in(bob).get("/agents/ada/mind/").content.decode()


def test_a_teammate_gets_403_an_outsider_404(bob, charlie, agent):
    assert signed_in(bob).get(PATH).status_code == 403
    assert save(signed_in(bob), name="Mallory").status_code == 403
    assert signed_in(charlie).get(PATH).status_code == 404
    assert Client().get(PATH).status_code == 302
    assert Agent.objects.get(id="ada").name == "Ada"


def test_the_owner_renames_it_and_changes_its_role(alice, agent):
    response = save(signed_in(alice), name="  Ada Lovelace ", role="analyst")
    assert response.status_code == 302 and response["Location"] == f"{PATH}?saved=1"
    agent.refresh_from_db()
    assert (agent.name, agent.role) == ("Ada Lovelace", "analyst")
    assert 'id="settings-saved"' in signed_in(alice).get(response["Location"]).content.decode()


def test_an_empty_name_keeps_the_input_and_says_the_apis_message(alice, agent):
    response = save(signed_in(alice), name="  ", role="new role")
    page = response.content.decode()
    assert response.status_code == 400 and "name must not be empty" in page
    assert 'value="new role"' in page
    assert Agent.objects.get(id="ada").role == "engineer"


def test_the_list_offers_only_the_servers_the_caller_may_attach(alice, sam, agent, servers):
    page = signed_in(alice).get(PATH).content.decode()
    assert 'value="git"' in page and 'value="docs"' in page and 'value="vault"' not in page
    assert 'value="vault"' in signed_in(sam).get(PATH).content.decode()


def test_ticking_attaches_and_unticking_detaches(alice, agent, servers):
    assert save(signed_in(alice), toolServers=["git", "docs"]).status_code == 302
    assert attached_names(["ada"])["ada"] == ["docs", "git"]
    page = signed_in(alice).get(PATH).content.decode()
    assert 'value="git" checked' in page
    assert save(signed_in(alice), toolServers=["docs"]).status_code == 302
    assert attached_names(["ada"])["ada"] == ["docs"]


def test_a_server_not_offered_is_refused_as_the_api_refuses_it(alice, agent, servers):
    response = save(signed_in(alice), name="Ada 2", toolServers=["git", "vault"])
    page = response.content.decode()
    assert response.status_code == 400
    assert "no tool server &#x27;vault&#x27; is offered to this agent; you may attach: docs, git" in page
    assert 'value="git" checked' in page and 'value="Ada 2"' in page
    assert attached_names(["ada"])["ada"] == [] and Agent.objects.get(id="ada").name == "Ada"


def test_staff_attach_any_server(sam, agent, servers):
    assert save(signed_in(sam), toolServers=["vault"]).status_code == 302
    assert attached_names(["ada"])["ada"] == ["vault"]


def test_the_form_needs_the_csrf_token(alice, agent):
    client = Client(enforce_csrf_checks=True)
    client.force_login(alice)
    assert save(client, name="X").status_code == 403


def test_she_moves_it_to_another_team_she_owns(alice, agent, team):
    lab = Team.objects.create(name="Lab", owner=alice)
    page = signed_in(alice).get(PATH).content.decode()
    assert f'<option value="{team.id}" selected>' in page and f'value="{lab.id}"' in page
    assert save(signed_in(alice), teamId=lab.id).status_code == 302
    assert Agent.objects.get(id="ada").team_id == lab.id


def test_a_team_she_only_belongs_to_is_not_offered_and_refused_with_the_apis_message(alice, charlie, agent, team):
    far = Team.objects.create(name="Far", owner=charlie)
    far.members.add(alice)
    assert f'value="{far.id}"' not in signed_in(alice).get(PATH).content.decode()
    refused = save(signed_in(alice), teamId=far.id, role="kept")
    assert refused.status_code == 403 and "Only staff and team owners" in refused.content.decode()
    assert 'value="kept"' in refused.content.decode()
    assert Agent.objects.get(id="ada").team_id == team.id


def test_an_owner_who_may_not_move_it_still_renames_it(bob, team):
    agent_create(name="Bobs", owner=bob, team=team, agent_id="bobs")
    response = signed_in(bob).post("/agents/bobs/settings/", {"name": "Bobby", "role": "", "teamId": team.id})
    assert response.status_code == 302 and Agent.objects.get(id="bobs").name == "Bobby"
