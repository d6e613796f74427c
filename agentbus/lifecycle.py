"""Task lifecycle on the bus: every task transition writes a ``task.<state>`` record to
the transition outbox, inside the transition's own transaction.

The audience is resolved here, inside that transaction, while the outgoing owner is
still on the row: read after commit, a terminal or blocked transition may have released
it, and "your task failed" would reach nobody. It is the task's owner (assignee) plus
the agent ids in ``metadata["watchers"]``. The record carries the real actor; it is
sent by the operator persona when the relay publishes it after commit.
"""

from __future__ import annotations

import logging
from typing import Any

from django.utils import timezone

from markus.core.actors import Actor
from markus.work.models import Task

from .outbox import outbox_write
from .schemas import TASK_LIFECYCLE_V1, task_topic

log = logging.getLogger(__name__)


def lifecycle_audience(task: Task) -> list[str]:
    watchers = (task.metadata or {}).get("watchers") or []
    ids = [task.assignee_id, *[w for w in watchers if isinstance(w, str)]]
    return sorted({i for i in ids if i})


def lifecycle_payload(task: Task, *, from_status: str | None, to_status: str, actor: Actor) -> dict[str, Any]:
    watchers = [w for w in (task.metadata or {}).get("watchers") or [] if isinstance(w, str)]
    return {
        "schema": TASK_LIFECYCLE_V1,
        "taskId": task.id,
        "title": task.title,
        "from": from_status,
        "to": to_status,
        "actor": {"type": actor.kind, "id": actor.id, "name": actor.name},
        "ownerId": task.assignee_id,
        "watchers": watchers,
        "requirementId": task.requirement_id,
        "at": timezone.now().isoformat(),
    }


def on_task_status_changed(
    sender: type[Task],
    *,
    task: Task,
    from_status: str | None,
    to_status: str,
    actor: Actor,
    **kwargs: Any,
) -> None:
    """Receiver of ``markus.core.signals.task_status_changed`` (sent inside the
    transition's transaction)."""
    audience = lifecycle_audience(task)
    if not audience:
        return
    outbox_write(
        topic=task_topic(str(to_status)),
        schema=TASK_LIFECYCLE_V1,
        audience=audience,
        payload=lifecycle_payload(
            task, from_status=from_status and str(from_status), to_status=str(to_status), actor=actor
        ),
    )
