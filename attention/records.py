"""Decisions, activities, activity logs, attention state and their events — every write
fenced by the lease it was made under."""

from __future__ import annotations

from collections.abc import Collection
from datetime import datetime
from typing import Any

from django.db.models import F, Max, Q
from django.utils import timezone

from mailbox.models import MailboxItem
from mailbox.registry import ActivityType, MailboxType, descriptor
from mailbox.selectors import queue_depth
from markus.agents.models import ChatMessage, ChatSession
from markus.agents.services import main_session
from markus.core.events import agent_group, send_event_on_commit

from .lease import Lease, fenced
from .models import ActivityLogType, AgentActivity, AgentActivityLog, AgentAttention, AgentDecision, AttentionState


def serialize_decision(d: AgentDecision) -> dict[str, Any]:
    return {
        "id": d.id,
        "agentId": d.agent_id,
        "decisionType": d.decision_type,
        "mailboxItemId": d.mailbox_item_id,
        "context": d.context,
        "reasoning": d.reasoning,
        "outcome": d.outcome,
        "createdAt": d.created_at,
    }


def focus_of(item: MailboxItem | None, started_at: datetime | None = None) -> dict[str, Any] | None:
    if item is None:
        return None
    return {
        "mailboxItemId": item.id,
        "sourceType": item.source_type,
        "label": item.summary or item.label,
        "startedAt": started_at or item.started_at,
    }


def record_decision(
    lease: Lease,
    *,
    item: MailboxItem,
    decision_type: str,
    reasoning: str,
    context: dict | None = None,
    outcome: str | None = None,
) -> AgentDecision:
    with fenced(lease):
        d = AgentDecision.objects.create(
            agent_id=lease.agent_id,
            mailbox_item=item,
            decision_type=decision_type,
            reasoning=reasoning,
            context=context or {},
            outcome=outcome,
            lease_epoch=lease.epoch,
        )
        send_event_on_commit(
            agent_group(lease.agent_id),
            "agent:decision",
            {"agentId": lease.agent_id, "decision": serialize_decision(d)},
        )
    return d


def set_state(lease: Lease, state: str, item: MailboxItem | None = None) -> None:
    now = timezone.now()
    with fenced(lease):
        fields: dict[str, Any] = {"state": state, "updated_at": now}
        if state == AttentionState.FOCUSED:
            fields.update(current_item=item, focus_started_at=now)
        elif state == AttentionState.IDLE:
            fields.update(current_item=None, focus_started_at=None)
        AgentAttention.objects.filter(agent_id=lease.agent_id, lease_epoch=lease.epoch).update(**fields)
        row = AgentAttention.objects.select_related("current_item").get(agent_id=lease.agent_id)
        focus = focus_of(row.current_item, row.focus_started_at)
        send_event_on_commit(
            agent_group(lease.agent_id),
            "agent:attention",
            {"agentId": lease.agent_id, "state": row.state, "currentFocus": focus},
        )
        if state != AttentionState.DECIDING:
            send_event_on_commit(
                agent_group(lease.agent_id),
                "agent:focus",
                {"agentId": lease.agent_id, "focus": focus, "mailboxDepth": queue_depth(lease.agent_id)},
            )


def activity_type_for(item: MailboxItem, scenario: str) -> str:
    d = descriptor(item.source_type)
    if d.activity_type is not None:
        return d.activity_type.value
    if scenario == "task_execution":
        return ActivityType.TASK.value
    return ActivityType.CHAT.value


def start_activity(lease: Lease, *, item: MailboxItem, scenario: str) -> AgentActivity:
    label = f"{item.label}: {item.summary}"[:300] if item.summary else item.label
    with fenced(lease):
        activity = AgentActivity.objects.create(
            agent_id=lease.agent_id,
            mailbox_item=item,
            type=activity_type_for(item, scenario),
            label=label,
            task_id=item.task_id,
            lease_epoch=lease.epoch,
        )
    activity._log_seq = 0  # a new activity has no log yet
    return activity


def log(lease: Lease, activity: AgentActivity, kind: str, content: str = "", metadata: dict | None = None) -> None:
    with fenced(lease):
        # The lease holder is the only writer of its activity's log, so the next
        # sequence number can live on the instance (read once from the table).
        seq: int | None = getattr(activity, "_log_seq", None)
        if seq is None:
            seq = AgentActivityLog.objects.filter(activity=activity).aggregate(m=Max("seq"))["m"] or 0
        activity._log_seq = seq + 1
        AgentActivityLog.objects.create(
            activity=activity, seq=seq + 1, type=kind, content=content[:20000], metadata=metadata or {}
        )


def add_usage(lease: Lease, activity: AgentActivity, *, tokens: int = 0, tools: int = 0) -> None:
    with fenced(lease):
        AgentActivity.objects.filter(id=activity.id).update(
            total_tokens=F("total_tokens") + tokens, total_tools=F("total_tools") + tools
        )


def end_activity(lease: Lease, activity: AgentActivity, *, success: bool) -> None:
    with fenced(lease):
        AgentActivity.objects.filter(id=activity.id).update(ended_at=timezone.now(), success=success)


WORKER_LOST = "worker lost"


def close_lost_activities(lease: Lease, *, requeued: Collection[str] = (), dropped: Collection[str] = ()) -> list[str]:
    """Recovery's part in attention (the mailbox knows no activities): the activities a
    dead worker left open are closed as failed, with a "worker lost" line in their log.

    Every outcome of a run closes its activity in the transaction that settles its item,
    so an open activity of an earlier lease epoch belongs to a worker that died or lost
    its lease mid-item; it can never close it itself (its writes are fenced).
    ``requeued`` / ``dropped``: what recovery did with the items, for the log line.
    Returns the activities closed."""
    closed = []
    with fenced(lease):
        lost = (
            AgentActivity.objects.select_for_update()
            .filter(agent_id=lease.agent_id, ended_at__isnull=True)
            .filter(Q(lease_epoch__lt=lease.epoch) | Q(lease_epoch__isnull=True))
            .order_by("started_at", "id")
        )
        for activity in lost:
            # It ended when it was last heard of (its last log line), not now: the dead
            # worker wrote nothing after the lease moved on, so the activities of the
            # agent still never overlap.
            last = AgentActivityLog.objects.filter(activity=activity).aggregate(m=Max("created_at"))["m"]
            ended = max(activity.started_at, last) if last is not None else activity.started_at
            AgentActivity.objects.filter(id=activity.id).update(ended_at=ended, success=False)
            fate = (
                "the item was re-queued"
                if activity.mailbox_item_id in requeued
                else "the item was dropped"
                if activity.mailbox_item_id in dropped
                else "the item was no longer in flight"
            )
            log(
                lease,
                activity,
                ActivityLogType.ERROR,
                f"{WORKER_LOST}: the worker of lease epoch {activity.lease_epoch} stopped mid-run; "
                f"recovery under epoch {lease.epoch} closed this activity as failed ({fate})",
                {"lostEpoch": activity.lease_epoch, "recoveryEpoch": lease.epoch},
            )
            closed.append(activity.id)
    return closed


def inject_main_session(lease: Lease, *, item: MailboxItem, outcome: str) -> None:
    """``[ACTIVITY: type] summary → outcome`` in the agent's main session (section 20)."""
    if item.source_type == MailboxType.HUMAN_CHAT:
        return
    with fenced(lease):
        session = main_session(lease.agent_id)
        ChatMessage.objects.create(
            session=session,
            role="system",
            content=f"[ACTIVITY: {item.source_type}] {item.summary or item.label} → {outcome}",
            metadata={"activityLog": True, "mailboxItemId": item.id},
        )
        ChatSession.objects.filter(id=session.id).update(last_message_at=timezone.now())
