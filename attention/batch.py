"""Batches (seed section 21, "Batch Processing"): queued items processed together with
the chosen one, in one LLM session.

Deliberation names them (``Plan.batch``). The loop claims them in the fenced transaction
that claims the chosen item (the *lead*), only those still queued, each with its own
decision record; the session presents them all (``session.load_session``); a successful
settle completes them all. They stay separate mailbox items throughout (nothing is
merged): an interrupted batch puts every item back, none completed alone, none lost.

The batch is written on the items (their marks, no column of its own): the lead carries ``batch`` (its
members' ids), each member ``batchLead``. The marks outlive an interruption that keeps
the session (a preempt defers all of them to the same time, a stop or pause re-queues
them, a lost lease leaves them to recovery, which re-queues them, an approval parks them
all), so when any of them is chosen again the batch is claimed again under its lead and
its saved session resumes. An interruption that throws the session away (a cancel, a
failed attempt) dissolves the batch: every item is re-queued without its mark and
triage decides afresh; after a failed attempt none of them is batched again.

Never batched: a human's chat, a strict item (an execution trigger, a review request, an
action-required requirement update), an item with a failed attempt behind it, or any
item when the lead runs no LLM.
"""

from __future__ import annotations

from collections.abc import Iterable
from datetime import datetime
from typing import Any

from mailbox import lifecycle
from mailbox.lifecycle import MAX_RECOVERY_ATTEMPTS
from mailbox.merge import is_strict
from mailbox.models import MailboxItem
from mailbox.registry import Status

from . import records
from .lease import Fence
from .models import DecisionType
from .scenarios import row, row_for

# Marks (``MailboxItem.marks``):
BATCH = "batch"  # on the lead: the ids of the items processed with it
BATCH_LEAD = "batchLead"  # on a member: the id of its lead
MAX_BATCH = 10  # members, besides the lead


def members_of(item: MailboxItem) -> list[str]:
    value = item.marks.get(BATCH)
    return [v for v in value if isinstance(v, str)] if isinstance(value, list) else []


def lead_of(item: MailboxItem) -> str | None:
    value = item.marks.get(BATCH_LEAD)
    return value if isinstance(value, str) and value != item.id else None


def unmarked(marks: dict[str, Any]) -> dict[str, Any]:
    return {k: v for k, v in marks.items() if k not in (BATCH, BATCH_LEAD)}


def _failed_before(item: MailboxItem) -> bool:
    return bool(item.marks.get("markerRetries"))


def may_lead(item: MailboxItem, scenario: str | None) -> bool:
    return scenario is not None and row(scenario).batches and not is_strict(item) and not _failed_before(item)


def may_join(item: MailboxItem) -> bool:
    return row_for(item).batches and not is_strict(item) and not _failed_before(item)


def resolve(
    chosen: MailboxItem, planned: Iterable[str], queue: list[MailboxItem], *, excluded: Iterable[str] = ()
) -> tuple[MailboxItem, list[str]]:
    """The item to begin and the ids wanted with it: the plan's batch, and the batch the
    chosen item already belongs to (a member chosen again resumes under its lead, when
    the lead is queued too and the plan does not defer, drop or complete it:
    ``excluded``; then the member runs by itself)."""
    lead = chosen
    lead_id = lead_of(chosen)
    if lead_id is not None and lead_id not in set(excluded):
        found = next((q for q in queue if q.id == lead_id), None)
        if found is None:
            found = MailboxItem.objects.filter(id=lead_id, agent_id=chosen.agent_id, status=Status.QUEUED).first()
        if found is not None:
            lead = found
    wanted = [*members_of(lead), *([chosen.id] if lead is not chosen else []), *planned]
    return lead, [i for i in dict.fromkeys(wanted) if i != lead.id]


def claim_members(tx: Fence, lead: MailboxItem, scenario: str | None, wanted: list[str]) -> list[MailboxItem]:
    """Claim the wanted items still queued that may join (at most MAX_BATCH), mark them
    and the lead. Inside the fenced transaction that claimed
    the lead; returns the members claimed."""
    members: list[MailboxItem] = []
    if wanted and may_lead(lead, scenario):
        rows = {
            r.id: r for r in MailboxItem.objects.filter(id__in=wanted, agent_id=lead.agent_id, status=Status.QUEUED)
        }
        for item_id in wanted:
            row = rows.get(item_id)
            if row is None or not may_join(row) or len(members) >= MAX_BATCH:
                continue
            item = lifecycle.claim(item_id, epoch=tx.epoch)
            if item is None:
                continue
            item.marks = {**unmarked(item.marks), BATCH_LEAD: lead.id}
            _mark(tx, item)
            members.append(item)
    if members or members_of(lead) or lead_of(lead):
        lead.marks = unmarked(lead.marks)
        if members:
            lead.marks[BATCH] = [m.id for m in members]
        _mark(tx, lead)
    return members


def record_picks(tx: Fence, lead: MailboxItem, members: list[MailboxItem], *, resumed: Iterable[str] = ()) -> None:
    """The members' decisions: ``resume`` for those ``resumed`` (already in the lead's
    batch, whose saved session goes on), ``pick`` for the others."""
    again = set(resumed)
    for item in members:
        back = item.id in again
        records.record_decision(
            tx,
            item=item,
            decision_type=DecisionType.RESUME if back else DecisionType.PICK,
            reasoning=(
                f"Resumed with its batch led by {lead.id}: its session goes on where it stopped"
                if back
                else f"Batched with {lead.id}: processed together in one session"
            ),
            context={"priority": item.priority, "batchLeadId": lead.id, **({"resumed": True} if back else {})},
        )


def _mark(tx: Fence, item: MailboxItem) -> None:
    lifecycle.transition(item.id, from_statuses=[Status.PROCESSING], epoch=tx.epoch, fenced=True, marks=item.marks)


# ---------------------------------------------------------------------------- interruptions


def defer_members(tx: Fence, members: list[MailboxItem], *, until: datetime) -> None:
    """Preempted: the lead and every member wait alike, marks kept (not an attempt)."""
    for m in members:
        lifecycle.defer(
            m.id,
            until=until,
            epoch=tx.epoch,
            fenced=True,
            from_statuses=[Status.PROCESSING],
            refund_attempt=True,
        )


def requeue_members(tx: Fence, members: list[MailboxItem]) -> None:
    """Stopped or paused: back to their places in the queue, marks kept (not an attempt),
    their first start kept (they resume with their lead)."""
    for m in members:
        lifecycle.requeue(m.id, epoch=tx.epoch, fenced=True, refund_attempt=True, keep_started=True)


def park_members(tx: Fence, members: list[MailboxItem], *, approval_id: str) -> None:
    """The lead waits for a person's answer: its members wait with it."""
    for m in members:
        lifecycle.park(m, epoch=tx.epoch, approval_id=approval_id)


def unpark_members(lead: MailboxItem, approval_id: str) -> None:
    """The approval the lead waited for was answered: its members come back with it."""
    for m in MailboxItem.objects.select_for_update().filter(id__in=members_of(lead), status=Status.DEFERRED):
        if lead_of(m) == lead.id and m.marks.get("approvalId") == approval_id:
            lifecycle.unpark(m)


def dissolve(tx: Fence, lead: MailboxItem, members: list[MailboxItem], *, failed: bool) -> None:
    """Cancelled, or a failed attempt: every item re-queued without its mark (triage
    decides afresh); ``failed``: each counts a failed attempt (and is not batched again)."""
    for item in [lead, *members]:
        marks = unmarked(item.marks)
        if failed:
            marks["markerRetries"] = int(marks.get("markerRetries", 0)) + 1
        lifecycle.requeue(item.id, epoch=tx.epoch, fenced=True, refund_attempt=not failed, marks=marks)


def record_members(
    tx: Fence, lead: MailboxItem, members: list[MailboxItem], *, decision: str, reasoning: str, outcome: str
) -> None:
    for m in members:
        records.record_decision(
            tx,
            item=m,
            decision_type=decision,
            reasoning=reasoning,
            context={"batchLeadId": lead.id},
            outcome=outcome,
        )


# ---------------------------------------------------------------------------- recovery


def recover(agent_id: str) -> list[str]:
    """Recovery after a lost lease, before the mailbox's own: items of a batch left in
    flight are re-queued together, marks kept (their batch resumes under its lead), with
    the crash counted; at MAX_RECOVERY_ATTEMPTS crashes they are left to the mailbox's
    recovery (which drops what nobody waits for, with the reason). Inside the caller's
    fenced transaction; returns the ids re-queued."""
    requeued = []
    rows = MailboxItem.objects.select_for_update().filter(agent_id=agent_id, status=Status.PROCESSING)
    for item in rows:
        if not (members_of(item) or lead_of(item)):
            continue
        crashes = int(item.marks.get("crashes", 0)) + 1
        if crashes >= MAX_RECOVERY_ATTEMPTS:
            continue
        if lifecycle.requeue(item.id, marks={**item.marks, "crashes": crashes}):
            requeued.append(item.id)
    return requeued
