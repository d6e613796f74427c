"""An item's life: the one writer of ``MailboxItem.status``.

queued → processing (claim) → completed | deferred | queued | dropped; queued or
processing → merged (absorbed by another live item); deferred → queued (resurface,
unpark). Every transition is one conditional UPDATE whose row count says whether it
happened, and emits the item's ``agent:mailbox`` event on commit. The attention loop
passes ``epoch``/``fenced`` (or a ``fence`` condition) so a worker that lost its lease
matches no row. The loop, the console, the approval hook, the tools and the work app
call these functions; nothing else writes ``mailbox_items`` (tests/attention/
test_mailbox_one_writer.py).

The hot paths are one statement each, written as SQL here rather than built by the
ORM per call: a new item is one INSERT, a claim one ``UPDATE … RETURNING`` (the head
of the queue chosen by a subquery, locked ``FOR UPDATE`` on PostgreSQL), a transition
one ``UPDATE … RETURNING``; the returned row becomes the ``MailboxItem`` and its event
without another read. Outside a transaction each is its own autocommit statement (no
BEGIN/COMMIT round trips); inside one it joins it. A database without ``RETURNING``
(SQLite before 3.35) takes the ORM path.
"""

from __future__ import annotations

from collections.abc import Iterable
from dataclasses import dataclass, field
from datetime import datetime
from typing import Any

from django.db import transaction
from django.db.models import Q, QuerySet
from django.utils import timezone

from markus.core.events import agent_group, send_json_on_commit
from markus.core.ids import mailbox_id
from markus.core.statements import prepared_cursor

from .merge import fold, may_merge
from .models import MailboxItem
from .registry import MailboxType, Status, descriptor
from .representation import event_item, redacted
from .statements import ATTNAMES, DEFAULTED, FIELD, ID_COLUMN, Statements, statements

OPEN_STATUSES = (Status.QUEUED, Status.PROCESSING, Status.DEFERRED)
# Recovery re-queues a human's in-flight item, an execution trigger or a review request
# at most this many attempts; then it is dropped with a recorded reason.
MAX_RECOVERY_ATTEMPTS = 2
MAX_HUMAN_ATTEMPTS = MAX_RECOVERY_ATTEMPTS
# A mark (``MailboxItem.marks``): when this deferred item resurfaces it goes behind the
# queue at its priority (the interrupt judge's defer), not back to its old place.
BEHIND_QUEUE = "resurfaceBehindQueue"
# A mark: the bus stream an outside agent's item was delivered on (``attention.outside``).
# Such an item is completed at delivery; the agent answers on the bus or where it was said.
DELIVERED_ON = "deliveredOn"


def emit_item(item: MailboxItem) -> None:
    """``agent:mailbox`` after commit; an item of a private chat session goes to the
    other watchers with its content replaced (``representation.redacted``)."""
    shown = event_item(item)
    event = {"type": "agent:mailbox", "agentId": item.agent_id, "item": shown}
    owner = shown["privateTo"]
    public = None if owner is None else {**event, "item": redacted(shown)}
    send_json_on_commit(agent_group(item.agent_id), event, private_to=owner, public=public)


def waking() -> Q:
    """Items that still bring somebody to the work they are about: open ones, and those
    delivered to an outside agent's inbox (its harness, not a loop, takes them up)."""
    return Q(status__in=OPEN_STATUSES) | Q(marks__deliveredOn__isnull=False)


def not_parked() -> Q:
    """Items not parked (for an approval, or for a colleague's reply), as a SQL
    condition. (``exclude(marks__waitingForApproval=True)`` would also drop rows without
    the key: NOT NULL is NULL.)"""
    return (Q(marks__waitingForApproval__isnull=True) | Q(marks__waitingForApproval=False)) & (
        Q(marks__waitingForReply__isnull=True) | Q(marks__waitingForReply=False)
    )


def waiting_for_reply() -> Q:
    """Items parked until a colleague's reply (or its timeout, ``deferred_until``)."""
    return Q(marks__waitingForReply=True)


def parked() -> Q:
    """Items parked for an approval (deferred until a person answers)."""
    return Q(marks__waitingForApproval=True)


def insert_queued(
    *,
    agent_id: str,
    source_type: str,
    priority: int,
    payload: dict[str, Any],
    metadata: dict[str, Any] | None,
    queued_at: datetime | None = None,
    marks: dict[str, Any] | None = None,
) -> MailboxItem:
    """Store a new queued item with one INSERT (no ORM save) and emit its event. Outside
    a transaction the statement commits on its own; inside one it joins it."""
    sql = statements()
    conn = sql.conn
    ops = conn.ops
    values, row = {}, {}
    for name, (value, stored) in sql.defaults.items():
        values[name], row[name] = value, stored
    for f in DEFAULTED:
        if f.attname not in values:  # a callable default: one value per row
            values[f.attname] = value = f.get_default()
            row[f.attname] = f.get_db_prep_save(value, conn)
    values.update(
        id=mailbox_id(),
        agent_id=agent_id,
        source_type=source_type,
        priority=priority,
        payload=payload,
        metadata=metadata,
        queued_at=queued_at or timezone.now(),
    )
    if marks:
        values["marks"] = marks
        row["marks"] = ops.adapt_json_value(marks, None)
    item = MailboxItem.from_db(conn.alias, ATTNAMES, [values[name] for name in ATTNAMES])
    row.update(
        id=item.id,
        agent_id=agent_id,
        source_type=source_type,
        priority=priority,
        payload=ops.adapt_json_value(payload, None),
        metadata=None if metadata is None else ops.adapt_json_value(metadata, None),
        queued_at=sql.stamp(item.queued_at),
    )
    sql.cursor().execute(sql.insert, [row[name] for name in ATTNAMES])
    emit_item(item)
    return item


def insert_discarded(item: MailboxItem, *, reason: str) -> None:
    """Store a new item that is not worth a call (a heartbeat while one is open) as
    dropped from the start, with its reason, and emit its event."""
    now = timezone.now()
    item.status = Status.DROPPED
    item.completed_at = now
    item.drop_reason = reason[:300]
    item.save(force_insert=True)
    emit_item(item)


# ---------------------------------------------------------------------------- the transition


def transition(
    item_id: str,
    *,
    from_statuses: Iterable[str],
    epoch: int | None = None,
    fenced: bool = False,
    refund_attempt: bool = False,
    **fields: Any,
) -> bool:
    """Move an item between statuses with one conditional UPDATE. With ``fenced``, only
    the worker that claimed it under ``epoch`` can. ``refund_attempt``: this run does not
    count as an attempt (a preempt, a pause). True if the row changed."""
    sql = statements()
    statuses = [str(s) for s in from_statuses]
    fence = None if not fenced else "null" if epoch is None else "epoch"
    shape = (tuple(fields), len(statuses), fence, refund_attempt)
    statement = sql.transitions.get(shape) or sql.transition(*shape)
    params = [sql.prep(FIELD[name], value) for name, value in fields.items()]
    params += [item_id, *statuses]
    if fence == "epoch":
        params.append(epoch)
    item = sql.fetch(statement, params)
    if item is None:
        return False
    emit_item(item)
    return True


# ---------------------------------------------------------------------------- claim


def queued(agent_id: str) -> QuerySet[MailboxItem]:
    """Queued items in the order they would be dequeued: priority, then FIFO."""
    return MailboxItem.objects.filter(agent_id=agent_id, status=Status.QUEUED).order_by("priority", "queued_at", "id")


def queued_or_come_due(agent_id: str, *, more_urgent_than: int, since: datetime | None = None) -> QuerySet[MailboxItem]:
    """``queued`` (those queued at ``since`` or later, when given), with the deferred items
    more urgent than ``more_urgent_than`` (a priority) whose time has come
    (``deferred_until`` passed, not parked: a retry's back-off, a reminder), in the same
    order: what may take the focus at a safe point between turns (``resurface_now`` brings
    such an item back). A less urgent one, or one deferred with no time (behind the
    queue), waits for the focus to end. One statement, on the agent's open rows only."""
    queued = Q(status=Status.QUEUED) if since is None else Q(status=Status.QUEUED, queued_at__gte=since)
    come_due = Q(status=Status.DEFERRED, deferred_until__lte=timezone.now(), priority__lt=more_urgent_than)
    come_due &= not_parked()
    open_rows = MailboxItem.objects.filter(agent_id=agent_id, status__in=[Status.QUEUED, Status.DEFERRED])
    return open_rows.filter(queued | come_due).order_by("priority", "queued_at", "id")


def _claim_params(sql: Statements, epoch: int | None) -> list[Any]:
    return [sql.stamp(timezone.now()), epoch]


def claim(item_id: str, *, epoch: int | None = None) -> MailboxItem | None:
    """Claim one queued item (``processing``) with a conditional UPDATE; None if it was
    not queued any more. The loop claims inside its fenced transaction, so a stale
    worker claims nothing."""
    sql = statements()
    item = sql.fetch(sql.claim, [*_claim_params(sql, epoch), item_id])
    if item is not None:
        emit_item(item)
    return item


def claim_fenced(item_id: str, *, epoch: int, fence: tuple[str, list[Any]]) -> tuple[bool, MailboxItem | None]:
    """``claim`` in one statement with the fence check of ``attention.lease.fenced``
    (PostgreSQL): ``fence`` is its UPDATE of the attention row (SQL without RETURNING,
    and its parameters). The item is claimed only when that UPDATE found the lease's row
    (epoch, owner, running). Whether it did, and the item (None: not queued any more)."""
    sql = statements()
    fence_sql, fence_params = fence
    cursor = prepared_cursor()
    cursor.execute(sql.fenced_claim(fence_sql), [*fence_params, *_claim_params(sql, epoch), item_id])
    rows = cursor.fetchall()
    if not rows:
        return False, None
    if rows[0][ID_COLUMN] is None:
        return True, None
    item = sql.item(rows[0])
    emit_item(item)
    return True, item


def claim_next(*, agent_id: str, epoch: int | None = None) -> MailboxItem | None:
    """Claim the head of the queue with one ``UPDATE … RETURNING``: the head chosen and
    (on PostgreSQL) locked by a subquery, so a head taken or merged meanwhile gives way
    to the next queued item. None when the queue is empty."""
    sql = statements()
    item = sql.fetch(sql.claim_next, [*_claim_params(sql, epoch), agent_id])
    if item is not None:
        emit_item(item)
    return item


def put_back(item_id: str, *, epoch: int) -> bool:
    """Return a claimed item to the queue as if it had not been claimed (its place and
    its attempt count are kept): triage chose another item to go first."""
    return transition(
        item_id,
        from_statuses=[Status.PROCESSING],
        epoch=epoch,
        fenced=True,
        refund_attempt=True,
        status=Status.QUEUED,
        started_at=None,
        lease_epoch=None,
    )


# ---------------------------------------------------------------------------- outcomes


def complete(item_id: str, *, epoch: int | None = None, fenced: bool = False) -> bool:
    return transition(
        item_id,
        from_statuses=[Status.PROCESSING],
        epoch=epoch,
        fenced=fenced,
        status=Status.COMPLETED,
        completed_at=timezone.now(),
    )


def defer(
    item_id: str,
    *,
    until: datetime | None = None,
    epoch: int | None = None,
    fenced: bool = False,
    from_statuses: Iterable[str] = (Status.QUEUED, Status.PROCESSING),
    marks: dict[str, Any] | None = None,
    refund_attempt: bool = False,
) -> bool:
    """Defer an item; with no ``until`` it resurfaces at the agent's next idle cycle.
    ``marks`` replaces the item's marks (a retry count, the behind-queue flag)."""
    extra = {} if marks is None else {"marks": marks}
    return transition(
        item_id,
        from_statuses=from_statuses,
        epoch=epoch,
        fenced=fenced,
        refund_attempt=refund_attempt,
        status=Status.DEFERRED,
        deferred_until=until,
        **extra,
    )


def defer_behind_queue(item: MailboxItem) -> bool:
    """The interrupt judge's defer of a queued item: it waits until the current focus
    ends, then goes behind the rest of the queue at its priority."""
    return defer(item.id, from_statuses=[Status.QUEUED], marks={**item.marks, BEHIND_QUEUE: True})


def requeue(
    item_id: str,
    *,
    epoch: int | None = None,
    fenced: bool = False,
    refund_attempt: bool = False,
    marks: dict[str, Any] | None = None,
    keep_started: bool = False,
) -> bool:
    """Put an in-flight item back at its place in the queue (its ``queued_at`` is kept);
    ``marks`` replaces its marks (a crash or a retry counted). ``keep_started``: the run
    goes on later where it stopped (a pause), so the item keeps its first start."""
    extra: dict[str, Any] = {} if marks is None else {"marks": marks}
    if not keep_started:
        extra["started_at"] = None
    return transition(
        item_id,
        from_statuses=[Status.PROCESSING],
        epoch=epoch,
        fenced=fenced,
        refund_attempt=refund_attempt,
        status=Status.QUEUED,
        lease_epoch=None,
        **extra,
    )


def drop(
    item_id: str,
    *,
    reason: str,
    epoch: int | None = None,
    fenced: bool = False,
    from_statuses: Iterable[str] = OPEN_STATUSES,
    **fields: Any,
) -> bool:
    """→ dropped, saying why; ``fields``: more of the row set in the same UPDATE."""
    return transition(
        item_id,
        from_statuses=from_statuses,
        epoch=epoch,
        fenced=fenced,
        status=Status.DROPPED,
        completed_at=timezone.now(),
        drop_reason=reason[:300],
        **fields,
    )


def deliver(item: MailboxItem, *, stream_id: str, answer_due: datetime | None = None) -> bool:
    """Queued → completed: the item went to its outside agent's bus inbox on
    ``stream_id`` (marked ``DELIVERED_ON``). Call it in the delivery's transaction.
    ``answer_due``: a person waits for its answer until then (``answer_due_at`` while it
    is unanswered: ``answers_due`` finds it, ``answer_came`` clears it)."""
    return transition(
        item.id,
        from_statuses=[Status.QUEUED],
        status=Status.COMPLETED,
        completed_at=timezone.now(),
        answer_due_at=answer_due,
        marks={**item.marks, DELIVERED_ON: stream_id},
    )


def answers_due(now: datetime) -> QuerySet[MailboxItem]:
    """Delivered items whose answer was due by ``now`` and has not come (the partial
    index ``idx_mailbox_answer_due`` holds only those still awaited)."""
    return MailboxItem.objects.filter(status=Status.COMPLETED, answer_due_at__isnull=False, answer_due_at__lte=now)


def answer_came(item_ids: Iterable[str]) -> int:
    """The outside agent answered these delivered items: nobody waits for them any more."""
    ids = list(item_ids)
    if not ids:
        return 0
    return MailboxItem.objects.filter(id__in=ids, status=Status.COMPLETED, answer_due_at__isnull=False).update(
        answer_due_at=None
    )


def answer_overdue(item: MailboxItem, *, reason: str) -> bool:
    """Completed (delivered, awaited) → dropped: its answer did not come in time."""
    return drop(item.id, reason=reason, from_statuses=[Status.COMPLETED], answer_due_at=None)


def set_priority(item_id: str, priority: int) -> bool:
    """Re-prioritise a queued item (the agent's prioritize tool)."""
    return transition(item_id, from_statuses=[Status.QUEUED], priority=priority)


# ---------------------------------------------------------------------------- parking


def park(item: MailboxItem, *, epoch: int, approval_id: str) -> bool:
    """Processing → deferred, waiting for a person's answer: not due until
    ``unpark`` (the approval hook) re-queues it."""
    return transition(
        item.id,
        from_statuses=[Status.PROCESSING],
        epoch=epoch,
        fenced=True,
        status=Status.DEFERRED,
        deferred_until=None,
        marks={**item.marks, "waitingForApproval": True, "approvalId": approval_id},
    )


def park_for_reply(
    item: MailboxItem, *, epoch: int, stream_id: str, until: datetime, about: dict[str, Any] | None = None
) -> bool:
    """Processing → deferred, waiting for the reply to the bus stream ``stream_id``: not
    due until ``unpark_reply`` re-queues it, when the reply stream closes or ``until``
    passes (the sweep's and recovery's check). ``about``: more marks (who was asked)."""
    return transition(
        item.id,
        from_statuses=[Status.PROCESSING],
        epoch=epoch,
        fenced=True,
        status=Status.DEFERRED,
        deferred_until=until,
        marks={**item.marks, **(about or {}), "waitingForReply": True, "replyStream": stream_id},
    )


def parked_for_reply(agent_id: str, stream_id: str) -> list[MailboxItem]:
    """The agent's items parked for the reply to ``stream_id`` (an item, and the items
    of its batch with it), locked."""
    return list(
        MailboxItem.objects.select_for_update()
        .filter(agent_id=agent_id, status=Status.DEFERRED, marks__replyStream=stream_id)
        .filter(waiting_for_reply())
        .order_by("queued_at", "id")
    )


def unpark_reply(item: MailboxItem) -> bool:
    """Deferred and waiting for a reply → queued (the reply came, or its time is up);
    it keeps its first start and the stream it asked on (``replyStream``)."""
    return transition(
        item.id,
        from_statuses=[Status.DEFERRED],
        status=Status.QUEUED,
        deferred_until=None,
        lease_epoch=None,
        marks={k: v for k, v in item.marks.items() if k != "waitingForReply"},
    )


def insert_delivered(
    target: MailboxItem, *, source_type: str, payload: dict[str, Any], metadata: dict[str, Any]
) -> MailboxItem:
    """Record an item delivered straight into ``target``'s session (a reply its run
    waited for): stored merged into it, nothing folded into its text."""
    item = MailboxItem(
        agent_id=target.agent_id,
        source_type=source_type,
        priority=int(descriptor(source_type).default_priority),
        payload=payload,
        metadata=metadata,
        status=Status.MERGED,
        merged_into=target,
        completed_at=timezone.now(),
    )
    item.save(force_insert=True)
    emit_item(item)
    return item


def deliver_queued(item_ids: list[str], target: MailboxItem) -> int:
    """Queued items whose content went into ``target``'s session (the reply's own agent
    messages) → merged into it, their text not folded in again."""
    n = 0
    for item_id in item_ids:
        n += transition(
            item_id,
            from_statuses=[Status.QUEUED],
            status=Status.MERGED,
            merged_into_id=target.id,
            completed_at=timezone.now(),
        )
    return n


def parked_for(item_id: str, approval_id: str) -> MailboxItem | None:
    """The item parked for this approval, locked; None if it is not (or no longer)."""
    item = MailboxItem.objects.select_for_update().filter(id=item_id).first()
    if item is None or item.status != Status.DEFERRED or item.marks.get("approvalId") != approval_id:
        return None
    return item


def unpark(item: MailboxItem) -> bool:
    """Deferred and parked → queued (the approval was answered); it keeps its first
    start (its run goes on)."""
    return transition(
        item.id,
        from_statuses=[Status.DEFERRED],
        status=Status.QUEUED,
        deferred_until=None,
        lease_epoch=None,
        marks={k: v for k, v in item.marks.items() if k != "waitingForApproval"},
    )


# ---------------------------------------------------------------------------- resurfacing


def resurface_due(agent_id: str, *, now: datetime | None = None) -> int:
    """Re-queue deferred items that are due: ``deferred_until`` passed or unset
    (section 22). Items parked for an approval are not due until it is answered; items
    deferred behind the queue go to its end at their priority. An item that had started
    (preempted, or a retry waiting out its back-off) keeps its first start: ``claim``
    sets ``started_at`` only on an item that never started."""
    now = now or timezone.now()
    due = (
        MailboxItem.objects.filter(agent_id=agent_id, status=Status.DEFERRED)
        .filter(Q(deferred_until__isnull=True) | Q(deferred_until__lte=now))
        .filter(not_parked())
    )
    rows = [(i, marks or {}) for i, marks in due.values_list("id", "marks")]
    if not rows:
        return 0
    count = 0
    with transaction.atomic():
        plain = [i for i, meta in rows if not meta.get(BEHIND_QUEUE)]
        if plain:
            count += MailboxItem.objects.filter(id__in=plain, status=Status.DEFERRED).update(
                status=Status.QUEUED, deferred_until=None, lease_epoch=None
            )
        for item_id, meta in rows:
            if meta.get(BEHIND_QUEUE):
                rest = {k: v for k, v in meta.items() if k != BEHIND_QUEUE}
                count += MailboxItem.objects.filter(id=item_id, status=Status.DEFERRED).update(
                    status=Status.QUEUED,
                    deferred_until=None,
                    lease_epoch=None,
                    queued_at=timezone.now(),
                    marks=rest,
                )
        for item in MailboxItem.objects.filter(id__in=[i for i, _ in rows]):
            emit_item(item)
    return count


def resurface_now(item_id: str) -> bool:
    """Deferred → queued now, unless parked for an approval (the operator's retry)."""
    with transaction.atomic():
        changed = (
            MailboxItem.objects.filter(id=item_id, status=Status.DEFERRED)
            .filter(not_parked())
            .update(status=Status.QUEUED, deferred_until=None, lease_epoch=None)
        )
        if changed:
            emit_item(MailboxItem.objects.get(id=item_id))
    return changed == 1


# ---------------------------------------------------------------------------- merging


def absorb(target: MailboxItem, item: MailboxItem, *, label_prefix: bool = False) -> None:
    """Fold ``item`` into ``target`` and store both. Both rows must be locked (or the
    item new) and the caller must have checked ``may_merge``."""
    fold(target, item, label_prefix=label_prefix)
    item.status = Status.MERGED
    target.save(update_fields=["payload", "priority"])
    item.save(update_fields=["status", "merged_into", "completed_at"])
    emit_item(item)
    emit_item(target)


def absorb_new(target: MailboxItem, item: MailboxItem) -> None:
    """Store a new ``item`` already folded into ``target``: it is inserted as merged (no
    second write of its row), and the target saved. The target must be locked and the
    caller must have checked ``may_merge``."""
    fold(target, item)
    item.status = Status.MERGED
    item.save(force_insert=True)
    target.save(update_fields=["payload", "priority"])
    emit_item(item)
    emit_item(target)


@transaction.atomic
def merge_into(
    item_id: str, target_id: str, *, claimed_epoch: int | None = None, into_focus: bool = False
) -> MailboxItem | None:
    """Absorb an item into another that is still live (queued, processing or deferred).
    The item must be queued, or, with ``claimed_epoch``, processing under that epoch (a
    claimed comment injected into a task's open execution). The merge rule decides.
    Returns the target as stored (its payload now carries the item), or None."""
    items = {i.id: i for i in MailboxItem.objects.select_for_update().filter(id__in=[item_id, target_id])}
    item, target = items.get(item_id), items.get(target_id)
    if item is None or target is None or target.status not in OPEN_STATUSES:
        return None
    claimed = claimed_epoch is not None and item.status == Status.PROCESSING and item.lease_epoch == claimed_epoch
    if item.status != Status.QUEUED and not claimed:
        return None
    if not may_merge(target, item, into_focus=into_focus):
        return None
    absorb(target, item)
    return target


# ---------------------------------------------------------------------------- recovery


@dataclass
class RecoveryReport:
    requeued: list[str] = field(default_factory=list)
    dropped: list[str] = field(default_factory=list)
    heartbeats_collapsed: list[str] = field(default_factory=list)
    comments_merged: list[str] = field(default_factory=list)
    expired: list[str] = field(default_factory=list)  # queued longer than their type's expiry


def is_awaited(item: MailboxItem) -> bool:
    """Somebody waits for this item's outcome: a human (a chat, a comment a human
    wrote), a task (its execution trigger, its review request), or whoever a reminder
    was set for (it fires once; dropped, it is never acted on)."""
    return (
        item.is_user_interaction
        or item.triggers_execution
        or item.source_type in (MailboxType.REVIEW_REQUEST, MailboxType.REMINDER)
    )


def _awaited_kind(item: MailboxItem) -> str:
    if item.is_user_interaction:
        return "a human's item"
    if item.triggers_execution:
        return "an execution trigger"
    return "a reminder" if item.source_type == MailboxType.REMINDER else "a review request"


@transaction.atomic
def recover_in_flight(agent_id: str, report: RecoveryReport) -> None:
    """Stale ``processing`` items (their worker stopped): an awaited item is re-queued,
    and dropped with a recorded reason only once it has been in flight at
    MAX_RECOVERY_ATTEMPTS crashes (``marks.crashes``: a retry after a failed attempt
    is not a crash); anything else is dropped with a reason."""
    for item in MailboxItem.objects.select_for_update().filter(agent_id=agent_id, status=Status.PROCESSING):
        crashes = int(item.marks.get("crashes", 0)) + 1
        if is_awaited(item) and crashes < MAX_RECOVERY_ATTEMPTS:
            if requeue(item.id, marks={**item.marks, "crashes": crashes}):
                report.requeued.append(item.id)
            continue
        reason = (
            f"recovery: {_awaited_kind(item)} in flight at a crash {crashes} times; gave up"
            if is_awaited(item)
            else "recovery: in flight when its worker stopped"
        )
        if drop(item.id, reason=reason, from_statuses=[Status.PROCESSING]):
            report.dropped.append(item.id)
