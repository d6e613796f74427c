"""Beginning an item: the fenced transaction's attention UPDATE (the fence check) and
the item's claim go together (``fenced(..., claim=item_id)``; on PostgreSQL one
statement, a CTE). The fence keeps its meaning: a holder whose epoch moved on claims
nothing and gets StaleLease; a stopped agent's holder claims nothing and gets
AgentNotRunning; an item no longer queued is not claimed while the fence holds."""

from __future__ import annotations

import threading

import pytest
from django.db import OperationalError, connection, transaction
from django.test.utils import CaptureQueriesContext
from django.utils import timezone

from attention.lease import AgentNotRunning, LeaseBusy, StaleLease, fenced, lease_take, lease_take_over
from attention.models import AgentAttention, AttentionState
from mailbox.models import MailboxItem
from mailbox.registry import MailboxType as T
from mailbox.registry import Status
from mailbox.services import mailbox_enqueue
from markus.agents.models import Agent

pytestmark = [pytest.mark.pg, pytest.mark.django_db(transaction=True)]


@pytest.fixture(autouse=True)
def offline_brain(offline_loop):
    offline_loop(WAKE_ON_ENQUEUE=False)


def enqueue(agent_id: str, summary: str = "one") -> str:
    return mailbox_enqueue(
        agent_id=agent_id, source_type=T.SYSTEM_EVENT, payload={"summary": summary, "content": summary}
    ).id


def focused() -> dict:
    return {"state": AttentionState.FOCUSED, "focus_started_at": timezone.now()}


def untouched(item_id: str) -> None:
    item = MailboxItem.objects.get(id=item_id)
    assert (item.status, item.lease_epoch, item.attempts, item.started_at) == (Status.QUEUED, None, 0, None)


def test_the_fence_claims_the_item_and_writes_the_attention_state(agent):
    lease = lease_take(agent.id)
    assert lease is not None
    item_id = enqueue(agent.id)
    with fenced(lease, running=True, claim=item_id, current_item_id=item_id, **focused()) as tx:
        assert tx.claimed is not None
        assert tx.claimed.id == item_id
        assert tx.claimed.status == Status.PROCESSING
    item = MailboxItem.objects.get(id=item_id)
    assert (item.status, item.lease_epoch, item.attempts) == (Status.PROCESSING, lease.epoch, 1)
    att = AgentAttention.objects.get(agent_id=agent.id)
    assert (att.state, att.current_item_id) == (AttentionState.FOCUSED, item_id)


def test_a_stale_holder_claims_nothing(agent):
    stale = lease_take(agent.id)
    assert stale is not None
    item_id = enqueue(agent.id)
    assert lease_take_over(agent.id, epoch=stale.epoch) is not None  # its epoch moved on
    with pytest.raises(StaleLease), fenced(stale, running=True, claim=item_id, **focused()):
        pytest.fail("a stale holder's fenced block ran")
    untouched(item_id)
    assert AgentAttention.objects.get(agent_id=agent.id).state == AttentionState.IDLE


def test_a_stopped_agents_holder_claims_nothing(agent):
    lease = lease_take(agent.id)
    assert lease is not None
    item_id = enqueue(agent.id)
    Agent.objects.filter(id=agent.id).update(status=Agent.RunStatus.STOPPED)
    with pytest.raises(AgentNotRunning), fenced(lease, running=True, claim=item_id, **focused()):
        pytest.fail("a stopped agent's fenced block ran")
    untouched(item_id)


def test_an_item_gone_meanwhile_is_not_claimed_and_the_fence_holds(agent):
    lease = lease_take(agent.id)
    assert lease is not None
    item_id = enqueue(agent.id)
    MailboxItem.objects.filter(id=item_id).update(status=Status.DROPPED)
    with fenced(lease, running=True, claim=item_id, **focused()) as tx:
        assert tx.claimed is None
    assert MailboxItem.objects.get(id=item_id).status == Status.DROPPED
    assert AgentAttention.objects.get(agent_id=agent.id).state == AttentionState.FOCUSED


@pytest.mark.postgres  # one statement on PostgreSQL; SQLite sends two (no round trips there)
def test_on_postgresql_the_fence_and_the_claim_are_one_statement(agent):
    assert connection.vendor == "postgresql", "routed by its marker to the PostgreSQL pass"
    lease = lease_take(agent.id)
    assert lease is not None
    item_id = enqueue(agent.id)
    with CaptureQueriesContext(connection) as ctx, fenced(lease, running=True, claim=item_id, **focused()):
        pass
    sent = [q["sql"] for q in ctx.captured_queries if q["sql"] not in ("BEGIN", "COMMIT")]
    assert len(sent) == 1, sent
    assert 'UPDATE "agent_attention"' in sent[0] and 'UPDATE "mailbox_items"' in sent[0]


@pytest.mark.postgres  # row locks and lock_timeout of PostgreSQL
@pytest.mark.parametrize("locked", ["attention", "item"])
def test_on_postgresql_a_lock_not_granted_in_time_is_told_apart(agent, locked):
    """The attention row held by another session: LeaseBusy, as before. The item's row
    held: the lock conflict itself, as the claim sent alone in the block raised it (the
    loop ends the run as a lost lease and lets go)."""
    assert connection.vendor == "postgresql", "routed by its marker to the PostgreSQL pass"
    lease = lease_take(agent.id)
    assert lease is not None
    item_id = enqueue(agent.id)
    held, release = threading.Event(), threading.Event()

    def holder() -> None:
        try:
            with transaction.atomic():
                rows = (
                    AgentAttention.objects.filter(agent_id=agent.id)
                    if locked == "attention"
                    else MailboxItem.objects.filter(id=item_id)
                )
                list(rows.select_for_update())
                held.set()
                release.wait(30)
        finally:
            connection.close()

    t = threading.Thread(target=holder)
    t.start()
    try:
        assert held.wait(10)
        refused = pytest.raises((OperationalError, LeaseBusy))
        with refused as raised, fenced(lease, running=True, claim=item_id, **focused()):
            pytest.fail("the fenced block ran without its locks")
    finally:
        release.set()
        t.join(10)
    assert isinstance(raised.value, LeaseBusy if locked == "attention" else OperationalError), raised.value
    untouched(item_id)
    assert AgentAttention.objects.get(agent_id=agent.id).state == AttentionState.IDLE
