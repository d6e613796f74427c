"""Heartbeat collapse (upstream's rule): a heartbeat that arrives while one is queued is
discarded (dropped, its reason naming the queued one), and nothing is appended to the
queued one; one that arrives while a heartbeat is being processed is dropped as a
duplicate of it. The reason is in the item's history (``dropReason``)."""

from __future__ import annotations

import pytest

from mailbox import lifecycle
from mailbox.models import MailboxItem
from mailbox.registry import MailboxType as T
from mailbox.registry import Status

pytestmark = pytest.mark.django_db

BEAT = {"summary": "Heartbeat check-in", "metadata": {"senderRole": "system"}}


def _beat(enqueue, content="Heartbeat check-in. Your heartbeat comes every 6 h"):
    return enqueue(T.HEARTBEAT, content=content, **BEAT)


@pytest.mark.pg
def test_a_heartbeat_arriving_while_one_is_queued_is_discarded_and_nothing_is_appended(agent, enqueue):
    first = _beat(enqueue)
    before = MailboxItem.objects.get(id=first.id)
    second = _beat(enqueue, content="Heartbeat check-in. Your heartbeat comes every 2 h")
    assert second.status == Status.DROPPED
    assert first.id in second.drop_reason and "queued" in second.drop_reason
    kept = MailboxItem.objects.get(id=first.id)
    assert kept.status == Status.QUEUED
    assert kept.payload == before.payload  # no "(+1)", no second text
    assert kept.priority == before.priority
    assert MailboxItem.objects.get(id=second.id).status == Status.DROPPED
    assert MailboxItem.objects.filter(merged_into=first).count() == 0


@pytest.mark.pg
def test_many_heartbeats_leave_the_first_queued_and_the_rest_dropped(agent, enqueue):
    first = _beat(enqueue)
    later = [_beat(enqueue) for _ in range(3)]
    assert [MailboxItem.objects.get(id=b.id).status for b in later] == [Status.DROPPED] * 3
    assert MailboxItem.objects.filter(agent=agent, source_type=T.HEARTBEAT, status=Status.QUEUED).get() == first
    assert MailboxItem.objects.get(id=first.id).summary == "Heartbeat check-in"


@pytest.mark.pg
def test_a_heartbeat_arriving_while_one_is_processing_is_dropped_as_its_duplicate(agent, enqueue):
    running = _beat(enqueue)
    assert lifecycle.claim(running.id) is not None
    duplicate = _beat(enqueue)
    assert duplicate.status == Status.DROPPED
    assert "duplicate" in duplicate.drop_reason and running.id in duplicate.drop_reason
    assert not MailboxItem.objects.filter(agent=agent, source_type=T.HEARTBEAT, status=Status.QUEUED).exists()


def test_the_discard_is_shown_in_the_mailbox_history(agent, enqueue, alice_client):
    first = _beat(enqueue)
    second = _beat(enqueue)
    history = alice_client.get(f"/api/agents/{agent.id}/mailbox").json()["history"]
    shown = {h["id"]: h for h in history}
    assert shown[second.id]["status"] == Status.DROPPED
    assert first.id in shown[second.id]["dropReason"]


def test_a_heartbeat_after_the_last_one_finished_is_queued(agent, enqueue):
    done = _beat(enqueue)
    lifecycle.claim(done.id)
    lifecycle.complete(done.id)
    fresh = _beat(enqueue)
    assert fresh.status == Status.QUEUED


def test_other_types_of_one_group_still_merge_with_their_text(agent, enqueue):
    """Only the heartbeat is discarded; a burst on one bus stream keeps every message."""
    a = enqueue(T.A2A_MESSAGE, content="first", extra={"channelKey": "stm_1"})
    b = enqueue(T.A2A_MESSAGE, content="second", extra={"channelKey": "stm_1"})
    assert b.status == Status.MERGED and b.merged_into_id == a.id
    assert "second" in MailboxItem.objects.get(id=a.id).content
