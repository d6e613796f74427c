"""The task and requirement state machines (issue 4), as data.

Terminal task states are the ones a task "ends" in: completed, failed, rejected,
cancelled and archived. Entering one of them (from a non-terminal state) runs the
cascades: dependents are unblocked, and a requirement whose linked tasks are all
terminal asks its agent for a review. Only a *completed* dependency satisfies a
dependent (also once archived, see ``Task.completed_at``): a failed or cancelled
dependency keeps its dependents waiting until a human decides.
"""

from __future__ import annotations

from datetime import datetime

from .models import RequirementState as R
from .models import TaskState as T

TASK_TRANSITIONS: dict[str, frozenset[str]] = {
    T.PENDING: frozenset({T.IN_PROGRESS, T.BLOCKED, T.REJECTED, T.CANCELLED, T.COMPLETED}),
    T.IN_PROGRESS: frozenset({T.REVIEW, T.BLOCKED, T.FAILED, T.CANCELLED}),
    T.BLOCKED: frozenset({T.IN_PROGRESS, T.CANCELLED}),
    T.REVIEW: frozenset({T.COMPLETED, T.IN_PROGRESS, T.CANCELLED}),
    T.COMPLETED: frozenset({T.ARCHIVED, T.IN_PROGRESS}),
    T.FAILED: frozenset({T.IN_PROGRESS, T.ARCHIVED}),
    T.REJECTED: frozenset({T.ARCHIVED}),
    T.CANCELLED: frozenset({T.ARCHIVED, T.IN_PROGRESS}),
    T.ARCHIVED: frozenset(),
}
TERMINAL_TASK_STATES = frozenset({T.COMPLETED, T.FAILED, T.REJECTED, T.CANCELLED, T.ARCHIVED})
# Transitions that notify nobody (seed 3.4): the cancel flag or the execution item
# already carries the news.
SILENT_TASK_TRANSITIONS = frozenset({(T.IN_PROGRESS, T.BLOCKED), (T.BLOCKED, T.IN_PROGRESS)})
# Where a retry may start from; a completed task is re-run with reset-for-rerun.
RETRYABLE_TASK_STATES = frozenset({T.FAILED, T.CANCELLED, T.BLOCKED})
RERUNNABLE_TASK_STATES = frozenset({T.COMPLETED})

REQUIREMENT_TRANSITIONS: dict[str, frozenset[str]] = {
    R.PENDING: frozenset({R.IN_PROGRESS, R.REJECTED, R.CANCELLED}),
    R.REJECTED: frozenset({R.PENDING, R.CANCELLED}),
    R.IN_PROGRESS: frozenset({R.COMPLETED, R.CANCELLED}),
    R.COMPLETED: frozenset({R.CANCELLED}),
    R.CANCELLED: frozenset(),
}
MAX_PENDING_REQUIREMENTS_PER_AGENT = 3


def task_transition_allowed(from_status: str, to_status: str) -> bool:
    return to_status in TASK_TRANSITIONS.get(from_status, frozenset())


def requirement_transition_allowed(from_status: str, to_status: str) -> bool:
    return to_status in REQUIREMENT_TRANSITIONS.get(from_status, frozenset())


def dependency_satisfied(status: str, completed_at: datetime | None) -> bool:
    return status == T.COMPLETED or (status == T.ARCHIVED and completed_at is not None)
