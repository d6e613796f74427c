"""The tool loop: LLM turn, tool round, yield point, until the turn ends.

A turn ends by a typed signal (ARCHITECTURE decision 18): a final answer with no tool
call, or the ``end_turn`` tool; only an empty answer is abnormal. A model that repeats
a refused call is making no progress: the second time it is told so in the call's
result, the third ends the attempt (``NoProgress``). Every call goes through the one
seam (``model_call``), which also keeps the item within its ceiling of calls and tokens.

A request is laid out for prompt caching: the system prompt holds what stays the same
(``scenarios.system_prompt``), the tools follow in a fixed order, then the session's
messages, only ever appended to: what changes from call to call (the working memory,
the mailbox: ``scenarios.context_message``) is appended as a note when it changed, so
every request repeats the one before it as its prefix.

A turn's records (its request and answer lines, its token usage) are written with
what follows them: the tool round's first transaction (``journal``), or, after the
final answer, the item's settle transaction, so a one-turn item writes no transaction
of its own. A session that a dead worker left in the middle of a tool round finishes
that round from the journal before it asks the LLM again."""

from __future__ import annotations

import dataclasses
from typing import Any

from django.utils import timezone

from markus.llm.base import (
    CallContext,
    LLMResponse,
    ToolCall,
    bare_tool_calls,
    fenced_tool_calls,
    get_provider,
    written_call,
)

from . import records, time_limit
from .compaction import compact
from .conversations import AWAITING
from .focus import AwaitingReply, Completed, Failed, Focus, Outcome, Parked, Retry, Stopped
from .interrupts import revoked, yield_point
from .journal import REVOKED, Round, pending_calls, run_round
from .model_call import ItemSpend, model_call
from .models import ActivityLogType as L
from .models import LLMSession
from .no_progress import Repeats, distinct_calls
from .replies import delta_sender
from .scenarios import context_lines, item_brief, longterm_lines, system_prompt
from .session import load_session
from .session_messages import (
    NOTE_MARK,
    context_message,
    last_context,
    only_repeats_a_note,
    same_context,
    says_nothing,
    without_echoed_context,
    written_as_a_note,
)
from .toolbox import END_TURN, ToolContext, restore_loaded, tools_for

MAX_TURNS = 12


def run_tool_loop(focus: Focus) -> Outcome:
    lease, item, activity = focus.lease, focus.item, focus.activity
    assert activity is not None
    provider = get_provider()
    session = load_session(focus)
    offered = tools_for(focus.agent.id, focus.scenario)  # built-in, and its tool servers'
    if focus.held.stored:  # a resumed session: the tools it found on demand are offered again
        restore_loaded(offered, focus.agent.id, focus.scenario, session.messages)
    ctx = CallContext(
        scenario=focus.scenario,
        agent_name=focus.agent.name,
        item=item_brief(item),
        cancelled=focus.stop_requested,
        on_delta=delta_sender(focus, session),
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
    spend = ItemSpend.of(item, focus.scenario, fresh=item.attempts <= 1 and not focus.held.stored)
    repeats = Repeats()
    system = system_prompt(focus.agent, item, focus.scenario)
    # A worker died in this session's last tool round: finish it from the journal.
    at, first, pending = pending_calls(session)
    if pending:
        done = _round(focus, session, tool_ctx, pending, at=at, first=first)
        if isinstance(done, Outcome):
            return done
    for _ in range(MAX_TURNS):
        if focus.stop_requested():
            focus.held.dirty = True  # saved with the outcome, to resume from here
            return Stopped()
        time_limit.check(focus)  # past the item's time limit: it ends (a CeilingReached)
        tools = [t.schema() for t in offered.values()]  # a tool found on demand joins them
        if compact(session, system=system, tools=tools):
            focus.held.dirty = True
            focus.turn.note(records.LogLine(L.STATUS, "older tool results cut to fit the model's context"))
        focus.turn.note(
            records.LogLine(
                L.LLM_REQUEST,
                f"turn {session.turn_count + 1}",
                {"provider": provider.name, "messages": len(session.messages)},
                at=timezone.now(),
            )
        )
        if _note_context(session, context_message(_context(focus))):
            focus.held.dirty = True
        asked = len(session.messages)  # what the model is sent: ``session.messages[:asked]``
        response = model_call(
            lease,
            provider,
            system=system,
            messages=session.messages,
            tools=tools,
            context=ctx,
            during="a turn",
            spend=spend,
        )
        if response.refusal:  # asked again, it would be refused again: the turn is not kept
            return Failed(f"the model's provider refused to answer ({response.refusal})")
        response = _typed(response, offered, session.turn_count)
        response = _once_each(focus, response)
        session.messages.append(response.as_message())
        session.turn_count += 1
        focus.held.dirty = True
        focus.turn.count(tokens=response.usage.total, tools=len(response.tool_calls))
        if response.text:
            focus.turn.note(records.LogLine(L.TEXT, response.text.strip()))
        if not response.tool_calls:
            return final_outcome(response, session.messages[:asked], offered)  # its records land with the outcome
        done = _round(focus, session, tool_ctx, response.tool_calls)
        if isinstance(done, Outcome):
            return done
        ended = [c for c in response.tool_calls if c.name == END_TURN]
        if ended:
            answer = str(ended[-1].arguments.get("answer") or "").strip()
            return final_outcome(LLMResponse(text=answer or response.text), session.messages[:asked], offered)
        stuck = _no_progress(session, done, repeats)
        if stuck is not None:
            return stuck
        merged = len(focus.merged_ids)
        verdict = yield_point(focus, session)
        if verdict is not None:
            return verdict
        if len(focus.merged_ids) != merged:  # a follow-up merged in: the item now carries it
            ctx.item = item_brief(item)
    return Retry(f"no final answer after {MAX_TURNS} turns")


def _typed(response: LLMResponse, offered: dict[str, Any], turn: int) -> LLMResponse:
    """A tool call a small model wrote into its text (a code fence, a ``<tool_call>``
    tag, or an answer of nothing but JSON calls) instead of calling it, for a tool it is
    offered, is taken as the call it meant."""
    if response.tool_calls or not response.text:
        return response
    calls, rest = fenced_tool_calls(response.text, set(offered), prefix=f"text_{turn}")
    if not calls:
        calls, rest = bare_tool_calls(response.text, set(offered), prefix=f"text_{turn}"), ""
    if not calls:
        return response
    return LLMResponse(text=rest, tool_calls=calls, usage=response.usage, finish_reason=response.finish_reason)


def _once_each(focus: Focus, response: LLMResponse) -> LLMResponse:
    """A call written again in the same answer is made once: the copies are left out of
    the answer before it is stored, so none is made, answered or sent back to the model
    (30 copies of one call grew a session by 60 messages)."""
    once = distinct_calls(response.tool_calls)
    copies = len(response.tool_calls) - len(once)
    if not copies:
        return response
    focus.turn.note(records.LogLine(L.STATUS, f"{copies} repeated call(s) in one answer left out: each call made once"))
    return dataclasses.replace(response, tool_calls=once)


def _round(
    focus: Focus,
    session: LLMSession,
    tool_ctx: ToolContext,
    calls: list[ToolCall],
    *,
    at: int | None = None,
    first: int = 0,
) -> Round | Outcome:
    """The tool round of a turn, through the journal; an Outcome if it parked the item."""
    if focus.run is not None:
        focus.run.memory = focus.run.longterm = None  # a tool may write working or long-term memory
    done = run_round(focus, session, tool_ctx, calls, at=at, first=first)
    if done.effects.get("parked_approval"):
        return Parked(done.effects["parked_approval"])
    if done.effects.get(AWAITING):  # asked a colleague and keeps its place (attention.conversations)
        return AwaitingReply(done.effects[AWAITING])
    if done.effects.get(REVOKED):  # its task left in_progress: the call was refused, the item ends
        return revoked(focus)
    return done


def _no_progress(session: LLMSession, done: Round, repeats: Repeats) -> Outcome | None:
    """Each call of the round counted (``no_progress``): the same refused call, or the
    same call answered the same, is told so in its result from the second time on; the
    third ends the attempt."""
    for call, ok, result in done.outcomes:
        told, stop = repeats.made(call, ok, result)
        if stop:
            return Retry(stop)
        if told == result:
            continue
        for message in reversed(session.messages):
            if message.get("role") == "tool" and message.get("tool_call_id") == call.id:
                message["content"] = told
                break
    return None


def _note_context(session: LLMSession, note: dict[str, Any]) -> bool:
    """The context note where the model reads it as context and not as the request: in
    a new session before the message that asks (a small model answers the last message
    it is given); when it changed since, after the last tool result, in that result. The
    session stays append-only, so each request repeats the one before it as its prefix."""
    text = str(note["content"])
    messages = session.messages
    if same_context(text, last_context(messages)):
        return False
    if messages and messages[-1].get("role") == "tool":
        messages[-1] = {**messages[-1], "content": f"{messages[-1].get('content') or ''}\n\n{text}"}
        return True
    asks = next((i for i in range(len(messages) - 1, -1, -1) if messages[i].get("role") == "user"), len(messages))
    messages.insert(asks, note)
    return True


def _context(focus: Focus) -> list[str]:
    """The request's context lines; the first turn uses what the loop read when it began
    the item, later turns read the queue again."""
    queue, depth = focus.queue, focus.depth
    focus.queue = focus.depth = None
    memory = focus.run.working_memory() if focus.run is not None else None
    if focus.longterm is None:  # read once per item: what the agent saves meanwhile it knows
        state = focus.run.longterm_state() if focus.run is not None else None
        focus.longterm = longterm_lines(focus.agent, focus.item, focus.scenario, state=state)
    return context_lines(
        focus.agent, focus.item, focus.scenario, memory=memory, queue=queue, depth=depth, longterm=focus.longterm
    )


def final_outcome(response: LLMResponse, sent: list[dict[str, Any]], offered: dict[str, Any]) -> Outcome:
    """A final answer counts when it says something: an empty or blank answer, or only
    an empty JSON value (``says_nothing``), is a failed attempt (for chats too), and so
    is one that only repeats the loop's context note ``sent`` to the model (the note is
    left out of any other), one that only repeats lines of its other notes
    (``NOTE_MARK``) or opens with their mark, and one that is a call written as text: of
    an ``offered`` tool that could not be read, or of a tool not offered. An answer cut
    at a limit (``LLMResponse.CUT_AT_LIMIT``) says so."""
    said = (response.text or "").strip()
    if not said:
        return Retry("an empty answer")
    if nothing := says_nothing(said, sent):
        return Retry(f"an empty answer ({nothing})")
    answer = without_echoed_context(said, sent)
    if not answer:
        return Retry("the answer only repeated the loop's context note")
    if only_repeats_a_note(answer, sent):
        return Retry("the answer only repeated the loop's own note")
    if written_as_a_note(answer):
        return Retry(f"the answer was written as a note of the loop's ({NOTE_MARK} …), not as an answer")
    if called := written_call(answer, offered):
        if called not in offered:
            return Retry(f"the answer was a call of {called}, which is no tool here, written as text")
        return Retry(f"the answer was a call of {called} written as text that could not be read as a call")
    if response.finish_reason in LLMResponse.CUT_AT_LIMIT:
        answer += "\n\n(This answer was cut short: it reached its length limit.)"
    elif response.finish_reason == LLMResponse.REPEATING:
        answer += "\n\n(This answer was cut short: it repeated itself.)"
    return Completed(answer)
