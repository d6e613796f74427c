"""Defer with an optional time, and resurfacing of due items (seed section 22)."""

from __future__ import annotations

from datetime import timedelta

import pytest
from django.utils import timezone

from mailbox import lifecycle, selectors
from mailbox.models import MailboxItem
from mailbox.registry import MailboxType, Status

from .conftest import statuses

T = MailboxType
pytestmark = pytest.mark.django_db


def test_a_deferred_item_leaves_the_queue(agent, enqueue):
    item = enqueue(T.MENTION)
    assert lifecycle.defer(item.id) is True
    assert statuses(item) == [Status.DEFERRED]
    assert lifecycle.claim_next(agent_id=agent.id) is None


def test_an_item_deferred_without_a_time_resurfaces_at_the_next_idle_cycle(agent, enqueue):
    item = enqueue(T.MENTION)
    lifecycle.defer(item.id)
    assert lifecycle.resurface_due(agent.id) == 1
    assert statuses(item) == [Status.QUEUED]
    assert lifecycle.claim_next(agent_id=agent.id).id == item.id


def test_an_item_deferred_until_later_stays_deferred_until_its_time_comes(agent, enqueue):
    item = enqueue(T.MENTION)
    until = timezone.now() + timedelta(hours=1)
    lifecycle.defer(item.id, until=until)
    item.refresh_from_db()
    assert item.deferred_until == until
    assert lifecycle.resurface_due(agent.id) == 0
    assert lifecycle.resurface_due(agent.id, now=until - timedelta(seconds=1)) == 0
    assert lifecycle.resurface_due(agent.id, now=until) == 1
    item.refresh_from_db()
    assert item.status == Status.QUEUED and item.deferred_until is None


def test_only_due_items_resurface(agent, enqueue):
    now = timezone.now()
    past = enqueue(T.MENTION, summary="past")
    future = enqueue(T.MENTION, summary="future")
    untimed = enqueue(T.MENTION, summary="untimed")
    lifecycle.defer(past.id, until=now - timedelta(minutes=5))
    lifecycle.defer(future.id, until=now + timedelta(minutes=5))
    lifecycle.defer(untimed.id)
    assert lifecycle.resurface_due(agent.id, now=now) == 2
    assert statuses(past, future, untimed) == [Status.QUEUED, Status.DEFERRED, Status.QUEUED]


def test_an_item_waiting_for_an_approval_is_not_resurfaced(agent, enqueue):
    parked = enqueue(T.HUMAN_CHAT)
    MailboxItem.objects.filter(id=parked.id).update(marks={"waitingForApproval": True})
    lifecycle.defer(parked.id)
    assert lifecycle.resurface_due(agent.id, now=timezone.now() + timedelta(days=30)) == 0
    assert statuses(parked) == [Status.DEFERRED]


@pytest.mark.parametrize("marks", [{"waitingForApproval": False}, {"other": 1}, {}])
def test_an_item_not_waiting_for_an_approval_is_resurfaced(agent, enqueue, marks):
    item = enqueue(T.MENTION, metadata={"waitingForApproval": True})  # a caller's metadata parks nothing
    MailboxItem.objects.filter(id=item.id).update(marks=marks)
    lifecycle.defer(item.id)
    assert lifecycle.resurface_due(agent.id) == 1
    assert statuses(item) == [Status.QUEUED]


def test_a_resurfaced_item_keeps_its_place_in_the_queue(agent, enqueue):
    older = enqueue(T.MENTION)
    newer = enqueue(T.MENTION)
    lifecycle.defer(older.id)
    lifecycle.resurface_due(agent.id)
    assert [i["id"] for i in selectors.queued_items(agent.id)] == [older.id, newer.id]


def test_resurfacing_touches_only_this_agents_items(agent, other_agent, enqueue):
    theirs = enqueue(T.MENTION, agent_id=other_agent.id)
    lifecycle.defer(theirs.id)
    assert lifecycle.resurface_due(agent.id) == 0
    assert statuses(theirs) == [Status.DEFERRED]


def test_an_item_in_flight_can_be_deferred(agent, enqueue):
    item = enqueue(T.MENTION)
    lifecycle.claim_next(agent_id=agent.id)
    assert lifecycle.defer(item.id) is True
    assert statuses(item) == [Status.DEFERRED]


def test_a_finished_item_cannot_be_deferred(agent, enqueue):
    item = enqueue(T.MENTION)
    lifecycle.claim_next(agent_id=agent.id)
    lifecycle.complete(item.id)
    assert lifecycle.defer(item.id) is False
    assert statuses(item) == [Status.COMPLETED]
