"""The mailbox's rules: enqueue with dedup, dequeue, consolidate, defer, resurface,
retry cleanup and restart recovery (seed sections 3, 14, 17, 18, 21, 22).

Nothing here knows about LLMs or leases. The attention loop passes a ``fence`` (a
boolean expression, e.g. "the agent's lease epoch is still E") that claims and
transitions must also satisfy, so a stale worker's writes match no row.
"""
from __future__ import annotations

import logging
import re
from collections import defaultdict
from collections.abc import Iterable
from dataclasses import dataclass, field
from datetime import datetime
from typing import Any

from django.db import transaction
from django.db.models import F, Q
from django.dispatch import Signal
from django.utils import timezone

from markus.errors import MarkusError
from notifications.events import agent_group, send_event_on_commit

from .models import MailboxItem
from .registry import (
    COMMENT_TYPES,
    MAILBOX_TYPE_REGISTRY,
    MESSAGE_SEPARATOR,
    PROTECTED_TYPES,
    MailboxType,
    Priority,
    Status,
    descriptor,
    is_known_type,
)

log = logging.getLogger(__name__)

# Sent inside the enqueue transaction; the attention app wakes the agent on commit.
item_enqueued = Signal()  # kwargs: item

# A human's in-flight item is re-queued by recovery at most this many attempts.
MAX_HUMAN_ATTEMPTS = 2
OPEN_STATUSES = (Status.QUEUED, Status.PROCESSING, Status.DEFERRED)


class MailboxError(MarkusError):
    """Bad input to the mailbox; the message is safe to show to the caller."""


class ProtectedItemError(MailboxError):
    """An agent tool tried to defer, drop or re-prioritise a protected item."""


# ---------------------------------------------------------------------------- helpers


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
        "queuedAt": item.queued_at,
        "startedAt": item.started_at,
        "completedAt": item.completed_at,
        "deferredUntil": item.deferred_until,
        "mergedInto": item.merged_into_id,
        "attempts": item.attempts,
        "dropReason": item.drop_reason,
    }


def emit_item(item: MailboxItem) -> None:
    send_event_on_commit(
        agent_group(item.agent_id), "agent:mailbox", {"agentId": item.agent_id, "item": serialize_item(item)}
    )


def _dig(payload: dict[str, Any], dotted: str) -> Any:
    value: Any = payload
    for part in dotted.split("."):
        if not isinstance(value, dict):
            return None
        value = value.get(part)
    return value


def _triggers_execution(payload: dict[str, Any]) -> bool:
    extra = payload.get("extra")
    return isinstance(extra, dict) and bool(extra.get("triggerExecution"))


def dedup_key(source_type: str, payload: dict[str, Any]) -> str | None:
    """The section 14 dedup key of an item, or None if it never merges at enqueue."""
    key_path = descriptor(source_type).dedup_key
    if key_path is None or _triggers_execution(payload):
        return None
    value = _dig(payload, key_path)
    return str(value) if value not in (None, "") else None


_PLUS = re.compile(r" \(\+(\d+)\)$")


def _bump_summary(summary: str, by: int = 1) -> str:
    """``X`` → ``X (+1)`` → ``X (+2)``: one suffix that counts the absorbed items."""
    match = _PLUS.search(summary)
    if match:
        return summary[: match.start()] + f" (+{int(match.group(1)) + by})"
    return f"{summary} (+{by})"


def _message_entry(payload: dict[str, Any], metadata: dict[str, Any] | None, at: datetime) -> dict[str, Any]:
    metadata = metadata or {}
    return {
        "senderId": metadata.get("senderId"),
        "senderName": metadata.get("senderName") or metadata.get("senderId") or "unknown",
        "content": str(payload.get("content", "")),
        "timestamp": at.isoformat(),
    }


def _absorb(target: MailboxItem, absorbed: MailboxItem, *, label_prefix: bool = False) -> None:
    """Fold ``absorbed`` into ``target`` (in memory; the caller saves both).

    Content is appended with the separator, the summary gains a ``(+N)`` suffix,
    channel merges carry a structured ``messages`` array, and the survivor keeps the
    highest priority (lowest number).
    """
    payload = dict(target.payload or {})
    incoming = absorbed.payload or {}
    text = str(incoming.get("content", ""))
    if label_prefix and absorbed.source_type != target.source_type:
        text = f"[{absorbed.label}] {text}"
    payload["content"] = f"{payload.get('content', '')}{MESSAGE_SEPARATOR}{text}"
    payload["summary"] = _bump_summary(str(payload.get("summary", "")))
    if target.source_type == MailboxType.A2A_MESSAGE and absorbed.source_type == MailboxType.A2A_MESSAGE:
        messages = list(payload.get("messages") or [_message_entry(target.payload, target.metadata, target.queued_at)])
        messages.extend(incoming.get("messages") or [_message_entry(incoming, absorbed.metadata, absorbed.queued_at)])
        payload["messages"] = messages
    if label_prefix:
        merged = list(payload.get("consolidated") or [])
        merged.append({"id": absorbed.id, "sourceType": absorbed.source_type, "summary": absorbed.summary})
        payload["consolidated"] = merged
    target.payload = payload
    target.priority = min(target.priority, absorbed.priority)
    absorbed.status = Status.MERGED
    absorbed.merged_into = target
    absorbed.completed_at = timezone.now()


# ---------------------------------------------------------------------------- enqueue


def check_enqueue(
    *, source_type: Any, payload: Any, priority: Any = None, metadata: Any = None
) -> tuple[str, dict[str, Any], int | None, dict[str, Any]]:
    """Validate enqueue input; raise MailboxError with a message for the caller."""
    if not is_known_type(source_type):
        known = ", ".join(t.value for t in MAILBOX_TYPE_REGISTRY)
        raise MailboxError(f"unknown sourceType {source_type!r}; expected one of: {known}")
    if not isinstance(payload, dict):
        raise MailboxError("payload must be an object")
    for key in ("summary", "content"):
        if key in payload and not isinstance(payload[key], str):
            raise MailboxError(f"payload.{key} must be a string")
    if "extra" in payload and payload["extra"] is not None and not isinstance(payload["extra"], dict):
        raise MailboxError("payload.extra must be an object")
    # Ids are strings; a number here would silently escape dedup and consolidation.
    for key in ("taskId", "requirementId"):
        if payload.get(key) is not None and not isinstance(payload[key], str):
            raise MailboxError(f"payload.{key} must be a string")
    channel = (payload.get("extra") or {}).get("channelKey")
    if channel is not None and not isinstance(channel, str):
        raise MailboxError("payload.extra.channelKey must be a string")
    if priority is not None:
        if isinstance(priority, bool) or not isinstance(priority, int) or not 0 <= priority <= 4:
            raise MailboxError("priority must be an integer from 0 (critical) to 4 (background)")
    if metadata is None:
        metadata = {}
    if not isinstance(metadata, dict):
        raise MailboxError("metadata must be an object")
    return str(source_type), payload, priority, metadata


def default_priority(source_type: str, metadata: dict[str, Any]) -> int:
    """The registry's default, except that a comment a human wrote is a user
    interaction and goes first (the seed's priority invariant)."""
    if source_type in COMMENT_TYPES and metadata.get("senderRole") == "user":
        return Priority.CRITICAL
    return int(descriptor(source_type).default_priority)


@transaction.atomic
def mailbox_enqueue(
    *,
    agent_id: str,
    source_type: str,
    payload: dict[str, Any],
    priority: int | None = None,
    metadata: dict[str, Any] | None = None,
) -> MailboxItem:
    """Store a stimulus for an agent. Returns the stored row: ``queued``, or ``merged``
    with ``merged_into`` set when a queued item of the same dedup group absorbed it."""
    source_type, payload, priority, metadata = check_enqueue(
        source_type=source_type, payload=payload, priority=priority, metadata=metadata
    )
    item = MailboxItem(
        agent_id=agent_id,
        source_type=source_type,
        priority=default_priority(source_type, metadata) if priority is None else priority,
        payload=payload,
        metadata=metadata,
        queued_at=timezone.now(),
    )
    key = dedup_key(source_type, payload)
    target = None
    if key is not None:
        target = _find_absorber(agent_id, source_type, key)
    if target is not None:
        # The target row is locked; it is still queued, so no worker holds it.
        item.save(force_insert=True)
        _absorb(target, item)
        target.save(update_fields=["payload", "priority"])
        item.save(update_fields=["status", "merged_into", "completed_at"])
        log.info("mailbox: %s merged into %s (%s)", item.id, target.id, source_type)
        emit_item(target)
    else:
        item.save(force_insert=True)
    emit_item(item)
    item_enqueued.send(sender=MailboxItem, item=item)
    return item


def _find_absorber(agent_id: str, source_type: str, key: str) -> MailboxItem | None:
    """The oldest queued item of the same dedup group, locked. Only a *queued* item can
    absorb (one being processed cannot change under the worker's feet), and an
    execution trigger never absorbs."""
    key_path = descriptor(source_type).dedup_key
    assert key_path is not None
    lookup = "payload__" + key_path.replace(".", "__")
    candidates = (
        MailboxItem.objects.select_for_update()
        .filter(agent_id=agent_id, source_type=source_type, status=Status.QUEUED, **{lookup: key})
        .order_by("queued_at", "id")
    )
    for candidate in candidates[:5]:
        if not candidate.triggers_execution:
            return candidate
    return None


# ---------------------------------------------------------------------------- dequeue


def queued(agent_id: str):
    """Queued items in the order they would be dequeued: priority, then FIFO."""
    return MailboxItem.objects.filter(agent_id=agent_id, status=Status.QUEUED).order_by(
        "priority", "queued_at", "id"
    )


def mailbox_claim_next(*, agent_id: str, epoch: int | None = None, fence: Q | None = None) -> MailboxItem | None:
    """Claim the head of the queue: one conditional UPDATE per attempt, row count
    checked. Returns the claimed item (``processing``) or None when the queue is empty
    or the fence no longer holds."""
    for _ in range(10):
        head = queued(agent_id).values_list("id", flat=True).first()
        if head is None:
            return None
        item = mailbox_claim(head, epoch=epoch, fence=fence)
        if item is not None:
            return item
        if fence is not None and not MailboxItem.objects.filter(id=head).filter(fence).exists():
            return None  # the lease moved on: this worker is stale
    return None


def mailbox_claim(item_id: str, *, epoch: int | None = None, fence: Q | None = None) -> MailboxItem | None:
    """Claim one queued item (``processing``) with a conditional UPDATE; None if it was
    not queued any more or the fence does not hold."""
    rows = MailboxItem.objects.filter(id=item_id, status=Status.QUEUED)
    if fence is not None:
        rows = rows.filter(fence)
    if rows.update(status=Status.PROCESSING, started_at=timezone.now(), lease_epoch=epoch,
                   attempts=F("attempts") + 1) != 1:
        return None
    item = MailboxItem.objects.get(id=item_id)
    with transaction.atomic():
        emit_item(item)
    return item


def mailbox_put_back(item_id: str, *, epoch: int) -> bool:
    """Return a claimed item to the queue as if it had not been claimed (its place and
    its attempt count are kept): triage chose another item to go first."""
    return _transition(item_id, from_statuses=[Status.PROCESSING], epoch=epoch, fenced=True,
                       status=Status.QUEUED, started_at=None, lease_epoch=None, attempts=F("attempts") - 1)


def mailbox_dequeue(agent_id: str) -> MailboxItem | None:
    """Unfenced claim, for callers that own the agent by other means (tests, tools)."""
    return mailbox_claim_next(agent_id=agent_id)


# ---------------------------------------------------------------------------- transitions


def _transition(
    item_id: str,
    *,
    from_statuses: Iterable[str],
    epoch: int | None = None,
    fenced: bool = False,
    **fields: Any,
) -> bool:
    """Move an item between statuses with one conditional UPDATE. With ``fenced``, only
    the worker that claimed it under ``epoch`` can. True if the row changed."""
    rows = MailboxItem.objects.filter(id=item_id, status__in=list(from_statuses))
    if fenced:
        rows = rows.filter(lease_epoch=epoch)
    with transaction.atomic():
        changed = rows.update(**fields) == 1
        if changed:
            emit_item(MailboxItem.objects.get(id=item_id))
    return changed


def mailbox_complete(item_id: str, *, epoch: int | None = None, fenced: bool = False) -> bool:
    return _transition(
        item_id, from_statuses=[Status.PROCESSING], epoch=epoch, fenced=fenced,
        status=Status.COMPLETED, completed_at=timezone.now(),
    )


def mailbox_defer(
    item_id: str,
    *,
    until: datetime | None = None,
    epoch: int | None = None,
    fenced: bool = False,
    from_statuses: Iterable[str] = (Status.QUEUED, Status.PROCESSING),
) -> bool:
    """Defer an item; with no ``until`` it resurfaces at the agent's next idle cycle."""
    return _transition(
        item_id, from_statuses=from_statuses, epoch=epoch, fenced=fenced,
        status=Status.DEFERRED, deferred_until=until,
    )


def mailbox_drop(
    item_id: str,
    *,
    reason: str,
    epoch: int | None = None,
    fenced: bool = False,
    from_statuses: Iterable[str] = OPEN_STATUSES,
) -> bool:
    return _transition(
        item_id, from_statuses=from_statuses, epoch=epoch, fenced=fenced,
        status=Status.DROPPED, completed_at=timezone.now(), drop_reason=reason[:300],
    )


def mailbox_requeue(item_id: str, *, epoch: int | None = None, fenced: bool = False) -> bool:
    """Put an in-flight item back at its place in the queue (its ``queued_at`` is kept)."""
    return _transition(
        item_id, from_statuses=[Status.PROCESSING], epoch=epoch, fenced=fenced,
        status=Status.QUEUED, started_at=None, lease_epoch=None,
    )


@transaction.atomic
def mailbox_merge_into(item_id: str, target_id: str, *, claimed_epoch: int | None = None) -> bool:
    """Absorb an item into another that is still live (queued, processing or deferred):
    the attention loop's merge decision. The item must be queued, or, with
    ``claimed_epoch``, processing under that epoch (a claimed comment that is injected
    into a task's open execution)."""
    items = {i.id: i for i in MailboxItem.objects.select_for_update().filter(id__in=[item_id, target_id])}
    item, target = items.get(item_id), items.get(target_id)
    if item is None or target is None or target.status not in OPEN_STATUSES:
        return False
    claimed = claimed_epoch is not None and item.status == Status.PROCESSING and item.lease_epoch == claimed_epoch
    if item.status != Status.QUEUED and not claimed:
        return False
    _absorb(target, item)
    target.save(update_fields=["payload", "priority"])
    item.save(update_fields=["status", "merged_into", "completed_at"])
    emit_item(item)
    emit_item(target)
    return True


def mailbox_resurface_due(agent_id: str, *, now: datetime | None = None) -> int:
    """Re-queue deferred items that are due: ``deferred_until`` passed or unset
    (section 22). Items parked for an approval are not due until it is answered."""
    now = now or timezone.now()
    due = MailboxItem.objects.filter(agent_id=agent_id, status=Status.DEFERRED).filter(
        Q(deferred_until__isnull=True) | Q(deferred_until__lte=now)
    )
    # Filtered here, not with .exclude(metadata__waitingForApproval=True): in SQL a
    # missing key compares as NULL, which would exclude every item without the key.
    ids = [i for i, meta in due.values_list("id", "metadata") if (meta or {}).get("waitingForApproval") is not True]
    if not ids:
        return 0
    with transaction.atomic():
        count = MailboxItem.objects.filter(id__in=ids, status=Status.DEFERRED).update(
            status=Status.QUEUED, deferred_until=None, started_at=None, lease_epoch=None
        )
        for item in MailboxItem.objects.filter(id__in=ids):
            emit_item(item)
    return count


# ---------------------------------------------------------------------------- agent tools


def check_agent_may_manage(item: MailboxItem) -> None:
    """Agent tools may not defer, drop or re-prioritise a human's chat."""
    if item.source_type in PROTECTED_TYPES:
        raise ProtectedItemError(f"{item.id} is a {item.label} item; it is protected and cannot be changed by a tool")


def _tool_item(agent_id: str, item_id: str) -> MailboxItem:
    item = MailboxItem.objects.filter(agent_id=agent_id, id=item_id).first()
    if item is None:
        raise MailboxError(f"no mailbox item {item_id!r} in your mailbox")
    check_agent_may_manage(item)
    if item.status != Status.QUEUED:
        raise MailboxError(f"{item_id} is {item.status}, only queued items can be changed")
    return item


def tool_defer_item(*, agent_id: str, item_id: str, until: datetime | None = None) -> MailboxItem:
    item = _tool_item(agent_id, item_id)
    mailbox_defer(item.id, until=until, from_statuses=[Status.QUEUED])
    item.refresh_from_db()
    return item


def tool_drop_item(*, agent_id: str, item_id: str, reason: str = "dropped by the agent") -> MailboxItem:
    item = _tool_item(agent_id, item_id)
    mailbox_drop(item.id, reason=reason, from_statuses=[Status.QUEUED])
    item.refresh_from_db()
    return item


def tool_prioritize_item(*, agent_id: str, item_id: str, priority: int) -> MailboxItem:
    item = _tool_item(agent_id, item_id)
    if isinstance(priority, bool) or not isinstance(priority, int) or not 0 <= priority <= 4:
        raise MailboxError("priority must be an integer from 0 to 4")
    with transaction.atomic():
        MailboxItem.objects.filter(id=item.id, status=Status.QUEUED).update(priority=priority)
        item.refresh_from_db()
        emit_item(item)
    return item


# ---------------------------------------------------------------------------- consolidation


def _entity_key(item: MailboxItem) -> tuple[str, str] | None:
    if item.triggers_execution or item.source_type in PROTECTED_TYPES:
        return None
    if item.task_id:
        return ("task", str(item.task_id))
    if item.requirement_id:
        return ("requirement", str(item.requirement_id))
    return None


def _needs_agent(item: MailboxItem) -> bool:
    d = descriptor(item.source_type)
    return d.invokes_llm or item.source_type in COMMENT_TYPES


@transaction.atomic
def mailbox_consolidate_by_entity(agent_id: str) -> int:
    """Cross-type consolidation before triage (section 21): queued items sharing a
    ``taskId`` (or else a ``requirementId``) collapse into one. The survivor is the
    first in dequeue order among those that need the agent's attention (so an
    informational status update never swallows a comment); it keeps the highest
    priority. Execution triggers and human chats never merge. Returns items merged."""
    groups: dict[tuple[str, str], list[MailboxItem]] = defaultdict(list)
    for item in queued(agent_id).select_for_update():
        key = _entity_key(item)
        if key is not None:
            groups[key].append(item)
    merged = 0
    for members in groups.values():
        if len(members) < 2:
            continue
        survivor = next((m for m in members if _needs_agent(m)), members[0])
        for other in members:
            if other is survivor:
                continue
            _absorb(survivor, other, label_prefix=True)
            other.save(update_fields=["status", "merged_into", "completed_at"])
            emit_item(other)
            merged += 1
        survivor.save(update_fields=["payload", "priority"])
        emit_item(survivor)
    return merged


@transaction.atomic
def mailbox_drop_status_updates_by_task_id(*, agent_id: str, task_id: str) -> int:
    """Retry cleanup (section 18): drop queued, informational task_status_update items
    of the task. Execution triggers, comments, mentions, a2a messages and anything
    already processing are kept."""
    rows = MailboxItem.objects.select_for_update().filter(
        agent_id=agent_id, status=Status.QUEUED, source_type=MailboxType.TASK_STATUS_UPDATE,
        payload__taskId=task_id,
    )
    dropped = 0
    for item in rows:
        if item.triggers_execution:
            continue
        if mailbox_drop(item.id, reason=f"retry cleanup for task {task_id}", from_statuses=[Status.QUEUED]):
            dropped += 1
    return dropped


# ---------------------------------------------------------------------------- recovery


@dataclass
class RecoveryReport:
    requeued: list[str] = field(default_factory=list)
    dropped: list[str] = field(default_factory=list)
    heartbeats_collapsed: list[str] = field(default_factory=list)
    comments_merged: list[str] = field(default_factory=list)


@transaction.atomic
def mailbox_recover(agent_id: str) -> RecoveryReport:
    """Restart recovery (section 17), called only when no live lease holds the agent.

    1. Stale ``processing`` items are dropped with a reason, except a human's item
       (a chat, or a comment a human wrote): it is re-queued, and dropped with a
       recorded reason only once it has been attempted MAX_HUMAN_ATTEMPTS times.
    2. The queue is deduplicated: heartbeats collapse to the newest, comments on one
       task (or requirement) merge with the survivor keeping the highest priority;
       execution triggers never merge.
    """
    report = RecoveryReport()
    for item in MailboxItem.objects.select_for_update().filter(agent_id=agent_id, status=Status.PROCESSING):
        if item.is_user_interaction and item.attempts < MAX_HUMAN_ATTEMPTS:
            if _transition(item.id, from_statuses=[Status.PROCESSING], status=Status.QUEUED,
                           started_at=None, lease_epoch=None):
                report.requeued.append(item.id)
        else:
            reason = (
                f"recovery: a human's item in flight at a crash {item.attempts} times; gave up"
                if item.is_user_interaction
                else "recovery: in flight when its worker stopped"
            )
            if mailbox_drop(item.id, reason=reason, from_statuses=[Status.PROCESSING]):
                report.dropped.append(item.id)
    _dedupe_queue(agent_id, report)
    return report


def _dedupe_queue(agent_id: str, report: RecoveryReport) -> None:
    items = list(queued(agent_id).select_for_update())
    heartbeats = sorted(
        (i for i in items if i.source_type == MailboxType.HEARTBEAT and not i.triggers_execution),
        key=lambda i: (i.queued_at, i.id),
    )
    for stale in heartbeats[:-1]:
        if mailbox_drop(stale.id, reason="recovery: heartbeat collapse", from_statuses=[Status.QUEUED]):
            report.heartbeats_collapsed.append(stale.id)
    groups: dict[tuple[str, str], list[MailboxItem]] = defaultdict(list)
    for item in items:
        key = dedup_key(item.source_type, item.payload or {})
        if item.source_type in COMMENT_TYPES and key is not None:
            groups[(item.source_type, key)].append(item)
    for members in groups.values():
        survivor, rest = members[0], members[1:]
        for other in rest:
            _absorb(survivor, other)
            other.save(update_fields=["status", "merged_into", "completed_at"])
            emit_item(other)
            report.comments_merged.append(other.id)
        if rest:
            survivor.save(update_fields=["payload", "priority"])
            emit_item(survivor)


def not_parked() -> Q:
    """Items not parked for an approval, as a SQL condition. (``exclude(metadata__
    waitingForApproval=True)`` would also drop rows without the key: NOT NULL is NULL.)"""
    return Q(metadata__isnull=True) | Q(metadata__waitingForApproval__isnull=True) | Q(
        metadata__waitingForApproval=False)
