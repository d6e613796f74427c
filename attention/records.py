"""Decisions, activities, activity logs, attention state and their events. Every writer
here takes the ``Fence`` of the phase it writes in (``attention.lease.fenced``) and
opens no transaction of its own, but ``enter_state``, a phase of its own. The loop writes
these rows for every item: each INSERT is made once per connection
(``markus.core.statements``), not built by the ORM every time."""

from __future__ import annotations

from collections.abc import Collection, Iterable
from dataclasses import dataclass
from datetime import datetime
from typing import Any

from django.db.models import F, Max, Q
from django.utils import timezone

from mailbox.models import MailboxItem
from mailbox.registry import descriptor
from mailbox.representation import PLACEHOLDER, private_to
from mailbox.selectors import depth_fields, queue_depth
from markus.agents.models import ChatMessage, ChatSession
from markus.agents.services import main_session
from markus.core.events import agent_group, send_event_on_commit
from markus.core.statements import table_statements

from .lease import Fence, Lease, fenced
from .models import ActivityLogType, AgentActivity, AgentActivityLog, AgentDecision, AttentionState, ToolCallRecord
from .scenarios import row, row_for


def serialize_decision(d: AgentDecision) -> dict[str, Any]:
    return {
        "id": d.id,
        "agentId": d.agent_id,
        "decisionType": d.decision_type,
        "mailboxItemId": d.mailbox_item_id,
        "context": d.context,
        "reasoning": d.reasoning,
        "outcome": d.outcome,
        "createdAt": d.created_at,
    }


def private_to_all(items: Iterable[MailboxItem]) -> int | None:
    """Whose private conversations are among ``items``: the one person, 0 when there
    are several, None when none is private."""
    owners = {o for o in (private_to(i) for i in items) if o is not None}
    if not owners:
        return None
    return owners.pop() if len(owners) == 1 else 0


def focus_of(item: MailboxItem | None, started_at: datetime | None = None) -> dict[str, Any] | None:
    if item is None:
        return None
    return {
        "mailboxItemId": item.id,
        "sourceType": item.source_type,
        "label": item.summary or item.label,
        "startedAt": started_at or item.started_at,
        "privateTo": private_to(item),
    }


def record_decision(
    tx: Fence,
    *,
    item: MailboxItem,
    decision_type: str,
    reasoning: str,
    context: dict | None = None,
    outcome: str | None = None,
) -> AgentDecision:
    tx.check()
    d = table_statements(AgentDecision).new(
        agent_id=tx.agent_id,
        mailbox_item=item,
        decision_type=decision_type,
        reasoning=reasoning,
        context=context or {},
        outcome=outcome,
        lease_epoch=tx.epoch,
    )
    table_statements(AgentDecision).save_new([d])
    decision = serialize_decision(d)
    owner = private_to(item)
    send_event_on_commit(
        agent_group(tx.agent_id),
        "agent:decision",
        {"agentId": tx.agent_id, "decision": decision},
        private_to=owner,
        public={"agentId": tx.agent_id, "decision": {**decision, "reasoning": PLACEHOLDER, "context": {}}},
    )
    return d


def enter_state(lease: Lease, state: str, item: MailboxItem | None = None, *, depth: int | None = None) -> None:
    """A phase of its own (the one writer here that opens its transaction): the
    attention state written, the write being the fence check, and announced from what
    was written, without reading the row back. ``depth``: the queue depth, when the
    caller knows it (else it is counted)."""
    fields, shown, since = _state_fields(state, item)
    with fenced(lease, **fields):
        emit_state(lease.agent_id, state, shown, since, depth=depth)


def _state_fields(state: str, item: MailboxItem | None) -> tuple[dict[str, Any], MailboxItem | None, datetime | None]:
    """The attention row's fields for a state, the item in focus and since when."""
    now = timezone.now()
    fields: dict[str, Any] = {"state": state, "updated_at": now}
    started: datetime | None = item.started_at if item is not None else None
    if state == AttentionState.FOCUSED:
        fields.update(current_item=item, focus_started_at=now)
        started = now
    elif state == AttentionState.IDLE:
        fields.update(current_item=None, focus_started_at=None)
        item = None
    return fields, item, started


def emit_state(
    agent_id: str, state: str, item: MailboxItem | None, started: datetime | None, *, depth: int | None = None
) -> None:
    """``agent:attention`` (and, unless deciding, ``agent:focus``) after commit."""
    focus = focus_of(item, started)
    owner = focus["privateTo"] if focus is not None else None
    shown = {**focus, "label": PLACEHOLDER} if focus is not None and owner is not None else focus
    attention = {"agentId": agent_id, "state": state}
    send_event_on_commit(
        agent_group(agent_id),
        "agent:attention",
        {**attention, "currentFocus": focus},
        private_to=owner,
        public={**attention, "currentFocus": shown},
    )
    if state != AttentionState.DECIDING:
        shown_depth = queue_depth(agent_id) if depth is None else depth
        focused = {"agentId": agent_id, **depth_fields(shown_depth, "mailboxDepth")}  # "1000+": capped
        send_event_on_commit(
            agent_group(agent_id),
            "agent:focus",
            {**focused, "focus": focus},
            private_to=owner,
            public={**focused, "focus": shown},
        )


def activity_type_for(item: MailboxItem, scenario: str) -> str:
    d = descriptor(item.source_type)
    if d.activity_type is not None:
        return d.activity_type.value
    return row(scenario).activity_type.value


def start_activity(
    lease: Lease, *, item: MailboxItem, scenario: str, batch: Collection[MailboxItem] = ()
) -> AgentActivity:
    """The activity of an item's run, made in memory (its id known): stored by the first
    write that needs the row (``ensure_stored``), so a brain that answers at once has its
    activity written with the outcome, in one INSERT. ``batch``: the items processed with
    it (named in the label)."""
    suffix = f" (+{len(batch)} batched)" if batch else ""
    label = (f"{item.label}: {item.summary}" if item.summary else item.label)[: 300 - len(suffix)] + suffix
    activity = table_statements(AgentActivity).new(
        agent_id=lease.agent_id,
        mailbox_item=item,
        type=activity_type_for(item, scenario),
        label=label,
        task_id=item.task_id,
        lease_epoch=lease.epoch,
        private_to=private_to_all([item, *batch]),
    )
    activity._log_seq = 0  # a new activity has no log yet
    return activity


def ensure_stored(tx: Fence, activity: AgentActivity) -> None:
    if activity._state.adding:
        tx.check()
        table_statements(AgentActivity).save_new([activity])


def log(tx: Fence, activity: AgentActivity, kind: str, content: str = "", metadata: dict | None = None) -> None:
    log_many(tx, activity, [LogLine(kind, content, metadata)])


@dataclass
class LogLine:
    """An activity-log line not written yet; ``at`` keeps when it happened."""

    kind: str
    content: str = ""
    metadata: dict | None = None
    at: datetime | None = None


def log_many(tx: Fence, activity: AgentActivity, lines: list[LogLine]) -> None:
    """Write log lines of an activity with one INSERT."""
    if not lines:
        return
    tx.check()
    ensure_stored(tx, activity)
    # The lease holder is the only writer of its activity's log, so the next
    # sequence number can live on the instance (read once from the table).
    seq: int | None = getattr(activity, "_log_seq", None)
    if seq is None:
        seq = AgentActivityLog.objects.filter(activity=activity).aggregate(m=Max("seq"))["m"] or 0
    now = timezone.now()
    made = table_statements(AgentActivityLog)
    rows = []
    for line in lines:
        seq += 1
        rows.append(
            made.new(
                activity=activity,
                seq=seq,
                type=line.kind,
                content=line.content[:20000],
                metadata=line.metadata or {},
                created_at=line.at or now,
            )
        )
    made.save_new(rows)
    activity._log_seq = seq


def add_usage(tx: Fence, activity: AgentActivity, *, tokens: int = 0, tools: int = 0) -> None:
    if activity._state.adding:  # stored with the usage in it
        activity.total_tokens += tokens
        activity.total_tools += tools
        ensure_stored(tx, activity)
        return
    tx.check()
    AgentActivity.objects.filter(id=activity.id).update(
        total_tokens=F("total_tokens") + tokens, total_tools=F("total_tools") + tools
    )


def end_activity(
    tx: Fence, activity: AgentActivity, *, success: bool, tokens: int = 0, tools: int = 0, outcome: str = ""
) -> None:
    """Close the activity (with the usage of its last turn, if any: one UPDATE).
    ``outcome``: ``ActivityOutcome`` of a run that was cancelled or stopped."""
    if activity._state.adding:  # stored as it ends: one INSERT
        activity.ended_at, activity.success, activity.outcome = timezone.now(), success, outcome
        activity.total_tokens += tokens
        activity.total_tools += tools
        ensure_stored(tx, activity)
        return
    fields: dict[str, Any] = {"ended_at": timezone.now(), "success": success}
    if outcome:
        fields["outcome"] = outcome
        activity.outcome = outcome
    if tokens:
        fields["total_tokens"] = F("total_tokens") + tokens
    if tools:
        fields["total_tools"] = F("total_tools") + tools
    tx.check()
    AgentActivity.objects.filter(id=activity.id).update(**fields)


WORKER_LOST = "worker lost"


def close_lost_activities(tx: Fence, *, requeued: Collection[str] = (), dropped: Collection[str] = ()) -> list[str]:
    """Recovery's part in attention (the mailbox knows no activities): the activities a
    dead worker left open are closed as failed, with a "worker lost" line in their log.

    Every outcome of a run closes its activity in the transaction that settles its item,
    so an open activity of an earlier lease epoch belongs to a worker that died or lost
    its lease mid-item; it can never close it itself (its writes are fenced).
    ``requeued`` / ``dropped``: what recovery did with the items, for the log line.
    Returns the activities closed."""
    closed = []
    tx.check()
    lost = (
        AgentActivity.objects.select_for_update()
        .filter(agent_id=tx.agent_id, ended_at__isnull=True)
        .filter(Q(lease_epoch__lt=tx.epoch) | Q(lease_epoch__isnull=True))
        .order_by("started_at", "id")
    )
    for activity in lost:
        # It ended when it was last heard of (its last log line), not now: the dead
        # worker wrote nothing after the lease moved on, so the activities of the
        # agent still never overlap.
        last = AgentActivityLog.objects.filter(activity=activity).aggregate(m=Max("created_at"))["m"]
        ended = max(activity.started_at, last) if last is not None else activity.started_at
        AgentActivity.objects.filter(id=activity.id).update(ended_at=ended, success=False)
        fate = (
            "a deliberation: nothing in the mailbox had changed, its items stay queued"
            if activity.mailbox_item_id is None
            else "the item was re-queued"
            if activity.mailbox_item_id in requeued
            else "the item was dropped"
            if activity.mailbox_item_id in dropped
            else "the item was no longer in flight"
        )
        calls = ToolCallRecord.objects.filter(activity_id=activity.id, ok=True).order_by("id")
        made = list(calls.values_list("name", flat=True))
        log(
            tx,
            activity,
            ActivityLogType.ERROR,
            f"{WORKER_LOST}: the worker of lease epoch {activity.lease_epoch} stopped mid-run; "
            f"recovery under epoch {tx.epoch} closed this activity as failed ({fate})"
            + (f"; calls that took effect: {', '.join(made)}" if made else ""),
            {"lostEpoch": activity.lease_epoch, "recoveryEpoch": tx.epoch, "effects": made},
        )
        closed.append(activity.id)
    return closed


# The main chat session of each agent, per lease (a run): read once per run, never
# across runs (an agent and its sessions may be deleted and made again between them).
_main_sessions: dict[tuple[str, str, int], str] = {}


def main_session_id(lease: Lease) -> str:
    key = (lease.agent_id, lease.owner, lease.epoch)
    sid = _main_sessions.get(key)
    if sid is None:
        if len(_main_sessions) > 1000:
            _main_sessions.clear()
        sid = _main_sessions[key] = main_session(lease.agent_id).id
    return sid


def know_main_session(lease: Lease, session_id: str) -> None:
    _main_sessions[(lease.agent_id, lease.owner, lease.epoch)] = session_id


def forget_run(lease: Lease) -> None:
    _main_sessions.pop((lease.agent_id, lease.owner, lease.epoch), None)


def inject_main_session(tx: Fence, *, item: MailboxItem, outcome: str) -> None:
    """``[ACTIVITY: type] summary → outcome`` in the agent's main session (section 20)."""
    if row_for(item).in_chat:  # the chat is in the main session already
        return
    tx.check()
    sid = main_session_id(tx.lease)
    now = timezone.now()
    line = table_statements(ChatMessage).new(
        session_id=sid,
        role=ChatMessage.Role.SYSTEM,
        content=f"[ACTIVITY: {item.source_type}] {item.summary or item.label} → {outcome}",
        metadata={"activityLog": True, "mailboxItemId": item.id},
        created_at=now,
    )
    table_statements(ChatMessage).save_new([line])
    table_statements(ChatSession).update_row(sid, last_message_at=now)
