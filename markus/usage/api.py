"""Usage per day and model (``GET /api/agents/{id}/usage``, ``GET /api/teams/{id}/usage``),
the team's budget (``GET|PATCH /api/teams/{id}/``), a person's
(``GET|PATCH /api/users/{id}/budget/``) and the deployment's
(``GET|PATCH /api/budgets/deployment/``); an agent's budget is set with
``PATCH /api/agents/{id}/`` (``markus.agents.api``)."""

from __future__ import annotations

from typing import Any

from django.contrib.auth.models import User
from django.db import transaction
from django.http import Http404
from drf_spectacular.utils import OpenApiParameter, extend_schema
from rest_framework.exceptions import PermissionDenied
from rest_framework.request import Request
from rest_framework.response import Response
from rest_framework.views import APIView

from attention.services import wake
from markus.agents import permissions
from markus.agents.auth import AnyRequest, IsUser, controls_team, signed_in_user, teams_seen_by
from markus.agents.models import Team
from markus.core.api import int_param, validated_body
from markus.core.input import whole_number
from markus.core.schema import errors

from . import budgets, selectors
from .models import Budget
from .serializers import BudgetPatchInput, ScopeBudgetOut, UsageOut
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


def access_team(request: AnyRequest, team_id: str, operation: str) -> Team:
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
    return {"budget": budget_data(budget), "budgetStatus": selectors.gate_data(budgets.budget_gate(budget))}


def _wake_all(agent_ids: list[str]) -> None:
    for agent_id in agent_ids:
        wake(agent_id)


def budget_set_and_wake(**scope: Any) -> Budget:
    """``budget_set`` for one scope, then (after commit) wake the agents it holds (a
    raised budget lets them work again): the API's and the usage pages' one way in."""
    with transaction.atomic():
        budget = budget_set(**scope)
        agent_ids = list(selectors.covered_agents(budget).values_list("id", flat=True))
        transaction.on_commit(lambda: _wake_all(agent_ids))
    return budget


def team_budget_patch(team: Team, limits: dict[str, Any]) -> dict[str, Any]:
    """``PATCH /api/teams/{id}/`` ``{"budget": {...}}`` (validated by ``BudgetInput``;
    the caller checked the team's owner or staff): set it, wake the team's agents after
    commit (a raised budget lets them work again), answer the team's budget data."""
    budget_set_and_wake(team=team, limits=limits)
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
        status = selectors.gate_data(budgets.budget_gate(budget))
        return Response({"teamId": team.id, **report, "budget": budget_data(budget), "budgetStatus": status})


def _scope_data(budget: Budget | None) -> dict[str, Any]:
    return {"budget": budget_data(budget), "budgetStatus": selectors.gate_data(budgets.budget_gate(budget))}


class DeploymentBudgetView(APIView):
    @extend_schema(
        operation_id="budgets_deployment_retrieve",
        responses={200: ScopeBudgetOut, **errors(401, 403)},
        description="The deployment's budget (every agent's LLM calls count) and what it says now. Staff only.",
    )
    def get(self, request: Request) -> Response:
        permissions.require_staff(request, "budgets_deployment_retrieve")
        budget = Budget.objects.filter(scope=Budget.Scope.DEPLOYMENT).first()
        return Response({"scope": "deployment", **_scope_data(budget)})

    @extend_schema(
        operation_id="budgets_deployment_partial_update",
        request=BudgetPatchInput,
        responses={200: ScopeBudgetOut, **errors(400, 401, 403)},
        description='Set the deployment\'s budget `{"budget": {"dailyTokens": N, "monthlyCost": X}}` (null: no '
        "limit); every agent is woken. Staff only.",
    )
    def patch(self, request: Request) -> Response:
        permissions.require_staff(request, "budgets_deployment_partial_update")
        body = validated_body(request, BudgetPatchInput)
        budget = budget_set_and_wake(deployment=True, limits=body["budget"])
        return Response({"scope": "deployment", **_scope_data(budget)})


def access_person(request: AnyRequest, user_id: str, operation: str) -> User:
    """The person whose budget ``operation`` reads or sets: their own is readable by
    them, any by staff; anybody else 403 (saying who may); a missing person 404 (staff)."""
    if operation == "users_budget_partial_update":
        permissions.require_staff(request, operation)
    caller = signed_in_user(request)
    if not (caller.is_staff or str(caller.pk) == user_id):
        raise PermissionDenied(f"Only the person and staff may {permissions.OPERATIONS[operation].what}.")
    pk = whole_number(user_id)
    person = User.objects.filter(pk=pk).first() if pk is not None else None
    if person is None:
        raise Http404("No such person.")
    return person


def _person_data(person: User, budget: Budget | None) -> dict[str, Any]:
    own = budget is not None and budget.pk is not None
    return {"scope": "user", "userId": person.pk, "default": not own, **_scope_data(budget)}


class PersonBudgetView(APIView):
    permission_classes = [IsUser]

    @extend_schema(
        operation_id="users_budget_retrieve",
        responses={200: ScopeBudgetOut, **errors(401, 403, 404)},
        description="A person's budget (it holds the agents they own outside any team; `default`: the settings' "
        "default per person, while they have none of their own) and what it says now. The person and staff.",
    )
    def get(self, request: Request, user_id: str) -> Response:
        person = access_person(request, user_id, "users_budget_retrieve")
        return Response(_person_data(person, budgets.person_budget(person)))

    @extend_schema(
        operation_id="users_budget_partial_update",
        request=BudgetPatchInput,
        responses={200: ScopeBudgetOut, **errors(400, 401, 403, 404)},
        description='Set a person\'s budget `{"budget": {"dailyTokens": N, "monthlyCost": X}}` (null: no limit; '
        "a row of their own: the default holds them no more); their teamless agents are woken. Staff only.",
    )
    def patch(self, request: Request, user_id: str) -> Response:
        person = access_person(request, user_id, "users_budget_partial_update")
        body = validated_body(request, BudgetPatchInput)
        budget = budget_set_and_wake(user=person, limits=body["budget"])
        return Response(_person_data(person, budget))
