"""Errors of the work app; the API maps ``status_code`` (400 / 403 / 404 / 409)."""

from __future__ import annotations

from collections.abc import Iterable
from typing import Any

from markus.core.errors import ConflictError, MarkusError


class WorkError(MarkusError):
    """Bad input about a task or a requirement (400)."""


class WorkPermissionError(MarkusError):
    """The actor may see the object but not do this to it (403)."""

    status_code = 403


class IllegalTransition(ConflictError):
    """A transition the state machine does not allow, or a rule forbids (409). A
    refusal by the state machine names the targets allowed from the current state
    (``allowed``, answered with the 409)."""

    def __init__(self, message: str, *, allowed: Iterable[str] | None = None) -> None:
        super().__init__(message)
        self.allowed = list(allowed) if allowed is not None else None
        self.extra: dict[str, Any] = {"allowed": self.allowed} if self.allowed is not None else {}


class WorkNotFound(MarkusError):
    """A task, requirement or comment that does not exist (404)."""

    status_code = 404


class DependentsWaiting(IllegalTransition):
    """A cancel while tasks wait on the task, without saying what becomes of them
    (409): ``dependents`` (the direct ones, as the task counts them), ``wouldCancel``
    (every task ``cascade: true`` cancels) and the two answers ``allowed``."""

    code = "dependents_waiting"

    def __init__(self, task_id: str, *, dependents: int, would_cancel: list[str]) -> None:
        named = ", ".join(would_cancel[:10]) + (", …" if len(would_cancel) > 10 else "")
        super().__init__(
            f"task {task_id} has {len(would_cancel)} task(s) waiting on it ({named}): send cascade true to "
            "cancel them too, or cascade false to cancel only this one"
        )
        self.extra = {
            "dependents": dependents,
            "wouldCancel": would_cancel,
            "allowed": [{"cascade": True}, {"cascade": False}],
        }
