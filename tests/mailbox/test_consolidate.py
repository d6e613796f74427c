"""Cross-type consolidation by taskId / requirementId before triage (seed section 21)."""

from __future__ import annotations

import pytest

from mailbox import lifecycle, selectors
from mailbox.registry import MailboxType, Status
from mailbox.services import mailbox_consolidate_by_entity

from .conftest import statuses

T = MailboxType
pytestmark = pytest.mark.django_db


def test_items_of_different_types_about_one_task_collapse_into_one(agent, enqueue):
    status_update = enqueue(T.TASK_STATUS_UPDATE, summary="Task blocked", content="blocked", taskId="tsk_1")
    message = enqueue(T.A2A_MESSAGE, summary="Ping", content="any news?", taskId="tsk_1")
    mention = enqueue(T.MENTION, summary="@ada", content="look here", taskId="tsk_1")
    comment = enqueue(T.TASK_COMMENT, summary="Comment", content="typo", taskId="tsk_1")
    assert mailbox_consolidate_by_entity(agent.id) == 3
    queue = selectors.queued_items(agent.id)
    assert len(queue) == 1
    survivor_id = queue[0]["id"]
    rows = [status_update, message, mention, comment]
    statuses(*rows)
    merged = [r for r in rows if r.id != survivor_id]
    assert all(r.status == Status.MERGED and r.merged_into_id == survivor_id for r in merged)
    content = queue[0]["payload"]["content"]
    for text in ("blocked", "any news?", "look here", "typo"):
        assert text in content
    assert queue[0]["summary"].endswith("(+3)")
    assert {c["id"] for c in queue[0]["payload"]["consolidated"]} == {r.id for r in merged}


def test_absorbed_items_are_labelled_by_their_type(agent, enqueue):
    enqueue(T.MENTION, content="look here", taskId="t")
    enqueue(T.TASK_STATUS_UPDATE, content="blocked", taskId="t")
    mailbox_consolidate_by_entity(agent.id)
    assert "[Task Status] blocked" in selectors.queued_items(agent.id)[0]["payload"]["content"]


def test_the_survivor_keeps_the_highest_priority(agent, enqueue):
    enqueue(T.TASK_COMMENT, taskId="t", priority=3)
    enqueue(T.A2A_MESSAGE, taskId="t", priority=1)
    enqueue(T.MENTION, taskId="t", priority=2)
    mailbox_consolidate_by_entity(agent.id)
    [survivor] = selectors.queued_items(agent.id)
    assert survivor["priority"] == 1


def test_an_informational_status_update_never_swallows_a_comment(agent, enqueue):
    status_update = enqueue(T.TASK_STATUS_UPDATE, taskId="t")  # priority 1, first in order
    comment = enqueue(T.TASK_COMMENT, taskId="t")  # priority 2
    mailbox_consolidate_by_entity(agent.id)
    assert statuses(status_update, comment) == [Status.MERGED, Status.QUEUED]
    comment.refresh_from_db()
    assert comment.priority == 1


def test_a_group_of_only_status_updates_keeps_the_first_in_dequeue_order(agent, enqueue):
    first = enqueue(T.TASK_STATUS_UPDATE, taskId="t")
    second = enqueue(T.TASK_STATUS_UPDATE, taskId="t")
    assert mailbox_consolidate_by_entity(agent.id) == 1
    assert statuses(first, second) == [Status.QUEUED, Status.MERGED]


def test_items_about_one_requirement_consolidate(agent, enqueue):
    update = enqueue(T.REQUIREMENT_UPDATE, requirementId="req_1")
    comment = enqueue(T.REQUIREMENT_COMMENT, requirementId="req_1")
    message = enqueue(T.A2A_MESSAGE, requirementId="req_1")
    assert mailbox_consolidate_by_entity(agent.id) == 2
    assert sorted(statuses(update, comment, message)) == [Status.MERGED, Status.MERGED, Status.QUEUED]


def test_items_about_different_tasks_are_not_consolidated(agent, enqueue):
    enqueue(T.MENTION, taskId="t1")
    enqueue(T.MENTION, taskId="t2")
    enqueue(T.MENTION, requirementId="t1")
    enqueue(T.MENTION)
    assert mailbox_consolidate_by_entity(agent.id) == 0
    assert selectors.queue_depth(agent.id) == 4


def test_execution_triggers_are_never_consolidated(agent, enqueue):
    trigger = enqueue(T.TASK_STATUS_UPDATE, taskId="t", extra={"triggerExecution": True})
    enqueue(T.MENTION, taskId="t")
    enqueue(T.TASK_COMMENT, taskId="t")
    assert mailbox_consolidate_by_entity(agent.id) == 1
    assert statuses(trigger) == [Status.QUEUED]
    trigger.refresh_from_db()
    assert "consolidated" not in trigger.payload


def test_a_human_chat_is_never_consolidated(agent, enqueue):
    chat = enqueue(T.HUMAN_CHAT, taskId="t", content="please hurry")
    mention = enqueue(T.MENTION, taskId="t")
    assert mailbox_consolidate_by_entity(agent.id) == 0
    assert statuses(chat, mention) == [Status.QUEUED, Status.QUEUED]


def test_items_not_queued_are_left_out(agent, enqueue):
    in_flight = enqueue(T.MENTION, taskId="t")
    assert lifecycle.claim_next(agent_id=agent.id).id == in_flight.id
    waiting = enqueue(T.A2A_MESSAGE, taskId="t")
    assert mailbox_consolidate_by_entity(agent.id) == 0
    assert statuses(in_flight, waiting) == [Status.PROCESSING, Status.QUEUED]


def test_consolidation_is_per_agent(agent, other_agent, enqueue):
    enqueue(T.MENTION, taskId="t")
    enqueue(T.MENTION, taskId="t", agent_id=other_agent.id)
    assert mailbox_consolidate_by_entity(agent.id) == 0
