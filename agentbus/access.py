"""Who may do what on the bus. Anything the caller may not see answers 404.

- Acting as an agent (``sender`` in a body): an agent token acts only as itself; a
  user acts as an agent they control (``bus:act_as`` in ``markus.agents.permissions``:
  its owner, its team's owner, staff). A teammate who only watches it gets 403.
- Addressing an agent (``recipient``, ``members``): a user addresses the agents they
  may see; an agent addresses the agents of its team and of its owner.
- A stream: an agent token sees the streams it takes part in; a user sees a stream
  when they may see one of its participants.
- An inbox: an agent token reads only its own. A user who may see the agent may read
  it too (wait, pending, drain --peek) but not consume it: draining and the
  acknowledgement of a ``wait`` cursor belong to the agent itself (403 for a user).
"""

from __future__ import annotations

from collections.abc import Iterable
from typing import TypeAlias

from django.contrib.auth.models import AnonymousUser, User
from django.db.models import Q, QuerySet
from rest_framework.request import Request

from markus.agents import permissions
from markus.agents.auth import Caller, acting_agent, user_may_see_agent, visible_agents
from markus.agents.auth import caller_ref as caller_ref  # the bus's name for its callers (agentbus.api, A2A)
from markus.agents.models import Agent

from . import selectors
from .errors import ForbiddenError, NotFoundError
from .models import Stream

# A DRF request, or the stand-in the async views build after authenticating themselves.
CallerRequest: TypeAlias = Request | Caller


def reachable_agents_for(*, agent: Agent | None, user: User | AnonymousUser | None) -> QuerySet[Agent]:
    if agent is not None:
        scope = Q(owner_id=agent.owner_id) if agent.owner_id else Q(id=agent.id)
        if agent.team_id:
            scope |= Q(team_id=agent.team_id)
        return Agent.objects.filter(scope)
    if user is None or not user.is_authenticated:
        return Agent.objects.none()
    if user.is_staff:
        return Agent.objects.all()
    return Agent.objects.filter(Q(owner=user) | Q(team__owner=user) | Q(team__members=user)).distinct()


def access_acting_agent(request: CallerRequest, agent_id: object) -> Agent:
    if not isinstance(agent_id, str) or not agent_id:
        raise NotFoundError("No such agent.")
    agent = Agent.objects.select_related("team").filter(id=agent_id).first()
    rel = permissions.relation(request, agent) if agent is not None else permissions.Relation.NONE
    if agent is None or not permissions.has_right(rel, permissions.Right.SEE):
        raise NotFoundError("No such agent.")
    if not permissions.has_right(rel, permissions.OPERATIONS["bus:act_as"].right):
        raise ForbiddenError(permissions.refusal("bus:act_as"))
    return agent


def access_recipients(request: CallerRequest, agent_ids: Iterable[object]) -> list[Agent]:
    given = list(agent_ids)
    ids = [i for i in given if isinstance(i, str) and i]
    if len(ids) != len(given):
        raise NotFoundError("No such agent.")
    found = {a.id: a for a in reachable_agents_for(agent=acting_agent(request), user=request.user).filter(id__in=ids)}
    missing = [i for i in ids if i not in found]
    if missing:
        raise NotFoundError(f"No such agent: {missing[0]}")
    return [found[i] for i in ids]


def may_see_stream(request: CallerRequest, stream: Stream) -> bool:
    participants = selectors.stream_participants(stream)
    agent = acting_agent(request)
    if agent is not None:
        return agent.id in participants
    return visible_agents(request).filter(id__in=participants).exists()


def access_stream(request: CallerRequest, stream_id: str) -> Stream:
    stream = Stream.objects.filter(id=stream_id).first()
    if stream is None or not may_see_stream(request, stream):
        raise NotFoundError("No such stream.")
    return stream


def may_read_inbox(*, agent: Agent | None, user: User | AnonymousUser | None, target: Agent) -> bool:
    if agent is not None:
        return agent.id == target.id
    return user_may_see_agent(user, target)
