"""Reads for the console, written as annotations so a changelist page costs the same
number of queries for 1 agent as for 100."""

from __future__ import annotations

import statistics
from collections import defaultdict
from dataclasses import dataclass
from datetime import UTC, datetime, timedelta
from typing import Any

from django.core.exceptions import ObjectDoesNotExist
from django.db.models import Count, OuterRef, Q, QuerySet
from django.db.models.functions import TruncHour
from django.utils import timezone

from agentbus.selectors import pending_inbox_expression
from attention.models import ActivityOutcome, AgentActivity, AgentAttention, AttentionState
from mailbox.models import MailboxItem
from mailbox.registry import Status
from mailbox.selectors import depth_shown, queue_depth_subquery
from markus.agents.models import Agent
from markus.core.counting import CappedCount


def queue_depth_expression() -> CappedCount:
    """What ``mailbox.selectors.queue_depth`` counts, for every row at once: up to the
    cap + 1 ("1000+", ``depth_shown``), never every queued item."""
    return queue_depth_subquery(OuterRef("pk"))


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
    return [{"id": r["id"], "label": r["name"], "value": depth_shown(r["depth"])} for r in rows]


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


@dataclass(frozen=True)
class AgentHealth:
    """One agent's last ``hours``: failed activities and dropped items, activities
    cancelled or stopped by a pause (``interrupted``: not failures), the median wait
    (queued → started, of items started in the window) and the median processing time
    (started → completed, of items completed in the window)."""

    id: str
    name: str
    failed_activities: int
    dropped: int
    started: int
    completed: int
    wait_p50: timedelta | None
    processing_p50: timedelta | None
    interrupted: int = 0

    @property
    def failures(self) -> int:
        return self.failed_activities + self.dropped

    @property
    def wait_text(self) -> str:
        return short_duration(self.wait_p50)

    @property
    def processing_text(self) -> str:
        return short_duration(self.processing_p50)


def short_duration(value: timedelta | None) -> str:
    """``—``, ``850 ms``, ``12.4 s``, ``3 min 05 s``, ``2 h 07 min``."""
    if value is None:
        return "—"
    seconds = value.total_seconds()
    if seconds < 1:
        return f"{round(seconds * 1000)} ms"
    if seconds < 60:
        return f"{seconds:.1f} s"
    minutes, rest = divmod(int(seconds), 60)
    if minutes < 60:
        return f"{minutes} min {rest:02d} s"
    hours, minutes = divmod(minutes, 60)
    return f"{hours} h {minutes:02d} min"


def _p50(durations: list[timedelta]) -> timedelta | None:
    if not durations:
        return None
    return timedelta(seconds=statistics.median(d.total_seconds() for d in durations))


def agent_health(now: datetime | None = None, hours: int = 24) -> list[AgentHealth]:
    """Every agent, in three queries whatever the number of agents and items: the
    agents, the failed activities counted per agent, and the timestamps of the
    window's items (the medians are taken here, portably across databases)."""
    now = now or timezone.now()
    since = now - timedelta(hours=hours)
    agents = list(Agent.objects.order_by("name", "id").values_list("id", "name"))
    # A run that was cancelled or stopped by a pause did not fail: counted apart.
    interrupting = Q(outcome__in=[ActivityOutcome.CANCELLED, ActivityOutcome.STOPPED])
    ended = {
        agent_id: (failed_n, interrupted_n)
        for agent_id, failed_n, interrupted_n in AgentActivity.objects.filter(
            success=False, started_at__gte=since, started_at__lte=now
        )
        .values("agent_id")
        .annotate(failed=Count("id", filter=~interrupting), interrupted=Count("id", filter=interrupting))
        .order_by()
        .values_list("agent_id", "failed", "interrupted")
    }
    waits: dict[str, list[timedelta]] = defaultdict(list)
    processing: dict[str, list[timedelta]] = defaultdict(list)
    dropped: dict[str, int] = defaultdict(int)
    rows = (
        MailboxItem.objects.filter(
            Q(started_at__gte=since, started_at__lte=now) | Q(completed_at__gte=since, completed_at__lte=now)
        )
        .order_by()
        .values_list("agent_id", "status", "queued_at", "started_at", "completed_at")
    )
    for agent_id, status, queued_at, started_at, completed_at in rows.iterator(chunk_size=2000):
        ended_in_window = completed_at is not None and since <= completed_at <= now
        if status == Status.DROPPED and ended_in_window:
            dropped[agent_id] += 1
        if started_at is None:
            continue
        if since <= started_at <= now:
            waits[agent_id].append(max(started_at - queued_at, timedelta(0)))
        if status == Status.COMPLETED and ended_in_window and completed_at is not None:
            processing[agent_id].append(max(completed_at - started_at, timedelta(0)))
    return [
        AgentHealth(
            id=agent_id,
            name=name,
            failed_activities=ended.get(agent_id, (0, 0))[0],
            interrupted=ended.get(agent_id, (0, 0))[1],
            dropped=dropped[agent_id],
            started=len(waits[agent_id]),
            completed=len(processing[agent_id]),
            wait_p50=_p50(waits[agent_id]),
            processing_p50=_p50(processing[agent_id]),
        )
        for agent_id, name in agents
    ]
