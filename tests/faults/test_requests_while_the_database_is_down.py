"""What a request meets while the database is down, and after (a PostgreSQL server of the
test's own, crashed with ``kill -9`` and started again): the API, a chat, an AgentBus
inbox read, a page and the admin answer 503 ``unavailable`` with Retry-After (the API's
JSON shape under ``/api/``, async views too), and are served again once it is back; a
wait's first read after it parked replaces a connection that died meanwhile; a chat or a
bus request stored before the outage waits on and ends pending or timed out, never a 503;
a WebSocket is closed with 4503 (try again later).
Which errors count: ``tests/api/test_which_database_errors_retry_later.py``; under load,
the MCP door and a parked wait included: ``test_database_down.py``."""

from __future__ import annotations

import pytest
from asgiref.sync import async_to_sync
from channels.testing import WebsocketCommunicator
from django.conf import settings
from django.contrib.auth.models import User
from django.db import DatabaseError, close_old_connections
from django.test import Client

from agentbus import selectors as bus_selectors
from agentbus.models import Stream
from attention import chat
from mailbox.models import MailboxItem
from markus.agents.models import Agent, Team
from markus.agents.services import agent_create, user_token_create
from markus.core.db import on_a_live_connection

from .own_postgres import OwnPostgres

pytestmark = [pytest.mark.postgres, pytest.mark.slow, pytest.mark.faults]


def test_while_the_database_is_down_requests_are_answered_503_with_retry_after_then_served_again(
    orm_on_own_server: OwnPostgres, monkeypatch: pytest.MonkeyPatch
) -> None:
    server = orm_on_own_server
    monkeypatch.setitem(settings.MARKUS, "CHAT_TIMEOUT_S", 0.2)  # no worker answers here: 202 at once
    alice = User.objects.create_user("alice", password="pw-alice", is_staff=True, is_superuser=True)
    _, token = user_token_create(alice)
    agent, _ = agent_create(name="Ada", role="engineer", agent_id="ada", owner=alice)
    api = Client(HTTP_AUTHORIZATION=f"Token {token}")
    page = Client()
    page.force_login(alice)
    # A DRF view, and three async views outside DRF: a chat, an AgentBus inbox read and
    # the A2A door (a JSON-RPC client reads its refusals as JSON too, not a page's text).
    rpc = {"jsonrpc": "2.0", "id": 1, "method": "GetTask", "params": {"id": "no-such-task"}}
    asked = [
        lambda: api.get("/api/agents/"),
        lambda: api.post(f"/api/agents/{agent.id}/chat", {"text": "hi"}, content_type="application/json"),
        lambda: api.get(f"/api/agents/{agent.id}/agentbus/inbox?timeout_seconds=0"),
        lambda: api.post(f"/a2a/{agent.id}/", rpc, content_type="application/json", HTTP_A2A_VERSION="1.0"),
    ]
    assert [ask().status_code for ask in asked] == [200, 202, 200, 200]
    assert page.get("/admin/").status_code == 200

    server.crash()
    # The first request finds its connection cut; the next ones find nobody listening.
    for answer in [ask() for ask in asked] + [ask() for ask in asked]:
        assert answer.status_code == 503, answer.content
        assert answer["Retry-After"] == "5"
        assert answer.json() == {"detail": "the database cannot be reached; try again in 5 s", "code": "unavailable"}
    for _ in range(2):
        shown = page.get("/admin/")
        assert shown.status_code == 503, shown.content
        assert shown["Retry-After"] == "5"
        assert shown.content == b"503 Service Unavailable: The database cannot be reached; try again in 5 s.\n"

    server.start()
    # What a request's start does in the server (Django's test client leaves it out): a
    # connection that failed is closed, the next statement opens a new one.
    close_old_connections()
    assert [ask().status_code for ask in asked] == [200, 202, 200, 200]
    assert page.get("/admin/").status_code == 200


def test_a_read_after_a_park_replaces_a_connection_that_died_meanwhile(orm_on_own_server: OwnPostgres) -> None:
    server = orm_on_own_server
    agent_create(name="Parked", role="engineer", agent_id="parked1")
    assert on_a_live_connection(Agent.objects.count) == 1  # a live connection: read once
    server.crash()
    with pytest.raises(DatabaseError):  # still down: the caller answers 503
        on_a_live_connection(Agent.objects.count)
    server.start()
    # The connection died under it (as under a parked wait): replaced, the read made again.
    assert on_a_live_connection(Agent.objects.count) == 1
    server.crash()
    server.start()
    with pytest.raises(DatabaseError):  # where a plain read on the dead connection fails
        Agent.objects.count()


def test_a_chat_stored_before_the_database_went_down_is_answered_pending_not_asked_again(
    orm_on_own_server: OwnPostgres, monkeypatch: pytest.MonkeyPatch
) -> None:
    """The person's message is stored, then its wait's reads meet the database down (its
    connection cut, then nobody listening, then back on a new connection): the wait goes
    on and ends as pending (202, the item to resume), never a 503 that asks the person to
    send again what is stored (a second message, answered twice)."""
    server = orm_on_own_server
    monkeypatch.setitem(settings.MARKUS, "CHAT_TIMEOUT_S", 3.5)  # no worker answers here
    alice = User.objects.create_user("alice", password="pw-alice")
    _, token = user_token_create(alice)
    agent, _ = agent_create(name="Ada", role="engineer", agent_id="ada", owner=alice)
    reads: list[str] = []
    real = chat.chat_reply_for

    def outage_under_the_wait(item_id: str):  # the wait's read, about once a second
        reads.append(item_id)
        if len(reads) == 1:
            server.crash()  # its connection is cut
        elif len(reads) == 3:
            server.start()  # back, its connection dead
        return real(item_id)

    monkeypatch.setattr(chat, "chat_reply_for", outage_under_the_wait)
    api = Client(HTTP_AUTHORIZATION=f"Token {token}")
    answer = api.post(f"/api/agents/{agent.id}/chat", {"text": "hi"}, content_type="application/json")
    assert answer.status_code == 202, answer.content
    assert answer.json()["pending"] is True
    assert len(reads) >= 4  # it read on across the outage and after it
    close_old_connections()
    assert list(MailboxItem.objects.filter(agent_id=agent.id).values_list("id", flat=True)) == [
        answer.json()["mailboxItemId"]
    ]


@pytest.mark.parametrize("back_by_the_end", [True, False], ids=["back-by-the-end", "down-to-the-end"])
def test_a_bus_request_stored_before_the_database_went_down_ends_timed_out_not_asked_again(
    orm_on_own_server: OwnPostgres, monkeypatch: pytest.MonkeyPatch, back_by_the_end: bool
) -> None:
    """A bus request's stream and message are stored, then its reads meet the database
    down (right after the request; at the wait's end back on a new connection, or still
    down): it answers as a request nobody replied to in time (200, ``timed_out``), never
    a 503 that asks the requester to send it again (the recipient asked twice). Still
    down at the end, its stream is left open (nothing can close it)."""
    server = orm_on_own_server
    alice = User.objects.create_user("alice", password="pw-alice")
    team = Team.objects.create(name="Core", owner=alice)
    eve, eve_token = agent_create(name="Eve", role="engineer", kind=Agent.Kind.EXTERNAL, owner=alice, team=team)
    max_, _ = agent_create(name="Max", role="engineer", kind=Agent.Kind.EXTERNAL, owner=alice, team=team)
    reads: list[str] = []
    real = bus_selectors.reply_state

    def outage_under_the_wait(stream_id: str, requester_id: str):
        reads.append(stream_id)
        # The read right after the request is tried twice (once more on a new connection).
        if len(reads) == 1:
            server.crash()  # right after the request was stored
        elif len(reads) == 3 and back_by_the_end:
            server.start()  # back for the wait's end, its connection dead
        return real(stream_id, requester_id)

    monkeypatch.setattr(bus_selectors, "reply_state", outage_under_the_wait)
    body = {"sender": eve.id, "recipient": max_.id, "payload": {"q": "?"}, "timeoutSeconds": 1}
    answer = Client(HTTP_AUTHORIZATION=f"Bearer {eve_token}").post(
        "/api/agentbus/request", body, content_type="application/json"
    )
    assert answer.status_code == 200, answer.content
    assert answer.json()["timed_out"] is True and answer.json()["reply"] == []
    assert len(reads) >= 3  # read again at the wait's end
    if not back_by_the_end:
        server.start()
    close_old_connections()
    asked = Stream.objects.filter(sender=eve, recipient=max_)
    assert asked.count() == 1  # asked once
    assert (asked.get().closed_at is not None) is back_by_the_end


def test_a_socket_opened_while_the_database_is_down_is_told_to_try_again_later(orm_on_own_server: OwnPostgres) -> None:
    """A WebSocket's handshake needs the database (the caller, the agent): while it is down
    the socket is accepted and closed at once with 4503 (try again later) and the 503's
    reason, which the pages reconnect after, not an HTTP 500 and a traceback; once it is
    back the same socket opens and stays open."""
    from markus.asgi import application

    server = orm_on_own_server
    alice = User.objects.create_user("alice", password="pw-alice")
    _, token = user_token_create(alice)
    agent, _ = agent_create(name="Ada", role="engineer", agent_id="ada", owner=alice)
    origin = [(b"origin", b"http://127.0.0.1:8000")]

    async def open_socket() -> tuple[bool, dict]:
        """Whether it opened, and what came first in half a second ({}: nothing)."""
        socket = WebsocketCommunicator(application, f"/ws/agents/{agent.id}/?token={token}", headers=origin)
        connected, _ = await socket.connect(timeout=10)
        first = {} if await socket.receive_nothing(timeout=0.5) else await socket.receive_output()
        if first.get("type") != "websocket.close":
            await socket.disconnect()
        return connected, first

    server.crash()
    connected, closed = async_to_sync(open_socket)()
    assert connected
    assert closed == {
        "type": "websocket.close",
        "code": 4503,
        "reason": "the database cannot be reached; try again in 5 s",
    }
    server.start()
    assert async_to_sync(open_socket)() == (True, {})
