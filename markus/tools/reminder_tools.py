"""Reminders: an agent puts an item in its own future (``schedule_reminder``), sees
and cancels what it set (``list_reminders``, ``cancel_reminder``). Times are read in
the agent's time zone (markus.reports.reminders)."""

from __future__ import annotations

from typing import Any

from attention import scenarios as sc
from attention.toolbox import ToolContext, ToolError, tool
from markus.agents.models import Agent
from markus.core.errors import MarkusError
from markus.reports import reminders

S = {"type": "string"}
# Where an agent works and may want to come back to something later.
WORKING_SCENARIOS = {
    sc.CHAT,
    sc.TASK_EXECUTION,
    sc.REVIEW,
    sc.COMMENT_RESPONSE,
    sc.REQUIREMENT_ACTION,
    sc.A2A,
    sc.SESSION_RESPONSE,
    sc.MENTION_RESPONSE,
    sc.SYSTEM_NOTICE,
    sc.CHECK_IN,
    sc.REMINDER_DUE,
}


@tool(
    "schedule_reminder",
    "Put a reminder in your own future: at that time it comes back to you as a mailbox item with this "
    "text, and you act on it then (e.g. 'remind the user about this review' → notify them). "
    f"when: {reminders.WHEN_FORMS}. At most a year ahead, never in the past.",
    {
        "type": "object",
        "properties": {"text": S, "when": S, "related_task_id": S},
        "required": ["text", "when"],
    },
    scenarios=WORKING_SCENARIOS,
)
def schedule_reminder(ctx: ToolContext, args: dict[str, Any]) -> dict[str, Any]:
    agent = Agent.objects.get(id=ctx.agent_id)
    task_id = args.get("related_task_id") or ctx.task_id or None
    try:
        item = reminders.reminder_schedule(
            agent=agent,
            text=args["text"],
            when=args["when"],
            source_item_id=ctx.mailbox_item_id,
            related_task_id=task_id,
        )
    except MarkusError as exc:
        raise ToolError(f"schedule_reminder: {exc}") from exc
    shown = reminders.ReminderView(item, reminders.PENDING).as_dict()
    return {"reminderId": item.id, "remindAt": shown["localTime"], "timezone": shown["timezone"], "scheduled": True}


@tool(
    "list_reminders",
    "List the reminders you set that have not fired yet.",
    {"type": "object", "properties": {}},
    scenarios=WORKING_SCENARIOS,
)
def list_reminders(ctx: ToolContext, args: dict[str, Any]) -> dict[str, Any]:
    pending = [v.as_dict() for v in reminders.reminder_list(ctx.agent_id) if v.state == reminders.PENDING]
    return {"reminders": [{k: r[k] for k in ("id", "text", "localTime")} for r in pending]}


@tool(
    "cancel_reminder",
    "Cancel a reminder you set that has not fired yet.",
    {"type": "object", "properties": {"reminder_id": S}, "required": ["reminder_id"]},
    scenarios=WORKING_SCENARIOS,
)
def cancel_reminder(ctx: ToolContext, args: dict[str, Any]) -> dict[str, Any]:
    try:
        reminders.reminder_cancel(agent_id=ctx.agent_id, item_id=args["reminder_id"], by=ctx.agent_name or ctx.agent_id)
    except MarkusError as exc:
        raise ToolError(f"cancel_reminder: {exc}") from exc
    return {"reminderId": args["reminder_id"], "cancelled": True}
