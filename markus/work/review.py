"""A person's answers about tasks, back through
``notifications.services.approval_answered_hooks``: a human reviewer's (the approval
created when a task entered review) and the approval of a task an agent filed
(``filing``)."""

from __future__ import annotations

from markus.core.actors import Actor
from notifications.models import Approval

from . import notices
from .filing import APPROVE, DECLINE, START_WHEN_APPROVED
from .models import Task, TaskState
from .selectors import unmet_dependencies
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


def on_filing_answered(approval: Approval) -> None:
    """Approve → the task starts (``in_progress``, its assignee gets the execution; one
    still waiting for dependencies, or filed not to start, stays pending and its
    assignee is told it was assigned); decline → ``rejected``, the comment posted on the task and carried as the
    note (the filing agent hears it). Other approvals, or a task no longer waiting on
    this one, are ignored."""
    task = Task.objects.select_for_update().filter(filing_approval=approval).first()
    if task is None or task.status != TaskState.PENDING or approval.selected_option not in (APPROVE, DECLINE):
        return
    actor = Actor.for_user(approval.user)
    task.filing_approval = None
    task.save(update_fields=["filing_approval"])
    if approval.comment.strip():
        task_comment_create(task_id=task.id, actor=actor, content=approval.comment)
    if approval.selected_option == DECLINE:
        task_transition(task_id=task.id, to_status=TaskState.REJECTED, actor=actor, note=approval.comment)
        return
    waiting = unmet_dependencies(task)
    if task.assignee_id is None:
        return
    if waiting or task.metadata.get(START_WHEN_APPROVED) is False:  # filed not to start: it waits pending
        notices.send_task_assigned(task, actor=actor, waiting_for=waiting)
        return
    note = f"approved by {actor.name}" + (f": {approval.comment}" if approval.comment.strip() else "")
    task_transition(task_id=task.id, to_status=TaskState.IN_PROGRESS, actor=actor, note=note)
