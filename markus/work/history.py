"""The status history of tasks and requirements, and the live events of the work pages.

Both listen to the one place a status changes (``markus.core.signals.task_status_changed`` and
``requirement_status_changed``, sent inside the transition's transaction): the history
row commits or rolls back with the transition; the event goes out after commit, to the
work pages' group (``WORK_GROUP``), with ids only. Comments announce themselves
(``comment_posted``) from ``comment_services``."""

from __future__ import annotations

from typing import Any

from django.db.models import QuerySet

from markus.core.actors import Actor
from markus.core.events import WORK_GROUP, send_json_on_commit

from .models import Requirement, StatusChange, Task

TASK_STATUS = "task:status"
TASK_COMMENT = "task:comment"
REQUIREMENT_STATUS = "requirement:status"
REQUIREMENT_COMMENT = "requirement:comment"
WORK_EVENTS = frozenset({TASK_STATUS, TASK_COMMENT, REQUIREMENT_STATUS, REQUIREMENT_COMMENT})


def record(entity: str, entity_id: str, from_status: str | None, to_status: str, actor: Actor, note: str) -> None:
    StatusChange.objects.create(
        entity=entity,
        entity_id=entity_id,
        from_status=from_status or "",
        to_status=to_status,
        actor_kind=actor.kind,
        actor_id=actor.id,
        actor_name=actor.name[:150],
        note=note or "",
    )


def on_task_status_changed(
    sender: type[Task], *, task: Task, from_status: str | None, to_status: str, actor: Actor, **kwargs: Any
) -> None:
    record(StatusChange.Entity.TASK, task.id, from_status, to_status, actor, kwargs.get("note") or "")
    send_json_on_commit(
        WORK_GROUP, {"type": TASK_STATUS, "taskId": task.id, "fromStatus": from_status, "status": to_status}
    )


def task_changed(task_id: str, status: str) -> None:
    """After commit: the task changed with its status the same (its dead-end mark)."""
    send_json_on_commit(WORK_GROUP, {"type": TASK_STATUS, "taskId": task_id, "fromStatus": status, "status": status})


def on_requirement_status_changed(
    sender: type[Requirement],
    *,
    requirement: Requirement,
    from_status: str | None,
    to_status: str,
    actor: Actor,
    **kwargs: Any,
) -> None:
    record(StatusChange.Entity.REQUIREMENT, requirement.id, from_status, to_status, actor, kwargs.get("note") or "")
    send_json_on_commit(
        WORK_GROUP,
        {"type": REQUIREMENT_STATUS, "requirementId": requirement.id, "fromStatus": from_status, "status": to_status},
    )


def comment_posted(kind: str, parent_id: str, comment_id: str) -> None:
    """After commit: a comment on the task or requirement ``parent_id``."""
    event = TASK_COMMENT if kind == "task" else REQUIREMENT_COMMENT
    key = "taskId" if kind == "task" else "requirementId"
    send_json_on_commit(WORK_GROUP, {"type": event, key: parent_id, "commentId": comment_id})


def history_of(entity: str, entity_id: str) -> QuerySet[StatusChange]:
    """Oldest first: the order a reader follows a task's life in."""
    return StatusChange.objects.filter(entity=entity, entity_id=entity_id).order_by("at", "id")


def history_row(change: StatusChange) -> dict[str, Any]:
    """One row of ``GET …/history`` (and of the work pages' history): the entity, from,
    to, who, when and the note."""
    return {
        "entity": {"kind": change.entity, "id": change.entity_id},
        "from": change.from_status or None,
        "to": change.to_status,
        "who": {"kind": change.actor_kind, "id": change.actor_id, "name": change.actor_name},
        "at": change.at,
        "note": change.note,
    }
