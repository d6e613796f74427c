"""Moving an agent to another team (issue 37, point 4): ``PATCH /api/agents/{id}/``
``{"teamId": …}`` by whoever controls it, into a team where the caller may create agents
(the create rule: staff; a team's owner in a team they own or with no team); a team the
caller cannot see reads "no such team"; its team channel follows.

alice owns Core (bob a member) and Lab; charlie owns Far (alice a member)."""

from __future__ import annotations

import pytest

from agentbus.models import StreamMember
from agentbus.team_channel import team_channel_id
from markus.agents.models import Agent, Team
from markus.agents.services import agent_create
from tests.conftest import client_for

pytestmark = pytest.mark.django_db


@pytest.fixture
def lab(alice):
    return Team.objects.create(name="Lab", owner=alice)


@pytest.fixture
def far(alice, charlie):
    team = Team.objects.create(name="Far", owner=charlie)
    team.members.add(alice)
    return team


def move(user, agent_id: str, team_id):
    return client_for(user).patch(f"/api/agents/{agent_id}/", {"teamId": team_id}, format="json")


def test_the_team_owner_moves_an_agent_to_another_team_she_owns_and_its_channel_follows(alice, agent, team, lab):
    Agent.objects.filter(id="ada").update(status=Agent.RunStatus.RUNNING)
    agent.save()  # a running member of Core's channel
    response = move(alice, "ada", lab.id)
    assert response.status_code == 200 and response.json()["teamId"] == lab.id
    channels = set(StreamMember.objects.filter(agent_id="ada").values_list("stream_id", flat=True))
    assert team_channel_id(lab.id) in channels and team_channel_id(team.id) not in channels


def test_out_of_any_team_as_creating_one_with_no_team(alice, agent):
    assert move(alice, "ada", None).json()["teamId"] is None
    assert Agent.objects.get(id="ada").team_id is None


def test_into_a_team_she_only_belongs_to_is_refused_as_create_refuses_it(alice, agent, far):
    refused = move(alice, "ada", far.id)
    assert refused.status_code == 403 and "Only staff and team owners" in refused.json()["detail"]
    assert Agent.objects.get(id="ada").team_id != far.id


def test_a_team_she_cannot_see_reads_no_such_team(alice, charlie, agent):
    hidden = Team.objects.create(name="Hidden", owner=charlie)
    refused = move(alice, "ada", hidden.id)
    assert refused.status_code == 400 and "teamId: no such team" in refused.json()["detail"]


def test_an_owner_who_owns_no_team_may_not_move_their_agent_out(bob, team):
    agent_create(name="Bobs", owner=bob, team=team, agent_id="bobs")
    assert move(bob, "bobs", None).status_code == 403
    assert Agent.objects.get(id="bobs").team_id == team.id


def test_a_teammate_may_not_move_it(bob, agent, lab):
    assert move(bob, "ada", None).status_code == 403


def test_a_moved_agent_keeps_only_the_tool_servers_its_new_team_is_offered(alice, agent, team, lab):
    """A server offered only to Core leaves ada when alice moves her to Lab; one offered to
    all stays (issue 35, point 1: only a server offered to the agent's team may be attached)."""
    from markus.toolservers.models import ToolServer

    core_only = ToolServer.objects.create(name="core-only", transport="stdio", command="true")
    core_only.offered_to.add(team)
    everyone = ToolServer.objects.create(name="everyone", transport="stdio", command="true", offered_to_all=True)
    attached = client_for(alice).patch("/api/agents/ada/", {"toolServers": ["core-only", "everyone"]}, format="json")
    assert attached.status_code == 200, attached.content
    assert move(alice, "ada", lab.id).status_code == 200
    assert list(ToolServer.objects.filter(agents=agent).values_list("name", flat=True)) == [everyone.name]
