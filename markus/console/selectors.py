"""Reads for the console, written as annotations so a changelist page costs the same
number of queries for 1 agent as for 100."""

from __future__ import annotations

from dataclasses import dataclass
from datetime import UTC, datetime, timedelta
from typing import Any

from django.core.exceptions import ObjectDoesNotExist
from django.db.models import Count, OuterRef, QuerySet
from django.db.models.functions import Coalesce, TruncHour
from django.utils import timezone

from agentbus.selectors import pending_inbox_expression
from attention.models import AgentAttention, AttentionState
from mailbox.models import MailboxItem
from mailbox.registry import Status
from markus.agents.models import Agent
from markus.core.db import count_subquery


def queue_depth_expression() -> Coalesce:
    """What ``mailbox.selectors.queue_depth`` counts, for every row at once."""
    return count_subquery(MailboxItem.objects.filter(agent_id=OuterRef("pk"), status=Status.QUEUED))


def agents_for_console(queryset: QuerySet[Agent]) -> QuerySet[Agent]:
    return queryset.select_related("team", "owner", "attention__current_item").annotate(
        queue_depth=queue_depth_expression(),
        pending_inbox=pending_inbox_expression(),
    )


@dataclass(frozen=True)
class LiveState:
    state: str
    focus: MailboxItem | None


def live_state(agent: Agent, now: datetime | None = None) -> LiveState:
    """``attention.loop.attention_snapshot`` from a select_related row: the stored
    state counts only while the lease is live; otherwise the agent is idle."""
    try:
        row: AgentAttention | None = agent.attention
    except ObjectDoesNotExist:
        row = None
    now = now or timezone.now()
    if row is None or not row.lease_owner or row.lease_expires_at is None or row.lease_expires_at <= now:
        return LiveState(AttentionState.IDLE, None)
    return LiveState(row.state, row.current_item)


# ----------------------------------------------------------------------- dashboard


def queue_depths(limit: int = 30) -> list[dict[str, Any]]:
    """The deepest queues first (agents with an empty queue included, up to ``limit``)."""
    rows = (
        Agent.objects.annotate(depth=queue_depth_expression())
        .order_by("-depth", "name", "id")
        .values("id", "name", "depth")[:limit]
    )
    return [{"id": r["id"], "label": r["name"], "value": r["depth"]} for r in rows]


def handled_per_hour(now: datetime | None = None, hours: int = 24) -> list[dict[str, Any]]:
    """Items completed in each of the last ``hours`` clock hours, the current one
    last (it is partial). Merged items are not counted: their survivor is."""
    now = now or timezone.now()
    current = now.astimezone(UTC).replace(minute=0, second=0, microsecond=0)
    first = current - timedelta(hours=hours - 1)
    counts = {
        row["hour"]: row["n"]
        for row in MailboxItem.objects.filter(status=Status.COMPLETED, completed_at__gte=first, completed_at__lte=now)
        .annotate(hour=TruncHour("completed_at", tzinfo=UTC))
        .values("hour")
        .annotate(n=Count("id"))
        .order_by()
    }
    buckets = []
    for i in range(hours):
        start = first + timedelta(hours=i)
        buckets.append(
            {
                "start": start,
                "label": timezone.localtime(start).strftime("%H:00"),
                "value": counts.get(start, 0),
            }
        )
    return buckets
