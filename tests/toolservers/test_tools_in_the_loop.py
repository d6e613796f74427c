"""An agent uses its tool servers' tools in a chat, end to end: the reference
``mcp-server-git`` over stdio and an SDK-built server over HTTP, a real worker, the
openai SDK against a stub model that picks the tool it is offered. Policies: read-only
tools run at once; an ``ask`` tool parks the item until a person answers and then runs
once; a ``deny`` tool is not offered. A dead or slow server answers a tool error and the
chat is still answered; the console's row shows the server's state."""

from __future__ import annotations

import json
import subprocess
import time
from dataclasses import replace

import pytest
from django.conf import settings
from django.test import Client

from attention.models import ToolCallRecord
from mailbox.models import MailboxItem
from markus.agents.models import ChatMessage
from markus.toolservers.models import ToolServer
from markus.toolservers.offered import RESULT_MAX_CHARS
from notifications.models import Approval

from .conftest import SUBJECT, Model, commits, git, result_of, wait_for

# The tools offered directly (the on-demand path past the setting: test_tool_search.py).
pytestmark = pytest.mark.usefixtures("inline_tools")


def chat(client, agent, text: str) -> dict:
    r = client.post(f"/api/agents/{agent.id}/chat", {"text": text}, format="json")
    assert r.status_code in (200, 202), r.content
    return r.json()


def reply_in(body: dict) -> str:
    """The assistant's reply the chat (``chat``'s answer) got later (waiting for it)."""
    wait_for(lambda: MailboxItem.objects.get(id=body["mailboxItemId"]).status == "completed", message="answered")
    session_id = body["sessionId"]
    message = wait_for(
        lambda: ChatMessage.objects.filter(session_id=session_id, role="assistant").order_by("-id").first(),
        message="the reply in the session",
    )
    return message.content


def git_log_args(repo):
    return lambda fn: {"repo_path": str(repo), "max_count": 1}


def test_a_chat_about_the_last_commit_is_answered_from_the_git_server(
    celery_worker, model, agent, alice_client, git_server, repo
):
    git_server.agents.add(agent)
    m = Model("__git_log", git_log_args(repo))
    model(m)
    body = chat(alice_client, agent, "What is the last commit in the git repository?")
    assert body["reply"] is not None, body
    assert SUBJECT in body["reply"]
    offered = {t["function"]["name"]: t["function"] for t in m.bodies[0]["tools"]}
    # Named <server>__<tool>, with the server's own description and schema, beside the built-in tools.
    assert "git__git_log" in offered and "git__git_status" in offered and "memory_save" in offered
    assert offered["git__git_log"]["description"].startswith("Shows the commit logs")
    assert f"the repository at {repo}" in offered["git__git_log"]["description"]
    assert offered["git__git_log"]["parameters"]["required"] == ["repo_path"]
    row = ToolCallRecord.objects.get(mailbox_item_id=body["mailboxItemId"])
    assert row.name == "git__git_log" and row.state == "done" and row.ok
    server = ToolServer.objects.get(name="git")
    assert server.state == "ready" and server.listed_at is not None and len(server.tools) >= 10


def test_an_ask_tool_parks_until_approved_then_runs_once(
    celery_worker, model, agent, alice, alice_client, git_server, repo, monkeypatch
):
    monkeypatch.setitem(settings.MARKUS, "CHAT_TIMEOUT_S", 1)  # the person does not wait on the approval
    git_server.agents.add(agent)
    git_server.offered_to.add(agent.team)  # its team's owner (alice) approves its calls
    before = commits(repo)
    m = Model("__git_commit", lambda fn: {"repo_path": str(repo), "message": "Add the notes"})
    model(m)
    body = chat(alice_client, agent, "Commit the staged notes, please.")
    item_id = body["mailboxItemId"]
    approval = wait_for(lambda: Approval.objects.filter(agent=agent, status="pending").first(), message="approval")
    wait_for(lambda: MailboxItem.objects.get(id=item_id).status == "deferred", message="parked")
    # Parked before the call: nothing committed; the approval names the tool, its server, its arguments.
    assert commits(repo) == before
    assert approval.user == alice and "git_commit" in approval.title and "git" in approval.title
    assert "Add the notes" in approval.description and str(repo) in approval.description
    row = ToolCallRecord.objects.get(mailbox_item_id=item_id)
    assert row.state == "awaiting" and row.effects == {"approvalId": approval.id}
    mind = alice_client.get(f"/api/agents/{agent.id}/mind").json()
    assert mind["waitingForApproval"] is True
    (waiting,) = mind["waitingCalls"]
    assert waiting["name"] == "git__git_commit" and waiting["arguments"]["message"] == "Add the notes"
    assert waiting["approvalId"] == approval.id and waiting["mailboxItemId"] == item_id
    page = Client()
    page.force_login(alice)
    html = page.get(f"/agents/{agent.id}/mind/").content.decode()
    assert "Waiting for approval to call <code>git__git_commit</code>" in html and "Add the notes" in html
    answer_it = f'href="/approvals/#approval-{approval.id}"'
    assert answer_it in html  # the mind view and the chat link to where it is answered
    chat_page = page.get(f"/agents/{agent.id}/chat/").content.decode()
    assert "waiting for your approval" in chat_page and answer_it in chat_page
    r = alice_client.post(f"/api/approvals/{approval.id}/respond", {"selectedOption": "approve"}, format="json")
    assert r.status_code == 200, r.content
    text = reply_in(body)
    assert answer_it not in page.get(f"/agents/{agent.id}/chat/").content.decode()
    assert commits(repo) == before + 1  # exactly once
    assert "Add the notes" in git(repo, "log", "-1", "--format=%s")
    assert "The tool said" in text
    row.refresh_from_db()
    assert row.state == "done" and row.ok
    # Each model turn saw the call once: the call and its result, no second call.
    calls = [c for b in m.bodies for msg in b["messages"] for c in msg.get("tool_calls") or []]
    assert len({c["id"] for c in calls}) == 1


def test_a_declined_call_is_not_made_and_the_model_is_told(
    celery_worker, model, agent, alice_client, git_server, repo, monkeypatch
):
    monkeypatch.setitem(settings.MARKUS, "CHAT_TIMEOUT_S", 1)
    git_server.agents.add(agent)
    git_server.offered_to.add(agent.team)  # its team's owner (alice) approves its calls
    before = commits(repo)
    model(Model("__git_commit", lambda fn: {"repo_path": str(repo), "message": "Sneaky"}))
    body = chat(alice_client, agent, "Commit it.")
    approval = wait_for(lambda: Approval.objects.filter(agent=agent, status="pending").first(), message="approval")
    r = alice_client.post(
        f"/api/approvals/{approval.id}/respond", {"selectedOption": "reject", "comment": "not today"}, format="json"
    )
    assert r.status_code == 200, r.content
    text = reply_in(body)
    said = result_of(text)
    assert said["declined"] is True and "declined" in said["error"] and "not today" in said["error"]
    assert commits(repo) == before


def test_a_denied_tool_is_not_offered(celery_worker, model, agent, alice_client, git_server, repo):
    git_server.agents.add(agent)
    ToolServer.objects.filter(pk=git_server.pk).update(policies={"git_commit": "deny"})
    m = Model("__git_commit", lambda fn: {"repo_path": str(repo), "message": "x"})
    model(m)
    body = chat(alice_client, agent, "Commit it.")
    assert body["reply"] == "I have no tool ending in __git_commit."
    names = [t["function"]["name"] for t in m.bodies[0]["tools"]]
    assert "git__git_commit" not in names and "git__git_log" in names


def test_a_dead_server_gives_a_tool_error_and_the_chat_is_still_answered(
    celery_worker, model, agent, alice_client, git_server, repo
):
    git_server.agents.add(agent)
    from markus.toolservers.offered import refresh

    assert refresh(git_server)  # listed once while it worked
    ToolServer.objects.filter(pk=git_server.pk).update(command="/bin/false", args=[])  # now it cannot start
    model(Model("__git_log", git_log_args(repo)))
    body = chat(alice_client, agent, "What is the last commit?")
    said = result_of(body["reply"])
    assert "tool server git is failing: could not be reached" in said["error"]
    server = ToolServer.objects.get(pk=git_server.pk)
    assert server.state == "failing" and "could not be reached" in server.last_error


def test_http_server_tools_their_errors_timeouts_and_big_results(
    celery_worker, model, agent, alice_client, counter, monkeypatch
):
    server = ToolServer.objects.create(name="counter", transport="http", url=counter.url, timeout_seconds=2)
    server.agents.add(agent)
    # A read-only tool runs at once.
    model(Model("__count", lambda fn: {"marker": "m"}))
    assert result_of(chat(alice_client, agent, "count")["reply"]) == {"content": "0"}
    # A tool error comes back as the tool's result, readable.
    model(Model("__fail", lambda fn: {"reason": "the disk is full"}))
    said = result_of(chat(alice_client, agent, "fail")["reply"])
    assert said["error"].startswith("counter__fail failed:")
    # Slower than the server's timeout: a tool error, and the chat goes on.
    model(Model("__nap", lambda fn: {"seconds": 5}))
    said = result_of(chat(alice_client, agent, "nap")["reply"])
    assert said["error"] == "tool server counter is failing: did not answer within 2 s"
    # A result over the bound is cut, with a note saying so.
    model(Model("__big", lambda fn: {"size": RESULT_MAX_CHARS * 3}))
    said = result_of(chat(alice_client, agent, "big")["reply"])
    assert len(said["content"]) < RESULT_MAX_CHARS + 200
    assert said["content"].endswith(f"[cut: the first {RESULT_MAX_CHARS:,} of {RESULT_MAX_CHARS * 3:,} characters]")


def test_a_result_of_every_kind_of_content_reads_as_text_saying_what_is_not_shown(
    celery_worker, model, agent, alice_client, counter
):
    """An embedded text resource's text and a resource link's name and address are words
    the model can use; they read as "[resource not shown]" and "[resource_link not shown]"."""
    server = ToolServer.objects.create(name="counter", transport="http", url=counter.url, timeout_seconds=5)
    server.agents.add(agent)
    model(Model("__media", lambda fn: {}))
    said = result_of(chat(alice_client, agent, "media")["reply"])
    assert said["content"].splitlines() == [
        "the chart and its data:",
        "[an image, image/png, not shown]",
        "[resource file:///data/sales.csv, text/csv]",
        "month,sales",
        "[resource link: report, file:///data/report.pdf, application/pdf]",
    ]


def test_team_servers_are_offered_to_its_agents(celery_worker, model, agent, alice_client, git_server, repo, team):
    git_server.teams.add(team)
    m = Model("__git_log", git_log_args(repo))
    model(m)
    assert SUBJECT in chat(alice_client, agent, "last commit?")["reply"]
    listed = alice_client.get(f"/api/agents/{agent.id}/tools").json()
    by_name = {t["name"]: t for t in listed["tools"]}
    assert by_name["git__git_log"]["origin"] == "git" and by_name["git__git_log"]["policy"] == "auto"
    assert by_name["git__git_commit"]["policy"] == "ask" and by_name["memory_save"]["origin"] == "built-in"


def test_a_stdio_server_that_crashed_is_restarted_once(db, git_server, repo):
    from markus.toolservers.offered import spec_of
    from markus.toolservers.runtime import ServerDown, runtime

    spec = spec_of(git_server)
    rt = runtime()
    assert rt.call_tool(spec, "git_log", {"repo_path": str(repo), "max_count": 1})["isError"] is False
    assert subprocess.run(["pkill", "-KILL", "-f", "--", f"--repository {repo}"]).returncode == 0
    # The call that meets the dead process fails; the next use starts it again.
    with pytest.raises(ServerDown, match="tool server git stopped answering"):
        rt.call_tool(spec, "git_status", {"repo_path": str(repo)})
    result = rt.call_tool(spec, "git_status", {"repo_path": str(repo)})
    assert result["isError"] is False and "NOTES" in json.dumps(result)
    # A server that dies before it answers anything: started, restarted once, then down for a while.
    broken = replace(spec, name="broken", command="/bin/false", args=())
    for _ in range(2):
        with pytest.raises(ServerDown, match="tool server broken could not be reached"):
            rt.list_tools(broken)
    with pytest.raises(ServerDown, match=r"stopped again after a restart \(.*\); it is tried again in \d+ s"):
        rt.call_tool(broken, "anything", {})


def test_a_pause_while_the_call_waits_loses_nothing_and_runs_nothing_early(
    celery_worker, model, agent, alice_client, git_server, repo, monkeypatch
):
    monkeypatch.setitem(settings.MARKUS, "CHAT_TIMEOUT_S", 1)
    git_server.agents.add(agent)
    git_server.offered_to.add(agent.team)  # its team's owner (alice) approves its calls
    before = commits(repo)
    model(Model("__git_commit", lambda fn: {"repo_path": str(repo), "message": "After the pause"}))
    body = chat(alice_client, agent, "Commit it.")
    approval = wait_for(lambda: Approval.objects.filter(agent=agent, status="pending").first(), message="approval")
    assert alice_client.post(f"/api/agents/{agent.id}/pause", format="json").status_code == 200
    r = alice_client.post(f"/api/approvals/{approval.id}/respond", {"selectedOption": "approve"}, format="json")
    assert r.status_code == 200
    wait_for(lambda: MailboxItem.objects.get(id=body["mailboxItemId"]).status == "queued", message="re-queued")
    time.sleep(1.0)  # paused: the approved call waits with its item
    assert commits(repo) == before
    assert alice_client.post(f"/api/agents/{agent.id}/resume", format="json").status_code == 200
    reply_in(body)
    assert commits(repo) == before + 1
    assert ToolCallRecord.objects.get(mailbox_item_id=body["mailboxItemId"]).state == "done"


def test_the_tools_are_offered_in_the_working_scenarios_only(db, agent, git_server):
    from attention.toolbox import tools_for
    from markus.toolservers.offered import WORKING_SCENARIOS

    git_server.agents.add(agent)
    assert {"chat", "task_execution", "review", "a2a", "comment_response"} <= WORKING_SCENARIOS
    for scenario in sorted(WORKING_SCENARIOS):
        assert "git__git_log" in tools_for(agent.id, scenario), scenario
    for scenario in ("check_in", "dream_cycle", "daily_report_writing", "reminder_due", "deliberation"):
        assert not any("__" in name for name in tools_for(agent.id, scenario)), scenario


def test_shutting_down_stops_every_stdio_server(db, git_server, repo):
    from markus.toolservers.offered import spec_of
    from markus.toolservers.runtime import runtime

    runtime().list_tools(spec_of(git_server))
    running = subprocess.run(["pgrep", "-f", "--", f"--repository {repo}"], capture_output=True, text=True)
    assert running.stdout.strip(), "the stdio server runs"
    runtime().shutdown()
    wait_for(
        lambda: not subprocess.run(["pgrep", "-f", "--", f"--repository {repo}"], capture_output=True).stdout.strip(),
        timeout=10,
        message="the stdio server stopped",
    )
    assert runtime().connected() == []
