"""Retry cleanup (seed section 18): a retried task's stale, queued, informational
status updates are dropped; everything else stays."""

from __future__ import annotations

import pytest

from mailbox import lifecycle
from mailbox.registry import MailboxType, Status
from mailbox.services import mailbox_drop_status_updates_by_task_id

from .conftest import statuses

T = MailboxType
pytestmark = pytest.mark.django_db


def retry(agent, task_id="tsk_r"):
    return mailbox_drop_status_updates_by_task_id(agent_id=agent.id, task_id=task_id)


def test_queued_informational_status_updates_of_the_task_are_dropped(agent, enqueue):
    blocked = enqueue(T.TASK_STATUS_UPDATE, summary="Task blocked", taskId="tsk_r")
    failed = enqueue(T.TASK_STATUS_UPDATE, summary="Task failed", taskId="tsk_r")
    assert retry(agent) == 2
    assert statuses(blocked, failed) == [Status.DROPPED, Status.DROPPED]
    assert "retry" in blocked.drop_reason and "tsk_r" in blocked.drop_reason
    assert blocked.completed_at is not None


def test_an_execution_trigger_for_the_task_is_kept(agent, enqueue):
    trigger = enqueue(T.TASK_STATUS_UPDATE, taskId="tsk_r", extra={"triggerExecution": True})
    assert retry(agent) == 0
    assert statuses(trigger) == [Status.QUEUED]


@pytest.mark.parametrize("source_type", [T.TASK_COMMENT, T.MENTION, T.A2A_MESSAGE, T.REVIEW_REQUEST])
def test_interactions_about_the_task_are_kept(agent, enqueue, source_type):
    kept = enqueue(source_type, taskId="tsk_r")
    assert retry(agent) == 0
    assert statuses(kept) == [Status.QUEUED]


def test_a_status_update_already_processing_is_kept(agent, enqueue):
    in_flight = enqueue(T.TASK_STATUS_UPDATE, taskId="tsk_r")
    assert lifecycle.claim_next(agent_id=agent.id).id == in_flight.id
    assert retry(agent) == 0
    assert statuses(in_flight) == [Status.PROCESSING]


def test_status_updates_of_other_tasks_and_other_agents_are_kept(agent, other_agent, enqueue):
    other_task = enqueue(T.TASK_STATUS_UPDATE, taskId="tsk_other")
    no_task = enqueue(T.TASK_STATUS_UPDATE)
    other_agents = enqueue(T.TASK_STATUS_UPDATE, taskId="tsk_r", agent_id=other_agent.id)
    assert retry(agent) == 0
    assert statuses(other_task, no_task, other_agents) == [Status.QUEUED] * 3


def test_a_requirement_update_is_not_a_task_status_update(agent, enqueue):
    update = enqueue(T.REQUIREMENT_UPDATE, taskId="tsk_r")
    assert retry(agent) == 0
    assert statuses(update) == [Status.QUEUED]


def test_a_mixed_queue_loses_exactly_the_stale_status_updates(agent, enqueue):
    stale = enqueue(T.TASK_STATUS_UPDATE, taskId="tsk_r")
    keep = [
        enqueue(T.TASK_STATUS_UPDATE, taskId="tsk_r", extra={"triggerExecution": True}),
        enqueue(T.TASK_COMMENT, taskId="tsk_r"),
        enqueue(T.MENTION, taskId="tsk_r"),
        enqueue(T.A2A_MESSAGE, taskId="tsk_r"),
    ]
    assert retry(agent) == 1
    assert statuses(stale) == [Status.DROPPED]
    assert statuses(*keep) == [Status.QUEUED] * 4
