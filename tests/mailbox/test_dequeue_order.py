"""Dequeue: highest priority first (0 is critical), first in first out within a
priority — not newest first as in the TypeScript code."""

from __future__ import annotations

from datetime import timedelta

import pytest
from django.utils import timezone

from mailbox import lifecycle, selectors
from mailbox.models import MailboxItem
from mailbox.registry import MailboxType, Status
from markus.agents.models import Agent

T = MailboxType
pytestmark = [pytest.mark.django_db, pytest.mark.pg]


def drain(agent_id: str) -> list[str]:
    out = []
    while (item := lifecycle.claim_next(agent_id=agent_id)) is not None:
        out.append(item.id)
        lifecycle.complete(item.id)
    return out


def test_the_highest_priority_item_is_dequeued_first(agent, enqueue):
    low = enqueue(T.HEARTBEAT)
    background = enqueue(T.MEMORY_CONSOLIDATION)
    critical = enqueue(T.HUMAN_CHAT)
    high = enqueue(T.MENTION)
    assert drain(agent.id) == [critical.id, high.id, low.id, background.id]


def test_items_of_equal_priority_come_out_first_in_first_out_not_newest_first(agent, enqueue):
    items = [enqueue(T.MENTION, summary=f"m{i}") for i in range(6)]
    assert drain(agent.id) == [i.id for i in items]


def test_priority_beats_age(agent, enqueue):
    old_low = enqueue(T.DAILY_REPORT)
    new_high = enqueue(T.SYSTEM_EVENT)
    assert drain(agent.id) == [new_high.id, old_low.id]


def test_items_queued_at_the_same_instant_are_ordered_by_id(agent, enqueue):
    items = [enqueue(T.MENTION, summary=f"m{i}") for i in range(4)]
    MailboxItem.objects.filter(agent=agent).update(queued_at=timezone.now())
    assert drain(agent.id) == sorted(i.id for i in items)


def test_an_older_item_stored_later_still_comes_first(agent, enqueue):
    first = enqueue(T.MENTION)
    second = enqueue(T.MENTION)
    MailboxItem.objects.filter(id=second.id).update(queued_at=first.queued_at - timedelta(seconds=1))
    assert drain(agent.id) == [second.id, first.id]


def test_a_claim_marks_the_item_processing_with_a_start_time_and_an_attempt(agent, enqueue):
    enqueue(T.MENTION)
    item = lifecycle.claim_next(agent_id=agent.id, epoch=7)
    item.refresh_from_db()
    assert item.status == Status.PROCESSING
    assert item.started_at is not None and item.attempts == 1 and item.lease_epoch == 7


def test_an_empty_queue_yields_nothing(agent):
    assert lifecycle.claim_next(agent_id=agent.id) is None


def test_only_queued_items_of_this_agent_are_claimed(agent, other_agent, enqueue):
    enqueue(T.HUMAN_CHAT, agent_id=other_agent.id)
    deferred = enqueue(T.HUMAN_CHAT)
    deferred_row = MailboxItem.objects.filter(id=deferred.id)
    deferred_row.update(status=Status.DEFERRED)
    mine = enqueue(T.HEARTBEAT)
    assert drain(agent.id) == [mine.id]
    assert deferred_row.get().status == Status.DEFERRED
    assert MailboxItem.objects.get(agent=other_agent).status == Status.QUEUED


def test_a_paused_agent_claims_nothing_the_loop_begins_only_while_it_runs(agent, enqueue):
    from attention.lease import AgentNotRunning, fenced, lease_take

    item = enqueue(T.MENTION)
    lease = lease_take(agent.id)
    Agent.objects.filter(id=agent.id).update(status=Agent.RunStatus.PAUSED)
    with pytest.raises(AgentNotRunning), fenced(lease, running=True) as tx:
        lifecycle.claim_next(agent_id=agent.id, epoch=tx.epoch)
    item.refresh_from_db()
    assert item.status == Status.QUEUED and item.attempts == 0


def test_a_requeued_item_goes_back_to_its_place_not_to_the_end(agent, enqueue):
    first = enqueue(T.MENTION)
    second = enqueue(T.MENTION)
    claimed = lifecycle.claim_next(agent_id=agent.id)
    assert claimed.id == first.id
    assert lifecycle.requeue(first.id)
    assert drain(agent.id) == [first.id, second.id]


def test_completing_needs_the_item_to_be_processing(agent, enqueue):
    item = enqueue(T.MENTION)
    assert lifecycle.complete(item.id) is False
    lifecycle.claim_next(agent_id=agent.id)
    assert lifecycle.complete(item.id) is True
    item.refresh_from_db()
    assert item.status == Status.COMPLETED and item.completed_at is not None


def test_a_fenced_complete_from_another_epoch_changes_nothing(agent, enqueue):
    item = enqueue(T.MENTION)
    lifecycle.claim_next(agent_id=agent.id, epoch=3)
    assert lifecycle.complete(item.id, epoch=2, fenced=True) is False
    assert lifecycle.complete(item.id, epoch=3, fenced=True) is True


def test_the_queued_listing_is_in_dequeue_order(agent, enqueue):
    a = enqueue(T.HEARTBEAT)
    b = enqueue(T.MENTION)
    c = enqueue(T.HUMAN_CHAT)
    d = enqueue(T.MENTION)
    listed = [i["id"] for i in selectors.queued_items(agent.id)]
    assert listed == [c.id, b.id, d.id, a.id]
    assert listed == drain(agent.id)
