"""Working memory and episodic recall tools."""

from __future__ import annotations

from django.utils import timezone

from attention.models import AgentActivity
from attention.toolbox import ToolContext, ToolError, tool
from markus.agents.models import WorkingMemory


@tool(
    "update_working_memory",
    "Remember something under a key (situational awareness).",
    {
        "type": "object",
        "properties": {"key": {"type": "string"}, "content": {"type": "string"}},
        "required": ["key", "content"],
    },
)
def update_working_memory(ctx: ToolContext, args: dict) -> dict:
    key = args["key"].strip()[:200]
    if not key:
        raise ToolError("update_working_memory: key must not be empty")
    WorkingMemory.objects.update_or_create(
        agent_id=ctx.agent_id, key=key, defaults={"content": args["content"], "updated_at": timezone.now()}
    )
    return {"key": key, "saved": True}


@tool(
    "clear_working_memory",
    "Forget a working-memory entry, or all of them with key '*'.",
    {"type": "object", "properties": {"key": {"type": "string"}}, "required": ["key"]},
)
def clear_working_memory(ctx: ToolContext, args: dict) -> dict:
    rows = WorkingMemory.objects.filter(agent_id=ctx.agent_id)
    if args["key"] != "*":
        rows = rows.filter(key=args["key"])
    deleted, _ = rows.delete()
    return {"cleared": deleted}


@tool(
    "recall_activity",
    "List your recent activities (what you did, with outcomes).",
    {"type": "object", "properties": {"limit": {"type": "integer"}}},
)
def recall_activity(ctx: ToolContext, args: dict) -> dict:
    limit = max(1, min(int(args.get("limit") or 10), 50))
    rows = AgentActivity.objects.filter(agent_id=ctx.agent_id, ended_at__isnull=False).order_by("-started_at")[:limit]
    return {
        "activities": [
            {
                "id": a.id,
                "type": a.type,
                "label": a.label,
                "success": a.success,
                "tokens": a.total_tokens,
                "tools": a.total_tools,
                "endedAt": a.ended_at,
            }
            for a in rows
        ]
    }
