"""Back-dated rows for the retention tests: an item with everything that hangs off it."""

from __future__ import annotations

from datetime import datetime, timedelta

from django.utils import timezone

from attention.models import (
    AgentActivity,
    AgentActivityLog,
    AgentDecision,
    DecisionType,
    LLMSession,
    ToolCallRecord,
    ToolCallState,
)
from attention.scenarios import SYSTEM_NOTICE
from mailbox.models import MailboxItem
from mailbox.registry import ActivityType, MailboxType, Status


def days_ago(days: float) -> datetime:
    return timezone.now() - timedelta(days=days)


OLD, RECENT = 40, 5  # days: past the 30-day default, and within it


def item(agent, *, age: float = OLD, status: str = Status.COMPLETED, source_type=MailboxType.SYSTEM_EVENT, **fields):
    at = days_ago(age)
    finished = status in (Status.COMPLETED, Status.DROPPED, Status.MERGED)
    payload = fields.pop("payload", {"summary": "an event", "content": "it happened"})
    return MailboxItem.objects.create(
        agent=agent,
        source_type=source_type,
        status=status,
        payload=payload,
        queued_at=at,
        started_at=at if status != Status.QUEUED else None,
        completed_at=at if finished else None,
        **fields,
    )


def with_history(it: MailboxItem, *, logs: int = 2, scenario: str = SYSTEM_NOTICE) -> MailboxItem:
    """The item's decision, activity with ``logs`` log lines, one tool call and its session."""
    at = it.completed_at or it.queued_at
    AgentDecision.objects.create(agent_id=it.agent_id, decision_type=DecisionType.PICK, mailbox_item=it, created_at=at)
    activity = AgentActivity.objects.create(
        agent_id=it.agent_id, mailbox_item=it, type=ActivityType.INTERNAL, label="work", started_at=at, ended_at=at
    )
    for seq in range(logs):
        AgentActivityLog.objects.create(activity=activity, seq=seq + 1, type="text", content="…", created_at=at)
    ToolCallRecord.objects.create(
        mailbox_item=it, attempt="att_1", turn=1, position=0, name="noop", state=ToolCallState.DONE, started_at=at
    )
    LLMSession.objects.create(id=f"ls_{it.id}", agent_id=it.agent_id, mailbox_item=it, scenario=scenario, updated_at=at)
    return it


def exists(it: MailboxItem) -> bool:
    return MailboxItem.objects.filter(pk=it.pk).exists()
