"""Bus errors. Their messages are safe to show a caller (markus.core.api maps status_code)."""

from __future__ import annotations

from markus.core.errors import ConflictError, MarkusError

__all__ = ["BusError", "ConflictError", "ForbiddenError", "NotFoundError"]


class BusError(MarkusError):
    """Bad input: 400."""


class ForbiddenError(MarkusError):
    """The caller may see the object but not do this to it: 403."""

    status_code = 403


class NotFoundError(MarkusError):
    """Missing, or not visible to the caller (answered alike): 404."""

    status_code = 404
