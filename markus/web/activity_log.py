"""The main session's activity-log lines for the mind view (seed section 20): each item
the agent handled, as ``[ACTIVITY: <type>] <summary> → <outcome>``. The chat hides them
(``markus.agents.chat.conversation``); the mind view is where they are read."""

from __future__ import annotations

from typing import Any

from markus.agents.models import ChatMessage

LINES = 10  # the newest lines the mind view shows


def activity_log_lines(agent_id: str, limit: int = LINES) -> list[dict[str, Any]]:
    """The newest ``limit`` lines of the agent's main session, newest first (one query)."""
    rows = (
        ChatMessage.objects.filter(session__agent_id=agent_id, session__is_main=True, metadata__activityLog=True)
        .order_by("-created_at", "-id")
        .values("id", "content", "created_at", "metadata")[:limit]
    )
    return [
        {
            "id": r["id"],
            "content": r["content"],
            "createdAt": r["created_at"],
            "mailboxItemId": (r["metadata"] or {}).get("mailboxItemId"),
        }
        for r in rows
    ]
