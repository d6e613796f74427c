"""The offline brain uses a tool server's tool when a chat plainly asks for it, so
``make run`` shows an agent reading its repository; ``manage.py demo`` sets that up."""

from __future__ import annotations

import pytest
from django.core.management import call_command

from markus.agents.models import Agent
from markus.toolservers.models import ToolServer

from .conftest import SUBJECT

pytestmark = pytest.mark.django_db(transaction=True)


# The git server's 12 tools are past MARKUS_TOOLSERVER_INLINE_TOOLS: found on demand (the
# brain loads git_log first), or all offered directly (``inline_tools``).
@pytest.mark.parametrize("offered", ["on demand", "inline"])
def test_the_offline_brain_answers_the_last_commit_from_the_git_server(
    celery_worker, agent, alice_client, git_server, offered, request
):
    if offered == "inline":
        request.getfixturevalue("inline_tools")
    git_server.agents.add(agent)
    r = alice_client.post(
        f"/api/agents/{agent.id}/chat", {"text": "What is the last commit in the git repository?"}, format="json"
    )
    assert r.status_code == 200, r.content
    reply = r.json()["reply"]
    assert "offline brain" in reply and f"The last commit is “{SUBJECT}”" in reply and "by Ada" in reply


def test_without_a_git_server_it_answers_all_the_same(celery_worker, agent, alice_client):
    r = alice_client.post(f"/api/agents/{agent.id}/chat", {"text": "What is the last commit?"}, format="json")
    assert r.status_code == 200 and "last commit is" not in r.json()["reply"]


def test_the_demo_attaches_a_git_server_on_a_demo_repository(db, settings, tmp_path, stop_servers, client):
    settings.DATA_DIR = tmp_path
    call_command("demo", stdout=open("/dev/null", "w"))
    call_command("demo", stdout=open("/dev/null", "w"))  # idempotent
    server = ToolServer.objects.get(name="git")
    ada = Agent.objects.get(id="ada")
    assert list(server.teams.all()) == [ada.team] and (tmp_path / "demo-repo" / ".git").exists()
    client.login(username="admin", password="admin")
    tools = client.get("/api/agents/ada/tools").json()["tools"]
    assert {"git__git_log", "git__git_commit"} <= {t["name"] for t in tools}


def test_the_agents_tools_list_the_servers_tools_found_on_demand(agent, alice_client, git_server):
    git_server.agents.add(agent)
    tools = {t["name"]: t for t in alice_client.get(f"/api/agents/{agent.id}/tools").json()["tools"]}
    assert not tools["tool_search"]["onDemand"] and not tools["tool_load"]["onDemand"]
    assert tools["git__git_log"]["onDemand"] and tools["git__git_log"]["origin"] == "git"
    assert not tools["task_get"]["onDemand"]
