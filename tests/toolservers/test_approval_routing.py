"""Who approves a call of an ``ask`` tool (issue 35, point 1): the person who asked if
they are staff; else, when the server is offered to the agent's team (``offeredTo`` or
its ``teams``), that team's owner; else the server's owner; else the first staff user.
Never the agent's owner merely because they own it: they may have set it up.

The people: lead owns the team Core, alice is in it and owns its agent ada, bob is in it;
carol owns another team; dave is in no team and owns solo; root registered the servers."""

from __future__ import annotations

import pytest

from attention.toolbox import ToolContext, ToolError
from mailbox.models import MailboxItem
from markus.agents.models import Agent, Team
from markus.agents.services import agent_create
from markus.toolservers.models import ToolServer
from markus.toolservers.offered import approver

pytestmark = pytest.mark.django_db


@pytest.fixture
def people(django_user_model) -> dict:
    make = django_user_model.objects.create_user
    found = {name: make(name, password="x") for name in ("lead", "alice", "bob", "carol", "dave")}
    found["root"] = make("root", password="x", is_staff=True)
    found["admin2"] = make("admin2", password="x", is_staff=True)
    core = Team.objects.create(name="Core", owner=found["lead"])
    core.members.add(found["alice"], found["bob"])
    Team.objects.create(name="Other", owner=found["carol"])
    return found


@pytest.fixture
def ada(people) -> Agent:
    return agent_create(name="Ada", owner=people["alice"], team=Team.objects.get(name="Core"), agent_id="ada")[0]


@pytest.fixture
def solo(people) -> Agent:
    return agent_create(name="Solo", owner=people["dave"], agent_id="solo")[0]


def server(owner=None, **offer) -> ToolServer:
    made = ToolServer.objects.create(
        name="srv", transport="stdio", command="true", owner=owner, offered_to_all=offer.get("to_all", False)
    )
    made.offered_to.set(offer.get("offered_to", []))
    made.teams.set(offer.get("teams", []))
    return made


def asked_by(agent: Agent, sender=None, role: str = "user") -> ToolContext:
    """The context of a call made for an item from ``sender`` (a user, or an agent's id)."""
    sender_id = getattr(sender, "pk", sender)
    item = MailboxItem.objects.create(
        agent=agent,
        source_type="human_chat" if role == "user" else "a2a_message",
        priority=1,
        payload={"summary": "do it", "content": "do it"},
        metadata={"senderId": str(sender_id), "senderRole": role} if sender_id is not None else {},
    )
    return ToolContext(agent_id=agent.id, agent_name=agent.name, mailbox_item_id=item.id)


def approver_of(ctx: ToolContext, srv: ToolServer) -> str:
    agent = Agent.objects.select_related("owner", "team__owner").get(id=ctx.agent_id)
    return approver(ctx, agent, srv).username


def core() -> Team:
    return Team.objects.get(name="Core")


def test_a_staff_sender_approves_what_they_asked(people, ada):
    assert approver_of(asked_by(ada, people["admin2"]), server(people["root"])) == "admin2"


@pytest.mark.parametrize("sender", ["alice", "bob", "carol", "dave", None])
def test_a_server_offered_to_the_team_is_approved_by_the_teams_owner(people, ada, sender):
    srv = server(people["root"], offered_to=[core()])
    assert approver_of(asked_by(ada, people[sender] if sender else None), srv) == "lead"


def test_a_server_of_the_teams_is_approved_by_the_teams_owner_who_may_be_the_sender(people, ada):
    srv = server(people["root"], teams=[core()])
    assert approver_of(asked_by(ada, people["lead"]), srv) == "lead"
    assert approver_of(asked_by(ada, people["alice"]), srv) == "lead"


def test_an_agents_item_is_routed_like_a_persons(people, ada):
    srv = server(people["root"], offered_to=[core()])
    assert approver_of(asked_by(ada, "zed", role="agent"), srv) == "lead"


def test_a_server_not_offered_to_the_team_is_approved_by_its_owner_not_the_agents(people, ada):
    srv = server(people["admin2"])  # staff attached it to ada
    assert approver_of(asked_by(ada, people["alice"]), srv) == "admin2"
    assert approver_of(asked_by(ada, people["lead"]), srv) == "admin2"


def test_a_teamless_agents_call_goes_to_the_servers_owner_not_to_the_person_who_set_it_up(people, solo):
    srv = server(people["admin2"], to_all=True)
    assert approver_of(asked_by(solo, people["dave"]), srv) == "admin2"


def test_a_server_without_an_owner_goes_to_the_first_staff_user(people, solo):
    srv = server(None, to_all=True)
    assert approver_of(asked_by(solo, people["dave"]), srv) == "root"
    people["root"].is_active = False
    people["root"].save()
    assert approver_of(asked_by(solo, people["dave"]), srv) == "admin2"


def test_with_nobody_to_approve_the_call_is_a_tool_error(people, solo):
    from django.contrib.auth.models import User

    User.objects.filter(is_staff=True).update(is_staff=False)
    srv = server(None, to_all=True)
    with pytest.raises(ToolError, match="nobody may approve"):
        approver_of(asked_by(solo, people["dave"]), srv)
