"""A tool server that cannot start is not invisible (issue 37, point 7): the agent is
offered ``<server>__unavailable`` in place of its tools, whose call says the server is
failing and why (and loads its tools should it start now); a call of a failing server's
tool as last listed says so too; the offline brain says so in its reply instead of
answering from another server's repository; the mind view shows a notice to whoever may
see the agent, with the server's last error to whoever controls it.

alice owns ada (team Core); bob is a teammate."""

from __future__ import annotations

from datetime import timedelta

import pytest
from django.test import Client
from django.utils import timezone

from attention.toolbox import ToolContext, ToolError
from markus.toolservers.models import ServerState, ToolServer
from markus.toolservers.offered import UNAVAILABLE, provide

from .conftest import GIT_SERVER, SUBJECT, Model, last_tool_result

MISSING = "no-such-mcp-server"


@pytest.fixture
def broken(stop_servers: None) -> ToolServer:
    """``docs-git``: a command found nowhere, never listed."""
    return ToolServer.objects.create(
        name="docs-git", transport="stdio", command=MISSING, description="the handbook repository at /srv/handbook"
    )


def offered(agent) -> dict:
    return {t.name: t for t in provide(agent.id, "chat")}


@pytest.mark.django_db
def test_a_server_that_cannot_start_is_offered_as_unavailable_and_its_call_says_why(agent, broken):
    broken.agents.add(agent)

    tools = offered(agent)

    stand_in = tools[f"docs-git{UNAVAILABLE}"]
    assert "docs-git" in stand_in.description and "failing" in stand_in.description
    with pytest.raises(ToolError) as refused:
        stand_in.handler(ToolContext(agent_id=agent.id, agent_name="Ada", offered=tools), {})
    assert str(refused.value).startswith("tool server docs-git is failing: ") and MISSING in str(refused.value)


@pytest.mark.django_db
def test_a_server_that_starts_now_loads_its_tools_through_the_stand_in(agent, repo, tmp_path, stop_servers):
    """Its command was missing when the item began, and is installed since."""
    command = tmp_path / "bin" / "mcp-server-git"
    server = ToolServer.objects.create(
        name="docs-git", transport="stdio", command=str(command), args=["--repository", str(repo)]
    )
    server.agents.add(agent)
    tools = offered(agent)
    command.parent.mkdir()
    command.symlink_to(GIT_SERVER)

    said = tools[f"docs-git{UNAVAILABLE}"].handler(ToolContext(agent_id=agent.id, agent_name="Ada", offered=tools), {})

    assert "docs-git__git_log" in said["loaded"] and "docs-git__git_log" in tools


@pytest.mark.django_db(transaction=True)
def test_the_offline_brain_says_the_named_server_is_failing(celery_worker, agent, alice_client, git_server, broken):
    git_server.agents.add(agent)
    broken.agents.add(agent)

    reply = alice_client.post(
        f"/api/agents/{agent.id}/chat", {"text": "What is the last commit in docs-git?"}, format="json"
    ).json()["reply"]

    assert "tool server docs-git is failing" in reply and MISSING in reply
    assert SUBJECT not in reply  # not the other server's repository, silently


@pytest.mark.django_db(transaction=True)
def test_the_offline_brain_answering_from_another_server_mentions_the_failing_one(
    celery_worker, agent, alice_client, git_server, broken
):
    git_server.agents.add(agent)
    broken.agents.add(agent)

    reply = alice_client.post(
        f"/api/agents/{agent.id}/chat", {"text": "What is the last commit in the git repository?"}, format="json"
    ).json()["reply"]

    assert f"The last commit is “{SUBJECT}”" in reply and "tool server docs-git is failing" in reply


@pytest.mark.django_db(transaction=True)
def test_a_call_of_a_failing_servers_tool_as_last_listed_says_it_is_failing(
    celery_worker, agent, alice_client, broken, model
):
    """Listed once (long ago), it cannot start now: its tools are still offered, and the
    model's call is answered that the server is failing, and why."""
    listed = {"name": "git_log", "description": "Shows the commit logs", "annotations": {"readOnlyHint": True}}
    ToolServer.objects.filter(pk=broken.pk).update(tools=[listed], listed_at=timezone.now() - timedelta(days=1))
    broken.agents.add(agent)
    m = Model("__git_log", lambda fn: {})
    model(m)

    r = alice_client.post(f"/api/agents/{agent.id}/chat", {"text": "the last commit?"}, format="json")

    assert r.status_code == 200, r.content
    result = next(last_tool_result(b) for b in m.bodies if last_tool_result(b) is not None)
    assert "tool server docs-git is failing: " in result and MISSING in result


@pytest.mark.django_db
def test_the_mind_view_shows_a_failing_server_with_its_error_to_who_controls_the_agent(agent, alice, bob, broken):
    broken.agents.add(agent)
    ToolServer.objects.filter(pk=broken.pk).update(state=ServerState.FAILING, last_error="exit 127: token [secret]")
    owner, teammate = Client(), Client()
    owner.force_login(alice)
    teammate.force_login(bob)

    mine = owner.get(f"/agents/{agent.id}/mind/").content.decode()
    theirs = teammate.get(f"/agents/{agent.id}/mind/").content.decode()

    assert "tool server docs-git is failing: exit 127: token [secret]" in mine
    assert "tool server docs-git is failing" in theirs and "exit 127" not in theirs


@pytest.mark.django_db
def test_the_mind_view_shows_no_notice_for_a_ready_server(agent, alice, broken):
    broken.agents.add(agent)
    ToolServer.objects.filter(pk=broken.pk).update(state=ServerState.READY)
    owner = Client()
    owner.force_login(alice)

    assert "is failing" not in owner.get(f"/agents/{agent.id}/mind/").content.decode()
