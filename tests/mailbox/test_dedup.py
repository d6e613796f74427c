"""Enqueue-time dedup exactly as seed section 14."""

from __future__ import annotations

import logging

import pytest

from attention.selectors import timeline
from mailbox import lifecycle, selectors
from mailbox.models import MailboxItem
from mailbox.registry import MESSAGE_SEPARATOR, MailboxType, Status

from .conftest import statuses

T = MailboxType
pytestmark = pytest.mark.django_db

GROUPS = [
    (T.TASK_COMMENT, {"taskId": "tsk_1"}, {"taskId": "tsk_2"}),
    (T.REQUIREMENT_COMMENT, {"requirementId": "req_1"}, {"requirementId": "req_2"}),
    (T.A2A_MESSAGE, {"extra": {"channelKey": "ch_1"}}, {"extra": {"channelKey": "ch_2"}}),
]


def test_the_separator_is_the_seeds():
    assert MESSAGE_SEPARATOR == "\n\n---\n\n"


@pytest.mark.parametrize("source_type,key,_other", GROUPS)
def test_a_second_item_with_the_same_key_is_merged_into_the_queued_one(agent, enqueue, source_type, key, _other):
    first = enqueue(source_type, summary="First", content="one", **key)
    second = enqueue(source_type, summary="Second", content="two", **key)
    first.refresh_from_db()
    second.refresh_from_db()
    assert first.status == Status.QUEUED
    if source_type == T.A2A_MESSAGE:  # agent messages name each sender (none given here)
        assert first.payload["content"] == "unknown: one\n\n---\n\nunknown: two"
    else:
        assert first.payload["content"] == "one\n\n---\n\ntwo"
    assert first.payload["summary"] == "First (+1)"
    assert second.status == Status.MERGED and second.merged_into_id == first.id
    assert selectors.queue_depth(agent.id) == 1


@pytest.mark.parametrize("source_type,key,other", GROUPS)
def test_items_with_different_keys_stay_apart(agent, enqueue, source_type, key, other):
    enqueue(source_type, **key)
    enqueue(source_type, **other)
    assert selectors.queue_depth(agent.id) == 2


def test_five_rapid_comments_become_one_item_with_all_five_contents_in_order(agent, enqueue):
    items = [enqueue(T.TASK_COMMENT, summary="Comment on X", content=f"c{i}", taskId="tsk_x") for i in range(5)]
    head = items[0]
    head.refresh_from_db()
    assert head.payload["content"] == MESSAGE_SEPARATOR.join(f"c{i}" for i in range(5))
    assert head.payload["summary"] == "Comment on X (+4)"
    assert statuses(*items[1:]) == [Status.MERGED] * 4
    assert {i.merged_into_id for i in items[1:]} == {head.id}


def test_comments_without_a_key_never_merge(agent, enqueue):
    enqueue(T.TASK_COMMENT, content="a")
    enqueue(T.TASK_COMMENT, content="b", taskId="")
    enqueue(T.A2A_MESSAGE, content="c")
    enqueue(T.A2A_MESSAGE, content="d", extra={})
    assert selectors.queue_depth(agent.id) == 4


def test_groups_are_per_type_so_a_task_and_a_requirement_comment_with_one_id_stay_apart(agent, enqueue):
    enqueue(T.TASK_COMMENT, taskId="same", requirementId="same")
    enqueue(T.REQUIREMENT_COMMENT, taskId="same", requirementId="same")
    enqueue(T.A2A_MESSAGE, taskId="same", extra={"channelKey": "same"})
    enqueue(T.MENTION, taskId="same")
    enqueue(T.MENTION, taskId="same")
    assert selectors.queue_depth(agent.id) == 5


def test_an_a2a_message_merges_by_channel_key_not_by_task_id(agent, enqueue):
    enqueue(T.A2A_MESSAGE, taskId="tsk_1", extra={"channelKey": "ch_a"})
    enqueue(T.A2A_MESSAGE, taskId="tsk_1", extra={"channelKey": "ch_b"})
    assert selectors.queue_depth(agent.id) == 2


def test_merges_are_per_agent(agent, other_agent, enqueue):
    enqueue(T.TASK_COMMENT, taskId="tsk_1")
    theirs = enqueue(T.TASK_COMMENT, taskId="tsk_1", agent_id=other_agent.id)
    assert statuses(theirs) == [Status.QUEUED]


def test_a_channel_merge_carries_a_structured_messages_array(agent, enqueue):
    first = enqueue(
        T.A2A_MESSAGE, content="hello", extra={"channelKey": "ch"}, metadata={"senderId": "agt_a", "senderName": "Ann"}
    )
    enqueue(
        T.A2A_MESSAGE,
        content="hi back",
        extra={"channelKey": "ch"},
        metadata={"senderId": "agt_b", "senderName": "Ben"},
    )
    enqueue(T.A2A_MESSAGE, content="and me", extra={"channelKey": "ch"}, metadata={"senderId": "agt_c"})
    first.refresh_from_db()
    messages = first.payload["messages"]
    assert [(m["senderId"], m["senderName"], m["content"]) for m in messages] == [
        ("agt_a", "Ann", "hello"),
        ("agt_b", "Ben", "hi back"),
        ("agt_c", "agt_c", "and me"),
    ]
    assert all(isinstance(m["timestamp"], str) and m["timestamp"] for m in messages)
    assert first.payload["summary"].endswith("(+2)")


def test_a_comment_merge_carries_no_messages_array(agent, enqueue):
    first = enqueue(T.TASK_COMMENT, taskId="t")
    enqueue(T.TASK_COMMENT, taskId="t")
    first.refresh_from_db()
    assert "messages" not in first.payload


def test_an_item_being_processed_does_not_absorb(agent, enqueue):
    first = enqueue(T.TASK_COMMENT, content="one", taskId="t")
    assert lifecycle.claim_next(agent_id=agent.id).id == first.id
    second = enqueue(T.TASK_COMMENT, content="two", taskId="t")
    first.refresh_from_db()
    assert first.payload["content"] == "one"
    assert statuses(second) == [Status.QUEUED]


def test_a_deferred_item_does_not_absorb(agent, enqueue):
    first = enqueue(T.TASK_COMMENT, content="one", taskId="t")
    lifecycle.defer(first.id)
    second = enqueue(T.TASK_COMMENT, content="two", taskId="t")
    assert statuses(first, second) == [Status.DEFERRED, Status.QUEUED]


def test_a_new_item_merges_into_the_oldest_queued_item_of_its_group(agent, enqueue):
    first = enqueue(T.TASK_COMMENT, content="one", taskId="t")
    lifecycle.claim_next(agent_id=agent.id)
    second = enqueue(T.TASK_COMMENT, content="two", taskId="t")
    lifecycle.requeue(first.id)
    third = enqueue(T.TASK_COMMENT, content="three", taskId="t")
    third.refresh_from_db()
    assert third.merged_into_id == first.id
    assert statuses(second) == [Status.QUEUED]


@pytest.mark.parametrize(
    "source_type,key",
    [
        (T.TASK_COMMENT, {"taskId": "t"}),
        (T.A2A_MESSAGE, {"extra": {"channelKey": "ch"}}),
    ],
)
def test_an_incoming_execution_trigger_is_never_merged(agent, enqueue, source_type, key):
    enqueue(source_type, **key)
    extra = {**key.get("extra", {}), "triggerExecution": True}
    trigger = enqueue(source_type, **{**key, "extra": extra})
    assert statuses(trigger) == [Status.QUEUED]
    assert selectors.queue_depth(agent.id) == 2


@pytest.mark.parametrize(
    "source_type,key",
    [
        (T.TASK_COMMENT, {"taskId": "t"}),
        (T.A2A_MESSAGE, {"extra": {"channelKey": "ch"}}),
    ],
)
def test_a_queued_execution_trigger_never_absorbs(agent, enqueue, source_type, key):
    extra = {**key.get("extra", {}), "triggerExecution": True}
    trigger = enqueue(source_type, content="run", **{**key, "extra": extra})
    later = enqueue(source_type, content="note", **key)
    trigger.refresh_from_db()
    assert trigger.payload["content"] == "run"
    assert statuses(later) == [Status.QUEUED]


@pytest.mark.parametrize(
    "source_type,key",
    [
        (T.TASK_STATUS_UPDATE, {"taskId": "t"}),
        (T.REQUIREMENT_UPDATE, {"requirementId": "r"}),
    ],
)
def test_status_updates_never_merge(agent, enqueue, source_type, key):
    blocked = enqueue(source_type, summary="blocked", **key)
    resumed = enqueue(source_type, summary="resumed", **key)
    assert statuses(blocked, resumed) == [Status.QUEUED, Status.QUEUED]
    assert blocked.payload["summary"] == "blocked"


def test_the_absorbed_item_is_kept_as_a_merged_row_that_the_timeline_shows(agent, enqueue):
    first = enqueue(T.TASK_COMMENT, summary="A", taskId="t")
    second = enqueue(T.TASK_COMMENT, summary="B", taskId="t")
    row = MailboxItem.objects.get(id=second.id)
    assert row.payload["summary"] == "B" and row.completed_at is not None
    history = {h["id"]: h for h in timeline(agent.id)["history"]}
    assert history[second.id]["status"] == Status.MERGED
    assert history[second.id]["mergedInto"] == first.id
    assert list(first.absorbed.values_list("id", flat=True)) == [second.id]


def test_a_merge_escalates_the_survivors_priority(agent, enqueue):
    agents_comment = enqueue(T.TASK_COMMENT, taskId="t", metadata={"senderRole": "agent"})
    enqueue(T.TASK_COMMENT, taskId="t", metadata={"senderRole": "user"})
    agents_comment.refresh_from_db()
    assert agents_comment.priority == 0


def test_a_merge_never_lowers_the_survivors_priority(agent, enqueue):
    urgent = enqueue(T.TASK_COMMENT, taskId="t", priority=1)
    enqueue(T.TASK_COMMENT, taskId="t", priority=4)
    urgent.refresh_from_db()
    assert urgent.priority == 1


def test_the_merge_is_logged_for_traceability(agent, enqueue, caplog):
    first = enqueue(T.TASK_COMMENT, taskId="t")
    with caplog.at_level(logging.INFO, logger="mailbox.services"):
        second = enqueue(T.TASK_COMMENT, taskId="t")
    assert f"{second.id} merged into {first.id}" in caplog.text
