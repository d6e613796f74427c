"""``agent:created`` and ``agent:removed`` on the work pages' group, after commit, from
the model's own signals (an agent made by the API, the admin or ``demo``; removed in
the admin or by a cascade). The event keeps the agent's owner and team so that the
socket can tell who may see an agent that no longer has a row (``markus.web.work_live``)."""

from __future__ import annotations

from typing import Any

from markus.core.events import WORK_GROUP, send_json_on_commit

from .models import Agent

AGENT_CREATED = "agent:created"
AGENT_REMOVED = "agent:removed"


def _event(kind: str, agent: Agent) -> dict[str, Any]:
    return {"type": kind, "agentId": agent.id, "ownerId": agent.owner_id, "teamId": agent.team_id}


def on_agent_saved(sender: type[Agent], *, instance: Agent, created: bool, raw: bool = False, **kwargs: Any) -> None:
    if created and not raw:
        send_json_on_commit(WORK_GROUP, _event(AGENT_CREATED, instance))


def on_agent_deleted(sender: type[Agent], *, instance: Agent, **kwargs: Any) -> None:
    send_json_on_commit(WORK_GROUP, _event(AGENT_REMOVED, instance))
