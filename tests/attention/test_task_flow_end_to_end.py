"""A human creates a task for agent A with agent B as reviewer; A executes it, B reviews
and completes it, the dependent task starts — all through the real loop."""

from __future__ import annotations

import pytest
from django.db import transaction

from attention.models import AgentActivity
from mailbox.models import MailboxItem
from mailbox.registry import MailboxType as T
from markus.agents.services import agent_create
from markus.core.actors import Actor
from markus.work.models import Task, TaskComment
from markus.work.services import task_create

from .conftest import wait_for


def timeline(agent_id):
    return [
        (i.source_type, i.status) for i in MailboxItem.objects.filter(agent_id=agent_id).order_by("queued_at", "id")
    ]


@pytest.mark.pg
def test_task_is_executed_reviewed_completed_and_its_dependent_starts(celery_worker, alice, team):
    a, _ = agent_create(name="Ada", agent_id="ada", owner=alice, team=team)
    b, _ = agent_create(name="Bea", agent_id="bea", owner=alice, team=team)
    human = Actor.for_user(alice)
    # Both filed before the worker hears of either (wake-ups go on commit): the whole first
    # flow may otherwise end before the second is filed, which then starts at once.
    with transaction.atomic():
        first = task_create(actor=human, title="Write the parser", assignee_id=a.id, reviewer_agent_id=b.id)
        second = task_create(
            actor=human, title="Wire the parser in", assignee_id=a.id, reviewer_agent_id=b.id, depends_on=[first.id]
        )
        assert Task.objects.get(id=second.id).status == "pending"
    wait_for(lambda: Task.objects.get(id=first.id).status == "completed", timeout=60, message="first task completed")
    wait_for(
        lambda: Task.objects.get(id=second.id).status in ("in_progress", "review", "completed"),
        timeout=30,
        message="dependent task started",
    )
    # A executed it: an execution item, a task activity, and its comment carries that activity.
    execution = MailboxItem.objects.get(
        agent=a, source_type=T.TASK_STATUS_UPDATE, payload__taskId=first.id, payload__extra__triggerExecution=True
    )
    wait_for(lambda: MailboxItem.objects.get(id=execution.id).status == "completed", message="execution completed")
    act = AgentActivity.objects.get(mailbox_item=execution)
    assert act.type == "task" and act.success and act.total_tools >= 3
    comment = TaskComment.objects.get(task_id=first.id, author_agent=a)
    assert comment.activity_id == act.id
    # B reviewed it: a review request, processed with the review scenario, which completed the task.
    review = MailboxItem.objects.get(agent=b, source_type=T.REVIEW_REQUEST, payload__taskId=first.id)
    wait_for(lambda: MailboxItem.objects.get(id=review.id).status == "completed", message="review item completed")
    assert TaskComment.objects.filter(task_id=first.id, author_agent=b).exists()
    a_types = [t for t, _ in timeline(a.id)]
    b_types = [t for t, _ in timeline(b.id)]
    assert a_types[:1] == [T.TASK_STATUS_UPDATE] and T.REVIEW_REQUEST not in a_types
    assert b_types[0] == T.REVIEW_REQUEST
    assert all(status in ("completed", "merged", "queued", "processing") for _, status in timeline(a.id))
    # The dependent task's execution reached A's mailbox.
    assert MailboxItem.objects.filter(
        agent=a, source_type=T.TASK_STATUS_UPDATE, payload__taskId=second.id, payload__extra__triggerExecution=True
    ).exists()
