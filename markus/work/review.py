"""A human reviewer's answer: the approval created when a task entered review comes
back through ``notifications.services.approval_answered_hooks``."""

from __future__ import annotations

from markus.core.actors import Actor
from notifications.models import Approval

from .models import Task, TaskState
from .services import task_comment_create, task_transition

OUTCOMES = {"approve": TaskState.COMPLETED, "request_changes": TaskState.IN_PROGRESS}


def on_approval_answered(approval: Approval) -> None:
    """Approve → completed; request changes → back to in_progress with the comment as
    feedback. The comment is also posted on the task. Approvals that are not a task
    review, or a review that is no longer pending, are ignored."""
    task = Task.objects.select_for_update().filter(metadata__reviewApprovalId=approval.id).first()
    if task is None or task.status != TaskState.REVIEW or approval.selected_option not in OUTCOMES:
        return
    actor = Actor.for_user(approval.user)
    if approval.comment.strip():
        task_comment_create(task_id=task.id, actor=actor, content=approval.comment)
    task_transition(task_id=task.id, to_status=OUTCOMES[approval.selected_option], actor=actor, note=approval.comment)
