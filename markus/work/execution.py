"""The cancellation flag of a task's running execution.

Leaving ``in_progress`` sets ``Task.cancel_requested_at``; the attention loop calls
``execution_cancelled`` at each yield point of a task execution and stops when it is
true. It lives in the database, so a worker on another machine sees it.
"""

from __future__ import annotations

from .models import Task, TaskState


def execution_cancelled(task_id: str, execution_round: int | None = None) -> bool:
    """True when the execution of ``task_id`` should stop: the flag is set, the task is
    gone or no longer in progress, or (given ``execution_round``) a newer round has
    started since, so this execution is stale."""
    row = Task.objects.filter(id=task_id).values("status", "cancel_requested_at", "execution_round").first()
    running = (TaskState.IN_PROGRESS, TaskState.REVIEW)  # review: submitted, the execution wraps up
    if row is None or row["cancel_requested_at"] is not None or row["status"] not in running:
        return True
    return execution_round is not None and row["execution_round"] != execution_round
