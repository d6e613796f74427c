"""Restart recovery (seed section 17), with one change on purpose: a human's item in
flight at a crash is re-queued (at most twice), never dropped silently."""

from __future__ import annotations

import pytest

from mailbox import lifecycle, selectors
from mailbox.models import MailboxItem
from mailbox.registry import MESSAGE_SEPARATOR, MailboxType, Status
from mailbox.services import MAX_HUMAN_ATTEMPTS, mailbox_recover

from .conftest import statuses

T = MailboxType
pytestmark = [pytest.mark.django_db, pytest.mark.pg]
HUMAN = {"senderRole": "user", "senderId": "alice"}


def crash_while_processing(agent) -> str:
    """Claim the head of the queue and 'crash' (never complete it)."""
    return lifecycle.claim_next(agent_id=agent.id).id


def test_a_stale_processing_item_is_dropped_with_a_reason(agent, enqueue):
    item = enqueue(T.MENTION)
    crash_while_processing(agent)
    report = mailbox_recover(agent.id)
    assert statuses(item) == [Status.DROPPED]
    assert report.dropped == [item.id]
    assert "in flight" in item.drop_reason and item.completed_at is not None


def test_an_agents_comment_in_flight_is_dropped_like_any_stale_item(agent, enqueue):
    item = enqueue(T.TASK_COMMENT, taskId="t", metadata={"senderRole": "agent"})
    crash_while_processing(agent)
    mailbox_recover(agent.id)
    assert statuses(item) == [Status.DROPPED]


@pytest.mark.parametrize(
    "source_type,fields,metadata",
    [
        (T.HUMAN_CHAT, {}, {}),
        (T.TASK_COMMENT, {"taskId": "t"}, HUMAN),
        (T.REQUIREMENT_COMMENT, {"requirementId": "r"}, HUMAN),
    ],
)
def test_a_humans_item_in_flight_is_requeued_with_its_attempt_counted(agent, enqueue, source_type, fields, metadata):
    item = enqueue(source_type, metadata=metadata, **fields)
    crash_while_processing(agent)
    report = mailbox_recover(agent.id)
    assert report.requeued == [item.id] and report.dropped == []
    item.refresh_from_db()
    assert item.status == Status.QUEUED and item.attempts == 1
    assert item.started_at is None and item.lease_epoch is None
    assert lifecycle.claim_next(agent_id=agent.id).id == item.id


def test_a_humans_item_is_dropped_with_a_recorded_reason_after_two_attempts(agent, enqueue):
    assert MAX_HUMAN_ATTEMPTS == 2
    chat = enqueue(T.HUMAN_CHAT, content="are you there?")
    crash_while_processing(agent)
    mailbox_recover(agent.id)
    crash_while_processing(agent)
    report = mailbox_recover(agent.id)
    assert report.dropped == [chat.id]
    chat.refresh_from_db()
    assert chat.status == Status.DROPPED and chat.attempts == 2
    assert "human" in chat.drop_reason and "2 times" in chat.drop_reason


def test_queued_items_survive_recovery_in_their_order(agent, enqueue):
    items = [enqueue(T.MENTION, summary=f"m{i}") for i in range(3)] + [enqueue(T.HUMAN_CHAT)]
    mailbox_recover(agent.id)
    assert [i["id"] for i in selectors.queued_items(agent.id)] == [items[3].id] + [i.id for i in items[:3]]


def test_queued_heartbeats_collapse_to_the_newest(agent, enqueue):
    beats = [enqueue(T.HEARTBEAT, summary=f"beat {i}") for i in range(3)]
    assert statuses(*beats) == [Status.QUEUED, Status.DROPPED, Status.DROPPED]  # one queued, at enqueue
    # A queue written before that rule (or by hand) can still hold several: recovery collapses them.
    MailboxItem.objects.filter(id__in=[b.id for b in beats]).update(status=Status.QUEUED, drop_reason="")
    report = mailbox_recover(agent.id)
    assert statuses(*beats) == [Status.DROPPED, Status.DROPPED, Status.QUEUED]
    assert report.heartbeats_collapsed == [beats[0].id, beats[1].id]
    assert all("heartbeat" in b.drop_reason for b in beats[:2])


def test_a_single_heartbeat_is_kept(agent, enqueue):
    beat = enqueue(T.HEARTBEAT)
    assert mailbox_recover(agent.id).heartbeats_collapsed == []
    assert statuses(beat) == [Status.QUEUED]


@pytest.mark.parametrize("source_type,key", [(T.TASK_COMMENT, "taskId"), (T.REQUIREMENT_COMMENT, "requirementId")])
def test_queued_comments_on_one_entity_are_merged(agent, store, source_type, key):
    first = store(source_type, summary="Comment", content="one", **{key: "e1"})
    second = store(source_type, summary="Comment", content="two", **{key: "e1"})
    elsewhere = store(source_type, content="other", **{key: "e2"})
    report = mailbox_recover(agent.id)
    assert report.comments_merged == [second.id]
    assert statuses(first, second, elsewhere) == [Status.QUEUED, Status.MERGED, Status.QUEUED]
    assert second.merged_into_id == first.id
    assert first.payload["content"] == f"one{MESSAGE_SEPARATOR}two"
    assert first.payload["summary"] == "Comment (+1)"


def test_a_merge_at_recovery_escalates_the_survivors_priority(agent, store):
    store(T.TASK_COMMENT, taskId="t", priority=3, content="low")
    store(T.TASK_COMMENT, taskId="t", priority=0, content="urgent")
    store(T.TASK_COMMENT, taskId="t", priority=2, content="normal")
    mailbox_recover(agent.id)
    [survivor] = selectors.queued_items(agent.id)
    assert survivor["priority"] == 0
    assert sorted(survivor["payload"]["content"].split(MESSAGE_SEPARATOR)) == ["low", "normal", "urgent"]


def test_execution_triggers_are_never_merged_at_recovery(agent, store):
    plain = store(T.TASK_COMMENT, taskId="t", content="note")
    trigger = store(T.TASK_COMMENT, taskId="t", content="run", extra={"triggerExecution": True})
    beat_trigger = store(T.HEARTBEAT, extra={"triggerExecution": True})
    beat = store(T.HEARTBEAT)
    later_beat = store(T.HEARTBEAT)
    mailbox_recover(agent.id)
    assert statuses(plain, trigger, beat_trigger, beat, later_beat) == [
        Status.QUEUED,
        Status.QUEUED,
        Status.QUEUED,
        Status.DROPPED,
        Status.QUEUED,
    ]
    assert plain.payload["content"] == "note" and trigger.payload["content"] == "run"


def test_other_queued_items_are_left_alone(agent, store):
    rows = [store(t, taskId="t") for t in (T.MENTION, T.MENTION, T.A2A_MESSAGE, T.TASK_STATUS_UPDATE)]
    report = mailbox_recover(agent.id)
    assert report.comments_merged == [] and report.heartbeats_collapsed == []
    assert statuses(*rows) == [Status.QUEUED] * 4


def test_recovery_touches_only_this_agents_items(agent, other_agent, enqueue):
    theirs = enqueue(T.MENTION, agent_id=other_agent.id)
    lifecycle.claim_next(agent_id=other_agent.id)
    mailbox_recover(agent.id)
    assert statuses(theirs) == [Status.PROCESSING]


def test_a_requeued_human_comment_joins_the_comment_merge(agent, enqueue):
    human = enqueue(T.TASK_COMMENT, content="from alice", taskId="t", metadata=HUMAN)
    crash_while_processing(agent)
    later = enqueue(T.TASK_COMMENT, content="from an agent", taskId="t", metadata={"senderRole": "agent"})
    mailbox_recover(agent.id)
    assert statuses(human, later) == [Status.QUEUED, Status.MERGED]
    assert human.payload["content"] == f"from alice{MESSAGE_SEPARATOR}from an agent"
    assert human.priority == 0
