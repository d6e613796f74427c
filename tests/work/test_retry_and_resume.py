"""Retry cleanup (seed section 18) and the start-up resume of in-progress tasks
(section 17)."""

from __future__ import annotations

import pytest

from mailbox import lifecycle
from mailbox.registry import MailboxType, Status
from mailbox.services import mailbox_enqueue
from markus.core.actors import Actor
from markus.work.errors import IllegalTransition
from markus.work.liveness import tasks_resume_in_progress
from markus.work.models import Task, TaskState
from markus.work.services import (
    task_comment_create,
    task_reset_for_rerun,
    task_retry,
    task_transition,
)

from .conftest import executions, force_status, infos, items

S = TaskState
pytestmark = pytest.mark.django_db


def _stale_info(agent, task, summary="Task blocked (old)"):
    return mailbox_enqueue(
        agent_id=agent.id,
        source_type=MailboxType.TASK_STATUS_UPDATE,
        payload={"summary": summary, "content": "old news", "taskId": task.id},
    )


def test_retry_drops_queued_status_updates_then_starts_a_fresh_round(make_task, as_alice, ada, bob):
    task = make_task(start=True)
    task_transition(task_id=task.id, to_status=S.FAILED, actor=as_alice)
    stale = _stale_info(ada, task)
    task_comment_create(task_id=task.id, actor=Actor.for_user(bob), content="What went wrong?")
    task_retry(task_id=task.id, actor=as_alice)
    task.refresh_from_db()
    assert task.status == S.IN_PROGRESS and task.execution_round == 2 and task.metadata["restarts"] == 1
    stale.refresh_from_db()
    assert stale.status == Status.DROPPED and "retry cleanup" in stale.drop_reason
    assert all(i.status == Status.DROPPED for i in infos(ada, task))
    # A person's comment on the failed task reaches Ada as a session reply (issue 13).
    [comment] = items(ada, MailboxType.SESSION_REPLY)
    assert comment.status == Status.QUEUED
    fresh = executions(ada, task)[-1]
    assert fresh.status == Status.QUEUED and fresh.payload["extra"]["executionRound"] == 2


def test_retry_keeps_status_updates_that_are_already_being_processed(make_task, as_alice, ada):
    task = make_task(start=True)
    task_transition(task_id=task.id, to_status=S.BLOCKED, actor=as_alice)
    stale = _stale_info(ada, task)
    lifecycle.claim_next(agent_id=ada.id)  # nothing else is queued: the stale update is now processing
    stale.refresh_from_db()
    assert stale.status == Status.PROCESSING
    task_retry(task_id=task.id, actor=as_alice)
    stale.refresh_from_db()
    assert stale.status == Status.PROCESSING


def test_retry_only_applies_to_failed_cancelled_or_blocked_tasks(make_task, as_alice):
    task = make_task(start=True)
    with pytest.raises(IllegalTransition, match="only blocked, cancelled, failed tasks can be retried"):
        task_retry(task_id=task.id, actor=as_alice)
    assert Task.objects.get(id=task.id).execution_round == 1


def test_reset_for_rerun_restarts_a_completed_task_with_the_same_cleanup(make_task, as_alice, ada):
    task = force_status(make_task(), S.COMPLETED)
    stale = _stale_info(ada, task, "Task completed")
    task_reset_for_rerun(task_id=task.id, actor=as_alice)
    task.refresh_from_db()
    stale.refresh_from_db()
    assert task.status == S.IN_PROGRESS and task.completed_at is None
    assert stale.status == Status.DROPPED
    with pytest.raises(IllegalTransition):
        task_reset_for_rerun(task_id=task.id, actor=as_alice)


def test_resume_recreates_the_execution_of_an_in_progress_task_that_lost_it(make_task, ada):
    task = make_task(start=True)
    [lost] = executions(ada, task)
    lost.status = Status.DROPPED  # e.g. recovery dropped it as stale "processing"
    lost.save(update_fields=["status"])
    created = tasks_resume_in_progress()
    assert [i.task_id for i in created] == [task.id]
    [item] = created
    assert item.payload["extra"] == {"triggerExecution": True, "executionRound": 1, "resumed": True}
    assert "Resumed after a restart" in item.payload["content"]
    assert tasks_resume_in_progress() == []  # idempotent: the new item is open


@pytest.mark.parametrize("state", ["queued", "processing", "deferred"])
def test_resume_leaves_a_task_alone_while_its_execution_item_is_open(make_task, ada, state):
    task = make_task(start=True)
    [item] = executions(ada, task)
    if state == "processing":
        lifecycle.claim_next(agent_id=ada.id)
    elif state == "deferred":
        lifecycle.defer(item.id)
    assert tasks_resume_in_progress() == []
    assert len(executions(ada, task)) == 1


def test_resume_ignores_tasks_that_are_not_in_progress(make_task, as_alice, ada):
    task = make_task(start=True)
    task_transition(task_id=task.id, to_status=S.BLOCKED, actor=as_alice)
    assert tasks_resume_in_progress() == []
