"""The human-in-the-loop gate on work an agent files (upstream: a task an agent creates
starts ``pending`` until a person approves it).

With its team's ``agent_task_approval`` on (the default; an agent without a team gets
the default), a task an agent files, for itself or a teammate, stays ``pending`` with
an approval to a person: the agent's owner, else its team's owner (nobody to ask: the
gate stays open). ``Task.filing_approval`` holds the question while it stands; the
answer comes back through ``review.on_filing_answered``. A task a person files never
waits here."""

from __future__ import annotations

from django.contrib.auth.models import User

from markus.agents.models import Agent
from notifications.models import Approval
from notifications.registry import NotificationType
from notifications.services import approval_cancel, approval_create

from .models import Task

FILING_OPTIONS = [
    {"id": "approve", "label": "Approve", "description": "Start the task: its assignee gets it."},
    {"id": "decline", "label": "Decline", "description": "Reject the task; your comment is posted on it."},
]
APPROVE, DECLINE = "approve", "decline"


def filing_approver(creator: Agent | None) -> User | None:
    """The person who approves what ``creator`` files, or None when nothing waits: a
    person filed it, the team turned the gate off, or there is nobody to ask."""
    if creator is None:
        return None
    team = creator.team
    if team is not None and not team.agent_task_approval:
        return None
    return creator.answerable_person


# A task filed not to start (``start: false``) only waits pending once approved.
START_WHEN_APPROVED = "startWhenApproved"


def request_filing_approval(task: Task, creator: Agent, approver: User, *, start: bool = True) -> Approval:
    """Ask ``approver`` whether the task ``creator`` filed may start; the task keeps
    the question in ``filing_approval``. ``start`` false (kept in the task's metadata
    as ``startWhenApproved``): approving only lets it wait pending, as a task filed not
    to start does. Call it in the transaction that files it."""
    assignee = task.assignee
    lines = [f"{creator.name} filed task {task.id}" + (f" for {assignee.name}." if assignee else ".")]
    if task.description:
        lines.append(task.description)
    verb = "start it" if start else "let it wait, pending, to be started later"
    lines.append(f"Approve to {verb}; decline to reject it (your comment is posted on the task).")
    approval = approval_create(
        user=approver,
        title=f"Approve task: {task.title}",
        description="\n\n".join(lines),
        options=[dict(o) for o in FILING_OPTIONS],
        agent=creator,
        notification_type=NotificationType.APPROVAL_REQUEST,
        action_target={"path": f"/work?task={task.id}"},
        metadata={"taskId": task.id},
    )
    task.filing_approval = approval
    if not start:
        task.metadata = {**task.metadata, START_WHEN_APPROVED: False}
    task.save(update_fields=["filing_approval", "metadata"])
    return approval


def withdraw_filing_approval(task: Task) -> None:
    """The task moved on without the answer (a person cancelled it, say): the question
    no longer stands. Must be called holding the task row lock."""
    if task.filing_approval_id is None:
        return
    approval_cancel(approval_id=task.filing_approval_id)
    task.filing_approval = None
    task.save(update_fields=["filing_approval"])
