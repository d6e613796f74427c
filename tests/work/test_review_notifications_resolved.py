"""A review asked of a person more than once (the liveness repair asks again, an
escalation asks the owner) leaves no question standing once the task leaves review
(issue 37, point 8): every review approval of the task is withdrawn and its
notification read, not only the last one asked.

alice owns agent ada and reviews its task."""

from __future__ import annotations

import pytest

from markus.core.actors import Actor
from markus.work.models import TaskState
from markus.work.services import request_review, task_create, task_transition
from notifications.models import Approval, UserNotification
from notifications.registry import NotificationType

pytestmark = pytest.mark.django_db


def test_every_review_of_the_task_is_resolved_when_it_leaves_review(alice, agent):
    task = task_create(actor=Actor.for_user(alice), title="Notes", assignee_id=agent.id, reviewer_user_id=alice.pk)
    task_transition(task_id=task.id, to_status=TaskState.REVIEW, actor=Actor.for_agent(agent), note="Drafted.")
    task.refresh_from_db()
    request_review(task, Actor.system(), user=alice, reason="No answer yet: asked again.")
    assert UserNotification.objects.filter(user=alice, type=NotificationType.TASK_REVIEW, read=False).count() == 2

    task_transition(task_id=task.id, to_status=TaskState.COMPLETED, actor=Actor.for_user(alice))
    assert not UserNotification.objects.filter(user=alice, type=NotificationType.TASK_REVIEW, read=False).exists()
    assert not Approval.objects.filter(user=alice, status=Approval.State.PENDING).exists()
