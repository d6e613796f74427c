"""Reads of the mailbox: the queue in dequeue order and the enriched timeline."""
from __future__ import annotations

from typing import Any

from django.db.models import Prefetch, QuerySet

from markus.errors import MarkusError

from .models import MailboxItem
from .registry import MAILBOX_TYPE_REGISTRY, Category, Status, is_known_type, types_in_category
from .services import queued, serialize_item


def queue_depth(agent_id: str) -> int:
    return MailboxItem.objects.filter(agent_id=agent_id, status=Status.QUEUED).count()


def queued_items(agent_id: str) -> list[dict[str, Any]]:
    return [serialize_item(i) for i in queued(agent_id)]


def timeline_queryset(
    agent_id: str, *, types: list[str] | None = None, category: str | None = None,
    statuses: list[str] | None = None,
) -> QuerySet[MailboxItem]:
    rows = MailboxItem.objects.filter(agent_id=agent_id)
    if types:
        unknown = [t for t in types if not is_known_type(t)]
        if unknown:
            raise MarkusError(f"unknown type {unknown[0]!r}; expected one of: {', '.join(MAILBOX_TYPE_REGISTRY)}")
        rows = rows.filter(source_type__in=types)
    if category:
        if category not in Category._value2member_map_:
            raise MarkusError(f"unknown category {category!r}; expected one of: {', '.join(c.value for c in Category)}")
        rows = rows.filter(source_type__in=types_in_category(category))
    if statuses:
        bad = [s for s in statuses if s not in Status._value2member_map_]
        if bad:
            raise MarkusError(f"unknown status {bad[0]!r}; expected one of: {', '.join(s.value for s in Status)}")
        rows = rows.filter(status__in=statuses)
    return rows.order_by("-queued_at", "-id")


def timeline_entry(item: MailboxItem) -> dict[str, Any]:
    activities = list(item.activities.all())
    activity = activities[-1] if activities else None
    return {
        "id": item.id,
        "sourceType": item.source_type,
        "category": item.category,
        "label": item.label,
        "priority": item.priority,
        "status": item.status,
        "summary": item.summary,
        "queuedAt": item.queued_at,
        "startedAt": item.started_at,
        "completedAt": item.completed_at,
        "deferredUntil": item.deferred_until,
        "mergedInto": item.merged_into_id,
        "dropReason": item.drop_reason,
        "decisions": [
            {"id": d.id, "decisionType": d.decision_type, "reasoning": d.reasoning, "createdAt": d.created_at}
            for d in item.decisions.all()
        ],
        "activity": None if activity is None else {
            "id": activity.id,
            "type": activity.type,
            "label": activity.label,
            "totalTokens": activity.total_tokens,
            "totalTools": activity.total_tools,
            "success": activity.success,
            "startedAt": activity.started_at,
            "endedAt": activity.ended_at,
        },
    }


def timeline(
    agent_id: str, *, limit: int = 50, offset: int = 0, types: list[str] | None = None,
    category: str | None = None, statuses: list[str] | None = None,
) -> dict[str, Any]:
    from attention.models import AgentActivity, AgentDecision

    rows = timeline_queryset(agent_id, types=types, category=category, statuses=statuses)
    page = rows.prefetch_related(
        Prefetch("decisions", queryset=AgentDecision.objects.order_by("created_at", "id")),
        Prefetch("activities", queryset=AgentActivity.objects.order_by("started_at", "id")),
    )[offset: offset + limit]
    return {
        "queued": queued_items(agent_id),
        "queueDepth": queue_depth(agent_id),
        "history": [timeline_entry(i) for i in page],
        "totalCount": rows.count(),
    }
