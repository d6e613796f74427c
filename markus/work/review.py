"""A reviewer's verdict on a task, and a person's answers about tasks, back through
``markus.core.signals.approval_answered``: a human reviewer's (the approval
created when a task entered review) and the approval of a task an agent filed
(``filing``). An agent reviewer gives its verdict with ``task_review`` (the MCP door);
both end in ``_verdict``."""

from __future__ import annotations

from django.db import transaction

from markus.core.actors import Actor
from notifications.models import Approval

from . import notices
from .errors import IllegalTransition, WorkError, WorkNotFound, WorkPermissionError
from .filing import APPROVE, DECLINE, START_WHEN_APPROVED
from .models import Task, TaskState
from .selectors import actor_is_reviewer, unmet_dependencies
from .services import task_comment_create, task_transition

OUTCOMES = {"approve": TaskState.COMPLETED, "request_changes": TaskState.IN_PROGRESS}
REQUEST_CHANGES = "request_changes"


def _verdict(task: Task, actor: Actor, verdict: str, comment: str) -> Task:
    """Approve → completed; request changes → back to in_progress with the comment as
    feedback. The comment is also posted on the task. Must be called holding SELECT
    FOR UPDATE on ``task``, in review."""
    if comment.strip():
        task_comment_create(task_id=task.id, actor=actor, content=comment)
    return task_transition(task_id=task.id, to_status=OUTCOMES[verdict], actor=actor, note=comment)


@transaction.atomic
def task_review(*, task_id: str, actor: Actor, verdict: str, comment: str = "") -> Task:
    """The task's reviewer gives its verdict (the caller checks the actor may see the
    task). Changes are requested with a comment: the assignee is told what to change."""
    if verdict not in OUTCOMES:
        raise WorkError(f"unknown verdict {verdict!r}; expected one of: {', '.join(OUTCOMES)}")
    if verdict == REQUEST_CHANGES and not (isinstance(comment, str) and comment.strip()):
        raise WorkError("comment is required to request changes: say what to change")
    task = Task.objects.select_for_update().filter(id=task_id).first()
    if task is None:
        raise WorkNotFound(f"no task {task_id!r}")
    if not actor_is_reviewer(task, actor):
        raise WorkPermissionError(f"only the task's reviewer reviews task {task.id}")
    if task.status != TaskState.REVIEW:
        raise IllegalTransition(f"task {task.id} is {task.status}, not in review")
    return _verdict(task, actor, verdict, comment)


def on_approval_answered(approval: Approval) -> None:
    """A person's answer to a task's review approval is their verdict. Approvals that
    are not a task review, or a review that is no longer pending, are ignored."""
    task = Task.objects.select_for_update().filter(metadata__reviewApprovalId=approval.id).first()
    if task is None or task.status != TaskState.REVIEW or approval.selected_option not in OUTCOMES:
        return
    _verdict(task, Actor.for_user(approval.user), approval.selected_option, approval.comment)


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
