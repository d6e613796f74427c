"""Teams: ``GET /api/teams/``, ``GET /api/teams/{id}/`` and ``PATCH /api/teams/{id}/``
``{agentTaskApproval?, budget?}`` (the budget through
``markus.usage.api.team_budget_patch``).
A person sees the teams they own or belong to (staff: all), an agent token its own
team; a team the caller may not see answers 404, like a missing one. Its settings are
changed by its owner and staff (a member gets 403). An API edge (it may import any
layer: ``.importlinter``)."""

from __future__ import annotations

from typing import Any

from django.core.exceptions import PermissionDenied
from django.db.models import QuerySet
from django.http import Http404
from drf_spectacular.utils import extend_schema
from rest_framework import serializers
from rest_framework.request import Request
from rest_framework.response import Response
from rest_framework.views import APIView

from markus.core.api import validated_body
from markus.core.schema import errors
from markus.usage.api import team_budget_data, team_budget_patch
from markus.usage.serializers import BudgetInput

from .auth import acting_agent, teams_seen_by
from .models import Team


class TeamOut(serializers.Serializer):
    id = serializers.CharField()
    name = serializers.CharField()
    ownerId = serializers.IntegerField()
    agentTaskApproval = serializers.BooleanField(
        help_text="a task one of its agents files waits pending until a person (the agent's owner, else the "
        "team's owner) approves it"
    )
    createdAt = serializers.DateTimeField()


class TeamDetailOut(TeamOut):
    budget = serializers.DictField(allow_null=True, help_text="its spending limits (GET /api/teams/{id}/usage)")
    budgetStatus = serializers.DictField(help_text="what its budget says now")


class TeamListOut(serializers.Serializer):
    teams = TeamOut(many=True)


class TeamPatchInput(serializers.Serializer):
    agentTaskApproval = serializers.BooleanField(required=False)
    budget = BudgetInput(
        required=False,
        help_text='its spending limits, {"dailyTokens": N, "monthlyCost": X} (either or both; null: no limit)',
    )


def team_data(team: Team) -> dict[str, Any]:
    return {
        "id": team.id,
        "name": team.name,
        "ownerId": team.owner_id,
        "agentTaskApproval": team.agent_task_approval,
        "createdAt": team.created_at,
    }


def visible_teams(request: Request) -> QuerySet[Team]:
    return teams_seen_by(request.user, agent=acting_agent(request))


def access_team(request: Request, team_id: str) -> Team:
    team = visible_teams(request).filter(id=team_id).first()
    if team is None:
        raise Http404("No such team.")
    return team


class TeamListView(APIView):
    @extend_schema(operation_id="teams_list", responses={200: TeamListOut, **errors(401)})
    def get(self, request: Request) -> Response:
        return Response({"teams": [team_data(t) for t in visible_teams(request).order_by("name", "id")]})


class TeamDetailView(APIView):
    @extend_schema(operation_id="teams_retrieve", responses={200: TeamDetailOut, **errors(401, 404)})
    def get(self, request: Request, team_id: str) -> Response:
        team = access_team(request, team_id)
        return Response({**team_data(team), **team_budget_data(team)})

    @extend_schema(
        operation_id="teams_partial_update",
        request=TeamPatchInput,
        responses={200: TeamDetailOut, **errors(400, 401, 403, 404)},
        description="Change the team's settings (its owner and staff): `agentTaskApproval` (tasks its agents "
        'file wait for a person\'s approval), `budget` `{"dailyTokens": N, "monthlyCost": X}` (its agents are '
        "woken).",
    )
    def patch(self, request: Request, team_id: str) -> Response:
        if acting_agent(request) is not None:  # a person's setting: not an agent's to change
            raise PermissionDenied("An agent token may not change a team's settings.")
        team = access_team(request, team_id)
        user = request.user
        if not (user.is_staff or team.owner_id == user.pk):
            raise PermissionDenied("Only the team's owner and staff may change its settings.")
        body = validated_body(request, TeamPatchInput)
        if "agentTaskApproval" in body:
            team.agent_task_approval = body["agentTaskApproval"]
            team.save(update_fields=["agent_task_approval"])
        budget = team_budget_patch(team, body["budget"]) if "budget" in body else team_budget_data(team)
        return Response({**team_data(team), **budget})
