"""Settling an item's run: the outcome (``attention.focus``: one class per way a run
ends) lands in one fenced transaction, through the mailbox lifecycle; whoever waits is
answered by the scenario's ending (``attention.endings``). Also the approval hook that
resumes a parked item."""

from __future__ import annotations

import json
from datetime import timedelta
from typing import assert_never

from django.conf import settings
from django.utils import timezone

from mailbox import lifecycle
from mailbox.models import MailboxItem
from mailbox.registry import Status
from markus.agents.models import Agent
from notifications.models import Approval
from notifications.services import approval_granted

from . import batch, conversations, endings, records
from .focus import (
    AwaitingReply,
    Cancelled,
    Completed,
    Failed,
    Focus,
    Outcome,
    Parked,
    Preempted,
    Retry,
    Skipped,
    Stopped,
)
from .interrupts import record_task_left
from .lease import Fence, StaleLease, fenced
from .model_call import backoff
from .models import ActivityLogType as L
from .models import ActivityOutcome, AgentActivity, DecisionType, LLMSession
from .services import wake_on_commit
from .session import FAILED_ATTEMPTS, append_note, discard_session, save_session, session_id
from .session_messages import NOTE_MARK

MAX_MARKER_RETRIES = 2


def settle(focus: Focus, outcome: Outcome) -> None:
    with fenced(focus.lease) as tx:  # the item's outcome lands in one transaction
        _settle(tx, focus, outcome)


def _end(tx: Fence, focus: Focus, *, success: bool, outcome: str = "") -> None:
    """End the focus's activity, with the token usage of its last turn, and write the
    log lines still pending (the last turn's, the outcome's) in one INSERT. ``outcome``:
    ``ActivityOutcome`` of a run cancelled or stopped (not a failure)."""
    assert focus.activity is not None
    tokens, tools = focus.turn.take_usage()
    records.end_activity(tx, focus.activity, success=success, tokens=tokens, tools=tools, outcome=outcome)
    records.log_many(tx, focus.activity, focus.turn.take_lines())


def _settle(tx: Fence, focus: Focus, outcome: Outcome) -> None:
    """One arm per way a run ends (``attention.focus``), the type checker holding the
    ``match`` exhaustive; a batch that does not end together (cancelled, failed) is
    dissolved by one arm."""
    item = focus.item
    assert focus.activity is not None
    # The outcome's line joins the last turn's, written when the activity ends (every
    # arm ends it); the session is saved unless this attempt is about to be thrown
    # away (a retry from a clean start).
    status = outcome.kind + (f": {outcome.detail}" if outcome.detail else "")
    focus.turn.note(records.LogLine(L.STATUS, status))
    discard = isinstance(outcome, Retry) and _marker_retries(item) < MAX_MARKER_RETRIES
    if focus.held.session is not None and focus.held.dirty and not discard:
        save_session(tx, focus, focus.held.session)
    match outcome:
        case Completed(text=text):
            _completed(tx, focus, text)
        case Preempted():
            _end(tx, focus, success=True)
            # Being preempted is not a failed attempt (recovery counts attempts).
            until = timezone.now() + resume_delay()
            # The item, and with it the whole batch: they wait alike and resume together.
            batch.defer_members(tx, [item, *focus.batch], until=until)
            if focus.batch:
                _record_batch(tx, focus, DecisionType.PREEMPT, "preempted with its batch", "deferred for resumption")
            records.inject_main_session(tx, item=item, outcome="paused (preempted), will resume")
        case Parked(approval_id=approval_id):
            _end(tx, focus, success=True)
            park(tx, item, approval_id=approval_id, batch_members=focus.batch)
        case AwaitingReply(effect=effect):
            _end(tx, focus, success=True)
            conversations.park(tx, item, effect, batch=focus.batch)
            asked = (effect.get("to") or {}).get("name") or "a colleague"
            records.inject_main_session(tx, item=item, outcome=f"waiting for a reply from {asked}")
        case Stopped(reason=reason):
            _end(tx, focus, success=False, outcome=ActivityOutcome.STOPPED)
            record_pause(tx, focus, reason)
            # Back to the queue; it keeps its first start and resumes with its session.
            lifecycle.requeue(item.id, epoch=tx.epoch, fenced=True, refund_attempt=True, keep_started=True)
            batch.requeue_members(tx, focus.batch)  # their batch resumes under its lead
        case Cancelled() | Retry() | Failed() if focus.batch:
            _dissolve(tx, focus, outcome)
        case Cancelled(reason=reason, task_left=task_left):
            if task_left:
                record_task_left(tx, focus)
            _end(tx, focus, success=False, outcome=ActivityOutcome.CANCELLED)
            endings.given_up(tx, item, reason)  # whoever waits hears it was called off
            complete(tx, item, outcome="cancelled")
        case Retry(reason=reason):
            _retry(tx, focus, reason)
        case Failed(reason=reason):  # it may not try again (its ceiling): it ends now
            _give_up(tx, focus, _failures(item, reason))
        case Skipped():  # nothing to do, no LLM call: its activity's label says why
            _relabel(focus.activity, status)
            _end(tx, focus, success=True)
            complete(tx, item, outcome=status)
        case _:
            assert_never(outcome)


def _relabel(activity: AgentActivity, outcome: str) -> None:
    """The activity's label followed by how it ended (its row written already, or not)."""
    label = f"{activity.label} — {outcome}"[:300]
    if activity._state.adding:
        activity.label = label
    else:
        AgentActivity.objects.filter(id=activity.id).update(label=label)


def _completed(tx: Fence, focus: Focus, text: str) -> None:
    """The run gave its final answer: unless the task it was for still waits for its
    verdict, the scenario's ending answers whoever waits with it, and the item and its
    batch complete together."""
    item = focus.item
    missing = verdict_missing(focus)
    if missing:
        return no_verdict(tx, focus, missing)
    _end(tx, focus, success=True)
    done = focus.row.done
    endings.answer(tx, focus, text, item)  # the reply and the completion commit together
    complete(tx, item, outcome=done)
    for member in focus.batch:
        endings.answer(tx, focus, text, member)
        complete(tx, member, outcome=f"{done} (in a batch with {item.id})")


def _dissolve(tx: Fence, focus: Focus, outcome: Cancelled | Retry | Failed) -> None:
    """A batch that does not end together goes back to the queue as separate items:
    triage decides afresh, with what cancelled it in view; after a failure every item
    runs again by itself, from a clean start."""
    cancelled = isinstance(outcome, Cancelled)
    if isinstance(outcome, Cancelled) and outcome.task_left:
        record_task_left(tx, focus)
    _end(tx, focus, success=False, outcome=ActivityOutcome.CANCELLED if cancelled else "")
    batch.dissolve(tx, focus.item, focus.batch, failed=not cancelled)
    if cancelled:
        _record_batch(tx, focus, DecisionType.CANCEL, "its batch was cancelled", "re-queued")
    else:
        _record_batch(tx, focus, DecisionType.DEFER, f"its batch failed ({outcome.detail})", "re-queued")
    discard_session(focus.item)


def record_pause(tx: Fence, focus: Focus, detail: str = "") -> None:
    """The decision a pause (or a stop) leaves on the item it interrupted, and on the
    items of its batch."""
    status = Agent.objects.filter(id=focus.item.agent_id).values_list("status", flat=True).first()
    how = "stopped" if status == Agent.RunStatus.STOPPED else "paused"
    session = focus.held.session
    context: dict[str, object] = {"agentStatus": status, "turn": session.turn_count if session is not None else 0}
    if detail:
        context["detail"] = detail
    reasoning = f"The agent was {how} mid-run: its turn stopped here"
    if detail.startswith("budget: "):  # processing: a budget refused the next LLM call
        reasoning = f"Stopped mid-run: {detail.removeprefix('budget: ')}"
    records.record_decision(
        tx,
        item=focus.item,
        decision_type=DecisionType.PAUSE,
        reasoning=reasoning,
        context=context,
        outcome="re-queued with its session; resumes when the agent runs again",
    )
    if focus.batch:
        _record_batch(tx, focus, DecisionType.PAUSE, f"the agent was {how}", "re-queued")


def _record_batch(tx: Fence, focus: Focus, decision: str, why: str, outcome: str) -> None:
    batch.record_members(
        tx,
        focus.item,
        focus.batch,
        decision=decision,
        reasoning=f"Batch led by {focus.item.id}: {why}",
        outcome=outcome,
    )


def _marker_retries(item: MailboxItem) -> int:
    return int(item.marks.get("markerRetries", 0))


def _retry(tx: Fence, focus: Focus, reason: str) -> None:
    """A failed attempt (an empty answer, a provider error, no progress): run again
    from a clean start, after a back-off, at most MAX_MARKER_RETRIES times, told what
    the failed attempts did and why they failed (``attempt_notes``); then an awaited
    task gets its back-off retries, anything else ends failed, naming every distinct
    reason of its attempts."""
    item, activity = focus.item, focus.activity
    assert activity is not None
    retries = _marker_retries(item)
    if retries < MAX_MARKER_RETRIES:
        _end(tx, focus, success=False)
        marks = {**item.marks, "markerRetries": retries + 1, FAILED_ATTEMPTS: _attempts(focus, reason)}
        delay = backoff(retries)
        if delay < 1:
            lifecycle.requeue(item.id, epoch=tx.epoch, fenced=True, marks=marks)
        else:  # not at once: what failed (a server, a model) gets a moment
            lifecycle.defer(
                item.id,
                until=timezone.now() + timedelta(seconds=delay),
                epoch=tx.epoch,
                fenced=True,
                from_statuses=[Status.PROCESSING],
                marks=marks,
            )
        discard_session(item)
        return
    if endings.verdict(focus.row.ending) is not None:
        return no_verdict(tx, focus, reason)
    _give_up(tx, focus, f"{retries + 1} attempts failed ({_failures(item, reason)})")


def _give_up(tx: Fence, focus: Focus, reason: str) -> None:
    """The item ends failed, now: whoever waits for it is told why, once; a task waiting
    for its verdict fails (an execution) or goes to a person (a review)."""
    item, activity = focus.item, focus.activity
    assert activity is not None
    _end(tx, focus, success=False)
    if endings.verdict(focus.row.ending) is not None:
        records.log(tx, activity, L.ERROR, reason)
        return _task_gave_up(tx, focus, reason)
    records.log(tx, activity, L.ERROR, f"gave up: {reason}")
    endings.given_up(tx, item, reason)
    complete(tx, item, outcome=f"failed ({reason})")


#: What the ``FAILED_ATTEMPTS`` mark keeps: the last attempts, and of each the last calls, each cut.
ATTEMPTS_KEPT, CALLS_KEPT, CALL_CHARS = 3, 6, 160


def _failures(item: MailboxItem, last: str) -> str:
    """Every distinct reason the item's attempts failed, in the order first seen."""
    reasons = [str(a.get("reason", "")) for a in item.marks.get(FAILED_ATTEMPTS, []) if isinstance(a, dict)]
    return "; ".join(dict.fromkeys(r for r in [*reasons, last] if r))


def _attempts(focus: Focus, reason: str) -> list[dict[str, object]]:
    """The item's failed attempts, this one added: its reason and the calls it made
    (each with how it ended), read from its session before the session is dropped."""
    session = focus.held.session
    messages = session.messages if session is not None else []
    results = {m.get("tool_call_id"): str(m.get("content") or "") for m in messages if m.get("role") == "tool"}
    calls = []
    for m in messages:
        for call in m.get("tool_calls") or [] if m.get("role") == "assistant" else []:
            fn = call.get("function") or {}
            result = results.get(call.get("id"), "")
            said = f"{fn.get('name')}({json.dumps(fn.get('arguments'), default=str)}) -> {result}"
            calls.append(said[:CALL_CHARS])
    earlier = [a for a in focus.item.marks.get(FAILED_ATTEMPTS, []) if isinstance(a, dict)]
    return [*earlier, {"reason": reason[:300], "calls": calls[-CALLS_KEPT:]}][-ATTEMPTS_KEPT:]


# ---------------------------------------------------------------------------- verdicts


def verdict_missing(focus: Focus) -> str:
    """Why the task this run was for still waits for it ('' if it does not)."""
    verdict = endings.verdict(focus.row.ending)
    return verdict.missing if verdict is not None and verdict.awaits(focus.item) else ""


def retry_delay(retries: int) -> timedelta:
    """30 s, 60 s, 120 s … (MARKUS EXECUTION_RETRY_BASE_S), at most the cap."""
    base, cap = settings.MARKUS["EXECUTION_RETRY_BASE_S"], settings.MARKUS["EXECUTION_RETRY_CAP_S"]
    return timedelta(seconds=min(cap, base * 2**retries))


def no_verdict(tx: Fence, focus: Focus, reason: str) -> None:
    """The run ended but the task still waits for it: the attempt failed. Retry with
    back-off (the item deferred, its session kept, a note saying why); after the
    retries the execution's task fails, a review goes to a person."""
    item, activity = focus.item, focus.activity
    assert activity is not None
    verdict = endings.verdict(focus.row.ending)
    assert verdict is not None, "only a run a task waits for has no verdict"
    key = verdict.mark
    retries = int(item.marks.get(key, 0))
    _end(tx, focus, success=False)
    records.log(tx, activity, L.ERROR, reason)
    if retries < settings.MARKUS["EXECUTION_MAX_RETRIES"]:
        delay = retry_delay(retries)
        marks = {k: v for k, v in item.marks.items() if k != "markerRetries"}
        marks.update({key: retries + 1, "lastFailure": reason})
        lifecycle.defer(
            item.id,
            until=timezone.now() + delay,
            epoch=tx.epoch,
            fenced=True,
            from_statuses=[Status.PROCESSING],
            marks=marks,
        )
        append_note(
            item,
            f"{NOTE_MARK} Your previous attempt failed: {reason}. Finish it now: give your verdict with the "
            "task tools (see your instructions).",
        )
        records.inject_main_session(
            tx, item=item, outcome=f"no verdict, retry {retries + 1} in {int(delay.total_seconds())} s"
        )
        return
    _task_gave_up(tx, focus, f"{retries} retries without a verdict: {reason}")


def _task_gave_up(tx: Fence, focus: Focus, reason: str) -> None:
    """The run a task waited for ends failed: the execution's task fails, a review goes
    to a person."""
    item = focus.item
    complete(tx, item, outcome=f"failed: {reason}")
    verdict = endings.verdict(focus.row.ending)
    if item.task_id is None or verdict is None:  # no task waits for this run: nothing to fail or hand over
        return
    verdict.gave_up(item.task_id, reason)


# ---------------------------------------------------------------------------- helpers


def resume_delay() -> timedelta:
    return timedelta(seconds=settings.MARKUS["PREEMPT_RESUME_DELAY_S"])


def complete(tx: Fence, item: MailboxItem, *, outcome: str) -> None:
    tx.check()
    if not lifecycle.complete(item.id, epoch=tx.epoch, fenced=True):
        raise StaleLease(f"{item.id} was no longer ours to complete")
    records.inject_main_session(tx, item=item, outcome=outcome)


# ---------------------------------------------------------------------------- parking


def park(tx: Fence, item: MailboxItem, *, approval_id: str, batch_members: list[MailboxItem] | None = None) -> None:
    """Waiting for a person: deferred, and not due until the approval is answered (the
    items of its batch with it)."""
    tx.check()
    lifecycle.park(item, epoch=tx.epoch, approval_id=approval_id)
    if batch_members:
        batch.park_members(tx, batch_members, approval_id=approval_id)
    # Answered already (between the tool call and this park)? Then the hook found
    # the item still processing and did nothing: resume it with the answer now.
    approval = Approval.objects.select_related("user").filter(id=approval_id).first()
    if approval is not None and approval.status != Approval.State.PENDING:
        on_approval_answered(approval)
    elif approval is not None:  # whoever waits for the answer hears it waits on a person
        for one in [item, *(batch_members or [])]:
            endings.waiting_on_person(one, approval)
    records.inject_main_session(tx, item=item, outcome=f"waiting for approval {approval_id}")


def on_approval_answered(approval: Approval) -> None:
    """Re-queue the item parked for this approval, with the answer as the tool result.
    Runs inside approval_respond's transaction."""
    item = lifecycle.parked_for(approval.mailbox_item_id, approval.id) if approval.mailbox_item_id else None
    if item is None:
        return
    answer = json.dumps(
        {
            "status": "ok",
            "approved": approval_granted(approval),
            "selected_option": approval.selected_option,
            "comment": approval.comment,
        }
    )
    session = LLMSession.objects.select_for_update().filter(id=session_id(item)).first()
    if session is not None:
        session.messages = [
            {**m, "content": answer} if m.get("role") == "tool" and approval.id in str(m.get("content")) else m
            for m in session.messages
        ]
        session.save(update_fields=["messages"])
    lifecycle.unpark(item)
    batch.unpark_members(item, approval.id)
    wake_on_commit(item.agent_id)
