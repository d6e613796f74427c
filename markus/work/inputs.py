"""Small input checks shared by the work services; each raises WorkError (400)."""

from __future__ import annotations

from typing import Any

from .errors import WorkError


def clean_text(value: Any, name: str, *, max_length: int, required: bool = False) -> str:
    """A stripped string of at most ``max_length`` characters (``None`` reads as "")."""
    if value is None:
        value = ""
    if not isinstance(value, str):
        raise WorkError(f"{name} must be a string")
    value = value.strip()
    if required and not value:
        raise WorkError(f"{name} is required")
    if len(value) > max_length:
        raise WorkError(f"{name} is longer than {max_length} characters")
    return value
