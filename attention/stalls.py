"""What is it doing, and why is it stuck? (issue 40)

An agent is *stalled* when it has made no progress for a while, one of three ways, the
first found in this order:

- ``tool_failing``: its current item's last calls are the same tool failing
  ``MARKUS_STALL_TOOL_FAILURES`` times in a row (default 3);
- ``long_focus``: it has held the same item longer than ``MARKUS_STALL_SECONDS``
  (default 600);
- ``waiting_on_person``: a person's answer (an approval, a question, a tool call to
  approve) has been awaited longer than ``MARKUS_STALL_WAIT_SECONDS`` (default a day).

``stalls_of`` reads it for any number of agents in at most three statements (their
attention rows, their current items' last tool calls, their oldest pending approvals):
the agents list (the API's ``stall`` and the cards) and the mind view show it. The
reason names no content (a private chat's tool results, an approval's text): whoever
sees the agent sees its stall. ``notify_stalls`` (the beat's ``attention.stalls``) tells
each running agent's owner (else its team's owner) once per stall: the stall's ``key``
names its start (the item and since when, the item and the tool, the approval), and a
notification already carrying it is not sent again. Runs at the same time (two beats)
take turns over that read and the writes, so neither tells a stall the other told."""

from __future__ import annotations

import logging
from dataclasses import dataclass
from datetime import datetime, timedelta
from typing import Any

from django.conf import settings
from django.db import OperationalError, transaction
from django.db.models import F, Window
from django.db.models.functions import RowNumber
from django.utils import timezone

from mailbox.registry import descriptor
from mailbox.services import mailbox_lock_group
from markus.agents.models import Agent
from markus.core.db import lock_conflict
from notifications.models import Approval, UserNotification
from notifications.registry import NotificationType
from notifications.services import notify_user

from .models import AgentAttention, ToolCallRecord

log = logging.getLogger(__name__)

TOOL_FAILING, LONG_FOCUS, WAITING_ON_PERSON = "tool_failing", "long_focus", "waiting_on_person"


@dataclass(frozen=True)
class Stall:
    kind: str
    reason: str
    since: datetime
    key: str  # the stall's start: one notification per key

    def data(self) -> dict[str, Any]:
        """The API's ``stall``."""
        return {"kind": self.kind, "reason": self.reason, "since": self.since}


def _for(seconds: float) -> str:
    minutes = int(seconds // 60)
    if minutes < 120:
        return f"{minutes} min"
    hours = minutes // 60
    return f"{hours} h" if hours < 48 else f"{hours // 24} days"


def stalls_of(agent_ids: list[str], now: datetime | None = None) -> dict[str, Stall | None]:
    """Each agent's stall (None: none), in at most three statements for any number."""
    now = now or timezone.now()
    conf = settings.MARKUS
    found: dict[str, Stall | None] = dict.fromkeys(agent_ids)
    if not agent_ids:
        return found
    focused = {
        row["current_item_id"]: row
        for row in AgentAttention.objects.filter(
            agent_id__in=agent_ids, current_item__isnull=False, lease_expires_at__gt=now
        )
        .exclude(lease_owner="")
        .values(
            "agent_id", "current_item_id", "current_item__source_type", "current_item__started_at", "focus_started_at"
        )
    }
    failing = _failing_tools(list(focused), int(conf["STALL_TOOL_FAILURES"]))
    for item_id, row in focused.items():
        agent_id = row["agent_id"]
        if item_id in failing:
            name, times, since = failing[item_id]
            reason = f"the tool {name} failed {times} times in a row"
            found[agent_id] = Stall(TOOL_FAILING, reason, since, f"{TOOL_FAILING}:{item_id}:{name}")
            continue
        started = row["current_item__started_at"] or row["focus_started_at"]
        if started is not None and (now - started).total_seconds() > conf["STALL_SECONDS"]:
            label = descriptor(row["current_item__source_type"]).label.lower()
            reason = f"on the same {label} for {_for((now - started).total_seconds())}"
            found[agent_id] = Stall(LONG_FOCUS, reason, started, f"{LONG_FOCUS}:{item_id}:{started.isoformat()}")
    waiting = (
        Approval.objects.filter(
            agent_id__in=[a for a in agent_ids if found[a] is None],
            status=Approval.State.PENDING,
            created_at__lte=now - timedelta(seconds=conf["STALL_WAIT_SECONDS"]),
        )
        .order_by("agent_id", "created_at", "id")
        .values_list("agent_id", "id", "created_at", "user__username")
    )
    for agent_id, approval_id, created_at, username in waiting:
        if found[agent_id] is None:
            reason = f"waiting for {username}'s answer for {_for((now - created_at).total_seconds())}"
            found[agent_id] = Stall(WAITING_ON_PERSON, reason, created_at, f"{WAITING_ON_PERSON}:{approval_id}")
    return found


def _failing_tools(item_ids: list[str], times: int) -> dict[str, tuple[str, int, datetime]]:
    """The items whose last ``times`` tool calls (or more, of the last few) are the same
    tool failing: the tool, how many times in a row, since when. One statement."""
    if not item_ids or times < 1:
        return {}
    window = times + 7  # a run longer than ``times`` is told as long as this reads
    calls = (
        ToolCallRecord.objects.filter(mailbox_item_id__in=item_ids)
        .annotate(recent=Window(RowNumber(), partition_by=[F("mailbox_item_id")], order_by=F("id").desc()))
        .filter(recent__lte=window)
        .order_by("mailbox_item_id", "-id")
        .values_list("mailbox_item_id", "name", "ok", "started_at")
    )
    runs: dict[str, tuple[str, int, datetime]] = {}
    ended: set[str] = set()
    for item_id, name, ok, started_at in calls:
        if item_id in ended:
            continue
        run = runs.get(item_id)
        if ok is False and (run is None or run[0] == name):
            runs[item_id] = (name, (run[1] if run else 0) + 1, started_at)
        else:
            ended.add(item_id)
    return {item_id: run for item_id, run in runs.items() if run[1] >= times}


def notify_stalls(now: datetime | None = None) -> list[str]:
    """Tell each running agent's owner (else its team's owner) of its stall, once per
    stall. Returns the keys told now."""
    agents = {a.id: a for a in Agent.objects.running().select_related("owner", "team__owner")}
    stalls = {agent_id: stall for agent_id, stall in stalls_of(list(agents), now).items() if stall is not None}
    if not stalls:
        return []
    try:
        with transaction.atomic():
            # Runs at once (two beats, a run overlapping the next) take turns from here:
            # the next reads what this one told (PostgreSQL: an advisory lock; SQLite: the
            # IMMEDIATE transaction's write lock), so a stall is told once.
            mailbox_lock_group("*", NotificationType.AGENT_STALLED, "stalls")
            return _tell(agents, stalls)
    except OperationalError as exc:
        if not lock_conflict(exc):
            raise
        # Another run held the turn past the lock timeout (slow, or frozen until the
        # database cuts it): nothing was written here; it tells, or the next beat does.
        log.info("stalls: another run is telling stalls; this beat leaves them to it")
        return []


def _tell(agents: dict[str, Agent], stalls: dict[str, Stall]) -> list[str]:
    """The notices of the stalls not told yet; the caller holds the stalls' turn."""
    told: list[str] = []
    already = set(  # one statement for every stall: the ones whose owner was told
        UserNotification.objects.filter(
            type=NotificationType.AGENT_STALLED, metadata__stallKey__in=[s.key for s in stalls.values()]
        ).values_list("user_id", "metadata__stallKey")
    )
    for agent_id, stall in stalls.items():
        agent = agents[agent_id]
        person = agent.answerable_person
        if person is None or (person.pk, stall.key) in already:
            continue
        notify_user(
            user=person,
            type=NotificationType.AGENT_STALLED,
            title=f"{agent.name} is stuck: {stall.reason}",
            body=f"{agent.name} has made no progress: {stall.reason} (since {stall.since:%Y-%m-%d %H:%M} UTC).",
            action_target={"path": f"/agents/{agent.id}/mind/", "agentId": agent.id},
            metadata={"agentId": agent.id, "stallKey": stall.key, "stallKind": stall.kind},
        )
        told.append(stall.key)
    return told
