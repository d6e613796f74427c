"""The attention loop: one focus per agent, interruptible between LLM turns.

``run_attention(agent_id)`` is the plain function behind the Celery task:

1. Take the agent's lease (or return: someone else is on it, or it is not running).
2. If items are still ``processing``, their worker died: run the mailbox's recovery.
3. Until the queue is empty or the per-run budget is spent: read the head of the
   queue (one statement, which also shows deferred items that came due: they are
   resurfaced first), let a burst coalesce, triage, then begin the item in one fenced
   transaction (the attention state, the claim, the pick decision, the activity) and
   process it.
4. Release the lease; tell the caller whether to run again (budget spent, a late
   arrival, or a deferred item coming due).

The coalescing window (``COALESCE_WINDOW_MS``) is a "not before" time, not a pause:
it counts from the item's enqueue, and only a head that a follow-up could still fold
into (an item about a task or requirement, not strict) waits out what is left of it,
unclaimed, so the follow-up merges into it at enqueue or by consolidation. Any other
item, and any item that waited in the queue that long already, starts at once. A
human's follow-up arriving while its chat runs is merged at the next yield point.
"""

from __future__ import annotations

import logging
import time
from dataclasses import dataclass, field
from enum import StrEnum
from typing import Any

from django.conf import settings
from django.db import connection
from django.db.models import Count, Min, Q
from django.utils import timezone

from mailbox import lifecycle
from mailbox import services as mailbox
from mailbox.models import MailboxItem
from mailbox.registry import Status
from mailbox.selectors import depth_capped
from markus import telemetry
from markus.agents.models import Agent
from markus.core.db import SESSION_LOST
from markus.core.shutdown import worker_stopping
from markus.llm.base import get_provider
from markus.usage import budgets

from . import batch, metering, records, time_limit
from .conversations import reply_waits_timed_out
from .deliberation import Aborted, choose
from .endings import given_up
from .focus import Focus, Run, agent_is_running
from .interrupts import execution_revoked
from .lease import (
    AgentNotRunning,
    Lease,
    StaleLease,
    abandoned_leases,
    fenced,
    lease_release,
    lease_take,
    lease_take_over,
)
from .lease_take import lease_take_for_run
from .models import ActivityLogType as L
from .models import AgentAttention, AttentionState, DecisionType, LLMSession
from .processing import inject_into_open_work, process_item
from .queue_read import QueueView, queue_sql, read_queue, record_expired, tidy, untidy, view_of, window_left
from .replies import tell_budget_wait
from .scenarios import row, scenario_for
from .services import wake
from .session import SESSION_PREFIX
from .settle import complete
from .triage import Plan, apply_plan

log = logging.getLogger(__name__)

# How soon a run that found the agent's row locked by a frozen holder tries again.
LOCKED_RETRY_S = 1.0


class RunStatus(StrEnum):
    """How a run of the loop ended (the Celery task returns it as its string)."""

    INACTIVE = "inactive"  # the agent does not run: no lease taken
    BUSY = "busy"  # another run holds the lease (or its row is locked)
    DONE = "done"  # the queue is empty
    BUDGET = "budget"  # the run's item budget is spent: it runs again at once
    STOPPED = "stopped"  # the agent was stopped or paused
    STALE = "stale"  # the lease was lost
    BLOCKED = "blocked"  # a spending budget is used up: the items wait queued


@dataclass
class RunResult:
    status: RunStatus
    processed: int = 0
    run_again_in: float | None = None  # seconds; None: no follow-up needed
    items: list[str] = field(default_factory=list)


# ---------------------------------------------------------------------------- beginning an item


class _Gone(Exception):
    """The chosen item was claimed, merged or dropped meanwhile: read the queue again."""


@dataclass
class Begun:
    """An item the loop began: claimed and focused, its pick recorded. ``focus`` is
    None when it ended at once (informational, or a revoked execution)."""

    item: MailboxItem
    focus: Focus | None


def _next(run: Run, first: QueueView | None = None) -> Begun | None:
    """Read the queue (``first``: a read made already, the run's first), let a burst
    coalesce, triage, and begin the chosen item. None: nothing to do. Raises
    AgentNotRunning (stopped or paused) and StaleLease."""
    lease = run.lease
    for _ in range(10):
        view, first = first or read_queue(lease.agent_id), None
        if view.due_deferred:
            lifecycle.resurface_due(lease.agent_id)
            view = read_queue(lease.agent_id)
        if untidy(view):  # (no query when it is not)
            tidy(lease)
            view = read_queue(lease.agent_id)
        if not view.items:
            return None
        wait = window_left(view.items[0])
        if wait > 0:
            time.sleep(wait)  # unclaimed: a follow-up merges into it at enqueue
            continue  # read (and tidy) again
        head = view.items[0]
        telemetry.focus(head)  # the item span starts here, in the trace the head was enqueued in
        gate = metering.gate(lease)
        if gate.blocked is not None:  # no LLM work: only what needs none, the rest waits queued
            free = next((i for i in view.items if not _needs_llm(i)), None)
            if free is None:
                budgets.tell_owner(gate.blocked)
                with fenced(lease) as tx:
                    tell_budget_wait(tx, view.items, gate.blocked.reason, gate.blocked.period)
                raise budgets.BudgetExhausted(gate.blocked)
            try:
                return _begin(run, free, view, None, skip=gate.blocked.reason)
            except _Gone:
                continue
        # triage: tier 0, 2 or the mini triage
        plan = choose(run, head, view.items, view.depth, read_at=view.read_at)
        if isinstance(plan, Aborted):
            continue  # a human's chat came in while the agent deliberated: it goes first
        chosen = plan.chosen if plan is not None else head
        near = gate.near
        try:
            return _begin(run, chosen, view, plan, skip=near.reason if near is not None else None)
        except _Gone:
            if plan is not None:
                plan.discard(lease)  # not applied: its own records still count (a deliberation's tokens)
            continue
        except AgentNotRunning:
            if plan is not None:
                plan.discard(lease)
            raise
    return None


def _resumes(chosen: MailboxItem) -> bool:
    """Does the item have a saved LLM session to go on with? The queue read says so
    (``has_session``); an item it did not return (a batch's lead) is looked up."""
    known = getattr(chosen, "has_session", None)
    if known is not None:
        return bool(known)
    return LLMSession.objects.filter(id=f"{SESSION_PREFIX}{chosen.id}").exists()


def _needs_llm(item: MailboxItem) -> bool:
    """Would the item's run call the LLM even with a budget used up? Informational
    items do not, and heartbeats and dreams are skipped then (their row's
    ``skipped_near_budget``)."""
    scenario = scenario_for(item)
    return scenario is not None and not row(scenario).skipped_near_budget


def _begin(run: Run, chosen: MailboxItem, view: QueueView, plan: Plan | None, *, skip: str | None = None) -> Begun:
    """One fenced transaction: the attention state (its UPDATE is the fence check, and
    it checks the agent is still running), the claim, triage's drops and defers, the
    claim of the batch processed with it (``batch``: the plan's, or the one the item
    already belongs to), the pick decisions, and either the item's end (nothing to run)
    or its activity. ``skip``: why a heartbeat or a dream is completed as skipped (a
    budget near or at its limit)."""
    lease = run.lease
    chosen, wanted = batch.resolve(
        chosen,
        plan.batch if plan is not None else (),
        view.items,
        excluded=[*plan.defer, *plan.drop, *plan.inline] if plan is not None else (),
    )
    scenario = scenario_for(chosen)
    agent = run.the_agent()
    revoked = False
    if scenario is not None and row(scenario).watches_task:
        probe = Focus(lease=lease, item=chosen, scenario=scenario, agent=agent)
        revoked = execution_revoked(probe)  # the task left in_progress while this waited
    now = timezone.now()
    with fenced(
        lease,
        running=True,
        claim=chosen.id,  # with the fence check: one statement on PostgreSQL
        state=AttentionState.FOCUSED,
        current_item=chosen,
        focus_started_at=now,
        updated_at=now,
    ) as tx:
        item = tx.claimed
        if item is None:
            raise _Gone(chosen.id)
        if plan is not None:
            apply_plan(tx, plan, remember=run.remember, known=run.working_memory())
        scenario = scenario_for(item)
        members = batch.claim_members(tx, item, None if revoked else scenario, wanted)
        together = {item.id, *(m.id for m in members)}
        depth = view.depth if depth_capped(view.depth) else max(0, view.depth - len(together))
        context: dict[str, Any] = {"priority": item.priority, "queueDepth": depth}
        if members:
            context["batch"] = [m.id for m in members]
        resumed = _resumes(chosen)
        if resumed:
            # Its LLM session was saved (a preempt, a pause, an approval, a lost worker):
            # it goes on where it stopped. The item keeps its first start.
            context["resumed"] = True
            if item.started_at is not None:
                context["firstStartedAt"] = item.started_at.isoformat()
        if plan is not None:
            reasoning = plan.pick_reasoning + ("; resumes its saved session" if resumed else "")
        else:
            reasoning = "Resumed from queue where it stopped" if resumed else "Idle — picked from queue"
        records.record_decision(
            tx,
            item=item,
            decision_type=DecisionType.RESUME if resumed else DecisionType.PICK,
            reasoning=reasoning + (f", with {len(members)} more as a batch" if members else ""),
            context=context,
        )
        # Members already in the lead's batch go on in its saved session with it.
        batch.record_picks(tx, item, members, resumed=batch.members_of(chosen) if resumed else ())
        records.emit_state(lease.agent_id, AttentionState.FOCUSED, item, now, depth=depth)
        focus_row = row(scenario)
        if scenario is None:
            complete(tx, item, outcome=focus_row.done)
            return Begun(item, None)
        if revoked:
            complete(tx, item, outcome="skipped: the task is no longer in progress")
            return Begun(item, None)
        if skip is not None and focus_row.skipped_near_budget:
            complete(tx, item, outcome=f"skipped: {skip}")
            return Begun(item, None)
        focus = Focus(
            lease=lease,
            item=item,
            scenario=scenario,
            agent=agent,
            run=run,
            batch=members,
            batch_context=str(getattr(plan, "batch_context", "") or "") if members else "",
            seen={q.id for q in view.items if q.id not in together},
            seen_all=view.complete,
            seen_since=view.read_at,
            # The read's items when it holds the whole queue; else the first turn's
            # mailbox block reads the queue itself (``scenarios.PROMPT_QUEUE_LIMIT``).
            queue=[q for q in view.items if q.id not in together] if view.complete else None,
            depth=depth,
            last_stop_check=time.monotonic(),  # the fence just found the agent running
        )
        focus.held.saved = resumed
        # A comment on a task or a requirement may go into its open work instead
        # (``markus.work.comment_routing``); not one that leads a batch.
        if not members and focus_row.joins_open_work and inject_into_open_work(tx, item):
            return Begun(item, None)
        # A brain that answers at once has its activity and its first lines written with
        # the outcome; for any other the live view shows them from now on.
        focus.activity = records.start_activity(lease, item=item, scenario=scenario, batch=members)
        started = records.LogLine(L.STATUS, f"started {scenario}", at=now)
        if not get_provider().local:
            records.log_many(tx, focus.activity, [started])  # stores the activity too
        else:
            focus.turn.note(started)
    return Begun(item, focus)


# ---------------------------------------------------------------------------- the run


def run_attention(agent_id: str, *, budget: int | None = None) -> RunResult:
    # Where it can (PostgreSQL), the statement that takes the lease also reads the queue
    # (one round trip less from a wake-up to the claim): the run's first view of it.
    now = timezone.now()
    take = lease_take_for_run(agent_id, with_read=queue_sql(agent_id, now))
    if take.lease is None:
        # A lease held by a live run: that run looks again when it lets go. A free or
        # expired lease whose row is locked (its holder frozen inside a transaction,
        # until the database cuts that session): nobody will, so this run comes back.
        return RunResult(RunStatus(take.status), run_again_in=LOCKED_RETRY_S if take.locked else None)
    lease = take.lease
    # The take read the agent's name, role and main session: no second read of them.
    run = Run(lease, agent=Agent(id=agent_id, name=take.agent_name, role=take.agent_role))
    if take.main_session_id:
        records.know_main_session(lease, take.main_session_id)
    first = view_of(agent_id, take.read, now) if take.read else None
    budget = budget or settings.MARKUS["RUN_BUDGET_ITEMS"]
    result = RunResult(RunStatus.DONE)
    try:
        if take.in_flight or take.abandoned:
            _recover(lease)
        while True:
            if result.processed >= budget or worker_stopping():
                # Past its budget, or its worker is stopping: the run lets go, and runs again
                # at once (another worker, or this one when it starts again) from the queue.
                result.status = RunStatus.BUDGET
                break
            # One invoke_agent span per item (markus.telemetry): triage and the item's run.
            with telemetry.item_step(agent_id, take.agent_name, provider=get_provider):
                try:
                    begun, first = _next(run, first), None
                except AgentNotRunning:
                    result.status = RunStatus.STOPPED
                    break
                except budgets.BudgetExhausted:
                    # The items wait queued: raising the budget wakes the agent, and the sweep
                    # kicks it at every beat, so the next period finds them.
                    result.status = RunStatus.BLOCKED
                    break
                if begun is None:
                    break
                batched = [m.id for m in begun.focus.batch] if begun.focus is not None else []
                telemetry.focus(begun.item, batch=batched)
                result.processed += 1 + len(batched)  # every item of a batch counts
                result.items += [begun.item.id, *batched]
                if begun.focus is not None:
                    process_item(begun.focus)
    except StaleLease as exc:
        log.warning("attention: %s", exc)
        result.status = RunStatus.STALE
        return result
    except SESSION_LOST as exc:
        # The database cut this session (a transaction left idle too long: this worker
        # was frozen), cancelled a statement or refused a lock in time: a lost lease.
        # Let go of it if it is still ours; the next run recovers the item.
        log.warning("attention: run of %s abandoned on a database error (%s: %s)", agent_id, type(exc).__name__, exc)
        result.status = RunStatus.STALE
        if not connection.in_atomic_block:
            connection.close_if_unusable_or_obsolete()
        _finish(lease, depth=None)
        return result
    finally:
        records.forget_run(lease)
        _flush_usage(lease)
        if result.status != RunStatus.STALE:
            _finish(lease, depth=0 if result.status == RunStatus.DONE else None)
    # A run that found our lease (or its row locked) answered busy and counts on us to
    # look again after we let go; also when we stopped for a pause that ended meanwhile.
    if result.status == RunStatus.BUDGET:
        result.run_again_in = 0.0
    elif result.status in (RunStatus.DONE, RunStatus.STOPPED):
        due = _next_due_in(agent_id)
        if due is not None and agent_is_running(agent_id):
            result.run_again_in = due
    return result


def _flush_usage(lease: Lease) -> None:
    """What the run's local calls spent and has not written yet (``metering.flush``)."""
    try:
        metering.flush(lease)
    except SESSION_LOST as exc:
        log.warning("attention: usage of %s not written (%s: %s)", lease.agent_id, type(exc).__name__, exc)


def _next_due_in(agent_id: str) -> float | None:
    """Seconds until this agent has work again (one statement): 0 if something is
    queued or due now, else until the soonest deferred item (not parked) comes due."""
    now = timezone.now()
    row = MailboxItem.objects.filter(agent_id=agent_id).aggregate(
        queued=Count("id", filter=Q(status=Status.QUEUED)),
        undated=Count("id", filter=Q(status=Status.DEFERRED, deferred_until__isnull=True) & lifecycle.not_parked()),
        soonest=Min("deferred_until", filter=Q(status=Status.DEFERRED) & lifecycle.not_parked()),
    )
    if row["queued"] or row["undated"]:
        return 0.0
    soonest = row["soonest"]
    if soonest is None:
        return None
    return max(0.0, (soonest - now).total_seconds())


def _recover(lease: Lease, overdue: time_limit.Overdue | None = None) -> int:
    """A worker died mid-item (its items still processing, its lease gone) or mid-run
    with nothing in flight (a deliberation: its state left ``deciding``, its activity
    open on no item), or froze past the item's time limit (``overdue``, from
    ``end_overdue``): the overdue item is dropped
    (``time_limit.drop_overdue``), the items of a batch are re-queued together
    (``batch.recover``), the mailbox re-queues or drops the others, the open activities
    end failed ("worker lost", with the calls that took effect), and whoever waits for a
    dropped item is answered that it could not be finished, in one fenced transaction.
    Returns the overdue items ended (0 or 1)."""
    with fenced(lease) as tx:
        late = time_limit.drop_overdue(tx, overdue) if overdue is not None else None
        batched = batch.recover(lease.agent_id)
        report = mailbox.mailbox_recover(lease.agent_id)
        report.requeued[:0] = batched
        for item in MailboxItem.objects.filter(id__in=report.expired).order_by("queued_at", "id"):
            record_expired(tx, item)
        reply_waits_timed_out(lease.agent_id)  # a wait for a colleague's reply that ran out
        dropped = [*report.dropped, *([late.id] if late is not None else [])]
        closed = records.close_lost_activities(tx, requeued=report.requeued, dropped=dropped)
        if late is not None:
            given_up(tx, late, late.drop_reason)
        for item in MailboxItem.objects.filter(id__in=report.dropped).order_by("queued_at", "id"):
            crashes = int(item.marks.get("crashes", 0)) + 1
            given_up(tx, item, f"the worker running it stopped {crashes} time(s) while I was on it")
    log.warning("attention: recovered %s after a lost lease: %s; activities closed: %s", lease.agent_id, report, closed)
    return 1 if late is not None else 0


def end_overdue() -> int:
    """The sweep's hook for the item time limit (``attention.time_limit``): every item
    whose holder kept it past the limit and a lease's length more, under a lease still
    alive, is taken from its holder (``lease_take_over``: the holder, should it wake,
    writes nothing) and ended by the recovery; the lease is let go and the agent woken
    for the rest of its queue. Returns the items ended."""
    limit = time_limit.limit_seconds()
    if limit is None:
        return 0
    ended = 0
    for agent_id, epoch, item_id in time_limit.overdue_holders(limit):
        lease = lease_take_over(agent_id, epoch=epoch)
        if lease is None:  # its holder let go or moved on meanwhile
            continue
        try:
            ended += _recover(lease, time_limit.Overdue(item_id, epoch, f"stopped: {time_limit.reason(limit)}"))
        except StaleLease:
            continue
        finally:
            _finish(lease, depth=None)
            wake(agent_id)
    return ended


def tidy_after_dead_workers() -> int:
    """The sweep's hook for agents that are not running (paused or stopped): no run may
    take their lease, so when a worker died holding one mid-run (its lease ran out, its
    state not idle: a deliberation's activity open, items still processing) the sweep
    takes the lease, recovers as a run would (``_recover``) and lets go. A live lease
    is its holder's: it stops at its next check. Returns the agents tidied."""
    left = (
        abandoned_leases(timezone.now()).exclude(agent__in=Agent.objects.running()).values_list("agent_id", flat=True)
    )
    tidied = 0
    for agent_id in list(left):
        lease = lease_take(agent_id)
        if lease is None:  # taken meanwhile (a resume's run), or its row locked
            continue
        try:
            _recover(lease)
            tidied += 1
        except StaleLease:
            continue
        finally:
            _finish(lease, depth=None)
    return tidied


def _finish(lease: Lease, *, depth: int | None) -> None:
    """Release the lease (its UPDATE also sets the state idle) and announce it, unless it
    was idle already: a run that found nothing says nothing."""
    try:
        if lease_release(lease):
            records.emit_state(lease.agent_id, AttentionState.IDLE, None, None, depth=depth)
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
