"""Where a comment goes when its agent is already working on what it is about (seed
section 3.4): into that work's open session, not a session of its own.

A task comment joins the open execution of its task. A requirement comment joins the
open requirement action (the agent in charge creating or reviewing its tasks), else the
open execution of one of the requirement's tasks that the agent works on. "Open": the
item is queued or deferred (begun and preempted); the attention loop checks that its
session was saved before it merges (``attention.processing``)."""

from __future__ import annotations

from mailbox.models import MailboxItem
from mailbox.registry import MailboxType, Status

from .models import Task

OPEN = (Status.QUEUED, Status.DEFERRED)
# The most recent items of a kind looked at (an agent has a handful open at most).
LOOKED_AT = 20


def _latest(agent_id: str, source_type: MailboxType, **payload: object) -> list[MailboxItem]:
    filters = {f"payload__{key}": value for key, value in payload.items()}
    rows = MailboxItem.objects.filter(agent_id=agent_id, source_type=source_type, status__in=OPEN, **filters)
    return list(rows.order_by("-queued_at", "-id")[:LOOKED_AT])


def open_work_for(item: MailboxItem) -> MailboxItem | None:
    """The open item of ``item``'s agent that a comment ``item`` belongs to, if any."""
    if item.source_type == MailboxType.TASK_COMMENT and item.task_id:
        runs = _latest(item.agent_id, MailboxType.TASK_STATUS_UPDATE, taskId=item.task_id)
        return next((r for r in runs if r.triggers_execution), None)
    if item.source_type != MailboxType.REQUIREMENT_COMMENT or not item.requirement_id:
        return None
    actions = _latest(item.agent_id, MailboxType.REQUIREMENT_UPDATE, requirementId=item.requirement_id)
    action = next((a for a in actions if a.extra.get("actionRequired")), None)
    if action is not None:
        return action
    task_ids = list(
        Task.objects.filter(requirement_id=item.requirement_id, assignee_id=item.agent_id).values_list("id", flat=True)
    )
    if not task_ids:
        return None
    executions = MailboxItem.objects.filter(
        agent_id=item.agent_id,
        source_type=MailboxType.TASK_STATUS_UPDATE,
        payload__taskId__in=task_ids,
        status__in=OPEN,
    ).order_by("-queued_at", "-id")[:LOOKED_AT]
    return next((r for r in executions if r.triggers_execution), None)
