"""Scenario 17: the database server itself killed (``kill -9`` of every process of it)
under load, kept down for a few seconds and started again (crash recovery). The
processes must outlive it: the server answers what it cannot store with 503 and
Retry-After (the load's client sends it again after that), the MCP door too (it runs
outside Django's request cycle) and it serves again once the database is back (its
thread's dead connection is closed, not kept for good), a WebSocket is closed with 4503
(try again later) and opens again once it is back, the workers' runs that lost
their session let go, the beat keeps ticking, and once the database is back the sweep
hands every agent with due work to a worker. Nothing accepted may be lost, processed
twice or left waiting."""

from __future__ import annotations

import json
import threading
import time
import urllib.error
import urllib.request
from typing import Any

import pytest
from django.db import connections
from django.utils import timezone

from markus.agents.models import Agent
from markus.agents.services import agent_token_rotate
from tests.websocket_wire import close_frame, handshake

from .figures import assert_invariants, collect, completions, settle
from .harness import Api, LoadGenerator, Plan, boot, requests_for, wait_until

pytestmark = [pytest.mark.pg, pytest.mark.redis, pytest.mark.slow, pytest.mark.faults]

DOWN_FOR = 6.0


def test_the_database_killed_under_load_and_restarted_loses_nothing(cluster_on_own_server, own_server, report, clock):
    cluster = cluster_on_own_server
    seeded = boot(cluster)
    plan = Plan(chats=4, events=4, tasks=2, seconds=10.0)
    api = Api(cluster.base, seeded.token)
    mcp_token = agent_token_rotate(agent=Agent.objects.get(id=seeded.agents[0]))
    assert mcp_inbox(cluster.base, mcp_token)[0] == 200
    quiet = seeded.agents[-1]  # no load: its inbox wait stays parked through the outage
    parked = ParkedWait(cluster.base, seeded.token, quiet, seconds=20).start()
    load = LoadGenerator(api, requests_for(seeded.agents[:-1], plan), plan.seconds, resend_503=20).start()
    time.sleep(3.0)
    own_server.crash()
    # The MCP door (outside Django's request cycle) answers the outage as the API does.
    status, retry_after = mcp_inbox(cluster.base, mcp_token)
    assert (status, retry_after) == (503, "5")
    # A socket opened now is told to try again later (the pages reconnect after that).
    unavailable = "the database cannot be reached; try again in 5 s"
    assert socket_closed(cluster.port, seeded.token, quiet) == (4503, unavailable)
    time.sleep(DOWN_FOR)
    own_server.start()
    up_at = timezone.now()
    connections["default"].close()  # this process's connection died with the server
    # and serves again once the database is back (its connection is not left dead).
    wait_until(lambda: mcp_inbox(cluster.base, mcp_token)[0] == 200, timeout=15, interval=0.5, what="the MCP door")
    # and a socket opens and stays open again (the sync thread's dead connection is gone).
    stays_open = lambda: socket_closed(cluster.port, seeded.token, quiet) is None  # noqa: E731
    wait_until(stays_open, timeout=15, interval=0.5, what="a socket")
    load.join()
    status, code, took = parked.result()
    settled = settle(120)
    for name in ("server", "w1", "w2", "beat"):
        cluster.check_alive(name)
    figures = collect(others=f"{completions(since=up_at)}items_done_after_restart")
    figures.extra = (
        f"down={DOWN_FOR:.0f}s requests={load.sent} answered_503_then_resent={load.resent} "
        f"request_errors={len(load.errors)} wait_parked_across={status}{f'({code})' if code else ''}_after_{took:.0f}s"
    )
    report(figures.line("17 database-down", clock()))
    assert not load.errors, load.errors[:5]
    assert load.resent, "no request met the outage: the crash came too late"
    # A wait parked across the outage ends by its timeout and is answered: the database
    # is back by then, and the connection that died under it is replaced.
    assert (status, code) == (200, None) and took < 25, (status, code, took)
    assert_invariants(figures, settled)


def mcp_inbox(base: str, token: str) -> tuple[int, str | None]:
    """An ``inbox_wait`` that does not wait, through the MCP door: the status and the
    Retry-After."""
    call = {"name": "inbox_wait", "arguments": {"timeout_seconds": 0}}
    request = urllib.request.Request(
        f"{base}/mcp/",
        data=json.dumps({"jsonrpc": "2.0", "id": 1, "method": "tools/call", "params": call}).encode(),
        headers={
            "Authorization": f"Bearer {token}",
            "Content-Type": "application/json",
            "Accept": "application/json, text/event-stream",
        },
        method="POST",
    )
    try:
        with urllib.request.urlopen(request, timeout=30) as response:
            response.read()
            return response.status, response.headers.get("Retry-After")
    except urllib.error.HTTPError as exc:
        return exc.code, exc.headers.get("Retry-After")


def socket_closed(port: int, token: str, agent: str) -> tuple[int, str] | None:
    """A WebSocket to the agent's events on the real server: the close frame's code and
    reason if the server closed it within a second, None if it stayed open."""
    origin = {"Origin": f"http://127.0.0.1:{port}"}
    sock = handshake(port, f"/ws/agents/{agent}/?token={token}", origin)
    sock.settimeout(1.0)
    try:
        return close_frame(sock)
    except TimeoutError:
        return None


class ParkedWait:
    """A REST inbox wait after everything the agent has (so it parks), in a thread."""

    def __init__(self, base: str, token: str, agent: str, *, seconds: float) -> None:
        self.url = f"{base}/api/agents/{agent}/agentbus/inbox"
        self.headers = {"Authorization": f"Token {token}"}
        self.seconds = seconds
        self.answer: tuple[Any, str | None, float] | None = None
        self.thread = threading.Thread(target=self._wait, name="faults-parked-wait", daemon=True)

    def start(self) -> ParkedWait:
        request = urllib.request.Request(f"{self.url}?timeout_seconds=0&limit=100", headers=self.headers)
        with urllib.request.urlopen(request, timeout=30) as response:
            self.cursor = json.loads(response.read())["next_cursor"]
        self.thread.start()
        return self

    def _wait(self) -> None:
        url = f"{self.url}?timeout_seconds={self.seconds:g}&after_cursor={self.cursor}"
        start = time.monotonic()
        try:
            with urllib.request.urlopen(urllib.request.Request(url, headers=self.headers), timeout=120) as response:
                response.read()
                self.answer = (response.status, None, time.monotonic() - start)
        except urllib.error.HTTPError as exc:
            code = json.loads(exc.read() or b"{}").get("code") if exc.code < 500 or exc.code == 503 else None
            self.answer = (exc.code, code, time.monotonic() - start)
        except OSError as exc:
            self.answer = (type(exc).__name__, None, time.monotonic() - start)

    def result(self) -> tuple[Any, str | None, float]:
        self.thread.join(120)
        assert self.answer is not None, "the parked wait never ended"
        return self.answer
