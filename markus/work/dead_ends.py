"""Dependencies that can never be met, seen (issue 40).

Only a completed dependency lets a task start (``states.dependency_satisfied``). A task
waiting (pending or blocked) on a dependency that ended any other way (failed, rejected,
cancelled, archived without completing) or waiting in a cycle (tasks waiting on each
other) would wait for good, and so would the tasks waiting on it. Such a task is marked:
``Task.blocked_reason`` says why (the API's ``blockedReason``, the task page and the
board), its status stays what it was
(the state machine is the assignee's; a person decides: retry the dependency, change or
drop it, cancel the task). Its creator is told once per dead end, when the mark is set
(a ``task_blocked`` notification: the person who filed it, or the owner of the agent
that did). The mark goes when the cause does (the dependency is retried or re-run, or
no longer depended on; the task leaves the waiting states); a new dead end later tells
the creator again. A task waiting on a marked task is marked in turn ("its dependency …
can never start"), without a notification of its own: the first one's is the news.

Re-checked where the cause changes: a task's transition re-checks the tasks waiting on
it (``services._apply``), a change of dependencies or a deletion the task changed
(``dependencies``), and the beat's ``attention.dead_ends`` (``sweep``) what slipped through:
a cycle closed by two changes at once, rows changed outside the services.
A deleted dependency is not a dead end here: deleting a task releases the tasks waiting
on it (``dependencies.release_dependents``), each with a history row."""

from __future__ import annotations

import logging

from django.db import transaction
from django.db.models import Q

from markus.core.actors import Actor
from notifications.registry import NotificationType
from notifications.services import notify_user

from . import history
from .models import StatusChange, Task, TaskState
from .selectors import WAITING_STATES, dependency_cycle

log = logging.getLogger(__name__)

# A dependency that ended without completing: it will never satisfy its dependents.
ENDED_BADLY = Q(status__in=[TaskState.FAILED, TaskState.REJECTED, TaskState.CANCELLED]) | Q(
    status=TaskState.ARCHIVED, completed_at__isnull=True
)


def dead_end_reason(task: Task) -> str:
    """Why ``task`` can never start as its dependencies stand, or "" (it may yet):
    the dependencies that ended badly, then the cycle it waits in."""
    if task.status not in WAITING_STATES:
        return ""
    dependency_ids = list(task.depends_on.values_list("id", flat=True))
    if not dependency_ids:
        return ""
    ended = task.depends_on.filter(ENDED_BADLY).order_by("id").values_list("id", "title", "status")
    reasons = [f"its dependency {i} ({title}) is {status}" for i, title, status in ended]
    cycle = dependency_cycle(task.id, dependency_ids)
    if cycle:
        reasons.append(f"it waits in a cycle: {' → '.join(cycle)}")
    if not reasons:  # else a dependency that can never start itself
        marked = task.depends_on.exclude(blocked_reason="").filter(status__in=WAITING_STATES).order_by("id")
        reasons = [f"its dependency {i} ({title}) can never start" for i, title in marked.values_list("id", "title")]
    return "; ".join(reasons)


def _transitive(reason: str) -> bool:
    """Is it marked only because a dependency is (no notification: that one's is enough)?"""
    return all(part.endswith("can never start") for part in reason.split("; "))


def recheck(task: Task, actor: Actor | None = None) -> bool:
    """Set or clear ``task``'s mark as its dependencies stand; tell its creator when a
    mark is set. Must be called holding SELECT FOR UPDATE on ``task``. True if the mark
    changed."""
    reason = dead_end_reason(task)
    if reason == task.blocked_reason:
        return False
    before, task.blocked_reason = task.blocked_reason, reason
    Task.objects.filter(id=task.id).update(blocked_reason=reason)
    if task.status not in WAITING_STATES:
        return True  # it no longer waits: its transition's history row says so
    actor = actor or Actor.system()
    note = f"can never start: {reason}" if reason else f"can start again (was: {before})"
    history.record(StatusChange.Entity.TASK, task.id, task.status, task.status, actor, note)
    history.task_changed(task.id, task.status)
    if reason and not before and not _transitive(reason):
        _tell_creator(task, reason)
    log.info("task %s: %s", task.id, note)
    recheck_dependents(task, actor)  # the tasks waiting on it: marked or unmarked in turn
    return True


def recheck_dependents(task: Task, actor: Actor | None = None) -> list[str]:
    """Re-check the tasks waiting on ``task`` (its status changed), and those marked
    that no longer wait. Returns the ids whose mark changed."""
    rows = (
        Task.objects.select_for_update()
        .filter(Q(status__in=WAITING_STATES) | ~Q(blocked_reason=""), depends_on=task)
        .order_by("created_at", "id")
    )
    return [t.id for t in rows if recheck(t, actor)]


def sweep() -> list[str]:
    """The beat's check (``attention.dead_ends``): every waiting task with dependencies and
    every marked task, each re-checked under its row lock. Returns the ids changed."""
    ids = list(
        Task.objects.filter(Q(status__in=WAITING_STATES, depends_on__isnull=False) | ~Q(blocked_reason=""))
        .order_by("created_at", "id")
        .values_list("id", flat=True)
        .distinct()
    )
    before = dict(Task.objects.filter(id__in=ids).values_list("id", "blocked_reason"))
    for task_id in ids:
        with transaction.atomic():
            task = Task.objects.select_for_update().filter(id=task_id).first()
            if task is not None:
                recheck(task)  # and, in turn, the tasks waiting on it
    after = dict(Task.objects.filter(id__in=ids).values_list("id", "blocked_reason"))
    return [task_id for task_id in ids if before.get(task_id) != after.get(task_id)]


def _tell_creator(task: Task, reason: str) -> None:
    """The person who filed ``task``, or the owner of the agent that filed it (else its
    team's owner): a ``task_blocked`` notification, once per dead end."""
    creator = task.created_by_user
    agent = task.created_by_agent
    if creator is None and agent is not None:
        creator = agent.answerable_person
    if creator is None:
        return
    notify_user(
        user=creator,
        type=NotificationType.TASK_BLOCKED,
        title=f"Task can never start: {task.title}",
        body=f"{task.title} ({task.id}) waits for good: {reason}. Retry or change the dependency, or cancel the task.",
        action_target={"path": f"/work?task={task.id}"},
        metadata={"taskId": task.id, "agentId": task.assignee_id, "reason": reason},
    )
