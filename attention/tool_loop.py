"""The tool loop: LLM turn, tool round, yield point, until a final answer."""

from __future__ import annotations

from markus.llm.base import COMPLETION_MARKER, CallContext, get_provider

from . import records
from .focus import Focus, Outcome
from .interrupts import yield_point
from .lease import LeaseKeeper, StaleLease, fenced, lease_renew
from .models import ActivityLogType as L
from .scenarios import SCENARIOS, item_brief, system_prompt
from .session import load_session, save_session
from .toolbox import ToolContext, execute_tool, schemas_for

MAX_TURNS = 12


def run_tool_loop(focus: Focus) -> Outcome:
    lease, item, activity = focus.lease, focus.item, focus.activity
    assert activity is not None
    provider = get_provider()
    session = load_session(focus)
    tools = schemas_for(focus.scenario)
    ctx = CallContext(
        scenario=focus.scenario, agent_name=focus.agent.name, item=item_brief(item), cancelled=focus.stop_requested
    )
    tool_ctx = ToolContext(
        agent_id=focus.agent.id,
        agent_name=focus.agent.name,
        mailbox_item_id=item.id,
        activity_id=activity.id,
        scenario=focus.scenario,
        task_id=item.task_id,
    )
    for _ in range(MAX_TURNS):
        if focus.stop_requested():
            save_session(focus, session)
            return Outcome("stopped")
        system = system_prompt(focus.agent, item, focus.scenario)
        records.log(
            lease,
            activity,
            L.LLM_REQUEST,
            f"turn {session.turn_count + 1}",
            {"provider": provider.name, "messages": len(session.messages)},
        )
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
                save_session(focus, session)
        if not response.tool_calls:
            return final_outcome(focus, response.text)
        for call in response.tool_calls:
            records.log(lease, activity, L.TOOL_START, call.name, {"arguments": call.arguments, "callId": call.id})
            ok, result = execute_tool(tool_ctx, call.name, call.arguments)
            records.log(lease, activity, L.TOOL_END, result[:4000], {"name": call.name, "ok": ok, "callId": call.id})
            session.messages.append({"role": "tool", "tool_call_id": call.id, "content": result})
        save_session(focus, session)
        if tool_ctx.effects.get("parked_approval"):
            return Outcome("parked", detail=tool_ctx.effects["parked_approval"])
        verdict = yield_point(focus, session)
        if verdict is not None:
            return verdict
    return Outcome("retry", detail=f"no final answer after {MAX_TURNS} turns")


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
