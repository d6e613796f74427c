"""Enqueue: type validation, default priority from the registry, per-item override,
a human's comment first, payload and metadata stored as JSON."""

from __future__ import annotations

import json

import pytest
from django.db import connection

from mailbox.models import MailboxItem
from mailbox.registry import MAILBOX_TYPE_REGISTRY, MailboxType, Priority, Status
from mailbox.services import MailboxError, mailbox_enqueue

T = MailboxType
pytestmark = pytest.mark.django_db


@pytest.mark.parametrize("bad_type", ["bogus", "", None, 3, "Human_Chat"])
def test_an_unknown_type_is_refused_with_a_message_and_stores_nothing(agent, bad_type):
    with pytest.raises(MailboxError, match="unknown sourceType"):
        mailbox_enqueue(agent_id=agent.id, source_type=bad_type, payload={"summary": "x"})
    assert MailboxItem.objects.count() == 0


@pytest.mark.parametrize("bad_payload", [None, [], "text", 7])
def test_a_payload_that_is_not_an_object_is_refused(agent, bad_payload):
    with pytest.raises(MailboxError, match="payload must be an object"):
        mailbox_enqueue(agent_id=agent.id, source_type=T.MENTION, payload=bad_payload)
    assert MailboxItem.objects.count() == 0


@pytest.mark.parametrize("bad_priority", [-1, 5, True, False, "1", 1.0])
def test_a_priority_outside_zero_to_four_or_not_an_integer_is_refused(agent, bad_priority):
    with pytest.raises(MailboxError, match="priority must be an integer"):
        mailbox_enqueue(agent_id=agent.id, source_type=T.MENTION, payload={}, priority=bad_priority)
    assert MailboxItem.objects.count() == 0


def test_metadata_that_is_not_an_object_is_refused(agent):
    with pytest.raises(MailboxError, match="metadata must be an object"):
        mailbox_enqueue(agent_id=agent.id, source_type=T.MENTION, payload={}, metadata=["x"])


@pytest.mark.parametrize("field,value", [("summary", 3), ("content", ["a"]), ("extra", "x")])
def test_payload_fields_of_the_wrong_shape_are_refused(agent, field, value):
    with pytest.raises(MailboxError, match=f"payload.{field}"):
        mailbox_enqueue(agent_id=agent.id, source_type=T.MENTION, payload={field: value})


@pytest.mark.parametrize("source_type", list(MAILBOX_TYPE_REGISTRY))
def test_each_type_is_enqueued_at_its_registry_default_priority(enqueue, source_type):
    item = enqueue(source_type)
    item.refresh_from_db()
    assert item.status == Status.QUEUED
    assert item.priority == MAILBOX_TYPE_REGISTRY[source_type].default_priority


def test_a_per_item_priority_overrides_the_registry_default(enqueue):
    item = enqueue(T.MEMORY_CONSOLIDATION, priority=Priority.CRITICAL)
    item.refresh_from_db()
    assert item.priority == 0


@pytest.mark.parametrize("source_type,key", [(T.TASK_COMMENT, "taskId"), (T.REQUIREMENT_COMMENT, "requirementId")])
def test_a_comment_written_by_a_human_is_a_user_interaction_enqueued_at_priority_zero(enqueue, source_type, key):
    item = enqueue(source_type, metadata={"senderRole": "user", "senderId": "alice"}, **{key: "x1"})
    item.refresh_from_db()
    assert item.priority == Priority.CRITICAL
    assert item.is_user_interaction


@pytest.mark.parametrize("role", ["agent", None])
def test_a_comment_written_by_an_agent_keeps_the_registry_default(enqueue, role):
    item = enqueue(T.TASK_COMMENT, metadata={"senderRole": role} if role else {}, taskId="t1")
    item.refresh_from_db()
    assert item.priority == Priority.NORMAL
    assert not item.is_user_interaction


def test_an_explicit_priority_wins_over_the_human_comment_rule(enqueue):
    item = enqueue(T.TASK_COMMENT, metadata={"senderRole": "user"}, priority=3, taskId="t1")
    item.refresh_from_db()
    assert item.priority == 3


def test_a_human_role_on_a_non_comment_type_does_not_change_its_priority(enqueue):
    item = enqueue(T.A2A_MESSAGE, metadata={"senderRole": "user"})
    assert item.priority == Priority.NORMAL


def test_payload_and_metadata_are_stored_as_json_and_read_back_unchanged(enqueue):
    payload_extra = {"channelKey": "ch-1", "nested": {"list": [1, 2.5, None, True], "ünï": "—✓"}}
    metadata = {"senderId": "alice", "senderName": "Alice", "tags": ["a", "b"], "n": 3}
    item = enqueue(T.A2A_MESSAGE, summary="Hi", content="line1\nline2", extra=payload_extra, metadata=metadata)
    stored = MailboxItem.objects.get(id=item.id)
    assert stored.payload == {"summary": "Hi", "content": "line1\nline2", "extra": payload_extra}
    assert stored.metadata == metadata
    with connection.cursor() as cursor:
        cursor.execute("SELECT payload, metadata FROM mailbox_items WHERE id = %s", [item.id])
        raw_payload, raw_metadata = cursor.fetchone()
    as_json = [json.loads(v) if isinstance(v, str) else v for v in (raw_payload, raw_metadata)]
    assert as_json == [stored.payload, metadata]


def test_a_new_item_is_queued_with_a_queued_time_and_nothing_else_set(enqueue):
    item = enqueue(T.MENTION)
    item.refresh_from_db()
    assert item.id.startswith("mbx_")
    assert item.status == Status.QUEUED and item.queued_at is not None
    assert item.started_at is None and item.completed_at is None and item.merged_into_id is None
    assert item.attempts == 0 and item.drop_reason == ""


def test_missing_metadata_is_stored_as_an_empty_object(agent):
    item = mailbox_enqueue(agent_id=agent.id, source_type=T.MENTION, payload={"summary": "s"})
    item.refresh_from_db()
    assert item.metadata == {}


@pytest.mark.django_db
@pytest.mark.parametrize(
    "payload,field",
    [
        ({"taskId": 5}, "payload.taskId"),
        ({"requirementId": ["r"]}, "payload.requirementId"),
        ({"extra": {"channelKey": 7}}, "payload.extra.channelKey"),
    ],
)
def test_ids_that_are_not_strings_are_refused_instead_of_escaping_dedup(agent, payload, field):
    with pytest.raises(MailboxError, match=field):
        mailbox_enqueue(agent_id=agent.id, source_type=MailboxType.TASK_COMMENT, payload={"summary": "s", **payload})
