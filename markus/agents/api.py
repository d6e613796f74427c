"""Agent endpoints: create (token shown once), list, show, the operator's change of an
agent (its name and role, its rhythm: heartbeat interval, time zone and active hours), and
its token's rotation (a new one, shown once) or revocation."""

from __future__ import annotations

from collections.abc import Sequence
from typing import TYPE_CHECKING, Any

from django.db import transaction
from drf_spectacular.utils import OpenApiParameter, extend_schema
from rest_framework import status
from rest_framework.request import Request
from rest_framework.response import Response
from rest_framework.views import APIView

from agentbus.selectors import pending_count, pending_counts
from attention.heartbeat import rhythm, rhythm_update
from attention.services import wake
from attention.stalls import Stall, stalls_of
from markus.agents import permissions
from markus.agents.auth import AnyRequest, IsUser, signed_in_user, visible_agents
from markus.agents.models import Agent
from markus.agents.serializers import (
    AgentCreatedOut,
    AgentCreateInput,
    AgentOut,
    AgentPatchInput,
    AgentTokenRevokedOut,
)
from markus.agents.services import agent_create, agent_token_revoke, agent_token_rotate
from markus.core.api import validated_body
from markus.core.schema import errors
from markus.toolservers import services as toolservers
from markus.usage import services as usage
from markus.usage.models import Budget

if TYPE_CHECKING:
    from rest_framework.permissions import _SupportsHasPermission  # the stubs' type of a permission


def agent_data(
    agent: Agent, tool_servers: list[str] | None = None, stalls: dict[str, Stall | None] | None = None
) -> dict[str, Any]:
    """An agent as the API shows it; ``tool_servers`` and ``stalls`` (``attention.stalls``):
    read with the others' (a list), else read here."""
    if tool_servers is None:
        tool_servers = toolservers.attached_names([agent.id])[agent.id]
    stall = (stalls if stalls is not None else stalls_of([agent.id])).get(agent.id)
    return {
        "id": agent.id,
        "name": agent.name,
        "role": agent.role,
        "kind": agent.kind,
        "status": agent.status,
        "teamId": agent.team_id,
        "ownerId": agent.owner_id,
        "createdAt": agent.created_at,
        **rhythm_data(agent),
        "toolServers": tool_servers,
        # null, or why it has made no progress for a while: {kind, reason, since}
        "stall": stall.data() if stall is not None else None,
    }


def rhythm_data(agent: Agent) -> dict[str, Any]:
    now = rhythm(agent)
    return {
        "heartbeatIntervalMinutes": now.interval_minutes,
        "heartbeatIntervalDefault": now.default,
        "timezone": now.time_zone,
        "heartbeatActiveStart": agent.heartbeat_active_start,
        "heartbeatActiveEnd": agent.heartbeat_active_end,
        "activeHours": (
            None
            if agent.heartbeat_active_start is None
            else {"start": agent.heartbeat_active_start, "end": agent.heartbeat_active_end}
        ),
        "nextHeartbeatAt": now.next_at,
        "heartbeatSleepDepth": now.sleep_depth,
    }


# The API's names of the rhythm settings → rhythm_update's.
_PATCHABLE = {
    "heartbeatIntervalMinutes": "interval_minutes",
    "timezone": "time_zone",
    "heartbeatActiveStart": "active_start",
    "heartbeatActiveEnd": "active_end",
}


class AgentListView(APIView):
    def get_permissions(self) -> Sequence[_SupportsHasPermission]:
        if self.request.method == "POST":
            return [IsUser()]
        return super().get_permissions()

    @extend_schema(
        operation_id="agents_list",
        responses={200: AgentOut(many=True), **errors(401)},
        parameters=[OpenApiParameter("inbox", str, description="1 adds pendingInboxCount")],
    )
    def get(self, request: Request) -> Response:
        agents = list(visible_agents(request).order_by("created_at", "id"))
        servers = toolservers.attached_names([a.id for a in agents])
        stalled = stalls_of([a.id for a in agents])
        rows = [agent_data(a, servers[a.id], stalled) for a in agents]
        if request.query_params.get("inbox") in ("1", "true"):
            counts = pending_counts([a.id for a in agents])
            for row in rows:
                row["pendingInboxCount"] = counts[row["id"]]
        return Response(rows)

    @extend_schema(
        operation_id="agents_create",
        request=AgentCreateInput,
        responses={201: AgentCreatedOut, **errors(400, 401, 403, 409, 413)},
        description=(
            "Create an agent; its token is in the answer, once. Staff may, and a team's owner in a team "
            "they own or with no team (MARKUS_AGENTS_CREATE=anyone: every person); anybody else 403. An `id` "
            "already taken, by any agent (yours or one you may not see), answers 409 `id not available` alike."
        ),
    )
    def post(self, request: Request) -> Response:
        agent, token = create_agent(request, validated_body(request, AgentCreateInput))
        return Response({**agent_data(agent), "token": token}, status=status.HTTP_201_CREATED)


def create_agent(caller: AnyRequest, body: dict[str, Any]) -> tuple[Agent, str]:
    """An agent made of ``AgentCreateInput``'s validated data, owned by the caller if they
    may create it (``permissions.require_creator``), and its token: the API's and the
    connect page's one way in."""
    team = body.get("teamId")
    user = permissions.require_creator(caller, team.owner_id if team is not None else None)
    return agent_create(
        name=body.get("name") or "",
        role=body.get("role") or "",
        kind=body.get("kind") or Agent.Kind.INTERNAL,
        agent_id=body.get("id"),
        team=team,
        owner=user,
    )


class AgentDetailView(APIView):
    @extend_schema(operation_id="agents_retrieve", responses={200: AgentOut, **errors(401, 404)})
    def get(self, request: Request, agent_id: str) -> Response:
        agent = permissions.require(request, "agents_retrieve", agent_id)
        return Response({**agent_data(agent), "pendingInbox": pending_count(agent.id)})

    @extend_schema(
        operation_id="agents_partial_update",
        request=AgentPatchInput,
        responses={200: AgentOut, **errors(400, 401, 403, 404)},
        description=(
            "Change the agent (its owner, its team's owner or staff; a teammate who may see it gets 403): "
            "`name`, `role`, `teamId` (another team where the caller may create an agent, as on create; null: "
            "no team), and its rhythm: `heartbeatIntervalMinutes` (5 to 1440; null: the default, 6 h), "
            "`timezone` (IANA name) and the active hours `heartbeatActiveStart` / `heartbeatActiveEnd` "
            "(hours 0-23 in that time zone, both or neither; outside them no heartbeat runs), or the same as "
            '`activeHours` `{"start": 8, "end": 20}` (null: all day). A new interval '
            "wakes the agent to it: the next heartbeat comes one interval after the last. "
            '`budget` `{"dailyTokens": N, "monthlyCost": X}` sets its spending limits (null: none; see '
            "`GET /api/agents/{id}/usage`); the answer then carries `budget`, and the agent is woken."
        ),
    )
    def patch(self, request: Request, agent_id: str) -> Response:
        agent = permissions.require(request, "agents_partial_update", agent_id)
        body = validated_body(request, AgentPatchInput)
        limits = body.get("budget")
        agent, budget = change_agent(request, agent, body)
        out = {**agent_data(agent), "pendingInbox": pending_count(agent.id)}
        if limits is not None:
            out["budget"] = usage.budget_data(budget)
        return Response(out)


def change_agent(caller: AnyRequest, agent: Agent, body: dict[str, Any]) -> tuple[Agent, Budget | None]:
    """``AgentPatchInput``'s validated data applied for ``caller`` (who controls the
    agent): the API's and the settings page's one way in. Another team (``teamId``) only
    where the caller may create an agent (``permissions.require_creator``). The agent as
    changed, and its budget when one was set."""
    body = dict(body)
    by = signed_in_user(caller)  # only people control it
    moved = "teamId" in body and (body["teamId"].id if body["teamId"] else None) != agent.team_id
    team = body.pop("teamId", None)
    if moved:
        permissions.require_creator(caller, team.owner_id if team is not None else None)
    if "activeHours" in body:
        hours = body.pop("activeHours") or {"start": None, "end": None}
        body["heartbeatActiveStart"], body["heartbeatActiveEnd"] = hours["start"], hours["end"]
    named = {key: body.pop(key) for key in ("name", "role") if key in body}
    servers = body.pop("toolServers", None)
    limits = body.pop("budget", None)
    budget = None
    with transaction.atomic():
        if named:
            Agent.objects.filter(id=agent.id).update(**named)
        if moved:  # saved, so its team channel follows (agentbus.team_channel.on_agent_saved)
            agent.team = team
            agent.save(update_fields=["team"])
            toolservers.detach_unoffered(agent, by=by)  # what the old team was offered goes with it
        if servers is not None:
            toolservers.attach(agent, servers, by=by)
        if limits is not None:  # a raised budget lets it work again: wake it
            budget = usage.budget_set(agent=agent, limits=limits)
            transaction.on_commit(lambda: wake(agent.id))
        agent, _ = rhythm_update(agent.id, **{_PATCHABLE[key]: value for key, value in body.items()})
    return agent, budget


class AgentTokenRotateView(APIView):
    @extend_schema(
        operation_id="agents_token_rotate",
        request=None,
        responses={200: AgentCreatedOut, **errors(401, 403, 404)},
        description=(
            "Give the agent a new token, in the answer once; the old one is refused from the next request on. "
            "Its owner, its team's owner or staff; a teammate 403; the agent's own token 403 (a leaked token "
            "must not mint its successor)."
        ),
    )
    def post(self, request: Request, agent_id: str) -> Response:
        agent = permissions.require(request, "agents_token_rotate", agent_id)
        return Response({**agent_data(agent), "token": agent_token_rotate(agent=agent)})


class AgentTokenView(APIView):
    @extend_schema(
        operation_id="agents_token_revoke",
        request=None,
        responses={200: AgentTokenRevokedOut, **errors(401, 403, 404)},
        description=(
            "Revoke the agent's token: it is refused from the next request on and nothing acts as the agent "
            "until a token is rotated in. Who may: as for rotating."
        ),
    )
    def delete(self, request: Request, agent_id: str) -> Response:
        agent = permissions.require(request, "agents_token_revoke", agent_id)
        agent_token_revoke(agent=agent)
        return Response({"id": agent.id, "revoked": True})
