"""Liveness: every task that waits has a waker (ARCHITECTURE decision 10).

The invariant, for every task:
- ``in_progress`` ⇒ its assignee has a live execution item for it (queued,
  processing, or deferred: preempted, parked for an approval, or a retry scheduled);
- ``review`` ⇒ its agent reviewer has a live ``review_request`` for the current round,
  or a human approval of the review is pending.
An outside agent's item is live once delivered to its bus inbox (``lifecycle.waking``):
its harness takes it up, no loop, so sending it again would only repeat it.

``work_liveness_repair`` restores what is missing, with the reason recorded on the new
item (``marks.repairReason``). It runs in the beat sweep and at start-up. Each task
is repaired under its row lock, re-checked inside it, so two sweeps (or two beats)
running at once restore one item, never two. A task that keeps losing its execution
(LIVENESS_MAX_REPAIRS in one round) fails with the reason; a review that keeps
losing its reviewer goes to a person.

The loop calls the verdict helpers when a task execution or a review ends: if the task
still waits, the run is a failed attempt (see ``attention.settle``).
"""

from __future__ import annotations

import logging
from dataclasses import dataclass, field

from django.conf import settings
from django.contrib.auth.models import User
from django.db import transaction
from django.db.models import Q

from mailbox.lifecycle import waking
from mailbox.models import MailboxItem
from mailbox.registry import MailboxType
from markus.agents.models import Agent
from markus.core.actors import Actor
from notifications.models import Approval
from notifications.registry import NotificationType
from notifications.services import notify_user

from . import notices
from .models import Task, TaskState
from .selectors import task_reviewer
from .services import request_review, task_transition

log = logging.getLogger(__name__)


@dataclass
class RepairReport:
    # (task id, the restored item or None when the repair was another action)
    restored: list[tuple[str, MailboxItem | None]] = field(default_factory=list)
    failed: list[str] = field(default_factory=list)
    escalated: list[str] = field(default_factory=list)

    def __bool__(self) -> bool:
        return bool(self.restored or self.failed or self.escalated)


# ---------------------------------------------------------------------------- the invariant


def live_execution(task: Task) -> bool:
    return MailboxItem.objects.filter(
        waking(),
        agent_id=task.assignee_id,
        source_type=MailboxType.TASK_STATUS_UPDATE,
        payload__taskId=task.id,
        payload__extra__triggerExecution=True,
    ).exists()


def live_review_request(task: Task, reviewer_id: str) -> bool:
    rows = MailboxItem.objects.filter(
        waking(), agent_id=reviewer_id, source_type=MailboxType.REVIEW_REQUEST, payload__taskId=task.id
    )
    # For the current round (an item written before rounds were recorded counts too).
    current = Q(payload__extra__reviewRound=task.execution_round) | Q(payload__extra__reviewRound__isnull=True)
    return rows.filter(current).exists()


def pending_review_approval(task: Task) -> bool:
    approval_id = (task.metadata or {}).get("reviewApprovalId")
    return bool(approval_id) and Approval.objects.filter(id=approval_id, status=Approval.State.PENDING).exists()


def waiting_without_waker(task: Task) -> str:
    """Why ``task`` violates the invariant ('' when it does not)."""
    if task.status == TaskState.IN_PROGRESS and task.assignee_id and not live_execution(task):
        return f"task in_progress (round {task.execution_round}) with no live execution item"
    if task.status == TaskState.REVIEW and not pending_review_approval(task):
        reviewer = task_reviewer(task)
        if reviewer is None:
            return ""  # nobody can review it; the transition rules keep this from happening
        if reviewer[0] == "user":
            return "task in review with a human reviewer and no pending approval"
        if not live_review_request(task, str(reviewer[1])):
            return f"task in review (round {task.execution_round}) with no live review request"
    return ""


# ---------------------------------------------------------------------------- the repair


def work_liveness_repair() -> RepairReport:
    """Restore every missing waker (see the module docstring). Idempotent."""
    report = RepairReport()
    for task_id in _suspects():
        with transaction.atomic():
            task = Task.objects.select_for_update().filter(id=task_id).first()
            reason = waiting_without_waker(task) if task is not None else ""
            if task is not None and reason:
                _repair(task, reason, report)
    return report


def _suspects() -> list[str]:
    """The waiting tasks that look to have no waker, found in four queries whatever the
    number of tasks (the sweep runs every few seconds); each is checked again under its
    row lock before anything is repaired."""
    tasks = list(Task.objects.filter(status__in=[TaskState.IN_PROGRESS, TaskState.REVIEW]))
    if not tasks:
        return []
    ids = [t.id for t in tasks]
    open_items = MailboxItem.objects.filter(waking(), payload__taskId__in=ids)
    executions = set(
        open_items.filter(
            source_type=MailboxType.TASK_STATUS_UPDATE, payload__extra__triggerExecution=True
        ).values_list("agent_id", "payload__taskId")
    )
    reviews = set(
        open_items.filter(source_type=MailboxType.REVIEW_REQUEST).values_list(
            "agent_id", "payload__taskId", "payload__extra__reviewRound"
        )
    )
    approvals = {(t.metadata or {}).get("reviewApprovalId") for t in tasks} - {None}
    pending = set(Approval.objects.filter(id__in=approvals, status=Approval.State.PENDING).values_list("id", flat=True))
    suspects = []
    for task in tasks:
        if task.status == TaskState.IN_PROGRESS:
            live = not task.assignee_id or (task.assignee_id, task.id) in executions
        else:
            reviewer = task_reviewer(task)
            live = (
                (task.metadata or {}).get("reviewApprovalId") in pending
                or reviewer is None
                or (
                    reviewer[0] == "agent"
                    and any((str(reviewer[1]), task.id, r) in reviews for r in (task.execution_round, None))
                )
            )
        if not live:
            suspects.append(task.id)
    return suspects


def _repair(task: Task, reason: str, report: RepairReport) -> None:
    """Must be called holding SELECT FOR UPDATE on ``task``."""
    repairs = _count_repair(task)
    log.warning("liveness: %s: %s (repair %d)", task.id, reason, repairs)
    limit = settings.MARKUS["LIVENESS_MAX_REPAIRS"]
    if task.status == TaskState.IN_PROGRESS:
        if repairs > limit:
            execution_gave_up(task.id, reason=f"{reason}, after {limit} repairs")
            report.failed.append(task.id)
            return
        item = notices.send_task_execution(
            task, actor=Actor.system(), from_status=task.status, resumed=True, reason=f"liveness repair: {reason}"
        )
        report.restored.append((task.id, item))
        return
    reviewer = task_reviewer(task)
    assert reviewer is not None
    if (
        reviewer[0] == "agent"
        and repairs > limit
        and review_gave_up(task.id, reason=f"{reason}, after {limit} repairs")
    ):
        report.escalated.append(task.id)
        return
    report.restored.append((task.id, request_review(task, Actor.system(), reason=f"Liveness repair: {reason}.")))


def _count_repair(task: Task) -> int:
    """Count this repair in the task's metadata, per execution round; returns the count."""
    counts = dict((task.metadata or {}).get("livenessRepairs") or {})
    key = str(task.execution_round)
    counts[key] = int(counts.get(key, 0)) + 1
    task.metadata = {**(task.metadata or {}), "livenessRepairs": counts}
    Task.objects.filter(id=task.id).update(metadata=task.metadata)
    return counts[key]


# ---------------------------------------------------------------------------- verdicts


def execution_awaits_verdict(task_id: str, execution_round: int | None) -> bool:
    """True when the task is still in_progress in this execution's round: the execution
    ended without submitting it for review or failing it."""
    row = Task.objects.filter(id=task_id).values("status", "execution_round").first()
    if row is None or row["status"] != TaskState.IN_PROGRESS:
        return False
    return execution_round is None or row["execution_round"] == execution_round


def review_awaits_verdict(task_id: str, review_round: int | None) -> bool:
    """True when the task is still in review in this review's round."""
    row = Task.objects.filter(id=task_id).values("status", "execution_round").first()
    if row is None or row["status"] != TaskState.REVIEW:
        return False
    return review_round is None or row["execution_round"] == review_round


def _owner(task: Task) -> User | None:
    """The person answerable for a task: who created it, else the owner of the agent
    that did (or of its assignee)."""
    if task.created_by_user_id:
        return task.created_by_user
    for agent_id in (task.created_by_agent_id, task.assignee_id):
        agent = Agent.objects.select_related("owner").filter(id=agent_id).first() if agent_id else None
        if agent is not None and agent.owner_id:
            return agent.owner
    return None


def execution_gave_up(task_id: str, *, reason: str) -> None:
    """The execution could not reach a verdict: the task fails with the reason, and its
    owner is told (a human creator by the task_failed notification of the transition)."""
    with transaction.atomic():
        task = Task.objects.select_for_update().filter(id=task_id).first()
        if task is None or task.status != TaskState.IN_PROGRESS:
            return
        task_transition(task_id=task.id, to_status=TaskState.FAILED, actor=Actor.system(), note=reason)
        owner = _owner(task)
        if owner is not None and task.created_by_user_id is None:
            notify_user(
                user=owner,
                type=NotificationType.TASK_FAILED,
                title=f"Task failed: {task.title}",
                body=f"{task.title} ({task.id}) failed: {reason}",
                action_target={"path": f"/work?task={task.id}"},
                metadata={"taskId": task.id, "agentId": task.assignee_id},
            )


def review_gave_up(task_id: str, *, reason: str) -> bool:
    """The agent reviewer could not reach a verdict: the review goes to a person (an
    approval for the task's owner). False when there is nobody to ask."""
    with transaction.atomic():
        task = Task.objects.select_for_update().filter(id=task_id).first()
        if task is None or task.status != TaskState.REVIEW or pending_review_approval(task):
            return task is not None and pending_review_approval(task)
        owner = _owner(task)
        if owner is None:
            log.warning("liveness: review of %s stalled (%s) and nobody to escalate to", task_id, reason)
            return False
        request_review(
            task,
            Actor.system(),
            user=owner,
            reason=f"The reviewer could not reach a verdict ({reason}); please review it.",
        )
        return True


def tasks_resume_in_progress() -> list[MailboxItem]:
    """Start-up (section 17): the liveness repair, run once before the workers start.
    Returns the items it restored."""
    return [item for _, item in work_liveness_repair().restored if item is not None]
