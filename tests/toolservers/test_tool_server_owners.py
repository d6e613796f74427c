"""Tool servers have owners (issue 35, point 1): staff register a server (its ``owner``)
and offer it to teams (``offeredTo``, or a server's ``teams``) or to every agent
(``offeredToAll``). Whoever controls an agent attaches to it only what is offered to its
team (a teamless agent: only what is offered to all); staff attach any. A refusal names
only what the caller may attach, an unknown name reads like a name not offered. Listing
an agent's tools starts a server only for who controls the agent.

The people: lead owns the team Core, alice is in it and owns its agent ada, bob is in it
too; carol owns the team Other and its agent zed; dave is in no team and owns solo."""

from __future__ import annotations

from dataclasses import dataclass

import pytest
from rest_framework.test import APIClient

from markus.agents.models import Agent, Team
from markus.agents.services import agent_create
from markus.toolservers.models import ToolServer
from markus.toolservers.runtime import runtime

from .conftest import GIT_SERVER

pytestmark = pytest.mark.django_db


@dataclass
class World:
    clients: dict[str, APIClient]
    ada: Agent
    zed: Agent
    solo: Agent


def client_of(user=None, token: str = "") -> APIClient:
    client = APIClient()
    if user is not None:
        client.force_authenticate(user)
    if token:
        client.credentials(HTTP_AUTHORIZATION=f"Bearer {token}")
    return client


@pytest.fixture
def world(django_user_model) -> World:
    make = django_user_model.objects.create_user
    people = {name: make(name, password="x") for name in ("lead", "alice", "bob", "carol", "dave")}
    root = make("root", password="x", is_staff=True)
    core = Team.objects.create(name="Core", owner=people["lead"])
    core.members.add(people["alice"], people["bob"])
    other = Team.objects.create(name="Other", owner=people["carol"])
    ada, token = agent_create(name="Ada", owner=people["alice"], team=core, agent_id="ada")
    zed, _ = agent_create(name="Zed", owner=people["carol"], team=other, agent_id="zed")
    solo, _ = agent_create(name="Solo", owner=people["dave"], agent_id="solo")
    servers = {
        "core-git": {"offered_to": [core]},
        "other-db": {"offered_to": [other]},
        "public": {"offered_to_all": True},
        "team-wide": {"teams": [core]},
        "private": {},
    }
    for name, how in servers.items():
        server = ToolServer.objects.create(
            name=name,
            transport="stdio",
            command="true",
            owner=root,
            env={"DB_PASSWORD": "never-shown"},
            offered_to_all=how.get("offered_to_all", False),
        )
        server.offered_to.set(how.get("offered_to", []))
        server.teams.set(how.get("teams", []))
    clients = {name: client_of(user) for name, user in people.items()}
    clients["staff"] = client_of(root)
    clients["agent"] = client_of(token=token)
    return World(clients, ada, zed, solo)


def attach(world: World, who: str, agent: Agent, names: list[str]):
    return world.clients[who].patch(f"/api/agents/{agent.id}/", {"toolServers": names}, format="json")


def attached(agent: Agent) -> list[str]:
    return sorted(agent.tool_servers.values_list("name", flat=True))


def test_the_owner_attaches_what_is_offered_to_the_agents_team(world):
    r = attach(world, "alice", world.ada, ["core-git", "public", "team-wide"])
    assert r.status_code == 200, r.content
    assert r.json()["toolServers"] == ["core-git", "public", "team-wide"]


def test_the_team_owner_attaches_too(world):
    assert attach(world, "lead", world.ada, ["core-git"]).status_code == 200
    assert attached(world.ada) == ["core-git"]


@pytest.mark.parametrize("name", ["other-db", "private", "nope"])
def test_a_server_not_offered_or_unknown_is_refused_naming_only_what_the_caller_may_attach(world, name):
    r = attach(world, "alice", world.ada, ["core-git", name])
    assert r.status_code == 400
    assert r.json()["detail"] == (
        f"toolServers: no tool server {name!r} is offered to this agent; you may attach: core-git, public, team-wide"
    )
    assert attached(world.ada) == []


def test_a_teamless_agent_gets_only_what_is_offered_to_all(world):
    r = attach(world, "dave", world.solo, ["core-git"])
    assert r.status_code == 400 and r.json()["detail"].endswith("you may attach: public")
    assert attach(world, "dave", world.solo, ["public"]).status_code == 200


def test_a_member_of_another_team_attaches_what_is_offered_to_hers(world):
    assert attach(world, "carol", world.zed, ["other-db", "public"]).status_code == 200
    assert attach(world, "carol", world.zed, ["core-git"]).status_code == 400
    assert attach(world, "carol", world.ada, ["other-db"]).status_code == 404  # she may not see ada


def test_a_teammate_and_the_agents_token_may_not_attach(world):
    assert attach(world, "bob", world.ada, ["core-git"]).status_code == 403
    assert attach(world, "agent", world.ada, ["core-git"]).status_code == 403
    assert attached(world.ada) == []


def test_staff_attach_any_server_and_what_is_attached_may_be_sent_again(world):
    assert attach(world, "staff", world.solo, ["private", "other-db"]).status_code == 200
    # dave may keep what staff attached (and drop it), not add more of it.
    r = attach(world, "dave", world.solo, ["private", "public"])
    assert r.status_code == 200 and r.json()["toolServers"] == ["private", "public"]
    assert attach(world, "dave", world.solo, ["public"]).status_code == 200
    r = attach(world, "dave", world.solo, ["public", "private"])
    assert r.status_code == 400 and r.json()["detail"].endswith("you may attach: public")


def test_nothing_offered_says_none(world):
    ToolServer.objects.filter(name="public").update(offered_to_all=False)
    r = attach(world, "dave", world.solo, ["public"])
    assert r.status_code == 400 and r.json()["detail"].endswith("you may attach: none")


def test_staff_read_and_write_the_owner_and_the_offer(world):
    staff = world.clients["staff"]
    r = staff.post(
        "/api/tool-servers/",
        {"name": "wiki", "transport": "stdio", "command": "true", "offeredTo": ["nope"]},
        format="json",
    )
    assert r.status_code == 400 and "offeredTo: no team 'nope'" in r.json()["detail"]
    core = Team.objects.get(name="Core")
    r = staff.post(
        "/api/tool-servers/",
        {"name": "wiki", "transport": "stdio", "command": "true", "offeredTo": [core.id]},
        format="json",
    )
    assert r.status_code == 201, r.content
    body = r.json()
    root = ToolServer.objects.get(name="public").owner
    assert body["ownerId"] == root.pk and body["offeredTo"] == [core.id] and body["offeredToAll"] is False
    r = staff.patch("/api/tool-servers/wiki/", {"offeredTo": [], "offeredToAll": True}, format="json")
    assert r.status_code == 200 and r.json()["offeredTo"] == [] and r.json()["offeredToAll"] is True
    assert attach(world, "dave", world.solo, ["wiki"]).status_code == 200
    # Its owner: another staff user, or nobody; never a person who is not staff.
    dave = Agent.objects.get(id="solo").owner
    r = staff.patch("/api/tool-servers/wiki/", {"ownerId": dave.pk}, format="json")
    assert r.status_code == 400 and r.json()["detail"] == f"ownerId: no active staff user {dave.pk}"
    assert staff.patch("/api/tool-servers/wiki/", {"ownerId": None}, format="json").json()["ownerId"] is None


def test_the_console_edits_the_offer_and_sets_its_owner(world, admin_client, admin_user):
    form = {
        "name": "wiki",
        "description": "",
        "transport": "stdio",
        "command": "true",
        "args": "[]",
        "env": "",
        "url": "",
        "headers": "",
        "timeout_seconds": "30",
        "enabled": "on",
        "policies": "{}",
        "idempotent": "{}",
        "offered_to": [Team.objects.get(name="Other").id],
    }
    r = admin_client.post("/admin/toolservers/toolserver/add/", form)
    assert r.status_code == 302, r.content.decode()[:3000]
    server = ToolServer.objects.get(name="wiki")
    assert server.owner == admin_user and [t.name for t in server.offered_to.all()] == ["Other"]
    page = admin_client.get(f"/admin/toolservers/toolserver/{server.pk}/change/").content.decode()
    assert "offered_to_all" in page and "never-shown" not in page


# ------------------------------------------------------------------ the tools list


@pytest.fixture
def git_for_ada(world, repo, stop_servers) -> ToolServer:
    """The real git server attached to ada, never listed yet."""
    server = ToolServer.objects.create(
        name="git", transport="stdio", command=GIT_SERVER, args=["--repository", str(repo)]
    )
    server.agents.add(world.ada)
    return server


@pytest.mark.parametrize("who", ["bob", "agent"])
def test_who_only_sees_the_agent_reads_its_tools_as_last_listed_and_starts_nothing(world, git_for_ada, who):
    r = world.clients[who].get("/api/agents/ada/tools")
    assert r.status_code == 200, r.content
    assert not [t for t in r.json()["tools"] if t["origin"] == "git"]  # never listed: none known
    git_for_ada.refresh_from_db()
    assert git_for_ada.listed_at is None and git_for_ada.state == "unknown" and runtime().connected() == []


@pytest.mark.parametrize("who", ["alice", "lead", "staff"])
def test_who_controls_the_agent_lists_its_servers_tools_now(world, git_for_ada, who):
    r = world.clients[who].get("/api/agents/ada/tools")
    assert r.status_code == 200, r.content
    assert "git__git_log" in {t["name"] for t in r.json()["tools"]}
    git_for_ada.refresh_from_db()
    assert git_for_ada.listed_at is not None and runtime().connected() == []
    # Listed once, the teammate reads that listing.
    assert "git__git_log" in {t["name"] for t in world.clients["bob"].get("/api/agents/ada/tools").json()["tools"]}


@pytest.mark.parametrize("who", ["carol", "dave"])
def test_an_outsider_gets_404_for_the_tools(world, git_for_ada, who):
    assert world.clients[who].get("/api/agents/ada/tools").status_code == 404
    git_for_ada.refresh_from_db()
    assert git_for_ada.listed_at is None
