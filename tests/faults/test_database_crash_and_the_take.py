"""The run's take of the lease is the one commit the loop does not wait for on disk
(``synchronous_commit`` off, ``attention.lease_take``): the claim that follows it is.
These tests crash a PostgreSQL server of their own (``kill -9`` of every process of it,
the WAL writer frozen beforehand so a commit not waited for is still in memory) and
start it again, to hold what that choice promises (what a request meets meanwhile:
``test_requests_while_the_database_is_down.py``):

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
from datetime import timedelta
from typing import Any

import pytest
from django.conf import settings
from django.db import DatabaseError, connections
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

from .harness import wait_until
from .own_postgres import OwnPostgres

pytestmark = [pytest.mark.postgres, pytest.mark.slow, pytest.mark.faults]


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


def test_a_crash_before_the_runs_first_durable_commit_loses_the_take_and_nothing_else(
    orm_on_own_server: OwnPostgres,
) -> None:
    server = orm_on_own_server
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
    orm_on_own_server: OwnPostgres, monkeypatch: pytest.MonkeyPatch
) -> None:
    server = orm_on_own_server
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
    # Read at a moment the lease still covers, not at "now": the restart alone may outlast
    # the 2 s lease on a loaded machine (it did, with the other passes beside this one).
    expires = AgentAttention.objects.get(agent_id=agent_id).lease_expires_at
    assert expires is not None
    assert agent_id not in agents_to_kick(expires - timedelta(milliseconds=100)), "the dead run's lease is not live"
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
