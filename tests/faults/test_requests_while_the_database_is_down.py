"""What a request meets while the database is down, and after (a PostgreSQL server of the
test's own, crashed with ``kill -9`` and started again): the API, a chat, an AgentBus
inbox read, a page and the admin answer 503 ``unavailable`` with Retry-After (the API's
JSON shape under ``/api/``, async views too), and are served again once it is back; a
wait's first read after it parked replaces a connection that died meanwhile. Which
errors count: ``tests/api/test_which_database_errors_retry_later.py``; under load, the
MCP door and a parked wait included: ``test_database_down.py``."""

from __future__ import annotations

import pytest
from django.conf import settings
from django.contrib.auth.models import User
from django.db import DatabaseError, close_old_connections
from django.test import Client

from markus.agents.models import Agent
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
    # A DRF view, and two async views outside DRF: a chat and an AgentBus inbox read.
    asked = [
        lambda: api.get("/api/agents/"),
        lambda: api.post(f"/api/agents/{agent.id}/chat", {"text": "hi"}, content_type="application/json"),
        lambda: api.get(f"/api/agents/{agent.id}/agentbus/inbox?timeout_seconds=0"),
    ]
    assert [ask().status_code for ask in asked] == [200, 202, 200]
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
    assert [ask().status_code for ask in asked] == [200, 202, 200]
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
