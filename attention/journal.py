"""The journal of a turn (ARCHITECTURE decision 14): an LLM turn and its tool round are
one unit of work, and every tool call of an item's session is recorded with its key
(the item, the session's attempt, the turn, the call's position in it).

A call whose tool changes only this database (every built-in tool) runs in one fenced
transaction with its journal row and its result: the effect and its record commit
together or not at all. The round's first such transaction also stores the session as
far as the assistant's turn, so a worker that dies after it leaves a session that asks
for calls the journal has already answered. A call whose effect leaves the database
(``Tool.transactional`` False) is recorded ``started`` before it runs and ``done`` with
its result after; one found ``started`` was in flight when its worker died: an
idempotent tool is called again with the same key (it finds its first effect), any other
is not called again and the LLM is told that its outcome is unknown.

A call of a tool a person approves first (``Tool.approval``: an MCP tool whose policy
is ``ask``) is not made: its approval is created and the call recorded ``awaiting`` in
one transaction, the round stops there and the item is parked. Resumed once the person
answered, the round starts at that call: granted, it is recorded ``started`` and made
(once, as above); declined, the LLM is told so and nothing is called.

A task execution whose task left in_progress makes no call: each call is refused in its
own transaction, the task's row locked (``execution_cancelled``), and the item ends
cancelled; a cancel never lands between the check and the effect.

A resumed, recovered or retried session whose last assistant turn has calls without
results finishes that round from the journal (``pending_calls``, ``run_round``): a
recorded call is replayed, never run again."""

from __future__ import annotations

import json
from collections.abc import Callable, Iterable
from dataclasses import dataclass, field
from datetime import datetime
from typing import Any, TypeVar

from django.conf import settings
from django.db import transaction
from django.utils import timezone

from mailbox.models import MailboxItem
from markus.llm.base import ToolCall
from markus.work.execution import LEFT_IN_PROGRESS
from notifications.models import Approval
from notifications.services import approval_granted

from . import records
from .focus import Focus
from .interrupts import execution_revoked
from .lease import Fence, fenced
from .lease_keeper import LeaseKeeper
from .models import ActivityLogType as L
from .models import LLMSession, ToolCallRecord, ToolCallState
from .session import save_session
from .toolbox import Tool, ToolContext, ToolError, arguments_of, execute_tool, offered

_T = TypeVar("_T")

# The effect of a call refused because the execution's task left in_progress: the turn
# ends there, cancelled (``tool_loop``).
REVOKED = "executionRevoked"
# What an activity's log keeps of a tool's result.
LOG_RESULT_CHARS = 4000
TOO_MANY = (
    "not made: at most {most} calls in one answer are made (MARKUS_TURN_MAX_TOOL_CALLS); "
    "make it in your next turn if it is still needed"
)
DECLINED = "{name} was not called: {who} declined it{comment}."
IN_FLIGHT = (
    "{name} was in flight when the worker running it stopped: whether it took effect is not known. "
    "Check its effect before you call it again."
)


def flush_turn(tx: Fence, focus: Focus, *, also: list[records.LogLine] | None = None) -> None:
    """Write what the last turn left pending (its log lines, its token usage), with
    ``also`` after them, in the phase's transaction."""
    activity = focus.activity
    if activity is None:
        return
    records.log_many(tx, activity, focus.turn.take_lines(*(also or [])))
    tokens, tools = focus.turn.take_usage()
    if tokens or tools:
        records.add_usage(tx, activity, tokens=tokens, tools=tools)


def call_key(item_id: str, attempt: str, turn: int, position: int) -> str:
    return f"{item_id}:{attempt}:{turn}:{position}"


def pending_calls(session: LLMSession) -> tuple[int, int, list[ToolCall]]:
    """The calls of the session's last assistant turn that have no result in it yet (a
    worker died in its tool round): where their results go (right after the turn's
    answered calls; notes appended since, such as a merged follow-up, come after), the
    position of the first of them in the turn, and the calls. Results follow their calls
    in order, so the answered ones are the first as many as there are results."""
    messages = session.messages
    for i in range(len(messages) - 1, -1, -1):
        message = messages[i]
        if message.get("role") != "assistant":
            continue
        calls = message.get("tool_calls") or []
        at = i + 1
        while at < len(messages) and messages[at].get("role") == "tool":
            at += 1
        answered = at - i - 1
        pending = [
            ToolCall(id=c.get("id") or "", name=c["function"]["name"], arguments=c["function"].get("arguments") or {})
            for c in calls[answered:]
        ]
        return at, answered, pending
    return len(messages), 0, []


@dataclass
class Round:
    """One tool round: the calls of one assistant turn of ``session``. ``opened``: the
    round's first write was made (the last turn's records, and the session with the
    assistant's turn in it); ``effects``: what its calls left to the loop."""

    focus: Focus
    session: LLMSession
    ctx: ToolContext
    turn: int
    recorded: dict[int, ToolCallRecord] = field(default_factory=dict)
    opened: bool = False
    effects: dict[str, Any] = field(default_factory=dict)
    position: int = 0  # of the call being made, in its turn
    # Each call made (or replayed) and its result: (call, ok, result text).
    outcomes: list[tuple[ToolCall, bool, str]] = field(default_factory=list)

    def key(self) -> str:
        return call_key(self.focus.item.id, self.session.attempt, self.turn, self.position)

    def open(self, tx: Fence, lines: list[records.LogLine]) -> None:
        """In the call's transaction: the last turn's records (its log lines with
        ``lines`` after them, its token usage) and, once per round, the session as far as
        the assistant's turn."""
        flush_turn(tx, self.focus, also=lines)
        if not self.opened:
            save_session(tx, self.focus, self.session)
            self.opened = True

    def row(self, call: ToolCall, **fields: Any) -> ToolCallRecord:
        activity = self.focus.activity
        return ToolCallRecord(
            mailbox_item_id=self.focus.item.id,
            attempt=self.session.attempt,
            turn=self.turn,
            position=self.position,
            call_id=call.id,
            name=call.name,
            arguments=call.arguments if isinstance(call.arguments, dict) else {"raw": str(call.arguments)},
            activity_id=activity.id if activity is not None else None,
            lease_epoch=self.focus.lease.epoch,
            **fields,
        )


def run_round(
    focus: Focus,
    session: LLMSession,
    ctx: ToolContext,
    calls: list[ToolCall],
    *,
    at: int | None = None,
    first: int = 0,
) -> Round:
    """Make (or replay) each call of a round, then store the session with their results.
    ``at``: a resumed round (``pending_calls``), whose results go there, whose first call
    is at position ``first`` of its turn and whose calls the journal may have answered
    already; None: a new turn's round, appended (the journal cannot know its calls: they
    are recorded with the session that asks them). Returns the round (its ``effects``)."""
    turn = session.turn_count
    positions = range(first, first + len(calls))
    r = Round(
        focus, session, ctx, turn, recorded=_recorded(focus.item, session, turn, positions) if at is not None else {}
    )
    results = []
    for position, call in zip(positions, calls, strict=True):
        r.position = position
        made = _call(r, call)
        if made is None:  # waits for a person's approval: the round resumes here
            break
        r.outcomes.append((call, *made))
        results.append({"role": "tool", "tool_call_id": call.id, "content": made[1]})
    where = len(session.messages) if at is None else at
    session.messages[where:where] = results
    _write(r, lambda tx: save_session(tx, focus, session))
    return r


def _write(r: Round, write: Callable[[Fence], _T]) -> _T:
    """The journal's one way to write: ``write`` in a fenced transaction of the item's
    lease (a call with its record, a record of a call made outside, the session)."""
    with fenced(r.focus.lease) as tx:
        return write(tx)


def _recorded(item: MailboxItem, session: LLMSession, turn: int, positions: Iterable[int]) -> dict[int, ToolCallRecord]:
    rows = ToolCallRecord.objects.filter(
        mailbox_item_id=item.id, attempt=session.attempt, turn=turn, position__in=list(positions)
    )
    return {row.position: row for row in rows}


def _start_line(call: ToolCall, *, at: datetime | None = None) -> records.LogLine:
    return records.LogLine(L.TOOL_START, call.name, {"arguments": call.arguments, "callId": call.id}, at=at)


def _end_line(call: ToolCall, ok: bool, result: str, **extra: Any) -> records.LogLine:
    return records.LogLine(
        L.TOOL_END, result[:LOG_RESULT_CHARS], {"name": call.name, "ok": ok, "callId": call.id, **extra}
    )


def _call(r: Round, call: ToolCall) -> tuple[bool, str] | None:
    """The call's result, or None when it waits for a person's approval."""
    r.ctx.effects = {}
    r.ctx.call_key = r.key()
    r.ctx.call_id = call.id
    found = r.recorded.get(r.position)
    if found is not None and found.state == ToolCallState.DONE:
        return _replay(r, call, found)
    t = offered(r.ctx, call.name)
    if found is not None and found.state == ToolCallState.AWAITING:
        return _approved(r, call, found)
    if found is not None:
        return _in_flight(r, call, found, idempotent=t is not None and t.idempotent)
    if execution_revoked(r.focus):  # refused in a transaction (``_in_transaction``), asking nobody
        return _in_transaction(r, call)
    if r.position >= (most := settings.MARKUS["TURN_MAX_TOOL_CALLS"]):
        return _in_transaction(r, call, refused=TOO_MANY.format(most=most))
    if t is not None and t.approval is not None:
        return _ask(r, call, t)
    if t is None or t.transactional:
        return _in_transaction(r, call)
    return _around(r, call)


def _replay(r: Round, call: ToolCall, row: ToolCallRecord) -> tuple[bool, str]:
    """A call the journal answered already: its result (and what it left to the loop)
    without calling the tool again."""
    r.effects.update(row.effects or {})
    ok = bool(row.ok)
    r.focus.turn.note(_end_line(call, ok, row.result, replayed=True))
    return ok, row.result


class _Refused(Exception):
    """A tool answered an error: what it wrote before it refused is rolled back."""


def execute_atomically(tx: Fence, ctx: ToolContext, name: str, arguments: Any) -> tuple[bool, str]:
    """Make a call inside the phase's fenced transaction, in a savepoint: a tool that
    refuses leaves nothing it wrote behind (nor what it left in ``ctx.effects``). The
    tool loop's and the deliberation's calls both go through here."""
    tx.check()
    before = dict(ctx.effects)
    try:
        with transaction.atomic():
            ok, result = execute_tool(ctx, name, arguments)
            if not ok:
                raise _Refused(result)
    except _Refused as refused:
        ctx.effects = before
        return False, str(refused)
    return ok, result


def _in_transaction(r: Round, call: ToolCall, *, refused: str | None = None) -> tuple[bool, str]:
    """The effect, its journal row and its result in one fenced transaction (``refused``:
    no call, that error is its result)."""
    focus = r.focus

    def made(tx: Fence) -> tuple[bool, str]:
        started = timezone.now()
        why = refused
        if focus.activity is not None:  # what the tool writes may name it
            records.ensure_stored(tx, focus.activity)
        if why is None and execution_revoked(focus, lock=True):
            # The task left in_progress: its execution has no more effect on it (nor any
            # other). Checked with the task's row locked, so a cancel and an effect never
            # cross: the cancel waits for this transaction, or this call sees it.
            why = LEFT_IN_PROGRESS
            r.ctx.effects[REVOKED] = True
        if why is None:
            ok, result = execute_atomically(tx, r.ctx, call.name, call.arguments)
        else:
            ok, result = False, json.dumps({"error": why})
        r.open(tx, [_start_line(call, at=started), _end_line(call, ok, result)])
        r.row(
            call,
            state=ToolCallState.DONE,
            ok=ok,
            result=result,
            effects=r.ctx.effects,
            started_at=started,
            completed_at=timezone.now(),
        ).save(force_insert=True)
        return ok, result

    ok, result = _write(r, made)
    r.effects.update(r.ctx.effects)
    return ok, result


def _around(r: Round, call: ToolCall) -> tuple[bool, str]:
    """A call whose effect leaves the database: recorded as started (with the session
    as far as this turn), made outside any transaction, then its result recorded."""

    def started(tx: Fence) -> ToolCallRecord:
        r.open(tx, [_start_line(call)])
        row = r.row(call, state=ToolCallState.STARTED)
        row.save(force_insert=True)
        return row

    row = _write(r, started)
    ok, result = _outside(r, call)
    _finish(r, call, row, ok, result)
    return ok, result


def _ask(r: Round, call: ToolCall, t: Tool) -> tuple[bool, str] | None:
    """A call a person approves first: its approval and its ``awaiting`` row in one
    transaction (with the session as far as this turn); the item is parked for it. Bad
    arguments, or nobody to ask, answer the LLM at once instead."""
    ask = t.approval
    assert ask is not None
    focus = r.focus
    try:
        args = arguments_of(t, call.arguments)
    except ToolError as exc:
        return _in_transaction(r, call, refused=str(exc))

    def asked(tx: Fence) -> str | None:
        """None once the approval is asked; else why it could not be."""
        if focus.activity is not None:  # the approval names the item and the activity
            records.ensure_stored(tx, focus.activity)
        try:
            with transaction.atomic():
                approval_id = ask(r.ctx, args)
        except ToolError as exc:
            return str(exc)
        waiting = records.LogLine(
            L.STATUS,
            f"{call.name} waits for a person's approval ({approval_id}) before it is called",
            {"callId": call.id, "approvalId": approval_id, "name": call.name, "arguments": args},
        )
        r.open(tx, [_start_line(call), waiting])
        r.row(call, state=ToolCallState.AWAITING, effects={"approvalId": approval_id}).save(force_insert=True)
        r.effects["parked_approval"] = approval_id
        return None

    refused = _write(r, asked)
    return None if refused is None else _in_transaction(r, call, refused=refused)


def _approved(r: Round, call: ToolCall, row: ToolCallRecord) -> tuple[bool, str] | None:
    """A call that waited for a person: still waiting, it parks again; declined (or the
    approval withdrawn), the LLM is told and nothing is called; granted, it is recorded
    ``started`` and made, once."""
    approval_id = str((row.effects or {}).get("approvalId") or "")
    answer = approval_answer(approval_id)
    if answer is None:
        r.effects["parked_approval"] = approval_id
        return None
    granted, who, comment = answer
    if not granted:
        said = f" ({comment[:500]})" if comment else ""
        result = json.dumps({"error": DECLINED.format(name=call.name, who=who, comment=said), "declined": True})
        r.focus.turn.note(records.LogLine(L.STATUS, f"{call.name}: {who} declined it", {"callId": call.id}))
        _finish(r, call, row, False, result)
        return False, result

    def started(tx: Fence) -> None:
        ToolCallRecord.objects.filter(id=row.id, state=ToolCallState.AWAITING).update(
            state=ToolCallState.STARTED, started_at=timezone.now()
        )
        r.open(tx, [records.LogLine(L.STATUS, f"{call.name}: approved by {who}; calling it", {"callId": call.id})])

    _write(r, started)
    ok, result = _outside(r, call)
    _finish(r, call, row, ok, result)
    return ok, result


def approval_answer(approval_id: str) -> tuple[bool, str, str] | None:
    """(granted, who answered, their comment) for an answered approval; None while it waits."""
    approval = Approval.objects.select_related("user").filter(id=approval_id).first()
    if approval is None:
        return False, "nobody (the approval is gone)", ""
    if approval.status == Approval.State.PENDING:
        return None
    who = approval.user.get_username() if approval.status == Approval.State.ANSWERED else "the approval was withdrawn:"
    return approval_granted(approval), who, approval.comment


def _outside(r: Round, call: ToolCall) -> tuple[bool, str]:
    """Make a call whose effect leaves the database: outside any transaction, the lease
    kept alive while it runs (a tool server may take its time)."""
    with LeaseKeeper(r.focus.lease):
        return execute_tool(r.ctx, call.name, call.arguments)


def _in_flight(r: Round, call: ToolCall, row: ToolCallRecord, *, idempotent: bool) -> tuple[bool, str]:
    """A call recorded as started whose result never came: its worker died during it."""
    if idempotent:  # called again with the same key: it finds its first effect
        ok, result = _outside(r, call)
        how = "made again (idempotent)"
    else:
        ok, result = False, json.dumps({"error": IN_FLIGHT.format(name=call.name)})
        how = "not made again: its outcome is unknown"
    r.focus.turn.note(
        records.LogLine(L.STATUS, f"{call.name} was in flight when its worker stopped; {how}", {"callId": call.id})
    )
    _finish(r, call, row, ok, result)
    return ok, result


def _finish(r: Round, call: ToolCall, row: ToolCallRecord, ok: bool, result: str) -> None:
    def done(tx: Fence) -> None:
        ToolCallRecord.objects.filter(id=row.id).update(
            state=ToolCallState.DONE, ok=ok, result=result, effects=r.ctx.effects, completed_at=timezone.now()
        )
        r.open(tx, [_end_line(call, ok, result)])

    _write(r, done)
    r.effects.update(r.ctx.effects)
