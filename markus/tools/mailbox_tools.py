"""Mailbox management tools (seed section 21): check, defer, drop, prioritise, and the
deliberation's decision (``complete_deliberation``).

Protected items (a human's chat or comment, an execution trigger, a review request, a
requirement update asking for action, a direct mention) are never deferred or dropped
by a tool: the tool answers with an error saying why. While the agent deliberates
(scenario ``deliberation``) defer, drop and prioritise only stage their change: it is
applied with ``complete_deliberation``'s decision and discarded if the deliberation is
aborted (a human's chat came in)."""

from __future__ import annotations

from datetime import timedelta

from django.utils import timezone

from attention.deliberation import DELIBERATION_ALLOWED_TOOLS
from attention.deliberation_decision import check_changeable, check_decision, check_minutes, stage
from attention.scenarios import CHAT, CHECK_IN, DELIBERATION, TRIAGE
from attention.toolbox import ToolContext, ToolError, tool
from mailbox import services as mailbox
from mailbox.lifecycle import queued
from mailbox.models import MailboxItem
from mailbox.selectors import QUEUE_DEPTH_CAP, depth_capped, depth_fields, queue_depth
from mailbox.services import serialize_item

CHECK_MAILBOX_MAX = 200  # items in one answer of check_mailbox
# Looking at the whole queue (the prompt lists its head): the check-in, triage and the
# deliberation, and a chat (a person asks what waits).
LISTING = frozenset({CHAT, CHECK_IN, TRIAGE, DELIBERATION})
# Deferring and dropping queued items: the deliberation, and tidying up in a check-in.
SORTING = frozenset({CHECK_IN, DELIBERATION})
# Reprioritising and the decision: the deliberation's own.
DECIDING = frozenset({DELIBERATION})

__all__ = ["DELIBERATION_ALLOWED_TOOLS"]


@tool(
    "check_mailbox",
    "List the items waiting in your mailbox in the order you would take them, a page from offset; "
    "queueDepth counts them all, more says how many follow.",
    {
        "type": "object",
        "properties": {
            "limit": {"type": "integer", "description": "1-200, default 50"},
            "offset": {"type": "integer"},
        },
    },
    scenarios=LISTING,
)
def check_mailbox(ctx: ToolContext, args: dict) -> dict:
    limit, offset = args.get("limit", 50), args.get("offset", 0)
    limit = 50 if limit is None else limit
    offset = 0 if offset is None else offset
    if isinstance(limit, bool) or not isinstance(limit, int) or not 1 <= limit <= CHECK_MAILBOX_MAX:
        raise ToolError(f"check_mailbox: limit is an integer from 1 to {CHECK_MAILBOX_MAX}")
    if isinstance(offset, bool) or not isinstance(offset, int) or offset < 0:
        raise ToolError("check_mailbox: offset is an integer from 0")
    rows = queued(ctx.agent_id)
    depth = queue_depth(ctx.agent_id)  # up to QUEUE_DEPTH_CAP + 1: a tool call never counts the whole queue
    items = [serialize_item(i) for i in rows[offset : offset + limit]]
    more = max(0, depth - offset - len(items))
    return {
        **depth_fields(depth),
        "offset": offset,
        "items": [
            {"id": i["id"], "type": i["sourceType"], "priority": i["priority"], "summary": i["summary"]} for i in items
        ],
        "more": min(more, QUEUE_DEPTH_CAP),
        "moreCapped": depth_capped(depth),  # past the cap: at least ``more`` follow
    }


def _check_tool_target(ctx: ToolContext, item_id: str, action: str) -> None:
    item = MailboxItem.objects.filter(agent_id=ctx.agent_id, id=item_id).first()
    if item is not None:
        check_changeable(item, action)


def _minutes(args: dict) -> int | None:
    minutes = args.get("minutes")
    check_minutes(minutes, "defer_mailbox_item")
    return minutes


@tool(
    "defer_mailbox_item",
    "Postpone a queued item, optionally for some minutes.",
    {
        "type": "object",
        "properties": {"item_id": {"type": "string"}, "minutes": {"type": "integer"}},
        "required": ["item_id"],
    },
    scenarios=SORTING,
)
def defer_mailbox_item(ctx: ToolContext, args: dict) -> dict:
    minutes = _minutes(args)
    if ctx.scenario == DELIBERATION:
        return stage(ctx, "defer", args["item_id"], minutes=minutes)
    _check_tool_target(ctx, args["item_id"], "deferred")
    until = timezone.now() + timedelta(minutes=minutes) if minutes else None
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
    scenarios=SORTING,
)
def drop_mailbox_item(ctx: ToolContext, args: dict) -> dict:
    reason = args.get("reason") or "dropped by the agent"
    if ctx.scenario == DELIBERATION:
        return stage(ctx, "drop", args["item_id"], reason=reason)
    _check_tool_target(ctx, args["item_id"], "dropped")
    item = mailbox.tool_drop_item(agent_id=ctx.agent_id, item_id=args["item_id"], reason=reason)
    return {"id": item.id, "status": item.status}


@tool(
    "prioritize_mailbox_item",
    "Change a queued item's priority.",
    {
        "type": "object",
        "properties": {
            "item_id": {"type": "string"},
            "priority": {"type": "integer", "minimum": 0, "maximum": 4, "description": "0 critical .. 4 background"},
        },
        "required": ["item_id", "priority"],
    },
    scenarios=DECIDING,
)
def prioritize_mailbox_item(ctx: ToolContext, args: dict) -> dict:
    priority = args["priority"]
    if isinstance(priority, bool) or not isinstance(priority, int) or not 0 <= priority <= 4:
        raise ToolError("prioritize_mailbox_item: priority must be an integer from 0 to 4")
    if ctx.scenario == DELIBERATION:
        return stage(ctx, "priority", args["item_id"], priority=priority)
    item = mailbox.tool_prioritize_item(agent_id=ctx.agent_id, item_id=args["item_id"], priority=priority)
    return {"id": item.id, "priority": item.priority}


_ENTRY = {
    "type": "object",
    "properties": {
        "item_id": {"type": "string"},
        "minutes": {"type": "integer", "description": "defer only: how long (default: a few minutes)"},
        "reason": {"type": "string"},
    },
    "required": ["item_id"],
}


@tool(
    "complete_deliberation",
    "Finish deliberating with your decision: the item to process now (process_item_id), other items to "
    "process together with it in one session (batch_item_ids, with batch_context saying what binds them), "
    "items to defer (with minutes) or drop (with a reason), ids you already handled inline, your reasoning, "
    "a short situational awareness (kept in your working memory) and other working-memory updates. "
    "Protected items (a human's chat, an execution trigger, a review request, a direct mention) cannot be "
    "deferred, dropped or completed inline.",
    {
        "type": "object",
        "properties": {
            "process_item_id": {"type": "string"},
            "batch_item_ids": {"type": "array", "items": {"type": "string"}},
            "batch_context": {"type": "string"},
            "defer": {"type": "array", "items": _ENTRY},
            "drop": {"type": "array", "items": _ENTRY},
            "inline_completed_ids": {"type": "array", "items": {"type": "string"}},
            "reasoning": {"type": "string"},
            "situational_awareness": {"type": "string"},
            "memory_updates": {
                "type": "array",
                "items": {
                    "type": "object",
                    "properties": {
                        "type": {
                            "type": "string",
                            "enum": ["working", "longterm"],
                            "description": "working (default): a working-memory key; longterm: a MEMORY.md "
                            "section the content is appended to",
                        },
                        "key": {"type": "string"},
                        "content": {"type": "string"},
                    },
                    "required": ["key", "content"],
                },
            },
        },
        "required": ["process_item_id", "reasoning"],
    },
    scenarios=DECIDING,
)
def complete_deliberation(ctx: ToolContext, args: dict) -> dict:
    return check_decision(ctx, args)
