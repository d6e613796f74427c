"""``/api/tool-servers/``: staff register, read, change and delete tool servers; secrets
are write-only everywhere (answers, the list, the console); bad input gets a 400 that
says what is wrong; anybody else is refused. Attaching: ``PATCH /api/agents/{id}/``
``toolServers``; ``GET /api/agents/{id}/tools`` lists what the agent is offered."""

from __future__ import annotations

import pytest
from rest_framework.test import APIClient

from markus.agents.services import agent_create
from markus.toolservers.models import ToolServer

from .conftest import GIT_SERVER

pytestmark = pytest.mark.django_db

SECRET = "s3cr3t-value-never-shown"


@pytest.fixture
def staff(django_user_model) -> APIClient:
    client = APIClient()
    client.force_authenticate(django_user_model.objects.create_user("root", password="x", is_staff=True))
    return client


def create(client: APIClient, **body) -> tuple[int, dict]:
    r = client.post("/api/tool-servers/", body, format="json")
    return r.status_code, r.json()


def test_staff_register_a_stdio_and_an_http_server_and_secrets_are_never_returned(staff, allow_private):
    status, git = create(
        staff,
        name="git",
        transport="stdio",
        command=GIT_SERVER,
        args=["--repository", "/srv/repo"],
        env={"GIT_TOKEN": SECRET},
        description="the team's repository",
    )
    assert status == 201, git
    assert git["envKeys"] == ["GIT_TOKEN"] and git["state"] == "unknown" and git["tools"] == []
    status, tracker = create(
        staff, name="tracker", transport="http", url="http://127.0.0.1:9/mcp", headers={"Authorization": SECRET}
    )
    assert status == 201, tracker
    assert tracker["headerNames"] == ["Authorization"] and tracker["timeoutSeconds"] == 30
    for r in (
        staff.get("/api/tool-servers/"),
        staff.get("/api/tool-servers/git/"),
        staff.get("/api/tool-servers/tracker/"),
    ):
        assert r.status_code == 200 and SECRET not in r.content.decode()
    listed = staff.get("/api/tool-servers/?limit=1").json()
    assert listed["totalCount"] == 2 and [s["name"] for s in listed["toolServers"]] == ["git"]
    assert ToolServer.objects.get(name="git").env == {"GIT_TOKEN": SECRET}  # kept, only not shown


@pytest.mark.parametrize(
    ("body", "message"),
    [
        ({"name": "git", "transport": "stdio", "command": "x", "colour": "red"}, "unknown field 'colour'"),
        ({"name": "Git_Server", "transport": "stdio", "command": "x"}, "lowercase letters, digits and single hyphens"),
        ({"name": "git", "transport": "ftp", "command": "x"}, "transport must be stdio or http"),
        ({"name": "git", "transport": "stdio"}, "command is required for a stdio server"),
        ({"name": "git", "transport": "http"}, "url is required for an http server"),
        (
            {"name": "git", "transport": "http", "url": "http://tools.example/mcp", "command": "x"},
            "are for stdio servers",
        ),
        ({"name": "git", "transport": "stdio", "command": "x", "args": "--flag"}, "args must be a list of strings"),
        ({"name": "git", "transport": "stdio", "command": "x", "env": {"1X": "v"}}, "not a valid variable name"),
        ({"name": "git", "transport": "stdio", "command": "x", "policies": {"t": "sometimes"}}, "must be one of"),
        ({"name": "git", "transport": "stdio", "command": "x", "timeoutSeconds": 0}, "timeoutSeconds must be 1 to 600"),
        ({"name": "git", "transport": "stdio", "command": "x", "teams": ["team_nope"]}, "no team 'team_nope'"),
    ],
)
def test_bad_input_answers_400_saying_what_is_wrong(staff, body, message):
    status, answer = create(staff, **body)
    assert status == 400, answer
    assert message in answer["detail"]
    assert not ToolServer.objects.exists()


def test_a_taken_name_is_409_and_patch_changes_only_what_is_sent(staff):
    assert create(staff, name="git", transport="stdio", command="a", env={"K": SECRET})[0] == 201
    status, answer = create(staff, name="git", transport="stdio", command="b")
    assert status == 409 and "PATCH it instead" in answer["detail"]
    r = staff.patch("/api/tool-servers/git/", {"policies": {"git_commit": "deny", "git_add": "auto"}}, format="json")
    assert r.status_code == 200 and r.json()["policies"] == {"git_commit": "deny", "git_add": "auto"}
    r = staff.patch("/api/tool-servers/git/", {"policies": {"git_add": None}, "enabled": False}, format="json")
    assert r.json()["policies"] == {"git_commit": "deny"} and r.json()["state"] == "disabled"
    assert ToolServer.objects.get(name="git").env == {"K": SECRET}  # not sent: kept
    assert staff.patch("/api/tool-servers/git/", {"name": "other"}, format="json").status_code == 400
    assert staff.patch("/api/tool-servers/git/", {}, format="json").json()["detail"].startswith("nothing to change")
    r = staff.delete("/api/tool-servers/git/")
    assert r.status_code == 200 and r.json() == {"name": "git", "deleted": True}
    assert staff.get("/api/tool-servers/git/").status_code == 404


def test_only_staff_may_touch_tool_servers(staff, alice, alice_client, agent_with_token):
    create(staff, name="git", transport="stdio", command="a")
    _, token = agent_with_token
    as_agent = APIClient()
    as_agent.credentials(HTTP_AUTHORIZATION=f"Bearer {token}")
    for client, code in ((alice_client, 403), (as_agent, 403), (APIClient(), 401)):
        assert client.get("/api/tool-servers/").status_code == code
        assert client.get("/api/tool-servers/git/").status_code == code
        r = client.post("/api/tool-servers/", {"name": "x", "transport": "stdio", "command": "sh"}, format="json")
        assert r.status_code == code
        assert client.patch("/api/tool-servers/git/", {"command": "sh"}, format="json").status_code == code
        assert client.delete("/api/tool-servers/git/").status_code == code
    assert "Only staff may" in alice_client.get("/api/tool-servers/").json()["detail"]
    assert ToolServer.objects.get(name="git").command == "a"


def test_the_agents_controller_attaches_servers_and_get_shows_them(staff, alice_client, agent, bob, allow_private):
    create(staff, name="git", transport="stdio", command="a", offeredTo=[agent.team_id])
    create(staff, name="tracker", transport="http", url="http://127.0.0.1:9/mcp", offeredToAll=True)
    r = alice_client.patch(f"/api/agents/{agent.id}/", {"toolServers": ["tracker", "git"]}, format="json")
    assert r.status_code == 200, r.content
    assert r.json()["toolServers"] == ["git", "tracker"]
    assert alice_client.get(f"/api/agents/{agent.id}/").json()["toolServers"] == ["git", "tracker"]
    listed = {a["id"]: a for a in alice_client.get("/api/agents/").json()}
    assert listed[agent.id]["toolServers"] == ["git", "tracker"]
    r = alice_client.patch(f"/api/agents/{agent.id}/", {"toolServers": ["nope"]}, format="json")
    assert r.status_code == 400
    assert (
        r.json()["detail"]
        == "toolServers: no tool server 'nope' is offered to this agent; you may attach: git, tracker"
    )
    assert (
        alice_client.patch(f"/api/agents/{agent.id}/", {"toolServers": []}, format="json").json()["toolServers"] == []
    )
    # A teammate (bob) sees the agent but may not change it.
    bob_client = APIClient()
    bob_client.force_authenticate(bob)
    assert bob_client.patch(f"/api/agents/{agent.id}/", {"toolServers": ["git"]}, format="json").status_code == 403


def test_the_agent_list_reads_tool_servers_in_one_query(alice, alice_client, django_assert_max_num_queries):
    for n in range(5):
        agent_create(name=f"a{n}", owner=alice)
    with django_assert_max_num_queries(8):
        assert alice_client.get("/api/agents/").status_code == 200


def test_the_console_never_shows_a_secret_and_keeps_it_when_left_empty(staff, admin_client):
    create(staff, name="git", transport="stdio", command="a", env={"K": SECRET})
    server = ToolServer.objects.get(name="git")
    page = admin_client.get(f"/admin/toolservers/toolserver/{server.pk}/change/")
    assert page.status_code == 200 and SECRET not in page.content.decode()
    form = {
        "name": "git",
        "description": "changed",
        "transport": "stdio",
        "command": "a",
        "args": "[]",
        "env": "",
        "url": "",
        "headers": "",
        "timeout_seconds": "30",
        "enabled": "on",
        "policies": "{}",
        "idempotent": "{}",
    }
    r = admin_client.post(f"/admin/toolservers/toolserver/{server.pk}/change/", form)
    assert r.status_code == 302, r.content.decode()[:2000]
    server.refresh_from_db()
    assert server.description == "changed" and server.env == {"K": SECRET}
    r = admin_client.post(f"/admin/toolservers/toolserver/{server.pk}/change/", {**form, "command": "", "args": "x"})
    assert r.status_code == 200 and "not valid JSON" in r.content.decode()
    assert admin_client.get("/admin/toolservers/toolserver/").status_code == 200


def test_the_agents_tools_list_every_offered_tool_with_its_policy_and_keep_no_server_running(
    staff, alice_client, agent, git_server, inline_tools
):
    from markus.toolservers.runtime import runtime

    git_server.agents.add(agent)
    staff.patch("/api/tool-servers/git/", {"policies": {"git_reset": "deny"}}, format="json")
    r = alice_client.get(f"/api/agents/{agent.id}/tools")
    assert r.status_code == 200, r.content
    body = r.json()
    tools = {t["name"]: t for t in body["tools"]}
    assert body["scenario"] == "chat" and tools["memory_save"] == {**tools["memory_save"], "origin": "built-in"}
    assert tools["git__git_log"]["policy"] == "auto" and tools["git__git_commit"]["policy"] == "ask"
    assert tools["git__git_log"]["parameters"]["required"] == ["repo_path"]
    assert "git__git_reset" not in tools and [d["name"] for d in body["denied"]] == ["git_reset"]
    assert runtime().connected() == []  # listed through a connection closed at once
    server = staff.get("/api/tool-servers/git/").json()
    assert server["state"] == "ready" and server["listedAt"] is not None
    listed = {t["name"]: t for t in server["tools"]}
    assert listed["git_commit"] == {
        "name": "git_commit",
        "offeredAs": "git__git_commit",
        "notOffered": "",
        "description": listed["git_commit"]["description"],
        "policy": "ask",
        "defaultPolicy": "ask",
        "readOnly": False,
        "repeatable": False,
    }
    assert listed["git_reset"]["policy"] == "deny" and listed["git_reset"]["defaultPolicy"] == "ask"
    r = alice_client.get(f"/api/agents/{agent.id}/tools?scenario=dream_cycle")
    assert r.status_code == 400 and "scenario must be one of" in r.json()["detail"]
    # Another command, perhaps another server: its tools are listed anew on the next use.
    staff.patch("/api/tool-servers/git/", {"args": ["--repository", "/elsewhere"]}, format="json")
    assert ToolServer.objects.get(name="git").listed_at is None
