"""Writes about tasks: create, the one transition function, retry / rerun, and the
start-up resume. Requirements live in ``requirement_services``, comments in
``comment_services``; both are re-exported here.

Every state change goes through ``task_transition`` (or its internal ``_apply``, which
must be called holding SELECT FOR UPDATE on the task row). Side effects are written in
the same transaction: mailbox items through ``mailbox_enqueue``, user notifications
through ``notify_user``; events go out on commit through their helpers.
"""

from __future__ import annotations

import logging
from collections.abc import Iterable
from typing import Any

from django.contrib.auth import get_user_model
from django.contrib.auth.models import User
from django.db import transaction
from django.utils import timezone

from mailbox import lifecycle
from mailbox.models import MailboxItem
from mailbox.registry import MailboxType, Status
from mailbox.services import mailbox_drop_status_updates_by_task_id
from markus.agents.models import Agent
from markus.core.actors import Actor
from markus.core.signals import task_status_changed
from notifications.models import UserNotification
from notifications.registry import NotificationType
from notifications.services import approval_cancel, approval_create, notify_user

from . import dead_ends, notices
from .comment_services import requirement_comment_create, task_comment_create
from .errors import DependentsWaiting, IllegalTransition, WorkError, WorkNotFound
from .filing import filing_approver, request_filing_approval, withdraw_filing_approval
from .inputs import clean_text
from .models import Requirement, RequirementState, Task, TaskState
from .requirement_services import (
    requirement_approve,
    requirement_cancel,
    requirement_complete,
    requirement_create,
    requirement_reject,
    requirement_resubmit,
    requirement_tasks_settled,
    requirement_transition,
)
from .selectors import WAITING_STATES, task_reviewer, unmet_dependencies, waiting_dependents, waiting_dependents_count
from .states import (
    RERUNNABLE_TASK_STATES,
    RETRYABLE_TASK_STATES,
    SILENT_TASK_TRANSITIONS,
    TERMINAL_TASK_STATES,
    task_transition_allowed,
)

log = logging.getLogger(__name__)

REVIEW_OPTIONS = [
    {"id": "approve", "label": "Approve", "description": "The work is done: complete the task."},
    {"id": "request_changes", "label": "Request changes", "description": "Send it back to the assignee."},
]
# Terminal states the creator agent of a delegated task hears about.
CREATOR_AGENT_NEWS = frozenset({TaskState.COMPLETED, TaskState.FAILED, TaskState.REJECTED, TaskState.CANCELLED})

__all__ = [
    "REVIEW_OPTIONS",
    "requirement_approve",
    "requirement_cancel",
    "requirement_comment_create",
    "requirement_complete",
    "requirement_create",
    "requirement_reject",
    "requirement_resubmit",
    "requirement_transition",
    "task_comment_create",
    "task_create",
    "task_reset_for_rerun",
    "task_retry",
    "task_transition",
]


def _agent(agent_id: str | None, name: str) -> Agent | None:
    if agent_id in (None, ""):
        return None
    agent = Agent.objects.filter(id=agent_id).first() if isinstance(agent_id, str) else None
    if agent is None:
        raise WorkError(f"{name}: no such agent {agent_id!r}")
    return agent


def _lock(task_id: str) -> Task:
    task = Task.objects.select_for_update().filter(id=task_id).first()
    if task is None:
        raise WorkNotFound(f"no task {task_id!r}")
    return task


# ---------------------------------------------------------------------------- create


@transaction.atomic
def task_create(
    *,
    actor: Actor,
    title: str,
    description: str = "",
    assignee_id: str | None = None,
    reviewer_agent_id: str | None = None,
    reviewer_user_id: int | None = None,
    depends_on: Iterable[str] = (),
    requirement_id: str | None = None,
    metadata: dict[str, Any] | None = None,
    start: bool = True,
) -> Task:
    """Create a task. With ``start`` (the default) and an assignee, it goes straight to
    ``in_progress`` when its dependencies are completed; otherwise it stays ``pending``
    (unblocked later by its last dependency) and the assignee is told it was assigned.
    A task an agent files waits ``pending`` for a person's approval first, where its
    team says so (``filing``): the assignee hears of it once it is approved.
    Checks existence and the rules; the caller checks what the actor may reference."""
    title = clean_text(title, "title", max_length=300, required=True)
    description = clean_text(description, "description", max_length=100_000)
    assignee = _agent(assignee_id, "assigneeId")
    reviewer = _agent(reviewer_agent_id, "reviewerId")
    reviewer_user = None
    if reviewer_user_id not in (None, ""):
        reviewer_user = get_user_model().objects.filter(pk=reviewer_user_id).first()
        if reviewer_user is None:
            raise WorkError(f"reviewerUserId: no such user {reviewer_user_id!r}")
    if reviewer is not None and reviewer_user is not None:
        raise WorkError("a task has one reviewer: give reviewerId or reviewerUserId, not both")
    if reviewer is not None and assignee is not None and reviewer.id == assignee.id:
        raise WorkError("the reviewer cannot be the assignee: a worker cannot complete its own task")
    metadata = _check_metadata(metadata)
    requirement = None
    if requirement_id not in (None, ""):
        requirement = Requirement.objects.filter(id=requirement_id).first()
        if requirement is None:
            raise WorkError(f"requirementId: no such requirement {requirement_id!r}")
        if requirement.status != RequirementState.IN_PROGRESS:
            raise WorkError(f"requirement {requirement.id} is {requirement.status}; tasks need an approved one")
    dependency_ids = check_dependency_ids(depends_on)
    creator_agent = (
        Agent.objects.select_related("owner", "team__owner").filter(id=actor.agent_id).first()
        if actor.is_agent
        else None
    )
    task = Task.objects.create(
        title=title,
        description=description,
        assignee=assignee,
        reviewer_agent=reviewer,
        reviewer_user=reviewer_user,
        created_by_agent=creator_agent,
        created_by_user_id=actor.user_id,
        requirement=requirement,
        team_id=(assignee.team_id if assignee else None) or (creator_agent.team_id if creator_agent else None),
        metadata=metadata,
    )
    task.depends_on.set(dependency_ids)  # type: ignore[arg-type]  # django-stubs: pks are ints; Task ids are str
    # Filing a task is the first event of its lifecycle (from nothing to pending).
    task_status_changed.send(sender=Task, task=task, from_status=None, to_status=task.status, actor=actor, note="")
    waiting = unmet_dependencies(task)
    approver = filing_approver(creator_agent)
    if creator_agent is not None and approver is not None:
        request_filing_approval(task, creator_agent, approver, start=start)
    elif start and assignee is not None and not waiting:
        _apply(task, TaskState.IN_PROGRESS, actor)
    elif assignee is not None and assignee.id != actor.agent_id:
        notices.send_task_assigned(task, actor=actor, waiting_for=waiting)
    if creator_agent is not None and creator_agent.owner is not None and creator_agent.owner != approver:
        notify_user(
            user=creator_agent.owner,
            type=NotificationType.TASK_CREATED,
            title=f"{creator_agent.name} created a task: {title}",
            body=description[:500],
            action_target=_task_path(task),
            metadata={"taskId": task.id, "agentId": creator_agent.id},
        )
    return task


def _check_metadata(metadata: Any) -> dict[str, Any]:
    if metadata is None:
        return {}
    if not isinstance(metadata, dict):
        raise WorkError("metadata must be an object")
    watchers = metadata.get("watchers")
    if watchers is not None:
        if not isinstance(watchers, list) or not all(isinstance(w, str) for w in watchers):
            raise WorkError("metadata.watchers must be a list of agent ids")
        known = set(Agent.objects.filter(id__in=watchers).values_list("id", flat=True))
        missing = [w for w in watchers if w not in known]
        if missing:
            raise WorkError(f"metadata.watchers: no such agent {missing[0]!r}")
    return dict(metadata)


def check_dependency_ids(depends_on: Iterable[str]) -> list[str]:
    """Task ids that exist, once each, in the order given (what the actor may see is the caller's)."""
    if isinstance(depends_on, str) or not all(isinstance(d, str) for d in depends_on):
        raise WorkError("dependsOn must be a list of task ids")
    ids = list(dict.fromkeys(depends_on))
    found = set(Task.objects.filter(id__in=ids).values_list("id", flat=True))
    missing = [d for d in ids if d not in found]
    if missing:
        raise WorkError(f"dependsOn: no such task {missing[0]!r}")
    return ids


def _task_path(task: Task) -> dict[str, str]:
    return {"path": f"/work?task={task.id}"}


# ---------------------------------------------------------------------------- transition


@transaction.atomic
def task_transition(*, task_id: str, to_status: str, actor: Actor, note: str = "", cascade: bool = False) -> Task:
    """Move a task to ``to_status``: the one way a task's status changes.

    Raises IllegalTransition (409) for a move the state machine or a rule forbids,
    WorkError (400) for an unknown status, WorkNotFound (404) for a missing task.
    ``note`` (a reason, a reviewer's feedback) is carried into the notifications.
    ``cascade`` with ``cancelled``: the tasks waiting on it (``waiting_dependents``,
    also those waiting on them) are cancelled too, each assignee told as for any
    cancellation, by the same actor.
    """
    if to_status not in TaskState.values:
        raise WorkError(f"unknown status {to_status!r}; expected one of: {', '.join(TaskState.values)}")
    task = _lock(task_id)
    note = clean_text(note, "note", max_length=10_000)
    cascading = cascade and to_status == TaskState.CANCELLED
    _apply(task, to_status, actor, note=note, recheck_dependents=not cascading)
    if cascading:
        because = f"cancelled with {task.id} ({task.title}), which it waits on"
        for dependent_id in waiting_dependents(task.id):
            dependent = _lock(dependent_id)
            if dependent.status in WAITING_STATES:
                _apply(dependent, TaskState.CANCELLED, actor, note=f"{because}. {note}".strip() if note else because)
        dead_ends.recheck_dependents(task, actor)  # those it did not cancel (waiting on others too)
    return task


def task_move(actor: Actor, task: Task, *, to_status: str, note: str, cascade: bool | None) -> tuple[Task, list[str]]:
    """Move a task as every door does (the API, the work page, the MCP door); a cancel while tasks
    wait on it needs ``cascade`` decided (else 409 ``dependents_waiting``, which says
    how many and which). Returns the task moved and the ids cancelled with it."""
    cascaded: list[str] = []
    if to_status == TaskState.CANCELLED:
        would = waiting_dependents(task.id)
        if would and cascade is None:
            raise DependentsWaiting(task.id, dependents=waiting_dependents_count(task), would_cancel=would)
        cascaded = would if cascade else []
    moved = task_transition(task_id=task.id, to_status=to_status, actor=actor, note=note, cascade=bool(cascade))
    return moved, cascaded


def _check_rules(task: Task, to_status: str, actor: Actor) -> None:
    if not task_transition_allowed(task.status, to_status):
        allowed = [s for s in TaskState.values if task_transition_allowed(task.status, s)]
        raise IllegalTransition(
            f"task {task.id} cannot move from {task.status} to {to_status}"
            f" (allowed: {', '.join(allowed) or 'none, it is final'})",
            allowed=allowed,
        )
    if to_status == TaskState.COMPLETED and actor.is_agent and actor.id == task.assignee_id:
        raise IllegalTransition("a worker cannot complete its own task: submit it for review instead")
    if task.filing_approval_id and not actor.is_user and to_status in (TaskState.IN_PROGRESS, TaskState.COMPLETED):
        raise IllegalTransition(
            f"task {task.id} waits for a person's approval before it starts (approval {task.filing_approval_id})",
            allowed=[TaskState.REJECTED, TaskState.CANCELLED],
        )
    if to_status == TaskState.IN_PROGRESS:
        if task.assignee_id is None:
            raise IllegalTransition(f"task {task.id} has no assignee to work on it")
        waiting = unmet_dependencies(task)
        if waiting:
            raise IllegalTransition(f"task {task.id} waits for unfinished tasks: {', '.join(waiting)}")
    if to_status == TaskState.REVIEW:
        reviewer = task_reviewer(task)
        if reviewer is None:
            raise IllegalTransition(f"task {task.id} has no reviewer")
        if reviewer == ("agent", task.assignee_id):
            raise IllegalTransition("the reviewer cannot be the assignee: a worker cannot complete its own task")


def _apply(task: Task, to_status: str, actor: Actor, *, note: str = "", recheck_dependents: bool = True) -> None:
    """Apply a transition. Must be called holding SELECT FOR UPDATE on ``task``.

    1. Check the state machine and the rules.
    2. Update the row: status, execution round and cancel flag, completed_at.
    3. Side effects of leaving the old state (cancel the execution, withdraw a review),
       then of entering the new one (execution, review request, notifications).
    4. Entering a terminal state runs the cascades (dependents, requirement).
    5. Dependencies that can never be met (``dead_ends``): its own mark, and (unless
       ``recheck_dependents`` is false: a cascade cancels them next) its dependents'.
    """
    _check_rules(task, to_status, actor)
    withdraw_filing_approval(task)  # moved on: the question of its filing no longer stands
    from_status = task.status
    now = timezone.now()
    task.status = to_status
    task.updated_at = now
    if to_status == TaskState.IN_PROGRESS:
        task.execution_round += 1
        task.cancel_requested_at = None
    elif from_status == TaskState.IN_PROGRESS and to_status != TaskState.REVIEW:
        # The loop sees this at its next yield point (markus.work.execution). Submitting
        # for review is the work finishing, not a cancellation: the execution wraps up.
        task.cancel_requested_at = now
    if to_status == TaskState.REVIEW:
        task.deliverables = note  # the submitter's note: what the reviewer is to look at
    if to_status == TaskState.COMPLETED:
        task.completed_at = now
    elif to_status != TaskState.ARCHIVED:
        task.completed_at = None
    if from_status == TaskState.REVIEW:
        (task.metadata or {}).pop("reviewApprovalId", None)
    task.save(
        update_fields=[
            "status",
            "updated_at",
            "execution_round",
            "cancel_requested_at",
            "completed_at",
            "metadata",
            "deliverables",
        ]
    )
    log.info("task %s: %s -> %s by %s %s", task.id, from_status, to_status, actor.kind, actor.id)

    if from_status == TaskState.IN_PROGRESS:
        _drop_open_items(task, task.assignee_id, reason=f"task left in_progress ({to_status})", execution=True)
    if from_status == TaskState.REVIEW:
        _withdraw_reviews(task)
        reviewer = task_reviewer(task)
        if reviewer and reviewer[0] == "agent":
            _drop_open_items(task, str(reviewer[1]), reason="task left review", execution=False)

    if to_status == TaskState.IN_PROGRESS:
        notices.send_task_execution(task, actor=actor, from_status=from_status, note=note)
    elif to_status == TaskState.REVIEW:
        request_review(task, actor)
    elif (from_status, to_status) not in SILENT_TASK_TRANSITIONS:
        _notify_assignee(task, actor, from_status, note)
    _notify_people(task, actor, from_status, note)

    if to_status in TERMINAL_TASK_STATES and from_status not in TERMINAL_TASK_STATES:
        _unblock_dependents(task)
        if task.requirement_id:
            requirement_tasks_settled(requirement_id=task.requirement_id)
    # Dependencies that can never be met: its own mark (it left waiting), its dependents'.
    if task.blocked_reason:
        dead_ends.recheck(task, actor)
    if recheck_dependents:
        dead_ends.recheck_dependents(task, actor)
    task_status_changed.send(
        sender=Task, task=task, from_status=from_status, to_status=to_status, actor=actor, note=note
    )


def _withdraw_reviews(task: Task) -> None:
    """The task left review: every review still asked of a person is withdrawn and its
    notification read. Not only the last one: the liveness repair and an escalation to
    the owner ask again, each with an approval of its own, found by its notification."""
    asked = UserNotification.objects.filter(type=NotificationType.TASK_REVIEW, metadata__taskId=task.id)
    for approval_id in set(asked.values_list("metadata__approvalId", flat=True)):
        approval_cancel(approval_id=approval_id)  # an answered one stays as it is


def _drop_open_items(task: Task, agent_id: str | None, *, reason: str, execution: bool) -> None:
    """Drop not-yet-started items about ``task``: its execution triggers (when it leaves
    in_progress) or the reviewer's review requests (when the review is withdrawn)."""
    if not agent_id:
        return
    source_type = MailboxType.TASK_STATUS_UPDATE if execution else MailboxType.REVIEW_REQUEST
    rows = MailboxItem.objects.filter(
        agent_id=agent_id,
        source_type=source_type,
        payload__taskId=task.id,
        status__in=[Status.QUEUED, Status.DEFERRED],
    )
    for item in rows:
        if execution and not item.triggers_execution:
            continue
        lifecycle.drop(item.id, reason=reason, from_statuses=[Status.QUEUED, Status.DEFERRED])


def request_review(task: Task, actor: Actor, *, user: User | None = None, reason: str = "") -> MailboxItem | None:
    """→ review: the reviewer agent gets a review_request; a human reviewer (or
    ``user``, a person the review is escalated to) an approval and a task_review
    notification. The submitting assignee gets nothing. ``reason``: why it is asked
    again (a liveness repair, an escalation). Returns the review request, if any."""
    reviewer = task_reviewer(task) if user is None else ("user", user.pk)
    if reviewer is None:
        raise IllegalTransition(f"task {task.id} has no reviewer")
    kind, reviewer_id = reviewer
    if kind == "agent":
        return notices.send_review_request(str(reviewer_id), task, actor=actor, reason=reason)
    user = user or get_user_model().objects.get(pk=reviewer_id)
    lines = [f"{actor.name} submitted task {task.id} for review."]
    if reason:
        lines.append(reason)
    if task.deliverables:
        lines.append(f"Deliverables:\n{task.deliverables}")
    if task.description:
        lines.append(task.description)
    approval = approval_create(
        user=user,
        title=f"Review task: {task.title}",
        description="\n\n".join(lines),
        options=[dict(o) for o in REVIEW_OPTIONS],
        agent=task.assignee,
        notification_type=NotificationType.TASK_REVIEW,
        action_target=_task_path(task),
        metadata={"taskId": task.id},
    )
    task.metadata = {**(task.metadata or {}), "reviewApprovalId": approval.id}
    task.save(update_fields=["metadata"])
    return None


def _notify_assignee(task: Task, actor: Actor, from_status: str, note: str) -> None:
    """Informational status update to the assignee (and, for the end of a delegated
    task, its creator agent). An agent is not told about a change it made itself."""
    recipients = [task.assignee_id]
    if task.status in CREATOR_AGENT_NEWS:
        recipients.append(task.created_by_agent_id)
    for agent_id in dict.fromkeys(r for r in recipients if r and r != actor.agent_id):
        notices.send_task_status_info(agent_id, task, actor=actor, from_status=from_status, note=note)


def _notify_people(task: Task, actor: Actor, from_status: str, note: str) -> None:
    """task_completed / task_failed for the human who created the task."""
    kinds: dict[str, NotificationType] = {
        TaskState.COMPLETED: NotificationType.TASK_COMPLETED,
        TaskState.FAILED: NotificationType.TASK_FAILED,
    }
    kind = kinds.get(task.status)
    if kind is None or task.created_by_user_id is None or (actor.is_user and str(task.created_by_user_id) == actor.id):
        return
    creator = task.created_by_user
    if creator is None:
        return
    body = f"{task.title} ({task.id}) moved from {from_status} to {task.status}."
    if note:
        body += f"\n{note}"
    notify_user(
        user=creator,
        type=kind,
        title=f"Task {task.status}: {task.title}",
        body=body,
        action_target=_task_path(task),
        metadata={"taskId": task.id, "agentId": task.assignee_id},
    )


def _unblock_dependents(task: Task) -> None:
    """Start pending or blocked dependents with an assignee once all their
    dependencies are completed."""
    dependents = (
        Task.objects.select_for_update()
        .filter(
            depends_on=task,
            status__in=[TaskState.PENDING, TaskState.BLOCKED],
            assignee__isnull=False,
            filing_approval__isnull=True,  # waits for a person's approval first
        )
        .order_by("created_at", "id")
    )
    for dependent in dependents:
        start_when_free(dependent, Actor.system(), note=f"its dependency {task.id} is completed")


def start_when_free(task: Task, actor: Actor, *, note: str) -> bool:
    """Start a waiting task (pending or blocked) with an assignee once all its
    dependencies are completed, unless it waits for a person's approval of its filing.
    Must be called holding SELECT FOR UPDATE on ``task``. True if it started."""
    if task.status not in WAITING_STATES or task.assignee_id is None or task.filing_approval_id is not None:
        return False
    if unmet_dependencies(task):
        return False
    _apply(task, TaskState.IN_PROGRESS, actor, note=note)
    return True


# ---------------------------------------------------------------------------- retry, rerun, resume


@transaction.atomic
def task_retry(*, task_id: str, actor: Actor, note: str = "") -> Task:
    """Retry a failed, cancelled or blocked task fresh (section 18): drop its queued
    informational status updates, then start a new execution round."""
    return _restart(task_id, actor, RETRYABLE_TASK_STATES, "retried", note)


@transaction.atomic
def task_reset_for_rerun(*, task_id: str, actor: Actor, note: str = "") -> Task:
    """Run a completed (e.g. scheduled) task again, with the same cleanup as a retry."""
    return _restart(task_id, actor, RERUNNABLE_TASK_STATES, "re-run", note)


def _restart(task_id: str, actor: Actor, allowed: frozenset[str], verb: str, note: str) -> Task:
    task = _lock(task_id)
    if task.status not in allowed:
        raise IllegalTransition(
            f"task {task.id} is {task.status}; only {', '.join(sorted(allowed))} tasks can be {verb}"
        )
    _check_rules(task, TaskState.IN_PROGRESS, actor)
    if task.assignee_id:
        mailbox_drop_status_updates_by_task_id(agent_id=task.assignee_id, task_id=task.id)
    task.metadata = {**(task.metadata or {}), "restarts": int((task.metadata or {}).get("restarts", 0)) + 1}
    _apply(task, TaskState.IN_PROGRESS, actor, note=clean_text(note, "note", max_length=10_000) or f"task {verb}")
    return task
