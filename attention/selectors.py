"""Reads of the loop's records: an agent's timeline, each mailbox item with the
decisions made about it and the activity that handled it."""

from __future__ import annotations

from typing import Any

from django.db.models import Prefetch

from mailbox.lifecycle import serialize_item
from mailbox.models import MailboxItem
from mailbox.selectors import queue_depth, queued_items, timeline_queryset

from .models import AgentActivity, AgentDecision

# What the item serialisation carries that a timeline row leaves out.
_NOT_IN_TIMELINE = frozenset({"agentId", "payload", "metadata", "attempts"})


def timeline_entry(item: MailboxItem) -> dict[str, Any]:
    activities = list(item.activities.all())
    activity = activities[-1] if activities else None
    return {
        **{k: v for k, v in serialize_item(item).items() if k not in _NOT_IN_TIMELINE},
        "decisions": [
            {"id": d.id, "decisionType": d.decision_type, "reasoning": d.reasoning, "createdAt": d.created_at}
            for d in item.decisions.all()
        ],
        "activity": None
        if activity is None
        else {
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
    agent_id: str,
    *,
    limit: int = 50,
    offset: int = 0,
    types: list[str] | None = None,
    category: str | None = None,
    statuses: list[str] | None = None,
) -> dict[str, Any]:
    rows = timeline_queryset(agent_id, types=types, category=category, statuses=statuses)
    page = rows.prefetch_related(
        Prefetch("decisions", queryset=AgentDecision.objects.order_by("created_at", "id")),
        Prefetch("activities", queryset=AgentActivity.objects.order_by("started_at", "id")),
    )[offset : offset + limit]
    return {
        "queued": queued_items(agent_id),
        "queueDepth": queue_depth(agent_id),
        "history": [timeline_entry(i) for i in page],
        "totalCount": rows.count(),
    }
