"""The agent's own rhythm: how often its heartbeat comes (attention.heartbeat)."""

from __future__ import annotations

from typing import Any

from attention.heartbeat import RhythmError, rhythm, rhythm_update
from attention.scenarios import CHAT, CHECK_IN
from attention.toolbox import ToolContext, ToolError, tool
from markus.agents.models import HEARTBEAT_MAX_MINUTES, HEARTBEAT_MIN_MINUTES


@tool(
    "set_heartbeat_interval",
    "Set how often your heartbeat check-in comes, in minutes "
    f"({HEARTBEAT_MIN_MINUTES} to {HEARTBEAT_MAX_MINUTES}; a value outside is clamped). Shorter while "
    "something needs watching, longer when things are quiet. Puts you back on this rhythm at once.",
    {
        "type": "object",
        "properties": {
            "minutes": {"type": "integer", "description": "minutes between heartbeats, e.g. 360 for every 6 h"},
            "reason": {"type": "string", "description": "why (kept in your activity log)"},
        },
        "required": ["minutes"],
    },
    scenarios={CHECK_IN, CHAT},
)
def set_heartbeat_interval(ctx: ToolContext, args: dict[str, Any]) -> dict[str, Any]:
    minutes = args["minutes"]
    if isinstance(minutes, bool) or not isinstance(minutes, int):
        raise ToolError("set_heartbeat_interval: minutes must be an integer number of minutes")
    try:
        agent, clamped = rhythm_update(ctx.agent_id, interval_minutes=minutes, clamp_interval=True)
    except RhythmError as exc:
        raise ToolError(f"set_heartbeat_interval: {exc}") from exc
    now = rhythm(agent)
    result: dict[str, Any] = {
        "intervalMinutes": now.interval_minutes,
        "nextHeartbeatAt": now.next_at.isoformat() if now.next_at else None,
    }
    if clamped:
        result["clamped"] = (
            f"{minutes} is outside {HEARTBEAT_MIN_MINUTES}–{HEARTBEAT_MAX_MINUTES}; set to {now.interval_minutes}"
        )
    return result
