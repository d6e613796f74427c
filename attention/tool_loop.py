"""The tool loop: LLM turn, tool round, yield point, until a final answer.

A turn's records (its request and answer lines, its token usage) are written with
what follows them: the tool round's first transaction (``journal``), or, after the
final answer, the item's settle transaction, so a one-turn item writes no transaction
of its own. A session that a dead worker left in the middle of a tool round finishes
that round from the journal before it asks the LLM again."""

from __future__ import annotations

import json

from django.utils import timezone

from markus.llm.base import COMPLETION_MARKER, CallContext, MarkerFilter, ToolCall, get_provider

from . import records
from .conversations import AWAITING
from .focus import Focus, Outcome
from .interrupts import yield_point
from .journal import flush_turn, pending_calls, run_round
from .lease import fenced, leased_complete
from .models import ActivityLogType as L
from .models import LLMSession
from .replies import delta_sender
from .scenarios import SCENARIOS, item_brief, longterm_lines, system_prompt
from .session import load_session, save_session
from .toolbox import ToolContext, tools_for

MAX_TURNS = 12


def run_tool_loop(focus: Focus) -> Outcome:
    lease, item, activity = focus.lease, focus.item, focus.activity
    assert activity is not None
    provider = get_provider()
    session = load_session(focus)
    offered = tools_for(focus.agent.id, focus.scenario)  # built-in, and its tool servers'
    tools = [t.schema() for t in offered.values()]
    deltas = MarkerFilter(delta_sender(focus, session))  # the completion marker never reaches a watcher
    ctx = CallContext(
        scenario=focus.scenario,
        agent_name=focus.agent.name,
        item=item_brief(item),
        cancelled=focus.stop_requested,
        on_delta=deltas,
    )
    tool_ctx = ToolContext(
        agent_id=focus.agent.id,
        agent_name=focus.agent.name,
        mailbox_item_id=item.id,
        activity_id=activity.id,
        scenario=focus.scenario,
        task_id=item.task_id,
        offered=offered,
    )
    # A worker died in this session's last tool round: finish it from the journal.
    at, first, pending = pending_calls(session)
    if pending:
        parked = _round(focus, session, tool_ctx, pending, at=at, first=first)
        if parked is not None:
            return parked
    for _ in range(MAX_TURNS):
        if focus.stop_requested():
            with fenced(lease) as tx:
                flush_turn(tx, focus)
                save_session(tx, focus, session)
            return Outcome("stopped")
        system = _prompt(focus)
        focus.turn.note(
            records.LogLine(
                L.LLM_REQUEST,
                f"turn {session.turn_count + 1}",
                {"provider": provider.name, "messages": len(session.messages)},
                at=timezone.now(),
            )
        )
        response = leased_complete(
            lease, provider, system=system, messages=session.messages, tools=tools, context=ctx, during="a turn"
        )
        deltas.flush()  # what was held back as a possible start of the marker
        session.messages.append(response.as_message())
        session.turn_count += 1
        focus.held.dirty = True
        focus.turn.count(tokens=response.usage.total, tools=len(response.tool_calls))
        if response.text:
            focus.turn.note(records.LogLine(L.TEXT, strip_marker(response.text)))
        if not response.tool_calls:
            return final_outcome(focus, response.text)  # its records land with the outcome
        parked = _round(focus, session, tool_ctx, response.tool_calls)
        if parked is not None:
            return parked
        merged = len(focus.merged_ids)
        verdict = yield_point(focus, session)
        if verdict is not None:
            return verdict
        if len(focus.merged_ids) != merged:  # a follow-up merged in: the item now carries it
            ctx.item = item_brief(item)
    return Outcome("retry", detail=f"no final answer after {MAX_TURNS} turns")


def _round(
    focus: Focus,
    session: LLMSession,
    tool_ctx: ToolContext,
    calls: list[ToolCall],
    *,
    at: int | None = None,
    first: int = 0,
) -> Outcome | None:
    """The tool round of a turn, through the journal; an Outcome if it parked the item."""
    if focus.run is not None:
        focus.run.memory = focus.run.longterm = None  # a tool may write working or long-term memory
    done = run_round(focus, session, tool_ctx, calls, at=at, first=first)
    if done.effects.get("parked_approval"):
        return Outcome("parked", detail=done.effects["parked_approval"])
    if done.effects.get(AWAITING):  # asked a colleague and keeps its place (attention.conversations)
        return Outcome(AWAITING, detail=json.dumps(done.effects[AWAITING]))
    return None


def _prompt(focus: Focus) -> str:
    """The system prompt; the first turn uses what the loop read when it began the item."""
    queue, depth = focus.queue, focus.depth
    focus.queue = focus.depth = None  # later turns read the queue again
    memory = focus.run.working_memory() if focus.run is not None else None
    if focus.longterm is None:  # read once per item: what the agent saves meanwhile it knows
        state = focus.run.longterm_state() if focus.run is not None else None
        focus.longterm = longterm_lines(focus.agent, focus.item, focus.scenario, state=state)
    return system_prompt(
        focus.agent, focus.item, focus.scenario, memory=memory, queue=queue, depth=depth, longterm=focus.longterm
    )


def strip_marker(text: str) -> str:
    return (text or "").replace(COMPLETION_MARKER, "").strip()


def final_outcome(focus: Focus, text: str) -> Outcome:
    """A final answer counts when it says something (an empty or blank answer is a
    failed attempt, for chats too) and, where the scenario asks, ends with the marker."""
    answer, needs_marker = strip_marker(text), SCENARIOS[focus.scenario].needs_marker
    if not answer and (not needs_marker or COMPLETION_MARKER not in (text or "")):
        return Outcome("retry", detail="an empty answer")
    if needs_marker and COMPLETION_MARKER not in text:
        return Outcome("retry", text=answer, detail="output without the completion marker")
    return Outcome("completed", text=answer)
