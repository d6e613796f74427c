"""The run's take of the lease is the one commit the loop does not wait for on disk
(``synchronous_commit`` off, ``attention.lease_take``): the claim that follows it is.
These tests crash a PostgreSQL server of their own (``kill -9`` of every process of it,
the WAL writer frozen beforehand so a commit not waited for is still in memory) and
start it again, to hold what that choice promises:

- a crash before the run's first durable commit loses the take and nothing else: the
  lease is as it was, the person's chat still queued, the sweep kicks the agent, the next
  run answers it, and the dead run's lease (its epoch reused by a new owner) is refused;
- a crash after the claim loses neither: the claim's commit wrote the WAL up to itself,
  the take's record included, so the item is the dead run's (``processing``) under its
  lease; when that lease runs out the sweep kicks the agent and the next run answers the
  chat, once.
"""

from __future__ import annotations

import contextlib
from collections.abc import Iterator
from typing import Any

import pytest
from django.conf import settings
from django.db import DatabaseError, close_old_connections, connections
from django.utils import timezone

from attention import loop
from attention.lease import StaleLease, fenced
from attention.lease_take import lease_take_for_run
from attention.models import AgentAttention
from attention.services import agents_to_kick
from mailbox.models import MailboxItem
from mailbox.registry import MailboxType, Status
from mailbox.services import mailbox_enqueue
from markus.agents.chat import chat_reply_for
from markus.agents.models import ChatMessage
from markus.agents.services import agent_create
from markus.llm.base import LLMResponse, set_provider_override
from markus.llm.offline import OfflineProvider

from .harness import django_on, use_in_memory_layer, wait_until
from .own_postgres import OwnPostgres

pytestmark = [pytest.mark.postgres, pytest.mark.slow, pytest.mark.faults]


@pytest.fixture
def server(
    own_server: OwnPostgres, own_database: str, django_db_blocker, monkeypatch: pytest.MonkeyPatch
) -> Iterator[OwnPostgres]:
    """The server of this test's own, this process's ORM pointed at its copy of the
    suite's template, the offline brain, the embedded channel layer."""
    use_in_memory_layer(monkeypatch)
    monkeypatch.setitem(settings.MARKUS, "LLM_PROVIDER", "offline")
    try:
        with django_db_blocker.unblock(), django_on(own_database):
            yield own_server
    finally:
        set_provider_override(None)


def _restart(server: OwnPostgres) -> None:
    connections["default"].close()  # the crashed server's connection is gone
    server.start()


def _chat(agent_id: str, text: str) -> MailboxItem:
    return mailbox_enqueue(
        agent_id=agent_id,
        source_type=MailboxType.HUMAN_CHAT,
        payload={"summary": text, "content": text},
        metadata={"senderId": "alice", "senderRole": "user"},
    )


def _lease(agent_id: str) -> tuple[int, str]:
    row = AgentAttention.objects.get(agent_id=agent_id)
    return row.lease_epoch, row.lease_owner


def _an_agent_that_has_answered_once() -> str:
    """An agent whose attention row and lease have been through one whole run."""
    agent, _ = agent_create(name="Crash", role="engineer", agent_id="crash1")
    first = _chat(agent.id, "hello")
    assert loop.run_attention(agent.id).processed == 1
    assert (chat_reply_for(first.id) or {}).get("reply")
    return agent.id


def test_a_crash_before_the_runs_first_durable_commit_loses_the_take_and_nothing_else(server: OwnPostgres) -> None:
    agent_id = _an_agent_that_has_answered_once()
    epoch, owner = _lease(agent_id)
    assert owner == ""  # let go after the first run
    item = _chat(agent_id, "are you there?")  # stored: its commit was waited for
    server.freeze_wal_writer()
    take = lease_take_for_run(agent_id)
    assert take.lease is not None and take.lease.epoch == epoch + 1

    server.crash()
    _restart(server)

    assert _lease(agent_id) == (epoch, owner), "the take was not waited for on disk: the crash lost it"
    assert MailboxItem.objects.get(id=item.id).status == Status.QUEUED
    assert agent_id in agents_to_kick(timezone.now()), "nobody would wake the agent"
    result = loop.run_attention(agent_id)
    assert result.processed == 1 and result.items == [item.id]
    assert (chat_reply_for(item.id) or {}).get("reply")
    # The dead run's lease names the epoch the new run took again, but another owner.
    assert _lease(agent_id)[0] == take.lease.epoch
    with pytest.raises(StaleLease), fenced(take.lease):
        pass


class _Crashes(OfflineProvider):
    """The offline brain, whose first call crashes the database server (the worker dies
    with it: nothing the run writes afterwards can land)."""

    def __init__(self, server: OwnPostgres) -> None:
        super().__init__()
        self.server = server
        self.crashed = False

    def complete(self, **kwargs: Any) -> LLMResponse:
        if not self.crashed:
            self.crashed = True
            self.server.crash()
        return super().complete(**kwargs)


def test_the_claims_durable_commit_carries_the_take_and_the_next_run_answers_once(
    server: OwnPostgres, monkeypatch: pytest.MonkeyPatch
) -> None:
    agent_id = _an_agent_that_has_answered_once()
    epoch, _ = _lease(agent_id)
    monkeypatch.setitem(settings.MARKUS, "LEASE_SECONDS", 2.0)
    item = _chat(agent_id, "what is the status?")
    brain = _Crashes(server)
    set_provider_override(brain)
    server.freeze_wal_writer()
    with contextlib.suppress(DatabaseError):  # the run meets the dead server after the claim
        loop.run_attention(agent_id)
    assert brain.crashed
    set_provider_override(None)
    _restart(server)

    taken_epoch, dead_owner = _lease(agent_id)
    assert taken_epoch == epoch + 1 and dead_owner, "the claim's commit wrote the take's WAL with its own"
    assert MailboxItem.objects.get(id=item.id).status == Status.PROCESSING
    assert agent_id not in agents_to_kick(timezone.now()), "the dead run's lease is still live"
    wait_until(
        lambda: agent_id in agents_to_kick(timezone.now()),
        timeout=20,
        interval=0.2,
        what="the sweep to see the lease run out",
    )
    wait_until(lambda: loop.run_attention(agent_id).processed, timeout=20, interval=0.2, what="a run that answers")
    assert (chat_reply_for(item.id) or {}).get("reply")
    assert ChatMessage.objects.filter(reply_to=item.id).count() == 1
    assert MailboxItem.objects.get(id=item.id).status == Status.COMPLETED


def test_while_the_database_is_down_requests_are_answered_503_with_retry_after_then_served_again(
    server: OwnPostgres, monkeypatch: pytest.MonkeyPatch
) -> None:
    from django.contrib.auth.models import User
    from django.test import Client

    from markus.agents.services import user_token_create

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


def test_a_read_after_a_park_replaces_a_connection_that_died_meanwhile(server: OwnPostgres) -> None:
    from markus.agents.models import Agent
    from markus.core.db import on_a_live_connection

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
