"""Issue 9, the merge rule: strict-state items (a human's chat, an execution trigger,
every review request, an action-required requirement update) keep their identity and
are never merged across types, at enqueue or in consolidation; group messages keep
who said what; two heartbeats never queue side by side (the second is discarded)."""

from __future__ import annotations

import pytest

from mailbox.models import MailboxItem
from mailbox.registry import MESSAGE_SEPARATOR, MailboxType, Status
from mailbox.services import mailbox_consolidate_by_entity

from .conftest import statuses

T = MailboxType
pytestmark = [pytest.mark.django_db, pytest.mark.pg]

HUMAN = {"senderId": "1", "senderName": "alice", "senderRole": "user"}
AGENT = {"senderId": "bea", "senderName": "Bea", "senderRole": "agent"}


def queued_ids(agent_id: str) -> set[str]:
    return set(MailboxItem.objects.filter(agent_id=agent_id, status=Status.QUEUED).values_list("id", flat=True))


# ---------------------------------------------------------------------------- symptom 1


def test_a_humans_comment_and_a_queued_review_request_for_the_same_task_stay_two_items(agent, enqueue):
    review = enqueue(T.REVIEW_REQUEST, summary="Review requested: parser", content="please review", taskId="t1")
    comment = enqueue(T.TASK_COMMENT, summary="alice commented", content="looks off", taskId="t1", metadata=HUMAN)
    assert statuses(review, comment) == [Status.QUEUED, Status.QUEUED]  # enqueue kept both
    mailbox_consolidate_by_entity(agent.id)
    assert statuses(review, comment) == [Status.QUEUED, Status.QUEUED]
    assert review.merged_into_id is None and comment.merged_into_id is None
    assert review.payload["content"] == "please review"


def test_two_review_rounds_for_the_same_task_stay_two_review_requests(agent, enqueue):
    first = enqueue(T.REVIEW_REQUEST, summary="Review round 1", content="round one", taskId="t1")
    second = enqueue(T.REVIEW_REQUEST, summary="Review round 2", content="round two", taskId="t1")
    assert statuses(first, second) == [Status.QUEUED, Status.QUEUED]
    assert mailbox_consolidate_by_entity(agent.id) == 0
    assert statuses(first, second) == [Status.QUEUED, Status.QUEUED]
    assert first.payload["content"] == "round one" and second.payload["content"] == "round two"


def test_an_action_required_requirement_update_is_never_absorbed_by_an_informational_one(agent, enqueue):
    info = enqueue(
        T.REQUIREMENT_UPDATE,
        summary="Requirement in_progress",
        content="approved",
        requirementId="req_1",
        extra={"toStatus": "in_progress"},
    )
    action = enqueue(
        T.REQUIREMENT_UPDATE,
        summary="Requirement tasks settled",
        content="decide next",
        requirementId="req_1",
        extra={"toStatus": "in_progress", "actionRequired": True},
    )
    assert statuses(info, action)[1] == Status.QUEUED  # enqueue kept it
    mailbox_consolidate_by_entity(agent.id)
    action.refresh_from_db()
    assert action.status == Status.QUEUED and action.merged_into_id is None


@pytest.mark.parametrize("strict", ["review_request", "action_required", "execution_trigger", "human_chat"])
def test_a_strict_item_keeps_its_identity_among_informational_items_about_the_same_entity(agent, enqueue, strict):
    entity = {"requirementId": "req_1"} if strict == "action_required" else {"taskId": "t1"}
    before = [
        enqueue(
            T.TASK_STATUS_UPDATE if "taskId" in entity else T.REQUIREMENT_UPDATE,
            summary="status",
            content="informational",
            **entity,
        ),
        enqueue(T.A2A_MESSAGE, summary="ping", content="any news?", metadata=AGENT, **entity),
    ]
    kinds = {
        "review_request": (T.REVIEW_REQUEST, {}, {}),
        "action_required": (T.REQUIREMENT_UPDATE, {"extra": {"actionRequired": True}}, {}),
        "execution_trigger": (T.TASK_STATUS_UPDATE, {"extra": {"triggerExecution": True, "executionRound": 1}}, {}),
        "human_chat": (T.HUMAN_CHAT, {}, HUMAN),
    }
    source_type, fields, metadata = kinds[strict]
    item = enqueue(source_type, summary="strict", content="STRICT-CONTENT", metadata=metadata, **entity, **fields)
    after = enqueue(T.A2A_MESSAGE, summary="ping again", content="still there?", metadata=AGENT, **entity)
    mailbox_consolidate_by_entity(agent.id)
    item.refresh_from_db()
    assert item.status == Status.QUEUED and item.merged_into_id is None
    assert item.payload["content"] == "STRICT-CONTENT"  # nothing folded into a strict item across types
    others = [*before, after]
    statuses(*others)
    assert not any(o.merged_into_id == item.id for o in others)


def test_informational_updates_comments_and_agent_messages_about_one_task_still_fold_into_one(agent, enqueue):
    review = enqueue(T.REVIEW_REQUEST, summary="Review requested", content="please review", taskId="t1")
    status_update = enqueue(T.TASK_STATUS_UPDATE, summary="Task blocked", content="blocked", taskId="t1")
    comment = enqueue(T.TASK_COMMENT, summary="Bea commented", content="typo", taskId="t1", metadata=AGENT)
    message = enqueue(T.A2A_MESSAGE, summary="Ping", content="any news?", taskId="t1", metadata=AGENT)
    assert mailbox_consolidate_by_entity(agent.id) == 2
    assert len(queued_ids(agent.id)) == 2 and review.id in queued_ids(agent.id)
    review.refresh_from_db()
    assert review.status == Status.QUEUED and review.payload["content"] == "please review"
    rows = [status_update, comment, message]
    statuses(*rows)
    [survivor] = [r for r in rows if r.status == Status.QUEUED]
    assert all(r.merged_into_id == survivor.id for r in rows if r is not survivor)
    for text in ("blocked", "typo", "any news?"):
        assert text in survivor.payload["content"]


# ---------------------------------------------------------------------------- symptom 7


def test_coalesced_group_messages_keep_each_senders_name_next_to_their_text(agent, enqueue):
    first = enqueue(
        T.A2A_MESSAGE,
        summary="group",
        content="FIRST-TEXT",
        extra={"channelKey": "grp_1"},
        metadata={"senderId": "ada2", "senderName": "Ada", "senderRole": "agent"},
    )
    second = enqueue(
        T.A2A_MESSAGE,
        summary="group",
        content="SECOND-TEXT",
        extra={"channelKey": "grp_1"},
        metadata={"senderId": "linus", "senderName": "Linus", "senderRole": "agent"},
    )
    assert second.status == Status.MERGED and second.merged_into_id == first.id
    first.refresh_from_db()
    content = first.payload["content"]
    at_first, at_second = content.index("FIRST-TEXT"), content.index("SECOND-TEXT")
    assert "Ada" in content[:at_first], content
    separator = content.index(MESSAGE_SEPARATOR, at_first)
    assert "Linus" in content[separator:at_second], content
    assert "Linus" not in content[:separator], content


# ---------------------------------------------------------------------------- symptom 8


def test_a_second_heartbeat_is_discarded_not_merged_into_the_queued_one(agent, enqueue):
    first = enqueue(
        T.HEARTBEAT, summary="Heartbeat check-in", content="Heartbeat check-in", metadata={"senderRole": "system"}
    )
    second = enqueue(
        T.HEARTBEAT, summary="Heartbeat check-in", content="Heartbeat check-in", metadata={"senderRole": "system"}
    )
    assert second.status == Status.DROPPED and second.merged_into_id is None and first.id in second.drop_reason
    assert MailboxItem.objects.filter(agent=agent, source_type=T.HEARTBEAT, status=Status.QUEUED).count() == 1


def test_many_heartbeats_leave_exactly_one_queued(agent, enqueue):
    for _ in range(4):
        enqueue(T.HEARTBEAT, summary="Heartbeat check-in", content="Heartbeat check-in")
    assert MailboxItem.objects.filter(agent=agent, source_type=T.HEARTBEAT, status=Status.QUEUED).count() == 1
    assert MailboxItem.objects.filter(agent=agent, source_type=T.HEARTBEAT, status=Status.DROPPED).count() == 3
