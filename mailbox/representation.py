"""A mailbox item as the API and the UI see it: ``serialize_item`` for the API (Python
values, encoded by DRF), ``event_item`` for the ``agent:mailbox`` event (JSON values,
made once from the row a statement wrote or returned)."""

from __future__ import annotations

from typing import Any

from markus.core.events import json_datetime

from .models import MailboxItem
from .registry import descriptor

# The key of ``MailboxItem.marks`` that makes an item private: the id of the person whose
# private chat session it belongs to. Who may read it is decided in
# ``markus.agents.permissions`` (``Reader``); everybody else gets ``redacted``.
PRIVATE_TO = "privateTo"
PLACEHOLDER = "(a private conversation)"
# What of an item's metadata a redacted item keeps: who spoke, not what about.
_KEPT_METADATA = ("senderId", "senderName", "senderRole")


def private_to(item: MailboxItem) -> int | None:
    return private_of(item.marks)


def private_of(marks: dict[str, Any] | None) -> int | None:
    """``PRIVATE_TO`` of an item's marks (read alone, without the item)."""
    value = (marks or {}).get(PRIVATE_TO)
    return value if isinstance(value, int) else None


def redacted(entry: dict[str, Any]) -> dict[str, Any]:
    """An item's representation (``serialize_item``, ``event_item``, a timeline entry)
    with the content of its private conversation replaced by ``PLACEHOLDER``: ids,
    type, status, times and the sender stay."""
    out = {**entry, "summary": PLACEHOLDER}
    if "payload" in out:
        out["payload"] = {"summary": PLACEHOLDER, "content": PLACEHOLDER}
    if "content" in out:
        out["content"] = ""
    if "metadata" in out:
        out["metadata"] = {k: v for k, v in (out["metadata"] or {}).items() if k in _KEPT_METADATA}
    if out.get("dropReason"):
        out["dropReason"] = PLACEHOLDER
    if isinstance(out.get("decisions"), list):
        out["decisions"] = [{**d, "reasoning": PLACEHOLDER} for d in out["decisions"]]
    if isinstance(out.get("activity"), dict):
        out["activity"] = {**out["activity"], "label": PLACEHOLDER}
    return out


def serialize_item(item: MailboxItem) -> dict[str, Any]:
    return {
        "id": item.id,
        "agentId": item.agent_id,
        "sourceType": item.source_type,
        "category": item.category,
        "label": item.label,
        "priority": item.priority,
        "status": item.status,
        "summary": item.summary,
        "payload": item.payload,
        "metadata": item.metadata or {},
        "marks": item.marks,
        "privateTo": private_to(item),
        "queuedAt": item.queued_at,
        "startedAt": item.started_at,
        "completedAt": item.completed_at,
        "deferredUntil": item.deferred_until,
        "answerDueAt": item.answer_due_at,
        "mergedInto": item.merged_into_id,
        "attempts": item.attempts,
        "dropReason": item.drop_reason,
    }


def event_item(item: MailboxItem) -> dict[str, Any]:
    """``serialize_item`` as JSON values, made once: what the ``agent:mailbox`` event
    carries (datetimes as ``DjangoJSONEncoder`` writes them). The payload and metadata
    are the row's JSON, stored (or read back) by the statement that wrote the row."""
    d = descriptor(item.source_type)
    payload = item.payload
    return {
        "id": item.id,
        "agentId": item.agent_id,
        "sourceType": str(item.source_type),
        "category": d.category.value,
        "label": d.label,
        "priority": int(item.priority),
        "status": str(item.status),
        "summary": str((payload or {}).get("summary", "")),
        "payload": payload,
        "metadata": item.metadata or {},
        "marks": item.marks,
        "privateTo": private_to(item),
        "queuedAt": json_datetime(item.queued_at),
        "startedAt": json_datetime(item.started_at),
        "completedAt": json_datetime(item.completed_at),
        "deferredUntil": json_datetime(item.deferred_until),
        "answerDueAt": json_datetime(item.answer_due_at),
        "mergedInto": item.merged_into_id,
        "attempts": int(item.attempts),
        "dropReason": item.drop_reason,
    }
