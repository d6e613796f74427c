"""The attention loop: one focus per agent, interruptible between LLM turns.

``run_attention(agent_id)`` is the plain function behind the Celery task:

1. Take the agent's lease (or return: someone else is on it).
2. If items are still ``processing``, their worker died: run the mailbox's recovery.
3. Until the queue is empty or the per-run budget is spent: resurface due deferred
   items, claim the head of the queue (fenced by the lease), coalesce a burst,
   record the pick, process the item.
4. Release the lease; tell the caller whether to run again (budget spent, a late
   arrival, or a deferred item coming due).
"""

from __future__ import annotations

import logging
import time
from dataclasses import dataclass, field
from typing import Any

from django.conf import settings
from django.db import connection
from django.db.models import Min
from django.utils import timezone

from mailbox import services as mailbox
from mailbox.models import MailboxItem
from mailbox.registry import Status
from markus.agents.models import Agent

from . import records
from .lease import SESSION_LOST, Lease, StaleLease, fenced, lease_release, lease_take
from .models import AgentAttention, AttentionState, DecisionType
from .processing import process_item
from .triage import triage

log = logging.getLogger(__name__)


@dataclass
class RunResult:
    status: str  # inactive | busy | done | budget | stopped | stale
    processed: int = 0
    run_again_in: float | None = None  # seconds; None: no follow-up needed
    items: list[str] = field(default_factory=list)


def agent_is_running(agent_id: str) -> bool:
    return Agent.objects.filter(id=agent_id, kind=Agent.Kind.INTERNAL, status=Agent.RunStatus.RUNNING).exists()


def _claim(lease: Lease) -> MailboxItem | None:
    item = mailbox.mailbox_claim_next(agent_id=lease.agent_id, epoch=lease.epoch, fence=lease.fence())
    if item is None:
        return None
    window = settings.MARKUS["COALESCE_WINDOW_MS"] / 1000
    if not item.is_user_interaction and window > 0:
        time.sleep(window)  # let a burst arrive and merge at enqueue
    if mailbox.queued(lease.agent_id).exists():
        _coalesce_into_head(lease, item)
        mailbox.mailbox_consolidate_by_entity(lease.agent_id)
        item.refresh_from_db()
        item = triage(lease, item)
    return item


def _coalesce_into_head(lease: Lease, head: MailboxItem) -> None:
    """Pre-triage consolidation (section 21) with the head taking part: queued items
    about the head's task or requirement fold into it where the merge rule allows."""
    with fenced(lease):  # a stale worker must not merge into an item it lost
        for other in mailbox.mailbox_coalesce_into(head, epoch=lease.epoch):
            records.record_decision(
                lease,
                item=other,
                decision_type=DecisionType.MERGE,
                reasoning=f"Consolidated into {head.id} (same entity)",
            )


def _next_due_in(agent_id: str) -> float | None:
    """Seconds until this agent has work again: 0 if something is queued or due now."""
    if MailboxItem.objects.filter(agent_id=agent_id, status=Status.QUEUED).exists():
        return 0.0
    deferred = MailboxItem.objects.filter(agent_id=agent_id, status=Status.DEFERRED).filter(mailbox.not_parked())
    if deferred.filter(deferred_until__isnull=True).exists():
        return 0.0
    soonest = deferred.aggregate(m=Min("deferred_until"))["m"]
    if soonest is None:
        return None
    return max(0.0, (soonest - timezone.now()).total_seconds())


def run_attention(agent_id: str, *, budget: int | None = None) -> RunResult:
    if not agent_is_running(agent_id):
        return RunResult("inactive")
    lease = lease_take(agent_id)
    if lease is None:
        return RunResult("busy")
    budget = budget or settings.MARKUS["RUN_BUDGET_ITEMS"]
    result = RunResult("done")
    try:
        if MailboxItem.objects.filter(agent_id=agent_id, status=Status.PROCESSING).exists():
            _recover(lease)
        while True:
            if result.processed >= budget:
                result.status = "budget"
                break
            if not agent_is_running(agent_id):
                result.status = "stopped"
                break
            mailbox.mailbox_resurface_due(agent_id)
            item = _claim(lease)
            if item is None:
                break
            result.processed += 1
            result.items.append(item.id)
            records.record_decision(
                lease,
                item=item,
                decision_type=DecisionType.PICK,
                reasoning="Idle — picked from queue",
                context={"priority": item.priority, "queueDepth": mailbox.queued(agent_id).count()},
            )
            process_item(lease, item)
    except StaleLease as exc:
        log.warning("attention: %s", exc)
        result.status = "stale"
        return result
    except SESSION_LOST as exc:
        # The database cut this session (a transaction left idle too long: this worker
        # was frozen), cancelled a statement or refused a lock in time: a lost lease.
        # Let go of it if it is still ours; the next run recovers the item.
        log.warning("attention: run of %s abandoned on a database error (%s: %s)", agent_id, type(exc).__name__, exc)
        result.status = "stale"
        if not connection.in_atomic_block:
            connection.close_if_unusable_or_obsolete()
        _finish(lease)
        return result
    finally:
        if result.status != "stale":
            _finish(lease)
    # A run that found our lease (or its row locked) answered busy and counts on us to
    # look again after we let go; also when we stopped for a pause that ended meanwhile.
    if result.status in ("done", "budget", "stopped") and agent_is_running(agent_id):
        result.run_again_in = 0.0 if result.status == "budget" else _next_due_in(agent_id)
    return result


def _recover(lease: Lease) -> None:
    """A worker died mid-item (its items still processing, its lease gone): the mailbox
    re-queues or drops the items, and its open activities end failed ("worker lost"),
    in one fenced transaction."""
    with fenced(lease):
        report = mailbox.mailbox_recover(lease.agent_id)
        closed = records.close_lost_activities(lease, requeued=report.requeued, dropped=report.dropped)
    log.warning("attention: recovered %s after a lost lease: %s; activities closed: %s", lease.agent_id, report, closed)


def _finish(lease: Lease) -> None:
    try:
        records.set_state(lease, AttentionState.IDLE)
        lease_release(lease)
    except StaleLease:
        return
    except SESSION_LOST as exc:  # the lease runs out by itself
        log.warning("attention: could not release %s (%s: %s)", lease.agent_id, type(exc).__name__, exc)


def attention_snapshot(agent_id: str) -> dict[str, Any]:
    row = AgentAttention.objects.select_related("current_item").filter(agent_id=agent_id).first()
    live = bool(row and row.lease_owner and row.lease_expires_at and row.lease_expires_at > timezone.now())
    state = row.state if (row and live) else AttentionState.IDLE
    focus = records.focus_of(row.current_item, row.focus_started_at) if (row and live) else None
    return {
        "state": state,
        "currentFocus": focus,
        "leaseEpoch": row.lease_epoch if row else 0,
        "leaseExpiresAt": row.lease_expires_at if row else None,
    }
