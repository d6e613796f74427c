"""Processing one item: informational items complete at once, comments on an active
task are injected into its session, everything else runs its scenario through the LLM
tool loop with a yield point after every round of tool results."""
from __future__ import annotations

import json
import logging
import time
from dataclasses import dataclass, field
from typing import Any

from django.conf import settings
from django.utils import timezone

from mailbox import services as mailbox
from mailbox.models import MailboxItem
from mailbox.registry import COMMENT_TYPES, MailboxType, Status
from markus.agents.models import Agent, ChatMessage, ChatSession
from markus.agents.services import main_session
from markus.llm.base import COMPLETION_MARKER, CallContext, LLMCancelled, get_provider
from markus.tools import ToolContext, execute_tool, schemas_for
from notifications.events import send_event_on_commit

from . import records
from .heuristics import Verdict, heuristic_decision
from .lease import Lease, LeaseKeeper, StaleLease, fenced, lease_renew
from .models import ActivityLogType as L
from .models import AgentActivity, AttentionState, DecisionType, LLMSession
from .scenarios import (
    CHAT, NON_PREEMPTABLE, TASK_EXECUTION, first_messages, item_brief, merged_message, scenario_for, system_prompt,
)

log = logging.getLogger(__name__)
MAX_TURNS = 12
MAX_MARKER_RETRIES = 2
JUDGE_WORDS = {"continue", "preempt", "cancel", "merge", "defer"}


def chat_group(agent_id: str) -> str:
    return f"chat.{agent_id}"


@dataclass
class Focus:
    """What the loop knows while it is focused on one item."""

    lease: Lease
    item: MailboxItem
    scenario: str
    agent: Agent
    activity: AgentActivity | None = None
    seen: set[str] = field(default_factory=set)  # queued items already decided about
    merged_ids: list[str] = field(default_factory=list)
    last_stop_check: float = 0.0
    stop_flag: bool = False

    def stop_requested(self) -> bool:
        now = time.monotonic()
        if now - self.last_stop_check > 0.1:
            self.last_stop_check = now
            self.stop_flag = not Agent.objects.filter(id=self.agent.id, status=Agent.RunStatus.RUNNING).exists()
        return self.stop_flag


@dataclass
class Outcome:
    kind: str  # completed | preempted | cancelled | stopped | retry | parked
    text: str = ""
    detail: str = ""


# --------------------------------------------------------------------------- entry


def process_item(lease: Lease, item: MailboxItem) -> None:
    scenario = scenario_for(item)
    if scenario is None:
        with fenced(lease):
            records.set_state(lease, AttentionState.FOCUSED, item)
            _complete(lease, item, outcome="noted (informational, no LLM)")
        return
    records.set_state(lease, AttentionState.FOCUSED, item)
    if item.source_type in COMMENT_TYPES and _inject_into_active_task(lease, item):
        return
    agent = Agent.objects.get(id=lease.agent_id)
    focus = Focus(lease=lease, item=item, scenario=scenario, agent=agent,
                  seen=set(mailbox.queued(lease.agent_id).values_list("id", flat=True)))
    if execution_revoked(focus):  # the task left in_progress while this waited
        with fenced(lease):
            _complete(lease, item, outcome="skipped: the task is no longer in progress")
        return
    with fenced(lease):
        focus.activity = records.start_activity(lease, item=item, scenario=scenario)
        records.log(lease, focus.activity, L.STATUS, f"started {scenario}")
    try:
        outcome = _tool_loop(focus)
    except LLMCancelled:
        outcome = Outcome("stopped", detail="the agent was stopped or paused mid-call")
    except StaleLease:
        raise
    except Exception as exc:  # a provider failure: retry like a missing marker
        log.exception("attention: %s failed on %s", scenario, item.id)
        records.log(lease, focus.activity, L.ERROR, f"{exc.__class__.__name__}: {exc}")
        outcome = Outcome("retry", detail=f"provider error: {exc.__class__.__name__}")
    _settle(focus, outcome)


def _settle(focus: Focus, outcome: Outcome) -> None:
    with fenced(focus.lease):  # the item's outcome lands in one transaction
        _settle_fenced(focus, outcome)


def _settle_fenced(focus: Focus, outcome: Outcome) -> None:
    lease, item, activity = focus.lease, focus.item, focus.activity
    assert activity is not None
    records.log(lease, activity, L.STATUS, outcome.kind + (f": {outcome.detail}" if outcome.detail else ""))
    if outcome.kind == "completed":
        records.end_activity(lease, activity, success=True)
        if focus.scenario == CHAT:  # the reply and the completion commit together
            _deliver_chat_reply(focus, outcome.text)
        _complete(lease, item, outcome=_outcome_label(focus.scenario))
    elif outcome.kind == "preempted":
        records.end_activity(lease, activity, success=True)
        # Being preempted is not a failed attempt (recovery counts a human's attempts).
        MailboxItem.objects.filter(id=item.id).update(attempts=max(0, item.attempts - 1))
        with fenced(lease):
            mailbox.mailbox_defer(item.id, until=timezone.now() + _resume_delay(), epoch=lease.epoch, fenced=True,
                                  from_statuses=[Status.PROCESSING])
        records.inject_main_session(lease, item=item, outcome="paused (preempted), will resume")
    elif outcome.kind == "parked":
        # Waiting for a person: deferred, and not due until the approval is answered.
        records.end_activity(lease, activity, success=True)
        with fenced(lease):
            MailboxItem.objects.filter(id=item.id, lease_epoch=lease.epoch, status=Status.PROCESSING).update(
                status=Status.DEFERRED, deferred_until=None,
                metadata={**(item.metadata or {}), "waitingForApproval": True, "approvalId": outcome.detail})
            mailbox.emit_item(MailboxItem.objects.get(id=item.id))
            # Answered already (between the tool call and this park)? Then the hook found
            # the item still processing and did nothing: resume it with the answer now.
            from notifications.models import Approval

            approval = Approval.objects.filter(id=outcome.detail).first()
            if approval is not None and approval.status != Approval.State.PENDING:
                on_approval_answered(approval)
        records.inject_main_session(lease, item=item, outcome=f"waiting for approval {outcome.detail}")
    elif outcome.kind == "cancelled":
        records.end_activity(lease, activity, success=False)
        _complete(lease, item, outcome="cancelled")
    elif outcome.kind == "stopped":
        records.end_activity(lease, activity, success=False)
        with fenced(lease):
            mailbox.mailbox_requeue(item.id, epoch=lease.epoch, fenced=True)
            MailboxItem.objects.filter(id=item.id).update(attempts=max(0, item.attempts - 1))
    elif outcome.kind == "retry":
        retries = int((item.metadata or {}).get("markerRetries", 0))
        records.end_activity(lease, activity, success=False)
        if retries < MAX_MARKER_RETRIES:
            with fenced(lease):
                MailboxItem.objects.filter(id=item.id).update(metadata={**(item.metadata or {}),
                                                                        "markerRetries": retries + 1})
                mailbox.mailbox_requeue(item.id, epoch=lease.epoch, fenced=True)
                LLMSession.objects.filter(id=_session_id(item)).delete()  # retry from a clean start
        else:
            records.log(lease, activity, L.ERROR, f"gave up after {retries} retries: {outcome.detail}")
            _complete(lease, item, outcome=f"failed ({outcome.detail})")


def _resume_delay():
    from .loop import resume_delay

    return resume_delay()


def _outcome_label(scenario: str) -> str:
    from .scenarios import HEARTBEAT, REVIEW, TASK_EXECUTION

    return {TASK_EXECUTION: "executed", REVIEW: "reviewed", HEARTBEAT: "heartbeat processed",
            CHAT: "answered"}.get(scenario, "handled")


def _complete(lease: Lease, item: MailboxItem, *, outcome: str) -> None:
    with fenced(lease):
        if not mailbox.mailbox_complete(item.id, epoch=lease.epoch, fenced=True):
            raise StaleLease(f"{item.id} was no longer ours to complete")
    records.inject_main_session(lease, item=item, outcome=outcome)


# --------------------------------------------------------------------------- the tool loop


def _session_id(item: MailboxItem) -> str:
    return f"ls_{item.id}"


def _chat_session_id(item: MailboxItem) -> str:
    sid = (item.metadata or {}).get("sessionId")
    if sid and ChatSession.objects.filter(id=sid, agent_id=item.agent_id).exists():
        return sid
    return main_session(item.agent_id).id


def _absorbed(item: MailboxItem) -> list[MailboxItem]:
    return list(MailboxItem.objects.filter(merged_into_id=item.id, status=Status.MERGED).order_by("queued_at", "id"))


def _load_session(focus: Focus) -> LLMSession:
    """A new session starts from the item's payload, which already carries everything
    merged into it. A saved one resumes where it was, and gets every item merged into
    its item since (at enqueue, by consolidation, an injected comment) appended."""
    session = LLMSession.objects.filter(id=_session_id(focus.item)).first()
    if session is None:
        chat_sid = _chat_session_id(focus.item) if focus.scenario == CHAT else None
        session = LLMSession(id=_session_id(focus.item), agent_id=focus.agent.id, mailbox_item=focus.item,
                             scenario=focus.scenario, messages=first_messages(focus.item, focus.scenario, chat_sid),
                             absorbed_ids=[m.id for m in _absorbed(focus.item)])
        with fenced(focus.lease):
            session.save(force_insert=True)
        return session
    if focus.activity is not None:
        records.log(focus.lease, focus.activity, L.STATUS, f"resumed session at turn {session.turn_count}")
    missed = [m for m in _absorbed(focus.item) if m.id not in set(session.absorbed_ids)]
    if missed:
        session.messages.extend(merged_message(m) for m in missed)
        session.absorbed_ids = [*session.absorbed_ids, *(m.id for m in missed)]
        _save_session(focus, session)
    return session


def _save_session(focus: Focus, session: LLMSession) -> None:
    with fenced(focus.lease):
        LLMSession.objects.filter(id=session.id).update(messages=session.messages, turn_count=session.turn_count,
                                                        absorbed_ids=session.absorbed_ids, updated_at=timezone.now())


def _tool_loop(focus: Focus) -> Outcome:
    lease, item, activity = focus.lease, focus.item, focus.activity
    assert activity is not None
    provider = get_provider()
    session = _load_session(focus)
    tools = schemas_for(focus.scenario)
    ctx = CallContext(scenario=focus.scenario, agent_name=focus.agent.name, item=item_brief(item),
                      cancelled=focus.stop_requested)
    tool_ctx = ToolContext(agent_id=focus.agent.id, agent_name=focus.agent.name, mailbox_item_id=item.id,
                           activity_id=activity.id, scenario=focus.scenario, task_id=item.task_id)
    for _ in range(MAX_TURNS):
        if focus.stop_requested():
            _save_session(focus, session)
            return Outcome("stopped")
        system = system_prompt(focus.agent, item, focus.scenario)
        records.log(lease, activity, L.LLM_REQUEST, f"turn {session.turn_count + 1}",
                    {"provider": provider.name, "messages": len(session.messages)})
        with LeaseKeeper(lease):
            response = provider.complete(system=system, messages=session.messages, tools=tools, context=ctx)
        if not lease_renew(lease):
            raise StaleLease(f"lost the lease of {lease.agent_id} during an LLM call")
        session.messages.append(response.as_message())
        session.turn_count += 1
        with fenced(lease):
            records.add_usage(lease, activity, tokens=response.usage.total, tools=len(response.tool_calls))
            if response.text:
                records.log(lease, activity, L.TEXT, strip_marker(response.text))
            if not response.tool_calls:
                _save_session(focus, session)
        if not response.tool_calls:
            return _final(focus, response.text)
        for call in response.tool_calls:
            records.log(lease, activity, L.TOOL_START, call.name, {"arguments": call.arguments, "callId": call.id})
            ok, result = execute_tool(tool_ctx, call.name, call.arguments)
            records.log(lease, activity, L.TOOL_END, result[:4000], {"name": call.name, "ok": ok, "callId": call.id})
            session.messages.append({"role": "tool", "tool_call_id": call.id, "content": result})
        _save_session(focus, session)
        if tool_ctx.effects.get("parked_approval"):
            return Outcome("parked", detail=tool_ctx.effects["parked_approval"])
        verdict = yield_point(focus, session)
        if verdict is not None:
            return verdict
    return Outcome("retry", detail=f"no final answer after {MAX_TURNS} turns")


def strip_marker(text: str) -> str:
    return text.replace(COMPLETION_MARKER, "").strip()


def _final(focus: Focus, text: str) -> Outcome:
    if focus.scenario != CHAT and COMPLETION_MARKER not in text:
        return Outcome("retry", text=strip_marker(text), detail="output without the completion marker")
    return Outcome("completed", text=strip_marker(text))


# --------------------------------------------------------------------------- yield point


def yield_point(focus: Focus, session: LLMSession) -> Outcome | None:
    """Between LLM turns: renew the lease, and if something arrived, decide.
    Returns an Outcome that ends the item here, or None to go on."""
    lease, item = focus.lease, focus.item
    if not lease_renew(lease):
        raise StaleLease(f"lost the lease of {lease.agent_id}")
    if focus.stop_requested():
        return Outcome("stopped")
    if execution_revoked(focus):
        records.record_decision(lease, item=item, decision_type=DecisionType.CANCEL,
                                reasoning="The task left in_progress: its execution is cancelled",
                                context={"rule": "task", "taskId": item.task_id}, outcome="stopped, will not resume")
        return Outcome("cancelled", detail="the task left in_progress")
    arrivals = [n for n in mailbox.queued(lease.agent_id) if n.id not in focus.seen]
    if not arrivals:
        return None
    records.set_state(lease, AttentionState.DECIDING, item)
    ended: Outcome | None = None
    for new in arrivals:
        focus.seen.add(new.id)
        verdict = decide(focus, new)
        if focus.scenario in NON_PREEMPTABLE and verdict.decision in (DecisionType.PREEMPT, DecisionType.CANCEL):
            records.record_decision(lease, item=new, decision_type=DecisionType.CONTINUE,
                                    reasoning=f"{verdict.reason}; a chat is not preemptable, so it runs right after",
                                    context={"rule": verdict.rule, "currentItemId": item.id, "restored": True})
            continue
        ended = _apply(focus, session, new, verdict)
        if ended is not None:
            break
    records.set_state(lease, AttentionState.FOCUSED, item)
    return ended


def execution_revoked(focus: Focus) -> bool:
    """A task execution whose task was moved out of in_progress (or re-run in a newer
    round) stops at its next yield point."""
    if focus.scenario != TASK_EXECUTION or not focus.item.task_id:
        return False
    from markus.work.execution import execution_cancelled

    return execution_cancelled(focus.item.task_id, focus.item.extra.get("executionRound"))


def decide(focus: Focus, new: MailboxItem) -> Verdict:
    verdict = heuristic_decision(focus.item, new)
    if verdict.decision != DecisionType.CONTINUE or not settings.MARKUS.get("INTERRUPT_JUDGE", True):
        return verdict
    provider = get_provider()
    if not provider.judges:
        return verdict
    try:
        word = provider.judge(current=item_brief(focus.item), new=item_brief(new),
                              context=CallContext(scenario="judge", agent_name=focus.agent.name))
    except Exception:
        log.exception("interrupt judge failed; continuing")
        return verdict
    word = word if word in JUDGE_WORDS else "continue"
    if word == "continue":
        return verdict
    return Verdict(word, "judge", f"LLM interrupt judge: {word}")


def _apply(focus: Focus, session: LLMSession, new: MailboxItem, verdict: Verdict) -> Outcome | None:
    lease, item = focus.lease, focus.item
    context = {"rule": verdict.rule, "currentItemId": item.id, "newItemId": new.id}
    if verdict.decision == DecisionType.MERGE:
        with fenced(lease):  # a stale worker must not merge into an item it lost
            if mailbox.mailbox_merge_into(new.id, item.id):
                new.refresh_from_db()
                session.messages.append(merged_message(new))
                session.absorbed_ids = [*session.absorbed_ids, new.id]
                focus.merged_ids.append(new.id)
                _save_session(focus, session)
                records.record_decision(lease, item=new, decision_type=DecisionType.MERGE,
                                        reasoning=verdict.reason, context=context)
        return None
    if verdict.decision == DecisionType.PREEMPT:
        records.record_decision(lease, item=item, decision_type=DecisionType.PREEMPT, reasoning=verdict.reason,
                                context=context, outcome="deferred for resumption")
        return Outcome("preempted", detail=f"by {new.id}")
    if verdict.decision == DecisionType.CANCEL:
        records.record_decision(lease, item=item, decision_type=DecisionType.CANCEL, reasoning=verdict.reason,
                                context=context, outcome="stopped, will not resume")
        return Outcome("cancelled", detail=f"by {new.id}")
    if verdict.decision == DecisionType.DEFER:
        if new.source_type == MailboxType.HUMAN_CHAT:  # protected: it waits its turn instead
            records.record_decision(lease, item=new, decision_type=DecisionType.CONTINUE, context=context,
                                    reasoning=f"{verdict.reason}; a human's chat is never deferred")
            return None
        mailbox.mailbox_defer(new.id, from_statuses=[Status.QUEUED])
        records.record_decision(lease, item=new, decision_type=DecisionType.DEFER, reasoning=verdict.reason,
                                context=context)
        return None
    records.record_decision(lease, item=new, decision_type=DecisionType.CONTINUE, reasoning=verdict.reason,
                            context=context)
    return None


# --------------------------------------------------------------------------- comments and chat


def _inject_into_active_task(lease: Lease, item: MailboxItem) -> bool:
    """A comment on a task whose execution is open (its session saved, the item
    deferred or queued) goes into that session instead of a new activity."""
    if not item.task_id:
        return False
    execution = MailboxItem.objects.filter(
        agent_id=item.agent_id, source_type=MailboxType.TASK_STATUS_UPDATE, payload__taskId=item.task_id,
        status__in=[Status.QUEUED, Status.DEFERRED],
    ).order_by("-queued_at").first()
    if execution is None or not execution.triggers_execution:
        return False
    with fenced(lease):
        if not LLMSession.objects.filter(id=_session_id(execution)).exists():
            return False
        # Merged for real (the execution's payload carries it too, should its session be
        # rebuilt); the saved session gets it appended when the execution resumes.
        if not mailbox.mailbox_merge_into(item.id, execution.id, claimed_epoch=lease.epoch):
            return False
    records.record_decision(lease, item=item, decision_type=DecisionType.MERGE,
                            reasoning="Comment on an active task — injected into its session",
                            context={"executionItemId": execution.id})
    records.inject_main_session(lease, item=item, outcome="injected into the running task")
    return True


def _deliver_chat_reply(focus: Focus, text: str) -> None:
    item = focus.item
    session_id = _chat_session_id(item)
    answered = [item.id, *focus.merged_ids]
    with fenced(focus.lease):
        for mid in answered:
            m = item if mid == item.id else MailboxItem.objects.get(id=mid)
            ChatMessage.objects.create(session_id=session_id, role="user", content=m.content,
                                       metadata={"mailboxItemId": mid, "senderId": (m.metadata or {}).get("senderId")})
        reply = ChatMessage.objects.create(session_id=session_id, role="assistant", content=text,
                                           metadata={"mailboxItemIds": answered, "provider": get_provider().name})
        ChatSession.objects.filter(id=session_id).update(last_message_at=timezone.now())
        send_event_on_commit(chat_group(item.agent_id), "chat:reply",
                             {"agentId": item.agent_id, "mailboxItemIds": answered, "sessionId": session_id,
                              "messageId": reply.id, "reply": text})


def chat_reply_for(item_id: str) -> dict[str, Any] | None:
    """The stored reply that answered an item (directly, or through a merge)."""
    item = MailboxItem.objects.filter(id=item_id).first()
    seen = set()
    while item is not None and item.status == Status.MERGED and item.merged_into_id and item.id not in seen:
        seen.add(item.id)
        item = MailboxItem.objects.filter(id=item.merged_into_id).first()
    if item is None:
        return None
    for msg in ChatMessage.objects.filter(session__agent_id=item.agent_id, role="assistant").order_by("-id")[:50]:
        if item.id in (msg.metadata or {}).get("mailboxItemIds", []) or item_id in (msg.metadata or {}).get(
                "mailboxItemIds", []):
            return {"reply": msg.content, "sessionId": msg.session_id, "mailboxItemId": item_id}
    if item.status in (Status.DROPPED, Status.COMPLETED):
        return {"reply": None, "sessionId": None, "mailboxItemId": item_id, "status": item.status}
    return None


def on_approval_answered(approval) -> None:
    """Re-queue the item parked for this approval, with the answer as the tool result.
    Runs inside approval_respond's transaction."""
    item = MailboxItem.objects.select_for_update().filter(id=approval.mailbox_item_id).first()
    if item is None or item.status != Status.DEFERRED or (item.metadata or {}).get("approvalId") != approval.id:
        return
    answer = json.dumps({"status": "ok", "approved": approval.selected_option in ("approve", "approved", "yes"),
                         "selected_option": approval.selected_option, "comment": approval.comment})
    session = LLMSession.objects.select_for_update().filter(id=_session_id(item)).first()
    if session is not None:
        session.messages = [
            {**m, "content": answer} if m.get("role") == "tool" and approval.id in str(m.get("content")) else m
            for m in session.messages
        ]
        session.save(update_fields=["messages"])
    meta = {k: v for k, v in (item.metadata or {}).items() if k not in ("waitingForApproval",)}
    MailboxItem.objects.filter(id=item.id).update(status=Status.QUEUED, deferred_until=None, started_at=None,
                                                  lease_epoch=None, metadata=meta)
    mailbox.emit_item(MailboxItem.objects.get(id=item.id))
    from .services import wake_on_commit

    wake_on_commit(item.agent_id)
