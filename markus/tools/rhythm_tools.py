"""The agent's own rhythm: how often its heartbeat comes (attention.heartbeat)."""

from __future__ import annotations

from typing import Any

from attention.heartbeat import RhythmError, rhythm, rhythm_update
from attention.scenarios import CHAT, CHECK_IN
from attention.toolbox import ToolContext, ToolError, tool
from markus.agents.models import HEARTBEAT_MAX_MINUTES, HEARTBEAT_MIN_MINUTES

# Setting one's rhythm: the check-in (its item says so), and a chat (a person asks for it).
PACING = frozenset({CHECK_IN, CHAT})


@tool(
    "set_heartbeat_interval",
    f"Set the minutes between your heartbeat check-ins ({HEARTBEAT_MIN_MINUTES}-{HEARTBEAT_MAX_MINUTES}, "
    "clamped): shorter while something needs watching.",
    {
        "type": "object",
        "properties": {"minutes": {"type": "integer"}, "reason": {"type": "string", "description": "why (logged)"}},
        "required": ["minutes"],
    },
    scenarios=PACING,
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
