"""Usage per day and model (``GET /api/agents/{id}/usage``, ``GET /api/teams/{id}/usage``)
and the team's budget (``GET|PATCH /api/teams/{id}/``); an agent's budget is set with
``PATCH /api/agents/{id}/`` (``markus.agents.api``)."""

from __future__ import annotations

from typing import Any

from django.db import transaction
from django.http import Http404
from drf_spectacular.utils import OpenApiParameter, extend_schema
from rest_framework.exceptions import PermissionDenied
from rest_framework.request import Request
from rest_framework.response import Response
from rest_framework.views import APIView

from attention.services import wake
from markus.agents import permissions
from markus.agents.auth import IsUser, controls_team, signed_in_user, teams_seen_by
from markus.agents.models import Team
from markus.core.api import int_param
from markus.core.schema import errors

from . import budgets, selectors
from .models import Budget
from .serializers import UsageOut
from .services import budget_data, budget_set

DAYS = OpenApiParameter(
    "days", int, description=f"the last N days, today included (1 to {selectors.MAX_DAYS}; default 7)"
)


def _days(request: Request) -> int:
    return int_param(request, "days", 7, lo=1, hi=selectors.MAX_DAYS)


class AgentUsageView(APIView):
    @extend_schema(
        operation_id="agents_usage",
        parameters=[DAYS],
        responses={200: UsageOut, **errors(400, 401, 404)},
        description="The agent's LLM calls per day and model (tokens in, out and cached, calls, cost in USD), "
        "its budget and what the budgets (its own and its team's) say now.",
    )
    def get(self, request: Request, agent_id: str) -> Response:
        agent = permissions.require(request, "agents_usage", agent_id)
        report = selectors.usage_report(selectors.agent_calls(agent.id), days=_days(request))
        own = Budget.objects.filter(agent_id=agent.id).first()
        status = selectors.gate_data(budgets.gate(agent.id))
        return Response({"agentId": agent.id, **report, "budget": budget_data(own), "budgetStatus": status})


def access_team(request: Request, team_id: str, operation: str) -> Team:
    """The team for ``operation``: its owner, its members and staff see it (anybody else
    gets 404, like a missing team); changing it is its owner's and staff's (403)."""
    user = signed_in_user(request)
    team = teams_seen_by(user).filter(id=team_id).first()
    if team is None:
        raise Http404("No such team.")
    if operation == "teams_partial_update" and not controls_team(user, team):
        raise PermissionDenied(f"Only the team's owner and staff may {permissions.OPERATIONS[operation].what}.")
    return team


def team_budget_data(team: Team) -> dict[str, Any]:
    """What a team's answer carries of its budget: the limits and what they say now."""
    budget = Budget.objects.filter(team_id=team.id).first()
    return {"budget": budget_data(budget), "budgetStatus": selectors.gate_data(budgets.team_gate(team.id))}


def _wake_all(agent_ids: list[str]) -> None:
    for agent_id in agent_ids:
        wake(agent_id)


def team_budget_patch(team: Team, limits: dict[str, Any]) -> dict[str, Any]:
    """``PATCH /api/teams/{id}/`` ``{"budget": {...}}`` (validated by ``BudgetInput``;
    the caller checked the team's owner or staff): set it, wake the team's agents after
    commit (a raised budget lets them work again), answer the team's budget data."""
    agent_ids = list(team.agents.values_list("id", flat=True))
    with transaction.atomic():
        budget_set(team=team, limits=limits)
        transaction.on_commit(lambda: _wake_all(agent_ids))
    return team_budget_data(team)


class TeamUsageView(APIView):
    permission_classes = [IsUser]

    @extend_schema(
        operation_id="teams_usage",
        parameters=[DAYS],
        responses={200: UsageOut, **errors(400, 401, 403, 404)},
        description="The team's LLM calls per day and model (all its agents'), its budget and what it says now.",
    )
    def get(self, request: Request, team_id: str) -> Response:
        team = access_team(request, team_id, "teams_usage")
        report = selectors.usage_report(selectors.team_calls(team.id), days=_days(request))
        budget = Budget.objects.filter(team_id=team.id).first()
        status = selectors.gate_data(budgets.team_gate(team.id))
        return Response({"teamId": team.id, **report, "budget": budget_data(budget), "budgetStatus": status})
