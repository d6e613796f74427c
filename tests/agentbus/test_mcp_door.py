"""The MCP door, through the ``mcp`` SDK's own clients: Streamable HTTP against a daphne
hub serving ``markus.asgi`` (``/mcp/``), and stdio against ``manage.py mcp`` (as a local
agent, and relayed to the hub). One agent sends, the other waits on its inbox and gets
the message with a cursor; pending and drain agree; a comment and a submit for review
reach the task. Authorization: an agent reads only its own inbox, a foreign task answers
like a missing one, no token no tool."""

from __future__ import annotations

import asyncio
import json
import os
import sys
import time
from typing import Any

import httpx2
import pytest
from mcp import Client
from mcp.client.stdio import StdioServerParameters, stdio_client
from mcp.client.streamable_http import streamable_http_client

from markus.core.actors import Actor
from markus.work import services as work_services
from markus.work.models import Task, TaskComment

from .hub_server import ROOT

pytestmark = [pytest.mark.django_db(transaction=True), pytest.mark.pg]

TOOLS = {
    "inbox_wait",
    "inbox_pending",
    "inbox_drain",
    "bus_send",
    "bus_request",
    "bus_reply",
    "agent_list_colleagues",
    "task_list",
    "task_get",
    "task_comment",
    "task_submit_review",
    "task_transition",
    "task_review",
}


def over_http(hub_url: str, token: str | None) -> Client:
    headers = {"Authorization": f"Bearer {token}"} if token else {}
    http = httpx2.AsyncClient(headers=headers, timeout=httpx2.Timeout(60))
    return Client(streamable_http_client(f"{hub_url}/mcp/", http_client=http))


async def call(client: Client, name: str, **arguments: Any) -> dict[str, Any]:
    result = await client.call_tool(name, arguments)
    text = "".join(c.text for c in result.content if getattr(c, "type", "") == "text")
    if result.is_error:  # the SDK says which tool: "Error executing tool <name>: <message>"
        return {"error": text.split(": ", 1)[-1]}
    return result.structured_content if isinstance(result.structured_content, dict) else json.loads(text)


def test_two_agents_talk_through_the_mcp_door_over_http(hub, eve, max_):
    async def scenario() -> None:
        async with over_http(hub.url, eve.token) as eve_mcp, over_http(hub.url, max_.token) as max_mcp:
            listed = await eve_mcp.list_tools()
            assert {t.name for t in listed.tools} == TOOLS
            colleagues = await call(eve_mcp, "agent_list_colleagues")
            assert "max" in {a["id"] for a in colleagues["agents"]}
            # A wait parked before the message arrives wakes on it (the hub's fallback poll is 30 s).
            waiting = asyncio.ensure_future(call(eve_mcp, "inbox_wait", timeout_seconds=20))
            await asyncio.sleep(0.5)
            started = time.monotonic()
            sent = await call(max_mcp, "bus_send", to="eve", text="hello eve", topic="greeting")
            assert sent["payload"] == {"text": "hello eve"}, sent
            got = await waiting
            assert time.monotonic() - started < 5, "woken by the message, not by the poll"
            assert [m["payload"] for m in got["messages"]] == [{"text": "hello eve"}] and not got["timed_out"]
            cursor = got["next_cursor"]
            # Passing the cursor back: nothing skipped, nothing repeated.
            again = await call(eve_mcp, "inbox_wait", timeout_seconds=0.3, after_cursor=cursor)
            assert again["messages"] == [] and again["timed_out"] is True
            await call(max_mcp, "bus_send", to="eve", text="second")
            assert (await call(eve_mcp, "inbox_pending"))["pending"] == 1
            peeked = await call(eve_mcp, "inbox_drain", peek=True)
            assert [m["payload"]["text"] for m in peeked["messages"]] == ["second"]
            drained = await call(eve_mcp, "inbox_drain")
            assert [m["payload"]["text"] for m in drained["messages"]] == ["second"]
            assert (await call(eve_mcp, "inbox_pending"))["pending"] == 0
            # Only its own inbox: another agent's answers like a missing one.
            refused = await call(eve_mcp, "inbox_drain", agent_id="max")
            assert refused == {"error": "No such agent."}
            assert "text or payload" in (await call(eve_mcp, "bus_send", to="max"))["error"]

    asyncio.run(scenario())


def test_tasks_through_the_mcp_door(hub, eve, zed, alice):
    task = work_services.task_create(actor=Actor.for_user(alice), title="Port the parser", assignee_id="eve")
    foreign = work_services.task_create(actor=Actor.for_user(zed.agent.owner), title="Theirs", assignee_id="zed")

    async def scenario() -> None:
        async with over_http(hub.url, eve.token) as mcp:
            listed = await call(mcp, "task_list")
            assert [t["id"] for t in listed["tasks"]] == [task.id]
            got = await call(mcp, "task_get", task_id=task.id)
            assert got["title"] == "Port the parser" and got["comments"] == []
            comment = await call(mcp, "task_comment", task_id=task.id, text="On it: the tokenizer first.")
            assert comment["content"] == "On it: the tokenizer first."
            submitted = await call(mcp, "task_submit_review", task_id=task.id, note="Ported, with tests.")
            assert submitted["status"] == "review"
            assert (await call(mcp, "task_get", task_id=foreign.id)) == {"error": "No such task."}
            bad = await call(mcp, "task_list", status="someday")
            assert bad["error"].startswith("unknown status 'someday'")

    asyncio.run(scenario())
    assert Task.objects.get(id=task.id).status == "review"
    assert TaskComment.objects.filter(task_id=task.id, content="On it: the tokenizer first.").exists()


def test_no_token_no_tool(hub, eve):
    r = httpx2.post(f"{hub.url}/mcp/", json={"jsonrpc": "2.0", "id": 1, "method": "tools/list"})
    assert r.status_code == 401 and r.headers["www-authenticate"] == "Bearer"
    r = httpx2.post(
        f"{hub.url}/mcp/",
        json={"jsonrpc": "2.0", "id": 1, "method": "tools/list"},
        headers={"Authorization": "Bearer not-a-token"},
    )
    assert r.status_code == 401


def _stdio(*args: str) -> StdioServerParameters:
    from django.db import connection

    script = (
        "import sys, django\n"
        "from django.conf import settings\n"
        "settings.DATABASES['default']['NAME'] = sys.argv[1]\n"
        "django.setup()\n"
        "from django.core.management import call_command\n"
        "call_command('mcp', *sys.argv[2:])\n"
    )
    return StdioServerParameters(
        command=sys.executable,
        args=["-c", script, connection.settings_dict["NAME"], *args],
        env={**os.environ, "DJANGO_SETTINGS_MODULE": "markus.settings.test"},
        cwd=str(ROOT),
    )


def test_the_stdio_door_as_a_local_agent_and_relayed_to_a_hub(hub, eve, max_):
    async def scenario() -> None:
        async with Client(stdio_client(_stdio("--agent", "eve"))) as local:
            assert {t.name for t in (await local.list_tools()).tools} == TOOLS
            sent = await call(local, "bus_send", to="max", text="from the local stdio door")
            assert sent["payload"] == {"text": "from the local stdio door"}
        async with Client(stdio_client(_stdio("--hub", hub.url, "--token", max_.token))) as relayed:
            assert {t.name for t in (await relayed.list_tools()).tools} == TOOLS
            got = await call(relayed, "inbox_wait", timeout_seconds=5)
            assert [m["payload"]["text"] for m in got["messages"]] == ["from the local stdio door"]
            assert (await call(relayed, "inbox_drain", agent_id="eve")) == {"error": "No such agent."}

    asyncio.run(scenario())


def test_a_waiting_inbox_wait_sends_progress_notifications(eve, max_, monkeypatch):
    from django.contrib.auth.models import AnonymousUser

    from agentbus import mcp_door
    from agentbus import services as bus
    from markus.agents.auth import Caller

    monkeypatch.setattr(mcp_door, "PROGRESS_SECONDS", 0.2)

    async def as_eve(ctx: object) -> Caller:
        return Caller(AnonymousUser(), eve.agent)

    progress: list[tuple[float, float | None, str | None]] = []

    async def on_progress(done: float, total: float | None, message: str | None) -> None:
        progress.append((done, total, message))

    async def scenario() -> dict[str, Any]:
        async with Client(mcp_door.build(as_eve)) as mcp:  # in process: the same server, no HTTP
            waiting = asyncio.ensure_future(
                mcp.call_tool("inbox_wait", {"timeout_seconds": 10}, progress_callback=on_progress)
            )
            await asyncio.sleep(0.9)
            from asgiref.sync import sync_to_async

            def send() -> None:
                stream = bus.stream_open(sender=max_.agent, recipient=eve.agent)
                bus.stream_append(stream_id=stream.id, sender=max_.agent, payload={"text": "at last"})

            await sync_to_async(send)()
            result = await waiting
            return result.structured_content or {}

    got = asyncio.run(scenario())
    assert [m["payload"]["text"] for m in got["messages"]] == ["at last"]
    assert len(progress) >= 3 and progress[0][1] == 10 and progress[0][2] == "waiting for a message"
    assert [p[0] for p in progress] == sorted(p[0] for p in progress)
