"""Working memory and episodic recall tools."""

from __future__ import annotations

from attention.models import AgentActivity
from attention.toolbox import ToolContext, ToolError, tool
from markus.agents import memory as working_memory


@tool(
    "update_working_memory",
    "Remember something under a key (situational awareness); it appears in every later prompt "
    "with its age. Working memory is bounded: an entry is cut to the per-entry limit, and the "
    "oldest entries are forgotten first when the total grows too large.",
    {
        "type": "object",
        "properties": {"key": {"type": "string"}, "content": {"type": "string"}},
        "required": ["key", "content"],
    },
)
def update_working_memory(ctx: ToolContext, args: dict) -> dict:
    if not args["key"].strip():
        raise ToolError("update_working_memory: key must not be empty")
    written = working_memory.remember(ctx.agent_id, args["key"], args["content"])
    result: dict = {"key": written.entry.key, "saved": True}
    if written.truncated:
        result["truncated"] = f"the content was cut to {working_memory.entry_cap()} characters"
    if written.evicted:
        result["forgotten"] = written.evicted  # the oldest entries, to stay within the bound
    return result


@tool(
    "clear_working_memory",
    "Forget a working-memory entry, or all of them with key '*'.",
    {"type": "object", "properties": {"key": {"type": "string"}}, "required": ["key"]},
)
def clear_working_memory(ctx: ToolContext, args: dict) -> dict:
    return {"cleared": working_memory.forget(ctx.agent_id, args["key"])}


@tool(
    "recall_activity",
    "Your episodic memory. Without activity_id: your recent activities (what you did, with outcomes), "
    "newest first. With activity_id: that activity and its log (LLM turns, tool calls and results, "
    "status lines), in order, from after_seq on.",
    {
        "type": "object",
        "properties": {
            "limit": {
                "type": "integer",
                "description": "activities (1-50, default 10) or log lines (1-200, default 50)",
            },
            "activity_id": {"type": "string", "description": "read this activity's log"},
            "after_seq": {"type": "integer", "description": "with activity_id: log lines after this sequence number"},
        },
    },
)
def recall_activity(ctx: ToolContext, args: dict) -> dict:
    if args.get("activity_id"):
        return _activity_log(ctx, str(args["activity_id"]), args)
    limit = max(1, min(int(args.get("limit") or 10), 50))
    rows = AgentActivity.objects.filter(agent_id=ctx.agent_id, ended_at__isnull=False).order_by("-started_at")[:limit]
    return {"activities": [_activity(a) for a in rows]}


# A log line's content is cut to this many characters in recall_activity.
RECALL_LOG_CHARS = 2000


def _activity(a: AgentActivity) -> dict:
    return {
        "id": a.id,
        "type": a.type,
        "label": a.label,
        "success": a.success,
        "tokens": a.total_tokens,
        "tools": a.total_tools,
        "mailboxItemId": a.mailbox_item_id,
        "taskId": a.task_id,
        "startedAt": a.started_at,
        "endedAt": a.ended_at,
    }


def _activity_log(ctx: ToolContext, activity_id: str, args: dict) -> dict:
    """One of the agent's own activities with its log lines (another agent's activity
    answers like a missing one)."""
    activity = AgentActivity.objects.filter(agent_id=ctx.agent_id, id=activity_id).first()
    if activity is None:
        raise ToolError(f"recall_activity: you have no activity {activity_id!r}; call it without activity_id to list")
    limit = max(1, min(int(args.get("limit") or 50), 200))
    after = int(args.get("after_seq") or 0)
    lines = list(activity.logs.filter(seq__gt=after).order_by("seq")[: limit + 1])
    more = len(lines) > limit
    return {
        "activity": _activity(activity),
        "logs": [
            {
                "seq": entry.seq,
                "type": entry.type,
                "content": entry.content
                if len(entry.content) <= RECALL_LOG_CHARS
                else entry.content[: RECALL_LOG_CHARS - 1] + "…",
                "metadata": entry.metadata or {},
                "createdAt": entry.created_at,
            }
            for entry in lines[:limit]
        ],
        "more": more,
    }
