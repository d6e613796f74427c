"""What a ``/ws/board/`` socket forwards: each event of the work group, to a caller who
may see what it names (the work selectors' visibility for tasks and requirements, the
permission table's ``see`` for agents), with ids only."""

from __future__ import annotations

from typing import Any

from django.contrib.auth.models import AnonymousUser, User

from markus.agents import permissions
from markus.agents.models import Agent
from markus.agents.signals import AGENT_CREATED, AGENT_REMOVED
from markus.core.actors import Actor
from markus.work.history import REQUIREMENT_COMMENT, REQUIREMENT_STATUS, TASK_COMMENT, TASK_STATUS
from markus.work.selectors import requirements_visible_to, tasks_visible_to

TASK_EVENTS = frozenset({TASK_STATUS, TASK_COMMENT})
REQUIREMENT_EVENTS = frozenset({REQUIREMENT_STATUS, REQUIREMENT_COMMENT})


def work_event_for(actor: Actor, user: User | AnonymousUser | None, event: dict[str, Any]) -> dict[str, Any] | None:
    kind = event.get("type")
    if kind in TASK_EVENTS:
        seen = tasks_visible_to(actor).filter(id=event.get("taskId")).exists()
        return event if seen else None
    if kind in REQUIREMENT_EVENTS:
        seen = requirements_visible_to(actor).filter(id=event.get("requirementId")).exists()
        return event if seen else None
    if kind in (AGENT_CREATED, AGENT_REMOVED):
        if actor.is_agent:
            return None  # an agent's token sees only itself
        # A removed agent is no row any more: its owner and team, as the event kept them.
        agent = Agent(id=str(event.get("agentId") or ""), owner_id=event.get("ownerId"), team_id=event.get("teamId"))
        if not permissions.user_may(user, permissions.Right.SEE, agent):
            return None
        return {"type": kind, "agentId": event.get("agentId")}
    return None
