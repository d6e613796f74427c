"""What retention may remove, one queryset per table; every rule that keeps a row is
written here, beside the others, with the reader that needs the row.

An item (and with it its decisions, activities and their logs, its tool-call journal
and its LLM session) may go when it is finished (completed, merged or dropped) since
before the cutoff and none of these still needs it:

- open work: an item merged into an item that is still open (the open item's session
  appends what it absorbed), the item an agent is focused on;
- a parked approval: a pending approval that names the item, or that its marks wait
  for; a tool call of the item still awaiting a person;
- a task's history: any item about a task that is not finished yet; of a finished
  task, its last execution item (a person's later comment continues its session,
  ``markus.work.comment_services``) and the item of the latest task session per agent
  (``attention.session.resumed_messages``);
- the A2A door: an item an A2A task follows (its state is read from the item), or the
  item such an item was merged into.

Task history rows themselves (``work_status_changes``, comments) are never touched, nor
anything open: queued, processing and deferred items (reminders and parked items are
deferred items). A bus chunk may go when every inbox it reaches (its direct recipient,
the stream's members, never its sender) has its consumer cursor at or past it; an
outbox row once relayed; an audit row by age.
"""

from __future__ import annotations

from datetime import datetime
from typing import Any

from django.db.models import Exists, F, OuterRef, Q, QuerySet, Value, Window
from django.db.models.fields.json import KeyTextTransform
from django.db.models.functions import Coalesce, RowNumber

from agentbus.models import INBOX_TOPIC, AuditEvent, Chunk, ConsumerCursor, OutboxRecord, OutboxStatus, StreamMember
from attention.models import (
    AgentActivity,
    AgentActivityLog,
    AgentAttention,
    AgentDecision,
    LLMSession,
    ToolCallRecord,
    ToolCallState,
)
from attention.scenarios import SESSION_RESPONSE, TASK_EXECUTION
from mailbox.lifecycle import OPEN_STATUSES
from mailbox.models import MailboxItem
from mailbox.registry import MailboxType, Status
from markus.a2a.models import A2ATask
from markus.work.models import Task
from markus.work.states import TERMINAL_TASK_STATES
from notifications.models import Approval

from .models import PruneRun

FINISHED = [s.value for s in Status if s not in OPEN_STATUSES]
TASK_SCENARIOS = [TASK_EXECUTION, SESSION_RESPONSE]


def open_task_ids() -> QuerySet[Task, Any]:
    return Task.objects.exclude(status__in=TERMINAL_TASK_STATES).values("id")


def _newest_per_agent_and_task(rows: QuerySet[Any], task_ref: KeyTextTransform, time: str) -> QuerySet[Any]:
    """The newest row (by ``time``, then id) of each agent and task: one window over the
    rows, not a correlated look for a newer one per row (that grew with the square)."""
    rank = Window(RowNumber(), partition_by=[F("agent_id"), task_ref], order_by=[F(time).desc(), F("pk").desc()])
    return rows.filter(task_ref__isnull=False).annotate(rank=rank).filter(rank=1)


def latest_task_sessions() -> QuerySet[LLMSession]:
    """Per agent and task, the newest session of a task scenario: a session reply on a
    finished task continues it (``attention.session.resumed_messages``)."""
    task_ref = KeyTextTransform("taskId", "mailbox_item__payload")
    sessions = LLMSession.objects.annotate(task_ref=task_ref).filter(scenario__in=TASK_SCENARIOS)
    return _newest_per_agent_and_task(sessions, task_ref, "updated_at")


def last_executions() -> QuerySet[MailboxItem]:
    """Per agent and task, the newest execution trigger (``comment_services._last_execution``)."""
    task_ref = KeyTextTransform("taskId", "payload")
    executions = MailboxItem.objects.annotate(task_ref=task_ref).filter(
        source_type=MailboxType.TASK_STATUS_UPDATE, payload__extra__triggerExecution=True
    )
    return _newest_per_agent_and_task(executions, task_ref, "queued_at")


def items(cutoff: datetime | None) -> QuerySet[MailboxItem]:
    if cutoff is None:
        return MailboxItem.objects.none()
    pk = OuterRef("pk")
    approval_ref = KeyTextTransform("approvalId", "marks")
    needed = (
        Exists(MailboxItem.objects.filter(pk=OuterRef("merged_into_id"), status__in=OPEN_STATUSES))
        | Exists(AgentAttention.objects.filter(current_item_id=pk))
        | Exists(Approval.objects.filter(mailbox_item_id=pk, status=Approval.State.PENDING))
        | Exists(Approval.objects.filter(id=OuterRef("approval_ref"), status=Approval.State.PENDING))
        | Exists(ToolCallRecord.objects.filter(mailbox_item_id=pk, state=ToolCallState.AWAITING))
        | Q(task_ref__isnull=False, task_ref__in=open_task_ids())
        | Q(pk__in=last_executions().values("pk"))
        | Q(pk__in=latest_task_sessions().values("mailbox_item_id"))
        | Exists(A2ATask.objects.filter(item_id=pk))
        | Exists(A2ATask.objects.filter(item__merged_into_id=pk))
    )
    return (
        MailboxItem.objects.annotate(
            ended=Coalesce("completed_at", "queued_at"),
            task_ref=KeyTextTransform("taskId", "payload"),
            approval_ref=approval_ref,
        )
        .filter(status__in=FINISHED, ended__lt=cutoff)
        .exclude(needed)
    )


def _of_items(cutoff: datetime | None) -> QuerySet[MailboxItem, Any]:
    return items(cutoff).values("pk")


def decisions(items_cutoff: datetime | None) -> QuerySet[AgentDecision]:
    return AgentDecision.objects.filter(mailbox_item_id__in=_of_items(items_cutoff))


def tool_calls(items_cutoff: datetime | None) -> QuerySet[ToolCallRecord]:
    return ToolCallRecord.objects.filter(mailbox_item_id__in=_of_items(items_cutoff))


def activities(items_cutoff: datetime | None, cutoff: datetime | None) -> QuerySet[AgentActivity]:
    """An item's activities go with it; an activity of no item (a deliberation, one whose
    item is gone) once it ended before ``cutoff``, unless it works on an open task."""
    rule = Q(mailbox_item_id__in=_of_items(items_cutoff))
    if cutoff is not None:
        rule |= Q(mailbox_item__isnull=True, ended_at__lt=cutoff) & ~Q(
            task_id__isnull=False, task_id__in=open_task_ids()
        )
    return AgentActivity.objects.filter(rule)


def activity_logs(items_cutoff: datetime | None, cutoff: datetime | None) -> QuerySet[AgentActivityLog]:
    return AgentActivityLog.objects.filter(activity_id__in=activities(items_cutoff, cutoff).values("pk"))


def sessions(items_cutoff: datetime | None, cutoff: datetime | None) -> QuerySet[LLMSession]:
    """An item's session goes with it; an ended one (its item finished, or gone) last
    written before ``cutoff``, unless it is a task's latest."""
    rule = Q(mailbox_item_id__in=_of_items(items_cutoff))
    if cutoff is not None:
        ended = Q(mailbox_item__isnull=True) | Q(mailbox_item__status__in=FINISHED)
        rule |= Q(updated_at__lt=cutoff) & ended & ~Q(pk__in=latest_task_sessions().values("pk"))
    return LLMSession.objects.filter(rule)


def chunks(cutoff: datetime | None) -> QuerySet[Chunk]:
    """Chunks every inbox they reach has consumed (``agentbus.selectors.inbox_chunks``
    reversed): no recipient or member, other than the sender, whose consumer cursor is
    still before the chunk."""
    if cutoff is None:
        return Chunk.objects.none()
    sender = Coalesce(OuterRef("sender_id"), Value(""))
    past = ConsumerCursor.objects.filter(topic=INBOX_TOPIC, position__gte=OuterRef(OuterRef("position")))
    unread_member = (
        StreamMember.objects.filter(stream_id=OuterRef("stream_id"))
        .exclude(agent_id=sender)
        .exclude(Exists(past.filter(agent_id=OuterRef("agent_id"))))
    )
    recipient_past = ConsumerCursor.objects.filter(
        topic=INBOX_TOPIC, agent_id=OuterRef("recipient_id"), position__gte=OuterRef("position")
    )
    unread_recipient = (
        Q(recipient_id__isnull=False) & ~Q(recipient_id=Coalesce(F("sender_id"), Value(""))) & ~Exists(recipient_past)
    )
    return Chunk.objects.filter(created_at__lt=cutoff).exclude(unread_recipient).exclude(Exists(unread_member))


def outbox(cutoff: datetime | None) -> QuerySet[OutboxRecord]:
    if cutoff is None:
        return OutboxRecord.objects.none()
    return OutboxRecord.objects.filter(status=OutboxStatus.RELAYED, relayed_at__lt=cutoff)


def audit(cutoff: datetime | None) -> QuerySet[AuditEvent]:
    if cutoff is None:
        return AuditEvent.objects.none()
    return AuditEvent.objects.filter(created_at__lt=cutoff)


def last_run() -> PruneRun | None:
    return PruneRun.objects.order_by("-started_at", "-id").first()
