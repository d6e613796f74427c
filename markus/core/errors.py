"""Errors whose message is safe to show a caller. The API maps them to 400 / 409.

Every 400 answers the fields at fault (``fields``, see ``markus.core.api``): an error
raised with ``fields=`` names them itself; otherwise ``fields_for`` reads the field
from the message ("title is required", "payload.content: NUL bytes are not allowed",
"unknown status 'x'"), and a message that names none is about the body as a whole
(``non_field_errors``, as a DRF serializer's ``validate`` answers)."""

from __future__ import annotations

import re
from collections.abc import Mapping
from typing import Any

# The key of an error about the input as a whole (DRF's NON_FIELD_ERRORS_KEY default).
NON_FIELD = "non_field_errors"

# "name: …", "name must …", "name is …": a field path as the messages spell it
# (``payload.extra.channelKey``, ``metadata.watchers``, ``dependsOn[2]``).
_NAMED = re.compile(
    r"^(?P<name>[A-Za-z_][A-Za-z0-9_\-]*(?:\.[A-Za-z_][A-Za-z0-9_\-]*|\[\d+\])*)"
    r"(?::| (?:must|is|are|may|cannot|needs|has|should|was)\b)"
)
# "unknown sourceType 'x'", "unknown status 'x'": the parameter or field named.
_UNKNOWN = re.compile(r"^unknown (?P<name>[A-Za-z_][A-Za-z0-9_]*) ['\"]")
# Words a sentence starts with that are not field names.
_NOT_FIELDS = frozenset({"a", "an", "the", "this", "that", "it", "there", "only", "nothing", "no", "not"})


class MarkusError(ValueError):
    """Bad input: answered with 400 and the message (and ``fields``: the ones given,
    else the one the message names)."""

    status_code = 400

    def __init__(self, *args: Any, fields: Mapping[str, Any] | None = None) -> None:
        super().__init__(*args)
        if fields is not None:
            self.fields = dict(fields)


class ConflictError(MarkusError):
    """A state conflict (an illegal transition, a closed stream): 409."""

    status_code = 409


def field_of(message: str) -> str | None:
    """The field (or parameter) a message is about, or None."""
    for pattern in (_NAMED, _UNKNOWN):
        found = pattern.match(message)
        if found and found.group("name").lower() not in _NOT_FIELDS:
            return found.group("name")
    return None


def fields_for(message: str) -> dict[str, list[str]]:
    """``{field: [message]}`` for an error that did not name its fields."""
    return {field_of(message) or NON_FIELD: [message]}
