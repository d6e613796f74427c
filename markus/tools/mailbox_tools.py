"""Mailbox management tools (seed section 21): check, defer, drop, prioritise.
A human's chat is protected from all but checking."""

from __future__ import annotations

from datetime import timedelta

from django.utils import timezone

from attention.toolbox import ToolContext, tool
from mailbox import services as mailbox
from mailbox.selectors import queued_items


@tool(
    "check_mailbox",
    "List the items waiting in your mailbox, in the order you would take them.",
    {"type": "object", "properties": {}},
)
def check_mailbox(ctx: ToolContext, args: dict) -> dict:
    items = queued_items(ctx.agent_id)
    return {
        "queueDepth": len(items),
        "items": [
            {"id": i["id"], "type": i["sourceType"], "priority": i["priority"], "summary": i["summary"]} for i in items
        ],
    }


@tool(
    "defer_mailbox_item",
    "Postpone a queued item, optionally for some minutes.",
    {
        "type": "object",
        "properties": {"item_id": {"type": "string"}, "minutes": {"type": "integer"}},
        "required": ["item_id"],
    },
)
def defer_mailbox_item(ctx: ToolContext, args: dict) -> dict:
    until = timezone.now() + timedelta(minutes=args["minutes"]) if args.get("minutes") else None
    item = mailbox.tool_defer_item(agent_id=ctx.agent_id, item_id=args["item_id"], until=until)
    return {"id": item.id, "status": item.status, "deferredUntil": item.deferred_until}


@tool(
    "drop_mailbox_item",
    "Discard a stale or redundant queued item.",
    {
        "type": "object",
        "properties": {"item_id": {"type": "string"}, "reason": {"type": "string"}},
        "required": ["item_id"],
    },
)
def drop_mailbox_item(ctx: ToolContext, args: dict) -> dict:
    item = mailbox.tool_drop_item(
        agent_id=ctx.agent_id, item_id=args["item_id"], reason=args.get("reason") or "dropped by the agent"
    )
    return {"id": item.id, "status": item.status}


@tool(
    "prioritize_mailbox_item",
    "Change a queued item's priority (0 critical .. 4 background).",
    {
        "type": "object",
        "properties": {"item_id": {"type": "string"}, "priority": {"type": "integer"}},
        "required": ["item_id", "priority"],
    },
    scenarios={"deliberation"},
)
def prioritize_mailbox_item(ctx: ToolContext, args: dict) -> dict:
    item = mailbox.tool_prioritize_item(agent_id=ctx.agent_id, item_id=args["item_id"], priority=args["priority"])
    return {"id": item.id, "priority": item.priority}
