"""Leaving in_progress cancels the running execution: the loop sees it at its next
yield point, and an execution item whose task left in_progress while it waited is
skipped without an LLM call."""

from __future__ import annotations

import pytest

from attention.models import ActivityLogType as L
from attention.models import AgentActivity, AgentDecision
from mailbox.models import MailboxItem
from mailbox.registry import MailboxType as T
from markus.core.actors import Actor
from markus.llm.scripted import Turn
from markus.work.models import Task, TaskComment, TaskState
from markus.work.services import task_create, task_transition

from .conftest import wait_for


def execution_of(task):
    return MailboxItem.objects.get(
        source_type=T.TASK_STATUS_UPDATE, payload__taskId=task.id, payload__extra__triggerExecution=True
    )


@pytest.mark.pg
def test_blocking_a_task_stops_its_execution_at_the_next_yield_point(celery_worker, scripted, agent, alice):
    first = Turn(tool_calls=[("check_mailbox", {})], delay=1.0)
    provider = scripted(first, default=Turn(text="should never be asked"))
    task = task_create(actor=Actor.for_user(alice), title="Long job", assignee_id=agent.id)
    assert first.started.wait(15)
    task_transition(task_id=task.id, to_status=TaskState.BLOCKED, actor=Actor.for_user(alice))
    item = execution_of(task)
    wait_for(lambda: MailboxItem.objects.get(id=item.id).status == "completed", message="execution stopped")
    cancel = AgentDecision.objects.get(mailbox_item=item, decision_type="cancel")
    assert "left in_progress" in cancel.reasoning
    assert len(provider.calls) == 1  # no LLM turn after the task was blocked
    assert AgentActivity.objects.get(mailbox_item=item).success is False


def test_an_execution_whose_task_was_cancelled_while_queued_is_skipped(
    celery_worker, scripted, agent, alice, monkeypatch
):
    from django.conf import settings

    provider = scripted(default=Turn(text="nope"))
    monkeypatch.setitem(settings.MARKUS, "WAKE_ON_ENQUEUE", False)
    task = task_create(actor=Actor.for_user(alice), title="Never mind", assignee_id=agent.id)
    item = execution_of(task)
    Task.objects.filter(id=task.id).update(status=TaskState.CANCELLED)  # behind the services' back
    monkeypatch.setitem(settings.MARKUS, "WAKE_ON_ENQUEUE", True)
    from attention.services import wake

    wake(agent.id)
    wait_for(lambda: MailboxItem.objects.get(id=item.id).status == "completed", message="skipped")
    assert provider.calls == [] and not AgentActivity.objects.filter(mailbox_item=item).exists()


@pytest.mark.pg
def test_a_task_cancelled_during_the_final_turn_gets_no_comment_and_no_submission(
    celery_worker, scripted, agent, alice, monkeypatch
):
    from django.conf import settings

    monkeypatch.setitem(settings.MARKUS, "WAKE_ON_ENQUEUE", False)  # the script names the task: filed first
    task = task_create(actor=Actor.for_user(alice), title="Refactor the login form", assignee_id=agent.id)
    last = Turn(
        tool_calls=[
            ("task_comment", {"task_id": task.id, "content": "Done as described; ready for review."}),
            ("task_submit_review", {"task_id": task.id, "summary": "done"}),
        ],
        delay=1.0,
    )
    scripted(Turn(tool_calls=[("task_get", {"task_id": task.id})]), last, default=Turn(text="over"))
    monkeypatch.setitem(settings.MARKUS, "WAKE_ON_ENQUEUE", True)
    from attention.services import wake

    wake(agent.id)
    assert last.started.wait(15)
    task_transition(task_id=task.id, to_status=TaskState.CANCELLED, actor=Actor.for_user(alice))
    item = execution_of(task)
    wait_for(lambda: MailboxItem.objects.get(id=item.id).status == "completed", message="execution ended")
    assert not TaskComment.objects.filter(task_id=task.id, author_agent_id=agent.id).exists()
    assert Task.objects.get(id=task.id).status == TaskState.CANCELLED
    assert AgentDecision.objects.filter(mailbox_item=item, decision_type="cancel").exists()
    refused = [line.content for line in AgentActivity.objects.get(mailbox_item=item).logs.filter(type=L.TOOL_END)]
    assert any("left in_progress" in text for text in refused)  # the agent is told why
