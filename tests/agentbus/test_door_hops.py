"""One hop per door call: an inbox call through the REST door or the MCP door crosses
to a thread once for all its database work (authentication, the target, the ack, the
cursor, the read), and a woken wait answers from its wake-up without crossing again.
A wait that parks crosses once more before it parks: its wake-up is registered only
once the caller is known to be allowed, and it reads again after that.

Every ``sync_to_async`` call is counted, Django's own included (the request's signals,
a synchronous DRF view); a plain one-row GET of the API, counted the same way, is the
baseline.
"""

from __future__ import annotations

import asyncio
import threading
import time

import pytest
from asgiref import sync as asgiref_sync
from asgiref.sync import async_to_sync
from django.contrib.auth.models import AnonymousUser
from django.db import connection
from django.test import AsyncClient

from agentbus import wakeup
from agentbus.mcp_door import build
from markus.agents.auth import Caller

from .conftest import say

pytestmark = pytest.mark.django_db(transaction=True)


class Hops:
    """Counts thread hops (``SyncToAsync`` calls) while on."""

    def __init__(self, monkeypatch) -> None:
        self.count = 0
        self.on = False
        real_call = asgiref_sync.SyncToAsync.__call__

        async def call(this, *args, **kwargs):
            if self.on:
                self.count += 1
            return await real_call(this, *args, **kwargs)

        monkeypatch.setattr(asgiref_sync.SyncToAsync, "__call__", call)

    async def counting(self, coro) -> tuple[object, int]:
        self.count, self.on = 0, True
        try:
            return await coro, self.count
        finally:
            self.on = False


def auth(persona) -> dict[str, str]:
    return {"authorization": f"Bearer {persona.token}"}


def test_an_inbox_call_hops_no_more_than_a_one_row_get(long_poll, monkeypatch, eve, max_):
    say(max_, eve, "waiting already")
    hops = Hops(monkeypatch)

    async def scenario() -> tuple[int, int]:
        client = AsyncClient()
        await client.get("/api/agents/eve/", headers=auth(eve))  # warm: first-request costs out of the count
        one_row, baseline = await hops.counting(client.get("/api/agents/eve/", headers=auth(eve)))
        assert one_row.status_code == 200
        inbox, used = await hops.counting(
            client.get("/api/agents/eve/agentbus/inbox", {"timeout_seconds": 0}, headers=auth(eve))
        )
        assert inbox.status_code == 200 and len(inbox.json()["messages"]) == 1
        return baseline, used

    baseline, used = async_to_sync(scenario)()
    assert used <= baseline, f"a non-waiting inbox call hopped {used} times, a one-row GET {baseline}"


def test_a_woken_rest_wait_hops_once_in_all(long_poll, monkeypatch, eve, max_):
    hops = Hops(monkeypatch)

    def later() -> None:
        while wakeup.parked_waiters() < 1:
            time.sleep(0.01)
        say(max_, eve, "wake up")
        connection.close()

    async def scenario() -> tuple[int, int]:
        client = AsyncClient()
        _, baseline = await hops.counting(client.get("/api/agents/eve/", headers=auth(eve)))
        thread = threading.Thread(target=later)
        thread.start()
        response, used = await hops.counting(
            client.get("/api/agents/eve/agentbus/inbox", {"timeout_seconds": 10}, headers=auth(eve))
        )
        await asyncio.to_thread(thread.join, 10)
        assert [m["payload"]["text"] for m in response.json()["messages"]] == ["wake up"]
        return baseline, used

    baseline, used = async_to_sync(scenario)()
    assert used <= baseline, f"a woken wait hopped {used} times, a one-row GET {baseline}"


def test_an_mcp_inbox_wait_hops_once_and_twice_when_it_parks(long_poll, monkeypatch, eve, max_):
    """The tool itself, its caller already known (the HTTP door resolves the token
    before the SDK sees the request): one hop for a call that answers at once; a call
    that parks hops once more before it parks (its wake-up is registered only once the
    caller is known to be allowed, then it reads again), and none after its wake-up."""
    from mcp import Client

    hops = Hops(monkeypatch)
    caller = Caller(AnonymousUser(), eve.agent)

    async def identify(ctx: object) -> Caller:
        return caller

    def later() -> None:
        while wakeup.parked_waiters() < 1:
            time.sleep(0.01)
        say(max_, eve, "wake up")
        connection.close()

    async def scenario() -> tuple[int, int]:
        async with Client(build(identify)) as client:
            now, at_once = await hops.counting(client.call_tool("inbox_wait", {"timeout_seconds": 0}))
            assert not now.is_error, now.content
            thread = threading.Thread(target=later)
            thread.start()
            cursor = now.structured_content["next_cursor"]
            woken, used = await hops.counting(
                client.call_tool("inbox_wait", {"timeout_seconds": 10, "after_cursor": cursor})
            )
            await asyncio.to_thread(thread.join, 10)
            assert [m["payload"]["text"] for m in woken.structured_content["messages"]] == ["wake up"]
            return at_once, used

    at_once, woken = async_to_sync(scenario)()
    assert (at_once, woken) == (1, 2)


# ------------------------------------------------------------- the server's own handler


async def asgi_get(app, path: str, query: str, headers: dict[str, str], events: list) -> tuple[int, dict, bytes]:
    """One GET through an ASGI app, as daphne calls it; ``events`` gets ("send", type)."""
    scope = {
        "type": "http",
        "asgi": {"version": "3.0"},
        "http_version": "1.1",
        "method": "GET",
        "scheme": "http",
        "path": path,
        "raw_path": path.encode(),
        "root_path": "",
        "query_string": query.encode(),
        "headers": [(k.lower().encode(), v.encode()) for k, v in headers.items()],
        "client": ("127.0.0.1", 5000),
        "server": ("testserver", 80),
    }
    sent: list[dict] = []
    asked = False

    async def receive():
        nonlocal asked
        if not asked:
            asked = True
            return {"type": "http.request", "body": b"", "more_body": False}
        await asyncio.sleep(3600)

    async def send(message):
        events.append(("send", message["type"]))
        sent.append(message)

    await app(scope, receive, send)
    start = next(m for m in sent if m["type"] == "http.response.start")
    body = b"".join(m.get("body", b"") for m in sent if m["type"] == "http.response.body")
    return start["status"], {k.decode().lower(): v.decode() for k, v in start["headers"]}, body


def test_a_woken_wait_answers_without_crossing_to_a_thread(long_poll, monkeypatch, eve, max_):
    """Through the server's handler (``markus.asgi``), middleware included: Django's own
    chain would cross six times (each middleware's ``process_response``); a token's call
    loads no session, so no after-half needs a thread."""
    from markus.core.waits import ParkingASGIHandler

    events: list = []
    real_call = asgiref_sync.SyncToAsync.__call__

    async def call(this, *args, **kwargs):
        events.append(("hop", getattr(this.func, "__qualname__", "?")))
        return await real_call(this, *args, **kwargs)

    monkeypatch.setattr(asgiref_sync.SyncToAsync, "__call__", call)

    def later() -> None:
        while wakeup.parked_waiters() < 1:
            time.sleep(0.01)
        events.append(("wake", ""))
        say(max_, eve, "wake up")
        connection.close()

    async def scenario():
        thread = threading.Thread(target=later)
        thread.start()
        got = await asgi_get(
            ParkingASGIHandler(), "/api/agents/eve/agentbus/inbox", "timeout_seconds=10", auth(eve), events
        )
        await asyncio.to_thread(thread.join, 10)
        return got

    status, _, body = async_to_sync(scenario)()
    assert status == 200 and b"wake up" in body
    woken = events.index(("wake", ""))
    answered = events.index(("send", "http.response.body"))
    hops = [name for kind, name in events[woken:answered] if kind == "hop"]
    assert hops == []


@pytest.mark.parametrize(
    "query,headers,status",
    [
        ("timeout_seconds=0", "eve", 200),
        ("timeout_seconds=0", None, 401),
        ("timeout_seconds=abc", "eve", 400),
        ("timeout_seconds=0", "session", 200),
    ],
)
def test_a_parked_request_answers_with_the_headers_of_djangos_own_chain(query, headers, status, alice, eve, max_):
    from django.core.handlers.asgi import ASGIHandler
    from django.test import Client

    from markus.core.waits import ParkingASGIHandler

    sent = auth(eve) if headers == "eve" else {}
    if headers == "session":  # a browser's: the session is loaded, its after-halves run in a thread
        browser = Client()
        browser.force_login(alice)
        sent = {"cookie": f"sessionid={browser.cookies['sessionid'].value}"}

    async def both():
        parked = await asgi_get(ParkingASGIHandler(), "/api/agents/eve/agentbus/inbox", query, sent, [])
        plain = await asgi_get(ASGIHandler(), "/api/agents/eve/agentbus/inbox", query, sent, [])
        return parked, plain

    parked, plain = async_to_sync(both)()
    assert parked[0] == plain[0] == status
    assert parked[1] == plain[1]
    assert parked[2] == plain[2]
