"""An MCP ``inbox_wait`` parks as lightly as a REST wait: the door answers a plain
``inbox_wait`` call itself, in the SDK's wire form, instead of spending the SDK's
per-request session, streams and tasks on a request that may park for an hour."""

from __future__ import annotations

import asyncio
import json
import threading
import time

import httpx2
import pytest
from asgiref.sync import async_to_sync
from django.db import connection
from mcp import Client
from mcp.client.streamable_http import streamable_http_client

from agentbus import wakeup
from agentbus.mcp_door import McpHttpApp
from markus.core.waits import ParkingASGIHandler

from .conftest import say

pytestmark = pytest.mark.django_db(transaction=True)

WAITS = 6  # twice this stays under the per-caller cap (16)


def rest_wait(persona) -> dict:
    return {
        "type": "http",
        "method": "GET",
        "path": f"/api/agents/{persona.id}/agentbus/inbox",
        "query_string": b"timeout_seconds=30",
        "headers": [(b"authorization", f"Bearer {persona.token}".encode())],
    }


def mcp_wait(persona, rpc_id: int) -> tuple[dict, bytes]:
    body = {
        "jsonrpc": "2.0",
        "id": rpc_id,
        "method": "tools/call",
        "params": {"name": "inbox_wait", "arguments": {"timeout_seconds": 30}},
    }
    scope = {
        "type": "http",
        "method": "POST",
        "path": "/mcp/",
        "query_string": b"",
        "headers": [
            (b"authorization", f"Bearer {persona.token}".encode()),
            (b"accept", b"application/json, text/event-stream"),
            (b"content-type", b"application/json"),
        ],
    }
    return scope, json.dumps(body).encode()


async def call(app, scope: dict, body: bytes = b"") -> list[dict]:
    full = {"asgi": {"version": "3.0"}, "http_version": "1.1", "scheme": "http", "root_path": "", **scope}
    full.setdefault("raw_path", scope["path"].encode())
    full.update(client=("127.0.0.1", 5000), server=("testserver", 80))
    sent: list[dict] = []
    asked = False

    async def receive():
        nonlocal asked
        if not asked:
            asked = True
            return {"type": "http.request", "body": body, "more_body": False}
        await asyncio.sleep(3600)

    async def send(message):
        sent.append(message)

    await app(full, receive, send)
    return sent


async def tasks_per_wait(start_waits, count: int) -> float:
    before = len(asyncio.all_tasks())
    waits = start_waits()
    deadline = asyncio.get_running_loop().time() + 20
    while wakeup.parked_waiters() < count:
        if asyncio.get_running_loop().time() > deadline:
            done = [w.result() if not w.exception() else w.exception() for w in waits if w.done()]
            raise AssertionError(f"{wakeup.parked_waiters()} of {count} parked; ended: {done[:2]}")
        await asyncio.sleep(0.01)
    await asyncio.sleep(0.1)
    held = len(asyncio.all_tasks()) - before - len(waits)
    return held / count, waits


def test_a_parked_mcp_wait_holds_no_more_tasks_than_a_parked_rest_wait(long_poll, eve, max_):
    rest_app, mcp_app = ParkingASGIHandler(), McpHttpApp()

    async def scenario() -> tuple[float, float, list, list]:
        rest, rest_waits = await tasks_per_wait(
            lambda: [asyncio.ensure_future(call(rest_app, rest_wait(eve))) for _ in range(WAITS)], WAITS
        )
        mcp, mcp_waits = await tasks_per_wait(
            lambda: [asyncio.ensure_future(call(mcp_app, *mcp_wait(eve, i + 1))) for i in range(WAITS)], 2 * WAITS
        )
        await asyncio.to_thread(lambda: (say(max_, eve, "all of you"), connection.close()))
        return rest, mcp, await asyncio.gather(*rest_waits), await asyncio.gather(*mcp_waits)

    rest, mcp, rest_answers, mcp_answers = async_to_sync(scenario)()
    assert mcp <= rest, f"a parked MCP wait holds {mcp} tasks, a REST wait {rest}"
    for sent in mcp_answers:
        assert sent[0]["status"] == 200 and (b"text/event-stream" in dict(sent[0]["headers"])[b"content-type"])
        data = b"".join(m.get("body", b"") for m in sent[1:]).decode()
        event = json.loads(data.split("data: ", 1)[1])
        assert event["result"]["structuredContent"]["messages"][0]["payload"] == {"text": "all of you"}
    assert all(json.loads(s[-1]["body"])["messages"] for s in rest_answers)


def test_the_sdks_own_client_reads_the_doors_answers(long_poll, eve, max_):
    """Initialize and list go to the SDK; the wait is the door's; the SDK's client reads
    both the same way: a result, a tool error, the cursor."""
    app = McpHttpApp()

    def later() -> None:
        while wakeup.parked_waiters() < 1:
            time.sleep(0.01)
        say(max_, eve, "through the door")
        connection.close()

    async def scenario():
        http = httpx2.AsyncClient(
            transport=httpx2.ASGITransport(app=app), headers={"Authorization": f"Bearer {eve.token}"}, timeout=30
        )
        async with Client(streamable_http_client("http://testserver/mcp/", http_client=http)) as client:
            thread = threading.Thread(target=later)
            thread.start()
            woken = await client.call_tool("inbox_wait", {"timeout_seconds": 10})
            await asyncio.to_thread(thread.join, 10)
            cursor = woken.structured_content["next_cursor"]
            empty = await client.call_tool("inbox_wait", {"timeout_seconds": 0.2, "after_cursor": cursor})
            refused = await client.call_tool("inbox_wait", {"timeout_seconds": 1, "agent_id": "max"})
            return woken, empty, refused

    woken, empty, refused = async_to_sync(scenario)()
    assert not woken.is_error and [m["payload"]["text"] for m in woken.structured_content["messages"]] == [
        "through the door"
    ]
    assert json.loads(woken.content[0].text) == woken.structured_content
    assert empty.structured_content["timed_out"] is True and empty.structured_content["messages"] == []
    assert refused.is_error and "No such agent." in refused.content[0].text
