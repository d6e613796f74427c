"""Working memory and episodic recall tools."""

from __future__ import annotations

from attention import scenarios as sc
from attention.models import AgentActivity
from attention.toolbox import ToolContext, ToolError, tool
from markus.agents import memory as working_memory

# Keeping situational awareness: the scenarios that work on something over time, the
# check-in and the deliberation. Not a chat (a person's facts go to memory_save), not
# the short replies, nor the report or the dream (they only look back).
NOTING = frozenset(
    {
        sc.TASK_EXECUTION,
        sc.REVIEW,
        sc.COMMENT_RESPONSE,
        sc.REQUIREMENT_ACTION,
        sc.A2A,
        sc.SYSTEM_NOTICE,
        sc.CHECK_IN,
        sc.REMINDER_DUE,
        sc.DELIBERATION,
    }
)
# Clearing it: wherever it is kept (an entry goes stale where the news comes in).
CLEARING = NOTING
# Looking back at what one did: everywhere (the guidance, the report and the dream name it).
RECALLING = frozenset(sc.SCENARIOS)


@tool(
    "update_working_memory",
    "Remember something under a key (situational awareness), shown in every later prompt with its age. "
    "Bounded: a long entry is cut, the oldest entries are forgotten first.",
    {
        "type": "object",
        "properties": {"key": {"type": "string"}, "content": {"type": "string"}},
        "required": ["key", "content"],
    },
    scenarios=NOTING,
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
    scenarios=CLEARING,
)
def clear_working_memory(ctx: ToolContext, args: dict) -> dict:
    return {"cleared": working_memory.forget(ctx.agent_id, args["key"])}


@tool(
    "recall_activity",
    "Your recent activities (what you did, with outcomes), newest first; with activity_id, that "
    "activity's log (LLM turns, tool calls and results) from after_seq on.",
    {
        "type": "object",
        "properties": {
            "limit": {"type": "integer"},
            "activity_id": {"type": "string"},
            "after_seq": {"type": "integer"},
        },
    },
    scenarios=RECALLING,
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
