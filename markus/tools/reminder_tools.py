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
# Setting a reminder: where the agent may want to come back to something later (a
# person asks for it in a chat, a comment or a colleague says "later", a task or a
# check-in needs a follow-up) and when a reminder comes due (its prompt says so).
SCHEDULING = frozenset({sc.CHAT, sc.TASK_EXECUTION, sc.COMMENT_RESPONSE, sc.A2A, sc.CHECK_IN, sc.REMINDER_DUE})
# Listing and cancelling them: tidying up in a check-in, or when a reminder comes due
# (a person sees and cancels them in the mind view, not through a chat).
MANAGING = frozenset({sc.CHECK_IN, sc.REMINDER_DUE})


@tool(
    "schedule_reminder",
    "Set yourself a reminder: at that time this text comes back to you as a mailbox item and you act on "
    f"it then. when: {reminders.WHEN_FORMS}; at most a year ahead.",
    {
        "type": "object",
        "properties": {"text": S, "when": S, "related_task_id": S},
        "required": ["text", "when"],
    },
    scenarios=SCHEDULING,
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
    scenarios=MANAGING,
)
def list_reminders(ctx: ToolContext, args: dict[str, Any]) -> dict[str, Any]:
    pending = [v.as_dict() for v in reminders.reminder_list(ctx.agent_id) if v.state == reminders.PENDING]
    return {"reminders": [{k: r[k] for k in ("id", "text", "localTime")} for r in pending]}


@tool(
    "cancel_reminder",
    "Cancel a reminder you set that has not fired yet.",
    {"type": "object", "properties": {"reminder_id": S}, "required": ["reminder_id"]},
    scenarios=MANAGING,
)
def cancel_reminder(ctx: ToolContext, args: dict[str, Any]) -> dict[str, Any]:
    try:
        reminders.reminder_cancel(agent_id=ctx.agent_id, item_id=args["reminder_id"], by=ctx.agent_name or ctx.agent_id)
    except MarkusError as exc:
        raise ToolError(f"cancel_reminder: {exc}") from exc
    return {"reminderId": args["reminder_id"], "cancelled": True}
