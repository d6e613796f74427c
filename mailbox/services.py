"""The mailbox's rules: enqueue with dedup, consolidate, retry cleanup, restart
recovery and the agent tools (seed sections 3, 14, 17, 18, 21, 22). The status
transitions themselves live in ``lifecycle``, the merge rule in ``merge``.

Nothing here knows about LLMs or leases: the attention loop makes its writes inside its
own fenced transaction, and stamps what it claims with its lease epoch.
"""

from __future__ import annotations

import hashlib
import logging
from collections import defaultdict
from datetime import datetime
from typing import Any

from django.db import connection, transaction
from django.utils import timezone

from markus import telemetry
from markus.core import signals
from markus.core.errors import MarkusError

from . import lifecycle
from .expiry import expire_stale
from .lifecycle import MAX_HUMAN_ATTEMPTS, OPEN_STATUSES, emit_item, not_parked, queued
from .merge import consolidation_key, dedup_key, is_protected, is_strict, may_merge, protection_reason
from .models import MailboxItem
from .registry import (
    COMMENT_TYPES,
    MAILBOX_TYPE_REGISTRY,
    MailboxType,
    Priority,
    Status,
    descriptor,
    is_known_type,
)
from .representation import serialize_item

log = logging.getLogger(__name__)

# Sent once the row is written (inside the enqueue's transaction when there is one);
# the attention app wakes the agent on commit (``markus.core.signals``).
item_enqueued = signals.item_enqueued

__all__ = [
    "MAX_HUMAN_ATTEMPTS",
    "OPEN_STATUSES",
    "dedup_key",
    "emit_item",
    "not_parked",
    "queued",
    "serialize_item",
]


class MailboxError(MarkusError):
    """Bad input to the mailbox; the message is safe to show to the caller."""


class ProtectedItemError(MailboxError):
    """An agent tool tried to defer, drop or re-prioritise a protected item."""


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


def mailbox_enqueue(
    *,
    agent_id: str,
    source_type: str,
    payload: dict[str, Any],
    priority: int | None = None,
    metadata: dict[str, Any] | None = None,
    marks: dict[str, Any] | None = None,
) -> MailboxItem:
    """Store a stimulus for an agent. Returns the stored row: ``queued``, or ``merged``
    with ``merged_into`` set when a queued item of the same dedup group absorbed it.
    ``metadata``: the caller's; ``marks``: what the system itself keeps on the item (the
    bus stream it carries, why the sweep re-queued it), never from a request.

    An item of no dedup group is one INSERT: outside a transaction it commits on its
    own, inside the caller's it joins it. An item of a group takes the group's lock,
    looks for a queued item to absorb it and is stored, in one transaction (the
    caller's, without a savepoint, when there is one). ``item_enqueued`` is sent once
    the row is written, inside the transaction if there is one; its receivers act on
    commit (``transaction.on_commit``)."""
    source_type, payload, priority, metadata = check_enqueue(
        source_type=source_type, payload=payload, priority=priority, metadata=metadata
    )
    if priority is None:
        priority = default_priority(source_type, metadata)
    marks = telemetry.stamp(marks)  # the trace it is enqueued in, for its processing
    key = dedup_key(source_type, payload)
    if key is None:
        item = lifecycle.insert_queued(
            agent_id=agent_id,
            source_type=source_type,
            priority=priority,
            payload=payload,
            metadata=metadata,
            marks=marks,
        )
    else:
        with transaction.atomic(savepoint=False):
            item = _enqueue_in_group(agent_id, source_type, payload, priority, metadata, key, marks)
    item_enqueued.send(sender=MailboxItem, item=item)
    return item


def _enqueue_in_group(
    agent_id: str,
    source_type: str,
    payload: dict[str, Any],
    priority: int,
    metadata: dict[str, Any],
    key: str,
    marks: dict[str, Any] | None,
) -> MailboxItem:
    item = MailboxItem(
        agent_id=agent_id,
        source_type=source_type,
        priority=priority,
        payload=payload,
        metadata=metadata,
        marks=marks or {},
        queued_at=timezone.now(),
    )
    # Without the lock, two enqueues that both find no queued item of the group
    # would both insert one (20 threads left up to 12 queued rows on PostgreSQL).
    mailbox_lock_group(agent_id, source_type, key)
    collapsing = descriptor(source_type).one_queued and not is_strict(item)
    if collapsing:
        reason = _collapse_onto(item)
        if reason is not None:
            lifecycle.insert_discarded(item, reason=reason)
            log.info("mailbox: %s discarded (%s)", item.id, reason)
            return item
    # (After a collapse check no queued item may absorb the new one: none is open.)
    target = None if collapsing else _find_absorber(item, key)
    if target is not None:
        # The target row is locked; it is still queued, so no worker holds it.
        lifecycle.absorb_new(target, item)
        log.info("mailbox: %s merged into %s (%s)", item.id, target.id, source_type)
    else:
        item.save(force_insert=True)
        emit_item(item)
    return item


# The first key of PostgreSQL's two-key advisory locks that the mailbox takes ("mbx").
_LOCK_SPACE = 0x6D6278


def mailbox_lock_group(agent_id: str, source_type: str, key: str) -> None:
    """Serialise the writers of one group of an agent's items (a dedup group, or a
    caller's own key such as a periodic job's) until the transaction ends.

    PostgreSQL: a transaction-scoped advisory lock on a hash of (agent, type, key): one
    statement, no row needed, released by the commit that makes the new item visible.
    SQLite: nothing to take; the IMMEDIATE transaction (``transaction_mode`` in the
    settings) already holds the database's write lock from its first statement.
    """
    if not connection.in_atomic_block:
        raise RuntimeError("mailbox_lock_group must be called inside a transaction")
    if connection.vendor != "postgresql":
        return
    digest = hashlib.blake2b(f"{agent_id}\0{source_type}\0{key}".encode(), digest_size=4).digest()
    group = int.from_bytes(digest, "big", signed=True)
    with connection.cursor() as cursor:
        cursor.execute("SELECT pg_advisory_xact_lock(%s, %s)", [_LOCK_SPACE, group])


def _collapse_onto(item: MailboxItem) -> str | None:
    """Heartbeat collapse (upstream's rule, for a type with ``one_queued``): while one
    of the type is queued a new one is discarded, nothing appended to the queued one;
    while one is being processed a new one is its duplicate. The reason to record, or
    None when no such item is open. The caller holds the group's lock."""
    open_ = (
        MailboxItem.objects.filter(
            agent_id=item.agent_id, source_type=item.source_type, status__in=[Status.QUEUED, Status.PROCESSING]
        )
        .order_by("queued_at", "id")
        .values_list("id", "status", "payload")
    )
    for other_id, status, payload in open_[:5]:
        if is_strict(MailboxItem(source_type=item.source_type, payload=payload)):
            continue  # an execution trigger keeps its own identity; it is not a check-in
        if status == Status.QUEUED:
            return f"heartbeat collapse: {other_id} is queued already; this one was discarded"
        return f"heartbeat collapse: a duplicate of {other_id}, which is being processed"
    return None


def _find_absorber(item: MailboxItem, key: str) -> MailboxItem | None:
    """The oldest queued item of the same dedup group that may absorb ``item``, locked.
    Only a *queued* item can absorb (one being processed cannot change under the
    worker's feet)."""
    rows = MailboxItem.objects.select_for_update().filter(
        agent_id=item.agent_id, source_type=item.source_type, status=Status.QUEUED
    )
    key_path = descriptor(item.source_type).dedup_key
    if key != "*" and key_path is not None:
        rows = rows.filter(**{"payload__" + key_path.replace(".", "__"): key})
    for candidate in rows.order_by("queued_at", "id")[:5]:
        if may_merge(candidate, item):
            return candidate
    return None


# ---------------------------------------------------------------------------- agent tools


def check_agent_may_manage(item: MailboxItem) -> None:
    """Agent tools may not defer, drop or re-prioritise a protected item (``is_protected``)."""
    if is_protected(item):
        raise ProtectedItemError(
            f"{item.id} is {protection_reason(item)}: it is protected and cannot be changed by a tool"
        )


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
    lifecycle.defer(item.id, until=until, from_statuses=[Status.QUEUED])
    item.refresh_from_db()
    return item


def tool_drop_item(*, agent_id: str, item_id: str, reason: str = "dropped by the agent") -> MailboxItem:
    item = _tool_item(agent_id, item_id)
    lifecycle.drop(item.id, reason=reason, from_statuses=[Status.QUEUED])
    item.refresh_from_db()
    return item


def tool_prioritize_item(*, agent_id: str, item_id: str, priority: int) -> MailboxItem:
    item = _tool_item(agent_id, item_id)
    if isinstance(priority, bool) or not isinstance(priority, int) or not 0 <= priority <= 4:
        raise MailboxError("priority must be an integer from 0 to 4")
    lifecycle.set_priority(item.id, priority)
    item.refresh_from_db()
    return item


# ---------------------------------------------------------------------------- consolidation


def _needs_agent(item: MailboxItem) -> bool:
    d = descriptor(item.source_type)
    return d.invokes_llm or item.source_type in COMMENT_TYPES


@transaction.atomic
def mailbox_consolidate_by_entity(agent_id: str, *, merged: list[MailboxItem] | None = None) -> int:
    """Consolidation at the queue's read (sections 14 and 21): queued items sharing a
    ``taskId`` (or else a ``requirementId``) collapse into one, across types, and so do
    agent messages of one conversation (one ``channelKey``): ``merge.consolidation_key``.
    The survivor of a task's or requirement's items is the first in dequeue order among
    those that need the agent's attention (so an informational status update never
    swallows a comment); of a conversation's messages, the oldest (its ``messages`` read
    in the order they were said). It keeps the highest priority. Execution triggers and
    human chats never merge. Returns how many items merged; ``merged``, when given,
    receives them (each with ``merged_into`` set)."""
    groups: dict[tuple[str, str], list[MailboxItem]] = defaultdict(list)
    for item in queued(agent_id).select_for_update():
        key = consolidation_key(item)
        if key is not None and not is_strict(item):
            groups[key].append(item)
    count = 0
    for (kind, _), members in groups.items():
        if kind == "channel":
            survivor = min(members, key=lambda m: (m.queued_at, m.id))
        else:
            survivor = next((m for m in members if _needs_agent(m)), members[0])
        for other in sorted(members, key=lambda m: (m.queued_at, m.id)) if kind == "channel" else members:
            if other is not survivor and may_merge(survivor, other):
                lifecycle.absorb(survivor, other, label_prefix=kind != "channel")
                count += 1
                if merged is not None:
                    merged.append(other)
    return count


@transaction.atomic
def mailbox_drop_status_updates_by_task_id(*, agent_id: str, task_id: str) -> int:
    """Retry cleanup (section 18): drop queued, informational task_status_update items
    of the task. Execution triggers, comments, mentions, a2a messages and anything
    already processing are kept."""
    rows = MailboxItem.objects.select_for_update().filter(
        agent_id=agent_id,
        status=Status.QUEUED,
        source_type=MailboxType.TASK_STATUS_UPDATE,
        payload__taskId=task_id,
    )
    dropped = 0
    for item in rows:
        if item.triggers_execution:
            continue
        if lifecycle.drop(item.id, reason=f"retry cleanup for task {task_id}", from_statuses=[Status.QUEUED]):
            dropped += 1
    return dropped


# ---------------------------------------------------------------------------- recovery


RecoveryReport = lifecycle.RecoveryReport


def mailbox_recover(agent_id: str) -> RecoveryReport:
    """Restart recovery (section 17), called only when no live lease holds the agent.

    1. Stale ``processing`` items: what somebody waits for (a human's chat or comment,
       an execution trigger, a review request, a reminder) is re-queued, and dropped with a
       recorded reason only after MAX_RECOVERY_ATTEMPTS; anything else is dropped.
    2. Stale queued items expire (``mailbox.expiry``): an item that waited longer than
       its type's expiry is dropped with its reason; never what somebody waits for.
    3. The queue is deduplicated: heartbeats collapse to the newest, comments on one
       task (or requirement) merge, the survivor keeping the highest priority.
    """
    report = RecoveryReport()
    with transaction.atomic():
        lifecycle.recover_in_flight(agent_id, report)
        report.expired = [i.id for i in expire_stale(agent_id)]
        _dedupe_queue(agent_id, report)
    return report


def _dedupe_queue(agent_id: str, report: RecoveryReport) -> None:
    items = list(queued(agent_id).select_for_update())
    heartbeats = sorted(
        (i for i in items if descriptor(i.source_type).one_queued and not is_strict(i)),
        key=lambda i: (i.queued_at, i.id),
    )
    for stale in heartbeats[:-1]:
        if lifecycle.drop(stale.id, reason="recovery: heartbeat collapse", from_statuses=[Status.QUEUED]):
            report.heartbeats_collapsed.append(stale.id)
    groups: dict[tuple[str, str], list[MailboxItem]] = defaultdict(list)
    for item in items:
        key = dedup_key(item.source_type, item.payload or {})
        if item.source_type in COMMENT_TYPES and key is not None:
            groups[(item.source_type, key)].append(item)
    for members in groups.values():
        survivor = members[0]
        for other in members[1:]:
            if may_merge(survivor, other):
                lifecycle.absorb(survivor, other)
                report.comments_merged.append(other.id)
