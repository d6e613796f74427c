"""Past ``MARKUS["TOOLSERVER_INLINE_TOOLS"]`` tools, an agent's tool servers' tools are
found on demand: the item is offered ``tool_search`` and ``tool_load`` instead of them,
and a tool it loads is offered from then on, for the rest of the item's session (a
resumed session loads it again from its messages). A loaded tool keeps its policy: a
denied one is never found nor loaded, an ``ask`` one still waits for a person. With the
reference ``mcp-server-git`` over stdio (12 tools) and a stub model behind the openai SDK."""

from __future__ import annotations

import json
from typing import Any

import pytest
from django.conf import settings

from attention.models import ToolCallRecord
from attention.scenarios import CHAT, SYSTEM_NOTICE
from attention.toolbox import ToolContext, execute_tool, restore_loaded, tools_for
from mailbox.models import MailboxItem
from markus.toolservers.models import ToolServer
from markus.toolservers.on_demand import LINE_CHARS, LIST_MAX, LOAD, LOAD_MAX, NEAR_LOADED, SEARCH, SEARCH_HITS
from notifications.models import Approval

from .conftest import SUBJECT, commits, git, last_tool_result, offered_names, wait_for

# What a chat's first request offered before tools were found on demand (commit 486d09d,
# an agent with this git server attached): 34 built-in tools and the server's 12.
BEFORE_CHAT_TOOLS = 46
BEFORE_CHAT_SCHEMA_CHARS = 19_728


def size(tools: dict) -> int:
    return len(json.dumps([t.schema() for t in tools.values()]))


def context(agent, scenario: str = CHAT) -> ToolContext:
    return ToolContext(
        agent_id=agent.id, agent_name=agent.name, scenario=scenario, offered=tools_for(agent.id, scenario)
    )


def call(ctx: ToolContext, name: str, **args: Any) -> dict[str, Any]:
    ok, text = execute_tool(ctx, name, args)
    assert ok, text
    return json.loads(text)


def server_tools(names) -> list[str]:
    return sorted(n for n in names if "__" in n)


@pytest.fixture
def attached(db, agent, git_server):
    git_server.agents.add(agent)
    git_server.offered_to.add(agent.team)  # its team's owner (alice) approves its calls
    return git_server


def test_past_the_setting_the_servers_tools_are_not_listed_but_found_on_demand(agent, attached, monkeypatch):
    assert settings.MARKUS["TOOLSERVER_INLINE_TOOLS"] == 4  # the default
    offered = tools_for(agent.id, CHAT)
    assert {SEARCH, LOAD} <= set(offered) and server_tools(offered) == []
    search = offered[SEARCH].description
    assert "git (the repository at" in search and "12 tools" in search
    # Within the setting they are offered directly, and the two are not.
    monkeypatch.setitem(settings.MARKUS, "TOOLSERVER_INLINE_TOOLS", 12)
    offered = tools_for(agent.id, CHAT)
    assert len(server_tools(offered)) == 12 and not {SEARCH, LOAD} & set(offered)


def test_a_chats_first_request_is_at_most_half_of_what_it_was(agent, attached, monkeypatch):
    offered = tools_for(agent.id, CHAT)
    assert len(offered) <= BEFORE_CHAT_TOOLS // 2, sorted(offered)
    assert size(offered) <= BEFORE_CHAT_SCHEMA_CHARS // 2, size(offered)
    # The server's tools alone, offered directly, would take a third of that again.
    monkeypatch.setitem(settings.MARKUS, "TOOLSERVER_INLINE_TOOLS", 100)
    inline = tools_for(agent.id, CHAT)
    assert size(inline) - size({n: t for n, t in offered.items() if n not in (SEARCH, LOAD)}) > 6_000


def test_a_system_notice_is_offered_no_tool_server_tools_nor_the_finders(agent, attached):
    offered = tools_for(agent.id, SYSTEM_NOTICE)
    assert server_tools(offered) == [] and not {SEARCH, LOAD} & set(offered)


def test_tool_search_finds_the_tools_by_words_a_line_each(agent, attached):
    ctx = context(agent)
    found = call(ctx, SEARCH, query="show the recent commit history log")
    hits = found["tools"]
    assert hits[0]["name"] == "git__git_log" and hits[0]["server"] == "git"
    assert len(hits) <= SEARCH_HITS and found["more"] >= 0
    for hit in hits:
        assert "\n" not in hit["description"] and len(hit["description"]) <= LINE_CHARS
    assert call(ctx, SEARCH, query="which files are staged")["tools"][0]["name"] in {
        "git__git_status",
        "git__git_diff_staged",
    }
    assert "git__git_create_branch" in [h["name"] for h in call(ctx, SEARCH, query="new branches")["tools"][:3]]
    nothing = call(ctx, SEARCH, query="weather forecast")
    assert nothing["tools"] == [] and "git__git_log" in nothing["note"]


def test_tools_a_search_matches_alike_list_those_that_change_nothing_first(agent, attached):
    """The real small model searched "git" (the server's name: every tool matches alike)
    and loaded the first hits, one load's worth: add, branch, checkout, commit, … in
    alphabetical order, not the log it needed. Among tools that match alike, those no
    person must approve come first: a model looks before it changes anything."""
    hits = call(context(agent), SEARCH, query="git")["tools"]
    asks = ["asks" in hit for hit in hits]
    assert asks == sorted(asks), [h["name"] for h in hits]  # no asking tool before one that asks nothing
    assert {"git__git_log", "git__git_show", "git__git_status"} <= {hit["name"] for hit in hits[:LOAD_MAX]}


def test_an_empty_query_lists_every_tool_briefly(agent, attached):
    listed = call(context(agent), SEARCH, query="")
    names = [t["name"] for t in listed["tools"]]
    assert len(names) == 12 <= LIST_MAX and listed["more"] == 0 and "git__git_log" in names
    assert len(json.dumps(listed)) < 3_000
    assert call(context(agent), SEARCH)["tools"] == listed["tools"]  # no query at all: the same


def test_a_loaded_tool_is_offered_from_then_on_and_its_call_works(agent, attached, repo):
    ctx = context(agent)
    loaded = call(ctx, LOAD, names=["git__git_log", "git_status"])  # a bare name: the one tool it names
    assert loaded["loaded"] == ["git__git_log", "git__git_status"] and "unknown" not in loaded
    assert {"git__git_log", "git__git_status"} <= set(ctx.offered)  # the item's own dict: the next turn sees them
    assert ctx.offered["git__git_log"].schema()["function"]["parameters"]["required"] == ["repo_path"]
    assert SUBJECT in call(ctx, "git__git_log", repo_path=str(repo), max_count=1)["content"]
    again = call(ctx, LOAD, names=["git__git_log"])
    assert again["loaded"] == [] and again["alreadyOffered"] == ["git__git_log"]
    # The real small model, given the searched names, put the server's prefix on them again.
    twice = call(ctx, LOAD, names=["git__git__git_diff", "GIT__git__git_show"])
    assert twice["loaded"] == ["git__git_diff", "git__git_show"] and "unknown" not in twice


def test_unknown_names_are_named_back_with_the_closest_valid_names(agent, attached):
    ctx = context(agent)
    before = set(ctx.offered)
    said = call(ctx, LOAD, names=["git__git_lgo", "git__commit", "push_to_origin"])
    assert said["loaded"] == [] and set(ctx.offered) == before
    closest = {u["name"]: u["closest"] for u in said["unknown"]}
    assert closest["git__git_lgo"][0] == "git__git_log"
    assert "git__git_commit" in closest["git__commit"]
    assert all(n.startswith("git__") for n in closest["push_to_origin"])
    ok, text = execute_tool(ctx, LOAD, {"names": [f"git__git_{i}" for i in range(9)]})
    assert not ok and "at most 8" in text


# What the real small model called, given a task to summarise the last commit: a tool
# named after the task's title (with the task's id), in two trials out of two.
MADE_UP = "Summarise the last commit of the demo repository"


def test_a_server_tool_called_by_its_name_unloaded_is_made_and_offered_from_then_on(agent, attached, repo):
    ctx = context(agent)
    assert "git__git_log" not in ctx.offered
    assert SUBJECT in call(ctx, "git__git_log", repo_path=str(repo), max_count=1)["content"]
    assert "git__git_log" in ctx.offered  # its schema is offered from the next turn
    assert "On branch" in call(ctx, "git_status", repo_path=str(repo))["content"]  # its bare name: the one tool
    assert "git__git_status" in ctx.offered


def test_a_made_up_name_loads_the_server_tools_its_words_match_and_says_which(agent, attached):
    ctx = context(agent)
    ok, text = execute_tool(ctx, MADE_UP, {"task_id": "tsk_1"})
    assert not ok
    error = json.loads(text)["error"]
    loaded = server_tools(ctx.offered)
    assert "git__git_log" in loaded and 0 < len(loaded) <= NEAR_LOADED, loaded
    assert "loaded now" in error and all(n in error for n in loaded), error
    assert "call one of them from your next turn" in error and "Tools you may call" in error
    # A made-up git tool (the real small model's next try) loads the git tools, though a
    # built-in tool's name is near it too (task_comment: "comm").
    ok, text = execute_tool(context(agent), "git_read_last_commit", {"repo": "demo-repo"})
    error = json.loads(text)["error"]
    assert not ok and "loaded now: git__git_commit" in error and "git__git_log" in error, error
    # A name that matches no tool of the servers loads nothing: the error is as it was.
    ok, text = execute_tool(ctx, "weather_forecast", {})
    assert not ok and "loaded now" not in json.loads(text)["error"]
    assert server_tools(ctx.offered) == loaded


def test_a_denied_tool_is_never_found_nor_loaded_nor_restored(agent, attached):
    ToolServer.objects.filter(pk=attached.pk).update(policies={"git_reset": "deny"})
    ctx = context(agent)
    assert "git__git_reset" not in [t["name"] for t in call(ctx, SEARCH, query="reset unstage")["tools"]]
    assert "git__git_reset" not in [t["name"] for t in call(ctx, SEARCH)["tools"]]
    said = call(ctx, LOAD, names=["git__git_reset", "git_reset"])
    assert said["loaded"] == [] and "git__git_reset" not in json.dumps(said["unknown"][0]["closest"])
    assert "git__git_reset" not in ctx.offered
    offered = tools_for(agent.id, CHAT)
    restore_loaded(offered, agent.id, CHAT, [loading("git__git_reset")])
    assert "git__git_reset" not in offered


def test_a_loaded_tool_keeps_its_policy_an_ask_tool_still_asks(agent, attached, monkeypatch):
    ctx = context(agent)
    call(ctx, LOAD, names=["git__git_commit", "git__git_log"])
    monkeypatch.setitem(settings.MARKUS, "TOOLSERVER_INLINE_TOOLS", 100)
    direct = tools_for(agent.id, CHAT)
    for name in ("git__git_commit", "git__git_log"):
        assert (ctx.offered[name].approval is None) == (direct[name].approval is None), name
    assert ctx.offered["git__git_commit"].approval is not None  # ask: a person approves each call
    assert ctx.offered["git__git_log"].approval is None  # read-only: auto
    assert call(ctx, SEARCH, query="commit")["tools"][0] == {
        "name": "git__git_commit",
        "server": "git",
        "description": ctx.offered["git__git_commit"].description.split("\n")[0][:LINE_CHARS],
        "asks": "a person approves each call",
    }


def loading(*names: str, as_text: bool = False) -> dict[str, Any]:
    arguments: Any = {"names": list(names)}
    call = {"id": "call_1", "type": "function", "function": {"name": LOAD, "arguments": arguments}}
    if as_text:
        call["function"]["arguments"] = json.dumps(arguments)
    return {"role": "assistant", "content": "", "tool_calls": [call]}


def test_a_resumed_session_loads_again_what_its_messages_loaded(agent, attached):
    messages = [
        {"role": "user", "content": "What changed?"},
        loading("git__git_log"),
        {"role": "tool", "tool_call_id": "call_1", "content": "{}"},
        loading("git_diff", "git__nonsense", as_text=True),  # arguments as the wire sends them: JSON text
        {
            "role": "assistant",
            "content": "",
            "tool_calls": [{"id": "x", "function": {"name": SEARCH, "arguments": {}}}],
        },
    ]
    offered = tools_for(agent.id, CHAT)
    restore_loaded(offered, agent.id, CHAT, messages)
    assert server_tools(offered) == ["git__git_diff", "git__git_log"]
    assert offered["git__git_log"].source == "git"
    fresh = tools_for(agent.id, CHAT)
    restore_loaded(fresh, agent.id, CHAT, [{"role": "user", "content": "hello"}])
    assert server_tools(fresh) == []  # nothing loaded, nothing restored


def calling(name: str, **arguments: Any) -> dict[str, Any]:
    call = {"id": f"call_{name}", "type": "function", "function": {"name": name, "arguments": json.dumps(arguments)}}
    return {"role": "assistant", "content": "", "tool_calls": [call]}


def test_a_resumed_session_loads_again_what_its_calls_loaded_by_name_or_by_a_made_up_one(agent, attached):
    """A tool loaded by its call (its name, or a name the model made up whose words match
    it) is offered again in the resumed session, as one loaded by ``tool_load`` is: the
    session's messages hold the call, and the model goes on from them."""
    first = context(agent)
    for name in ("git_log", "git_read_last_commit", "task_list"):
        execute_tool(first, name, {})
    loaded = server_tools(first.offered)
    assert "git__git_log" in loaded and "git__git_commit" in loaded, loaded
    messages = [{"role": "user", "content": "What changed?"}]
    messages += [calling("git_log"), calling("git_read_last_commit"), calling("task_list")]
    resumed = tools_for(agent.id, CHAT)
    restore_loaded(resumed, agent.id, CHAT, messages)
    assert server_tools(resumed) == loaded


class Finder:
    """A stub model that finds its tool: it searches with ``query``, loads the hit whose
    name ends with ``suffix``, calls it with ``arguments``, then answers with what it
    returned."""

    def __init__(self, query: str, suffix: str, arguments: dict[str, Any]) -> None:
        self.query, self.suffix, self.arguments = query, suffix, arguments
        self.bodies: list[dict[str, Any]] = []

    def __call__(self, body: dict[str, Any]) -> dict[str, Any]:
        self.bodies.append(body)
        step = sum(1 for m in body["messages"] if m.get("role") == "tool")
        result = last_tool_result(body)
        if step == 0:
            return {"tool_calls": [(SEARCH, {"query": self.query})]}
        if step == 1:
            hits = [t["name"] for t in json.loads(result or "{}")["tools"]]
            self.found = next(n for n in hits if n.endswith(self.suffix))
            return {"tool_calls": [(LOAD, {"names": [self.found]})]}
        if step == 2:
            return {"tool_calls": [(self.found, self.arguments)]}
        return {"content": f"The tool said: {result}"}


def chat(client, agent, text: str) -> dict:
    r = client.post(f"/api/agents/{agent.id}/chat", {"text": text}, format="json")
    assert r.status_code in (200, 202), r.content
    return r.json()


def test_a_chat_finds_loads_and_calls_the_git_log_in_the_loop(
    celery_worker, model, agent, alice_client, attached, repo
):
    m = Finder("commit history", "__git_log", {"repo_path": str(repo), "max_count": 1})
    model(m)
    body = chat(alice_client, agent, "What is the last commit in the git repository?")
    assert SUBJECT in body["reply"], body
    first = offered_names(m.bodies[0])
    assert {SEARCH, LOAD} <= set(first) and server_tools(first) == []
    # From the turn after the load the tool is offered with its schema; what ran is journaled.
    assert "git__git_log" in offered_names(m.bodies[-1])
    rows = ToolCallRecord.objects.filter(mailbox_item_id=body["mailboxItemId"]).order_by("turn", "position", "id")
    assert [r.name for r in rows] == [SEARCH, LOAD, "git__git_log"] and all(r.ok for r in rows)


class MakesUpItsTool:
    """A stub model as the real small one was: it first calls a tool named after what it
    wants done; then, offered the git log, calls it; then answers with what it said."""

    def __init__(self, repo) -> None:
        self.repo = repo
        self.bodies: list[dict[str, Any]] = []

    def __call__(self, body: dict[str, Any]) -> dict[str, Any]:
        self.bodies.append(body)
        if len(self.bodies) == 1:
            return {"tool_calls": [(MADE_UP, {"task_id": "tsk_1"})]}
        if "git__git_log" in offered_names(body) and len(self.bodies) == 2:
            return {"tool_calls": [("git__git_log", {"repo_path": str(self.repo), "max_count": 1})]}
        return {"content": f"The tool said: {last_tool_result(body)}"}


def test_a_chat_whose_model_makes_up_a_tool_is_offered_the_matching_ones_and_answers(
    celery_worker, model, agent, alice_client, attached, repo
):
    m = MakesUpItsTool(repo)
    model(m)
    body = chat(alice_client, agent, "Summarise the last commit of the demo repository, please.")
    assert SUBJECT in body["reply"], body
    assert server_tools(offered_names(m.bodies[0])) == []
    assert "git__git_log" in offered_names(m.bodies[1])  # loaded by the made-up call, for the next turn
    rows = ToolCallRecord.objects.filter(mailbox_item_id=body["mailboxItemId"]).order_by("turn", "position", "id")
    assert [(r.name, r.ok) for r in rows] == [(MADE_UP, False), ("git__git_log", True)]
    assert len(m.bodies) == 3


def test_a_loaded_ask_tool_parks_and_runs_once_approved_in_the_resumed_session(
    celery_worker, model, agent, alice_client, attached, repo, monkeypatch
):
    monkeypatch.setitem(settings.MARKUS, "CHAT_TIMEOUT_S", 1)  # the person does not wait on the approval
    before = commits(repo)
    m = Finder("record the staged changes", "__git_commit", {"repo_path": str(repo), "message": "Add the notes"})
    model(m)
    body = chat(alice_client, agent, "Commit the staged notes, please.")
    approval = wait_for(lambda: Approval.objects.filter(agent=agent, status="pending").first(), message="approval")
    wait_for(lambda: MailboxItem.objects.get(id=body["mailboxItemId"]).status == "deferred", message="parked")
    assert m.found == "git__git_commit" and commits(repo) == before and "git_commit" in approval.title
    r = alice_client.post(f"/api/approvals/{approval.id}/respond", {"selectedOption": "approve"}, format="json")
    assert r.status_code == 200, r.content
    wait_for(lambda: MailboxItem.objects.get(id=body["mailboxItemId"]).status == "completed", message="answered")
    assert commits(repo) == before + 1 and "Add the notes" in git(repo, "log", "-1", "--format=%s")
    row = ToolCallRecord.objects.get(mailbox_item_id=body["mailboxItemId"], name="git__git_commit")
    assert row.state == "done" and row.ok
