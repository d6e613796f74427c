"""The registry of JSON schemas for payloads published on the bus, validated with
``jsonschema`` at publish time, and the task lifecycle topics.

``task_topics()`` derives ``task.<state>`` from ``markus.work.models.TaskState``, so a
new task state cannot exist without its topic, and the lifecycle schema's state enum
comes from the same place.
"""

from __future__ import annotations

from collections.abc import Callable
from functools import cache
from typing import Any

from jsonschema import Draft202012Validator, FormatChecker
from jsonschema.exceptions import best_match

from markus.work.models import TaskState

from .errors import BusError

TASK_LIFECYCLE_V1 = "markus.task.lifecycle.v1"


class SchemaViolation(BusError):
    """A payload does not match its registered schema."""


def registered_schemas() -> list[str]:
    return sorted(_BUILDERS)


def is_registered(name: object) -> bool:
    return isinstance(name, str) and name in _BUILDERS


def schema_for(name: str) -> dict[str, Any]:
    if name not in _BUILDERS:
        raise BusError(f"unknown schema {name!r}")
    return _BUILDERS[name]()


@cache
def _validator(name: str) -> Draft202012Validator:
    schema = schema_for(name)
    Draft202012Validator.check_schema(schema)
    return Draft202012Validator(schema, format_checker=FormatChecker())


def validate_payload(name: str, payload: Any) -> None:
    """Raise SchemaViolation (a 400 with the first error) unless ``payload`` matches."""
    error = best_match(_validator(name).iter_errors(payload))
    if error is not None:
        where = "/".join(str(p) for p in error.absolute_path) or "(root)"
        raise SchemaViolation(f"payload does not match {name} at {where}: {error.message}")


def task_states() -> list[str]:
    return list(TaskState.values)


def task_topic(state: str) -> str:
    if state not in task_states():
        raise BusError(f"unknown task state {state!r}")
    return f"task.{state}"


def task_topics() -> dict[str, str]:
    """``{state: "task.<state>"}`` for every task state."""
    return {state: f"task.{state}" for state in task_states()}


def _task_lifecycle_v1() -> dict[str, Any]:
    states = task_states()
    nullable_str = {"type": ["string", "null"]}
    return {
        "$schema": "https://json-schema.org/draft/2020-12/schema",
        "$id": TASK_LIFECYCLE_V1,
        "title": "A task changed state",
        "type": "object",
        "required": ["schema", "taskId", "title", "from", "to", "actor", "at"],
        "properties": {
            "schema": {"const": TASK_LIFECYCLE_V1},
            "taskId": {"type": "string", "minLength": 1},
            "title": {"type": "string"},
            "from": {"enum": [*states, None]},
            "to": {"enum": states},
            "actor": {
                "type": "object",
                "required": ["type", "id"],
                "properties": {
                    "type": {"enum": ["user", "agent", "system"]},
                    "id": nullable_str,
                    "name": {"type": "string"},
                },
            },
            "ownerId": nullable_str,
            "watchers": {"type": "array", "items": {"type": "string"}},
            "requirementId": nullable_str,
            "reason": {"type": "string"},
            "at": {"type": "string", "format": "date-time"},
        },
        "additionalProperties": True,
    }


# The schemas by name, a table of this module (no app adds one): each is built when first
# used, since it may read model enums, which are not importable while apps load.
_BUILDERS: dict[str, Callable[[], dict[str, Any]]] = {TASK_LIFECYCLE_V1: _task_lifecycle_v1}
