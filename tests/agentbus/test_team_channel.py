"""The team's group channel ``group:<teamId>`` (seed section 25.2): it exists for every
team, its members are the team's running agents (kept in step as agents are created,
removed, moved, paused, stopped, resumed), agents talk on it with the group tools and
every other running member hears it in its mailbox."""

from __future__ import annotations

import importlib

import pytest
from django.apps import apps as django_apps

from agentbus import selectors
from agentbus.errors import BusError
from agentbus.models import Stream, StreamMember
from agentbus.services import stream_append, stream_open
from agentbus.team_channel import team_channel_ensure, team_channel_id
from attention.services import agent_pause, agent_resume, agent_start, agent_stop
from attention.toolbox import ToolContext, execute_tool
from mailbox.models import MailboxItem
from mailbox.registry import MailboxType
from markus.agents.models import Agent, Team
from markus.agents.services import agent_create

pytestmark = [pytest.mark.django_db, pytest.mark.pg]
A2A_TOOLS = "markus.tools.a2a_tools"


def members(team: Team) -> list[str]:
    return sorted(StreamMember.objects.filter(stream_id=team_channel_id(team.id)).values_list("agent_id", flat=True))


def make(agent_id: str, team: Team | None, owner, kind: str = Agent.Kind.INTERNAL) -> Agent:
    return agent_create(name=agent_id.title(), agent_id=agent_id, team=team, owner=owner, kind=kind)[0]


@pytest.fixture
def a2a_tools(settings):
    modules = list(settings.MARKUS["TOOL_MODULES"])
    if A2A_TOOLS not in modules:
        settings.MARKUS = {**settings.MARKUS, "TOOL_MODULES": [*modules, A2A_TOOLS]}


def test_a_new_team_has_its_group_channel_named_after_it(alice):
    team = Team.objects.create(name="Platform", owner=alice)
    stream = Stream.objects.get(id=f"group:{team.id}")
    assert stream.is_group and stream.sender_id is None and stream.closed_at is None
    assert selectors.group_name(stream) == "Platform"


def test_renaming_the_team_renames_its_channel(alice, team):
    team.name = "Core platform"
    team.save()
    assert selectors.group_name(Stream.objects.get(id=team_channel_id(team.id))) == "Core platform"


def test_the_team_running_internal_agents_are_its_members_and_nobody_else(alice, charlie, team):
    make("ada", team, alice)
    make("bea", team, alice)
    make("harness", team, alice, kind=Agent.Kind.EXTERNAL)  # not run by the loop: not "running"
    other = Team.objects.create(name="Elsewhere", owner=charlie)
    make("zed", other, charlie)
    make("loner", None, alice)
    assert members(team) == ["ada", "bea"]
    assert members(other) == ["zed"]


def test_pausing_or_stopping_an_agent_takes_it_out_and_resuming_or_starting_brings_it_back(alice, team):
    ada = make("ada", team, alice)
    make("bea", team, alice)
    agent_pause(ada)
    assert members(team) == ["bea"]
    agent_resume(ada)
    assert members(team) == ["ada", "bea"]
    agent_stop(ada)
    assert members(team) == ["bea"]
    agent_start(ada)
    assert members(team) == ["ada", "bea"]


def test_moving_an_agent_to_another_team_moves_its_membership(alice, team):
    ada = make("ada", team, alice)
    other = Team.objects.create(name="Ops", owner=alice)
    ada.team = other
    ada.save()
    assert members(team) == []
    assert members(other) == ["ada"]
    ada.team = None
    ada.save()
    assert members(other) == []


def test_a_status_change_in_the_admin_keeps_the_membership_in_step(alice, team):
    ada = make("ada", team, alice)
    ada.status = Agent.RunStatus.STOPPED
    ada.save()
    assert members(team) == []


def test_removing_an_agent_removes_its_membership_and_removing_the_team_its_channel(alice, team):
    ada = make("ada", team, alice)
    make("bea", team, alice)
    ada.delete()
    assert members(team) == ["bea"]
    team_id = team.id
    team.delete()
    assert not Stream.objects.filter(id=team_channel_id(team_id)).exists()


def test_a_team_made_without_signals_gets_its_channel_on_first_use(alice):
    (team,) = Team.objects.bulk_create([Team(name="Raw", owner=alice)])  # bulk_create sends no signal
    assert not Stream.objects.filter(id=team_channel_id(team.id)).exists()
    Agent.objects.bulk_create([Agent(id="raw1", name="Raw one", team=team, owner=alice)])
    stream = team_channel_ensure(team)
    assert stream.id == f"group:{team.id}"
    assert members(team) == ["raw1"]
    assert team_channel_ensure(team).id == stream.id  # idempotent
    assert members(team) == ["raw1"]


def test_the_migration_gives_existing_teams_their_channel(alice):
    (team,) = Team.objects.bulk_create([Team(name="Old", owner=alice)])
    Agent.objects.bulk_create(
        [
            Agent(id="old1", name="Old one", team=team, owner=alice),
            Agent(id="old2", name="Old two", team=team, owner=alice, status=Agent.RunStatus.PAUSED),
        ]
    )
    migration = importlib.import_module("agentbus.migrations.0002_team_channels")
    migration.make_team_channels(django_apps, None)
    migration.make_team_channels(django_apps, None)  # twice: one channel
    assert Stream.objects.filter(id=team_channel_id(team.id)).count() == 1
    assert members(team) == ["old1"]


def test_nobody_may_take_a_team_channel_id_for_a_stream_of_their_own(alice, team):
    ada = make("ada", team, alice)
    bea = make("bea", team, alice)
    with pytest.raises(BusError, match="teams' channels"):
        stream_open(sender=ada, recipient=bea, stream_id="group:team_not_made_yet")


def test_a_message_on_the_channel_reaches_every_other_running_member_mailbox(alice, team, a2a_tools):
    ada = make("ada", team, alice)
    make("bea", team, alice)
    cy = make("cy", team, alice)
    agent_pause(cy)
    ctx = ToolContext(agent_id=ada.id, agent_name=ada.name, mailbox_item_id=None, scenario="a2a")
    ok, listed = execute_tool(ctx, "agent_list_group_chats", {})
    assert ok and team_channel_id(team.id) in listed
    ok, result = execute_tool(
        ctx, "agent_send_group_message", {"group_id": team_channel_id(team.id), "text": "Standup in five"}
    )
    assert ok, result
    items = MailboxItem.objects.filter(source_type=MailboxType.A2A_MESSAGE)
    assert sorted(items.values_list("agent_id", flat=True)) == ["bea"]
    item = items.get()
    assert item.extra["groupId"] == team_channel_id(team.id)
    assert item.extra["groupName"] == "Core"
    assert "Standup in five" in item.content


def test_a_newcomer_does_not_find_the_channel_history_waiting_in_its_bus_inbox(alice, team):
    ada = make("ada", team, alice)
    make("bea", team, alice)
    stream_append(stream_id=team_channel_id(team.id), sender=ada, payload={"text": "before you came"})
    make("cy", team, alice)
    assert "cy" in members(team)
    assert selectors.pending_count("cy") == 0
    # The history is still there to read.
    assert [e["payload"]["text"] for e in selectors.stream_events(Stream.objects.get(id=team_channel_id(team.id)))] == [
        "before you came"
    ]


def test_the_console_shows_a_team_channel_with_its_members_and_opens_its_page(django_user_model, alice, team):
    from django.test import Client

    make("ada", team, alice)
    staff = django_user_model.objects.create_user("op", password="pw", is_staff=True, is_superuser=True)
    client = Client()
    client.force_login(staff)
    listing = client.get("/admin/agentbus/stream/", {"q": "group:"}).content.decode()
    assert team_channel_id(team.id) in listing
    change = client.get(f"/admin/agentbus/stream/{team_channel_id(team.id)}/change/")
    assert change.status_code == 200
    page = change.content.decode()
    assert "Ada (ada)" in page  # the members inline
    assert f'href="/teams/{team.id}/channel/"' in page  # "View on site": the channel's page
