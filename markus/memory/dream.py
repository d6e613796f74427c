"""The dream cycle's check (beat, every few hours): which agents dream now.

An agent dreams when it has at least DREAM_MIN_OBSERVATIONS new observations (saved
since its last dream's consolidation), at most once every DREAM_INTERVAL_HOURS, or once
every DREAM_BUSY_INTERVAL_HOURS when it has DREAM_BUSY_OBSERVATIONS or more; never while
one of its dreams is still open. At most DREAM_MAX_CONCURRENT agents of the cluster
dream at once: the queued and processing ``memory_consolidation`` items of running
agents are counted, under one lock, so two beats at the same moment cannot together
pass the cap. The dream is a mailbox item; the agent consolidates in the ``dream_cycle``
scenario with the ``memory_consolidate`` tool."""

from __future__ import annotations

import logging
from dataclasses import dataclass
from datetime import datetime, timedelta

from django.conf import settings
from django.db import transaction
from django.db.models import Count, Max, OuterRef, Subquery
from django.db.models.functions import Coalesce
from django.utils import timezone

from mailbox.lifecycle import OPEN_STATUSES
from mailbox.models import MailboxItem
from mailbox.registry import MailboxType, Status
from mailbox.services import mailbox_enqueue, mailbox_lock_group
from markus.agents.models import Agent

from .models import MemoryState, Observation
from .selectors import one_line
from .services import OBSERVATION_LIMIT

log = logging.getLogger(__name__)
DREAM = MailboxType.MEMORY_CONSOLIDATION
# A beat a little early (schedulers drift) still counts as a full interval.
SLACK = timedelta(minutes=10)
# What a dream item lists of the new observations: at most this many, this many
# characters in all (the rest come in the next dream).
LIST_ITEMS = 300
LIST_CHARS = 12000
OBSERVATION_CHARS = OBSERVATION_LIMIT  # whole: a merge keeps the text it was shown


def _setting(name: str, default: float) -> float:
    return float(settings.MARKUS.get(name, default))


@dataclass
class Due:
    agent_id: str
    new: int


def due_agents(now: datetime) -> list[Due]:
    """The running agents a dream is due for, the one with most new observations first."""
    least, busy = int(_setting("DREAM_MIN_OBSERVATIONS", 50)), int(_setting("DREAM_BUSY_OBSERVATIONS", 500))
    interval = timedelta(hours=_setting("DREAM_INTERVAL_HOURS", 24))
    busy_interval = timedelta(hours=_setting("DREAM_BUSY_INTERVAL_HOURS", 6))
    running = list(Agent.objects.running().values_list("id", flat=True))
    dreams = MailboxItem.objects.filter(agent_id__in=running, source_type=DREAM)
    # A dream recovery dropped (its worker died in it) is no day's dream: the next check
    # may start another.
    counted = dreams.exclude(status=Status.DROPPED, drop_reason__startswith="recovery:")
    last = dict(counted.values("agent_id").annotate(at=Max("queued_at")).values_list("agent_id", "at"))
    open_ = set(dreams.filter(status__in=OPEN_STATUSES).values_list("agent_id", flat=True))
    # The new observations of every running agent, in one query.
    through = MemoryState.objects.filter(agent_id=OuterRef("agent_id")).values("consolidated_through")[:1]
    counts = dict(
        Observation.objects.filter(agent_id__in=running, id__gt=Coalesce(Subquery(through), 0))
        .values("agent_id")
        .annotate(n=Count("id"))
        .values_list("agent_id", "n")
    )
    due = []
    for agent_id in running:
        if agent_id in open_:
            continue
        new = counts.get(agent_id, 0)
        if new < least:
            continue
        wait = busy_interval if new >= busy else interval
        if agent_id in last and now - last[agent_id] < wait - SLACK:
            continue
        due.append(Due(agent_id, new))
    return sorted(due, key=lambda d: (-d.new, d.agent_id))


def dreaming_now() -> int:
    """Agents of the cluster with a dream queued, in progress or deferred (preempted by a
    chat, it resumes; running agents only: a stopped agent's queued dream holds no place)."""
    return (
        MailboxItem.objects.filter(
            source_type=DREAM,
            status__in=OPEN_STATUSES,
            agent__in=Agent.objects.running(),
        ).aggregate(n=Count("agent_id", distinct=True))["n"]
        or 0
    )


def dream_check(*, now: datetime | None = None) -> int:
    """Enqueue the dreams that are due, within the cluster's cap; returns how many."""
    now = now or timezone.now()
    cap = int(_setting("DREAM_MAX_CONCURRENT", 3))
    with transaction.atomic():
        # One lock for the whole cluster (PostgreSQL: an advisory lock; SQLite: the
        # IMMEDIATE transaction's write lock).
        mailbox_lock_group("*", DREAM, "dream-cap")
        free = cap - dreaming_now()
        if free <= 0:
            log.info("dream cycle: %d agents dream already (cap %d)", cap - free, cap)
            return 0
        chosen = due_agents(now)[:free]
        for due in chosen:
            _enqueue(due, now)
    return len(chosen)


def _enqueue(due: Due, now: datetime) -> MailboxItem:
    content, listed, through = dream_listing(due.agent_id)
    summary = f"Dream cycle: consolidate memory ({due.new} new observations)"
    return mailbox_enqueue(
        agent_id=due.agent_id,
        source_type=DREAM,
        payload={
            "summary": summary,
            "content": content,
            "extra": {
                "period": timezone.localdate(now).isoformat(),
                "newObservations": due.new,
                "listed": listed,
                "throughObservation": through,
            },
        },
        metadata={"senderRole": "system"},
    )


def dream_listing(agent_id: str) -> tuple[str, int, int]:
    """The dream item's text: the new observations, oldest first, one per line as
    ``[obs ID ×COUNT] text`` (×COUNT when merged before), within LIST_ITEMS and
    LIST_CHARS; returns (text, how many listed, the last id listed)."""
    start = MemoryState.objects.filter(agent_id=agent_id).values_list("consolidated_through", flat=True).first() or 0
    lines: list[str] = []
    used, through = 0, start
    rows = Observation.objects.filter(agent_id=agent_id, id__gt=start).order_by("id")
    for obs in rows.values("id", "content", "count")[:LIST_ITEMS]:
        times = f" ×{obs['count']}" if obs["count"] > 1 else ""
        line = f"[obs {obs['id']}{times}] {one_line(obs['content'], OBSERVATION_CHARS)}"
        if lines and used + len(line) > LIST_CHARS:
            break
        lines.append(line)
        used += len(line) + 1
        through = obs["id"]
    total = rows.count()
    head = (
        f"Your observations since your last dream ({len(lines)} of {total}, oldest first). "
        "Consolidate them with memory_consolidate: remove what no longer matters, merge what says the same "
        "thing, promote lasting lessons into MEMORY.md."
    )
    tail = [f"… and {total - len(lines)} more (they come in your next dream)."] if total > len(lines) else []
    return "\n".join([head, "", *lines, *tail]), len(lines), through
