"""The yield point between LLM turns: renew the lease, notice a stop or a revoked
execution, and decide about every item that arrived (heuristics, then the judge)."""

from __future__ import annotations

import copy
import logging
from typing import Any

from django.conf import settings

from mailbox import lifecycle
from mailbox.merge import may_merge
from mailbox.models import MailboxItem
from mailbox.registry import Status
from markus.llm.base import CallContext, get_provider
from markus.usage.budgets import BudgetExhausted
from markus.work.execution import LEFT_IN_PROGRESS, execution_cancelled

from . import records
from .focus import Cancelled, Focus, Outcome, Preempted, Stopped
from .heuristics import Verdict, heuristic_decision, may_call_off, may_preempt
from .lease import Fence, StaleLease, fenced, lease_renew_if_due
from .model_call import model_judge
from .models import AttentionState, DecisionType, LLMSession
from .scenarios import item_brief, row_for
from .session import save_session
from .session_messages import merged_message

log = logging.getLogger(__name__)
JUDGE_WORDS = {"continue", "preempt", "cancel", "merge", "defer"}


def yield_point(focus: Focus, session: LLMSession) -> Outcome | None:
    """Between LLM turns. Returns an Outcome that ends the item here, or None to go on."""
    lease, item = focus.lease, focus.item
    if not lease_renew_if_due(lease):
        raise StaleLease(f"lost the lease of {lease.agent_id}")
    if focus.stop_requested():
        return Stopped()
    if execution_revoked(focus):
        return revoked(focus)
    # Read only what may be new (a queue of 10,000 was read whole at every turn).
    since = focus.arrivals_since
    waiting = lifecycle.queued_or_come_due(lease.agent_id, more_urgent_than=weighed(focus).priority, since=since)
    arrivals = [n for n in waiting if _arrived(focus, n)]
    if not arrivals:
        return None
    records.enter_state(lease, AttentionState.DECIDING, item)
    ended: Outcome | None = None
    for new in arrivals:
        focus.seen.add(new.id)
        verdict = decide(focus, new)  # the judge's LLM call, if any: outside any transaction
        with fenced(lease) as tx:
            if not focus.row.preemptable and verdict.decision in (DecisionType.PREEMPT, DecisionType.CANCEL):
                records.record_decision(
                    tx,
                    item=new,
                    decision_type=DecisionType.CONTINUE,
                    reasoning=f"{verdict.reason}; a chat is not preemptable, so it runs right after",
                    context={"rule": verdict.rule, "currentItemId": item.id, "restored": True},
                )
                continue
            ended = _apply(tx, focus, session, new, verdict)
        if ended is not None:
            break
    records.enter_state(lease, AttentionState.FOCUSED, item)
    return ended


def _arrived(focus: Focus, item: MailboxItem) -> bool:
    """Whether the item is new to the focus: queued since it began, or a more urgent
    deferred item whose time came (a person's chat that waited out its retry's back-off
    while the agent took its heartbeat), brought back to the queue now."""
    if item.status != Status.DEFERRED:
        return focus.is_arrival(item)
    if item.id in focus.seen or not lifecycle.resurface_now(item.id):
        return False
    item.status = Status.QUEUED
    return True


def execution_revoked(focus: Focus, *, lock: bool = False) -> bool:
    """A task execution whose task was moved out of in_progress (or re-run in a newer
    round) stops at its next yield point, and makes no call before it (``lock``: the
    task's row held for the caller's transaction, ``execution_cancelled``)."""
    if not focus.row.watches_task or not focus.item.task_id:
        return False
    return execution_cancelled(focus.item.task_id, focus.item.extra.get("executionRound"), lock=lock)


def revoked(focus: Focus) -> Outcome:
    """The revoked execution ends here, cancelled; its decision (``record_task_left``)
    is written as it settles."""
    return Cancelled("the task left in_progress", task_left=True)


def record_task_left(tx: Fence, focus: Focus) -> None:
    """The cancel decision of a revoked execution, saying why."""
    records.record_decision(
        tx,
        item=focus.item,
        decision_type=DecisionType.CANCEL,
        reasoning=LEFT_IN_PROGRESS.capitalize(),
        context={"rule": "task", "taskId": focus.item.task_id},
        outcome="stopped, will not resume",
    )


def weighed(focus: Focus) -> MailboxItem:
    """What an arrival is weighed against: the focus's item, or for a batch its lead with
    the priority of the batch's most urgent item (a batch is as urgent as its most
    urgent item)."""
    urgent = min([focus.item.priority, *(m.priority for m in focus.batch)])
    if urgent >= focus.item.priority:
        return focus.item
    item = copy.copy(focus.item)
    item.priority = urgent
    return item


def decide(focus: Focus, new: MailboxItem) -> Verdict:
    verdict = heuristic_decision(weighed(focus), new)
    if verdict.decision == DecisionType.MERGE and not may_merge(focus.item, new, into_focus=True):
        verdict = Verdict(
            DecisionType.CONTINUE,
            verdict.rule,
            f"{verdict.reason} — but a {new.label.lower()} keeps its own identity: it runs by itself",
        )
    if verdict.decision != DecisionType.CONTINUE or not settings.MARKUS["INTERRUPT_JUDGE"]:
        return verdict
    provider = get_provider()
    if not provider.judges:
        return verdict
    context = CallContext(scenario="judge", agent_name=focus.agent.name)
    try:
        word = model_judge(
            focus.lease, provider, current=item_brief(weighed(focus)), new=item_brief(new), context=context
        )
    except BudgetExhausted:
        return verdict  # no judge beyond the budget: the heuristics' word stands
    except Exception:
        log.exception("interrupt judge failed; continuing")
        return verdict
    word = word if word in JUDGE_WORDS else "continue"
    if word == "continue" or (word == "merge" and not may_merge(focus.item, new, into_focus=True)):
        return verdict
    if word == "cancel" and not may_call_off(focus.item, new):
        why = "but only whoever asked for the current work may call it off"
        return Verdict(DecisionType.CONTINUE, "judge", f"LLM interrupt judge: cancel — {why}")
    if word == "preempt" and not may_preempt(weighed(focus), new):
        why = "but it is less urgent than the current work"
        return Verdict(DecisionType.CONTINUE, "judge", f"LLM interrupt judge: preempt — {why}")
    return Verdict(word, "judge", f"LLM interrupt judge: {word}")


def _apply(tx: Fence, focus: Focus, session: LLMSession, new: MailboxItem, verdict: Verdict) -> Outcome | None:
    """A yield point's decision about one arrival, in its own fenced transaction."""
    item = focus.item
    context: dict[str, Any] = {"rule": verdict.rule, "currentItemId": item.id, "newItemId": new.id}
    if verdict.decision == DecisionType.MERGE:
        tx.check()
        target = lifecycle.merge_into(new.id, item.id, into_focus=True)
        if target is not None:
            # The focus's item now carries what was merged (as stored): the next turns
            # are given both (``item_brief``, the brain's view of the item).
            item.payload, item.priority = target.payload, target.priority
            new.refresh_from_db()
            session.messages.append(merged_message(new))
            session.absorbed_ids = [*session.absorbed_ids, new.id]
            focus.merged_ids.append(new.id)
            save_session(tx, focus, session)
            records.record_decision(
                tx, item=new, decision_type=DecisionType.MERGE, reasoning=verdict.reason, context=context
            )
        return None
    if verdict.decision == DecisionType.PREEMPT:
        records.record_decision(
            tx,
            item=item,
            decision_type=DecisionType.PREEMPT,
            reasoning=verdict.reason,
            context=context,
            outcome="deferred for resumption",
        )
        return Preempted(f"by {new.id}")
    if verdict.decision == DecisionType.CANCEL:
        if focus.batch:
            context["batch"] = [m.id for m in focus.batch]
        records.record_decision(
            tx,
            item=item,
            decision_type=DecisionType.CANCEL,
            reasoning=verdict.reason,
            context=context,
            # A batch is never completed alone: all of it goes back to the queue.
            outcome="stopped; its batch is re-queued" if focus.batch else "stopped, will not resume",
        )
        who = (new.metadata or {}).get("senderName") or (new.metadata or {}).get("senderId")
        return Cancelled(f"called off by a newer message from {who} ({new.id})")
    if verdict.decision == DecisionType.DEFER:
        if row_for(new).in_chat:  # a person waits: it waits its turn instead
            records.record_decision(
                tx,
                item=new,
                decision_type=DecisionType.CONTINUE,
                context=context,
                reasoning=f"{verdict.reason}; a human's chat is never deferred",
            )
            return None
        tx.check()
        if lifecycle.defer_behind_queue(new):
            records.record_decision(
                tx,
                item=new,
                decision_type=DecisionType.DEFER,
                reasoning=verdict.reason,
                context=context,
                outcome="after the current focus, behind the queue",
            )
        return None
    records.record_decision(
        tx, item=new, decision_type=DecisionType.CONTINUE, reasoning=verdict.reason, context=context
    )
    return None
