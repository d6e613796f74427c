"""Who reaches which agent and which task through the A2A door.

A person reaches an agent as the permission table says (``a2a:card``, ``a2a:rpc``); an
agent's token reaches itself by its row, and the agents it may address on the bus
(``bus:address``: its team's and its owner's). Anything else answers 404, exactly like
a missing agent. A task is its sender's: another caller's task answers like a missing
one (``TaskNotFoundError``)."""

from __future__ import annotations

from django.db.models import QuerySet
from django.http import Http404

from agentbus.access import caller_ref, reachable_agents_for
from markus.agents import permissions
from markus.agents.auth import Caller, acting_agent, visible_agents
from markus.agents.models import Agent

from .models import A2ATask


def access_agent(caller: Caller, operation: str, agent_id: str) -> Agent:
    acting = acting_agent(caller)
    if acting is None or acting.id == agent_id:
        return permissions.require(caller, operation, agent_id)
    agent = reachable_agents_for(agent=acting, user=None).select_related("team").filter(id=agent_id).first()
    if agent is None:
        raise Http404("No such agent.")
    return agent


def reachable_agents(caller: Caller) -> QuerySet[Agent]:
    """The agents the caller reaches through the door (the directory lists the running ones)."""
    acting = acting_agent(caller)
    if acting is None:
        return visible_agents(caller)
    return reachable_agents_for(agent=acting, user=None)


def caller_tasks(caller: Caller, agent: Agent) -> QuerySet[A2ATask]:
    """The caller's own tasks on ``agent``."""
    return A2ATask.objects.filter(agent=agent, caller=caller_ref(caller))


def access_task(caller: Caller, agent: Agent, task_id: str) -> A2ATask | None:
    return caller_tasks(caller, agent).filter(id=task_id).first() if task_id else None
