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
