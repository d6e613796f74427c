"""Agent endpoints: create (token shown once), list, show."""
from __future__ import annotations

from typing import Any

from rest_framework import status
from rest_framework.response import Response
from rest_framework.views import APIView

from markus.agents.auth import IsUser, access_agent, visible_agents
from markus.agents.models import Agent, Team
from markus.agents.services import AgentError, agent_create


def agent_data(agent: Agent) -> dict[str, Any]:
    return {
        "id": agent.id,
        "name": agent.name,
        "role": agent.role,
        "kind": agent.kind,
        "status": agent.status,
        "teamId": agent.team_id,
        "ownerId": agent.owner_id,
        "createdAt": agent.created_at,
    }


class AgentListView(APIView):
    def get_permissions(self):
        if self.request.method == "POST":
            return [IsUser()]
        return super().get_permissions()

    def get(self, request):
        return Response([agent_data(a) for a in visible_agents(request).order_by("created_at", "id")])

    def post(self, request):
        body = request.data if isinstance(request.data, dict) else None
        if body is None:
            return Response({"detail": "body must be a JSON object"}, status=status.HTTP_400_BAD_REQUEST)
        team = None
        if body.get("teamId"):
            team = Team.objects.filter(id=body["teamId"]).first()
            if team is None or not (request.user.is_staff or team.owner_id == request.user.id
                                    or team.members.filter(id=request.user.id).exists()):
                raise AgentError("no such team")
        for key in ("name", "role", "kind", "id"):
            if body.get(key) is not None and not isinstance(body[key], str):
                raise AgentError(f"{key} must be a string")
        agent, token = agent_create(
            name=body.get("name") or "", role=body.get("role") or "",
            kind=body.get("kind") or Agent.Kind.INTERNAL, agent_id=body.get("id"),
            team=team, owner=request.user,
        )
        return Response({**agent_data(agent), "token": token}, status=status.HTTP_201_CREATED)


class AgentDetailView(APIView):
    def get(self, request, agent_id: str):
        return Response(agent_data(access_agent(request, agent_id)))
