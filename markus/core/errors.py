"""Errors whose message is safe to show a caller. The API maps them to 400 / 409."""

from __future__ import annotations


class MarkusError(ValueError):
    """Bad input: answered with 400 and the message."""

    status_code = 400


class ConflictError(MarkusError):
    """A state conflict (an illegal transition, a closed stream): 409."""

    status_code = 409
