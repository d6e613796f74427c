"""The cancellation flag of a task's running execution.

Leaving ``in_progress`` sets ``Task.cancel_requested_at``; the attention loop calls
``execution_cancelled`` at each yield point of a task execution and stops when it is
true, and before each tool call of the execution (locked: the call's effect commits
only while the task is still the execution's). It lives in the database, so a worker on
another machine sees it.
"""

from __future__ import annotations

from .models import Task, TaskState

# What an execution's refused effect and its cancel decision say.
LEFT_IN_PROGRESS = "the task left in_progress: its execution is cancelled"


def execution_cancelled(task_id: str, execution_round: int | None = None, *, lock: bool = False) -> bool:
    """True when the execution of ``task_id`` should stop: the flag is set, the task is
    gone or no longer in progress, or (given ``execution_round``) a newer round has
    started since, so this execution is stale. ``lock``: hold the task's row until the
    caller's transaction ends, so a cancel waits for the effect made under it (or the
    effect sees the cancel)."""
    rows = Task.objects.filter(id=task_id)
    if lock:
        rows = rows.select_for_update()
    row = rows.values("status", "cancel_requested_at", "execution_round").first()
    # review: submitted, the execution wraps up; completed (only from review: the reviewer
    # approved while the execution still finished its last turns) too. Any other state, or
    # the flag (set when the task left in_progress for anything but review), stops it.
    running = (TaskState.IN_PROGRESS, TaskState.REVIEW, TaskState.COMPLETED)
    if row is None or row["cancel_requested_at"] is not None or row["status"] not in running:
        return True
    return execution_round is not None and row["execution_round"] != execution_round
