"""The dashboard's failures are failures: an item whose turn a pause stopped, and an
execution cancelled because its task left in_progress, end their activities unfinished
but not failed. They are counted apart, as paused/cancelled."""

from __future__ import annotations

import pytest
from django.urls import reverse
from django.utils import timezone

from attention import services
from attention.models import AgentActivity
from mailbox.models import MailboxItem
from mailbox.registry import MailboxType as T
from mailbox.services import mailbox_enqueue
from markus.core.actors import Actor
from markus.llm.scripted import Turn
from markus.work.models import TaskState
from markus.work.services import task_create, task_transition

from ..attention.conftest import celery_worker, scripted, wait_for, wake_on_enqueue  # noqa: F401

URL = reverse("console:dashboard")


def status(item_id):
    return MailboxItem.objects.get(id=item_id).status


def health(response, agent_id):
    return next(row for row in response.context["agent_health"] if row.id == agent_id)


@pytest.mark.pg
def test_a_pause_and_a_cancel_are_not_counted_as_failures(celery_worker, scripted, operator, agent, alice):
    slow = Turn(text="never returned", delay=30.0)
    check = Turn(tool_calls=[("check_mailbox", {})], delay=1.0)
    scripted(slow, check, default=Turn(text="done"))
    # A pause stops a turn: its item goes back to the queue.
    work = mailbox_enqueue(agent_id=agent.id, source_type=T.SYSTEM_EVENT, payload={"summary": "job", "content": "x"})
    assert slow.started.wait(15)
    services.agent_pause(agent)
    wait_for(lambda: status(work.id) == "queued", message="in-flight item re-queued")
    wait_for(lambda: not AgentActivity.objects.filter(ended_at__isnull=True).exists(), message="activity closed")
    # Cancelled: the task leaves in_progress while its execution runs.
    MailboxItem.objects.filter(id=work.id).update(
        status="dropped", drop_reason="not part of this test", completed_at=timezone.now()
    )
    agent.refresh_from_db()
    services.agent_resume(agent)
    task = task_create(actor=Actor.for_user(alice), title="Long job", assignee_id=agent.id)
    assert check.started.wait(15)
    task_transition(task_id=task.id, to_status=TaskState.CANCELLED, actor=Actor.for_user(alice))
    execution = MailboxItem.objects.get(
        source_type=T.TASK_STATUS_UPDATE, payload__taskId=task.id, payload__extra__triggerExecution=True
    )
    wait_for(lambda: status(execution.id) == "completed", message="execution cancelled")
    wait_for(lambda: not AgentActivity.objects.filter(ended_at__isnull=True).exists(), message="activity closed")
    # One real failure, for comparison.
    AgentActivity.objects.create(agent=agent, type="chat", label="broke", success=False)

    response = operator.get(URL)
    ada = health(response, agent.id)
    assert ada.failed_activities == 1
    assert ada.dropped == 1  # the item this test dropped by hand
    assert ada.failures == 2
    assert ada.interrupted == 2  # the pause and the cancel, apart
    html = response.content.decode()
    assert '<td class="failed-activities">1</td>' in html and '<td class="interrupted">2</td>' in html
