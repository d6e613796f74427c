"""Usage on a page: ``/agents/<id>/usage/``, ``/teams/<id>/usage/`` and (staff)
``/usage/``: the LLM calls per day and model as a table (``selectors.usage_report``, as
``GET …/usage`` answers), tokens and cost per day as charts (``usage_chart``) under each
budget's limit, what is left of each, and a form per budget the caller may set.

Who sees a page is the API's rule (an agent: whoever sees it; a team: its owner, its
members and staff; the deployment: staff). A budget set here goes through the API's
checks and its one write (``budget_set_and_wake``): an agent's by whoever controls it, a
team's by its owner and staff, a person's and the deployment's by staff."""

from __future__ import annotations

from dataclasses import dataclass, field
from datetime import date, timedelta
from decimal import Decimal
from typing import Any

from django.contrib.auth.decorators import login_required
from django.core.exceptions import PermissionDenied
from django.db.models import Q, Sum
from django.http import HttpRequest, HttpResponse, HttpResponseBadRequest
from django.shortcuts import redirect, render
from django.views.decorators.http import require_http_methods
from rest_framework import exceptions

from markus.agents import permissions
from markus.agents.auth import controls_team
from markus.agents.models import Agent, Team
from markus.core.api import first_error
from markus.core.errors import MarkusError
from markus.core.input import whole_number
from markus.usage import api as usage_api
from markus.usage import budgets, selectors
from markus.usage.models import Budget, LLMCall
from markus.usage.serializers import BudgetInput
from markus.usage.services import budget_data

from . import usage_chart

DEFAULT_DAYS = 30  # the window a page opens with (?days=1 to selectors.MAX_DAYS)
Scope = Budget.Scope


@dataclass
class BudgetForm:
    """One budget that holds what the page shows: its limits now, and its form."""

    scope: str
    name: str  # "the agent ada", "the team core", "alice's agents outside a team", "the deployment"
    budget: Budget | None
    may_set: bool
    limits: list[dict[str, Any]] = field(default_factory=list)
    values: dict[str, Any] = field(default_factory=dict)  # the form's fields as shown
    error: str = ""

    def __post_init__(self) -> None:
        self.limits = [selectors.limit_data(limit) for limit in budgets.budget_gate(self.budget).limits]
        for limit in self.limits:
            limit["left"] = max(limit["limit"] - limit["used"], 0)
        data = budget_data(self.budget)
        if not self.values:
            self.values = {key: "" if data[key] is None else data[key] for key in ("dailyTokens", "monthlyCost")}


@dataclass(frozen=True)
class Subject:
    """What a usage page is about: its calls, its budgets, where it lives."""

    title: str
    calls: Any  # QuerySet[LLMCall]
    forms: list[BudgetForm]
    path: str
    agent: Agent | None = None
    team: Team | None = None


def _days(request: HttpRequest) -> int:
    days = whole_number(request.GET.get("days") or str(DEFAULT_DAYS))
    if days is None or not 1 <= days <= selectors.MAX_DAYS:
        raise ValueError(f"days must be a whole number from 1 to {selectors.MAX_DAYS}")
    return days


def _forms(request: HttpRequest, agent: Agent | None, team: Team | None) -> list[BudgetForm]:
    """The budgets that hold the page's subject, narrowest first, as ``budgets.budgets_of``
    orders them; each with whether the caller may set it (the POST checks again)."""
    user = request.user
    staff = bool(user.is_authenticated and user.is_staff)
    rows = {b.scope: b for b in Budget.objects.filter(_holding(agent, team)).select_related("user")}
    forms = []
    if agent is not None:
        may = permissions.may(request, "agents_partial_update", agent)
        forms.append(BudgetForm(Scope.AGENT, f"the agent {agent.name}", rows.get(Scope.AGENT), may))
    if team is not None:
        may = controls_team(user, team)
        forms.append(BudgetForm(Scope.TEAM, f"the team {team.name}", rows.get(Scope.TEAM), may))
    elif agent is not None and agent.owner is not None:
        person = rows.get(Scope.USER) or budgets.person_default(agent.owner)
        name = f"{agent.owner.username}'s agents outside a team"
        forms.append(BudgetForm(Scope.USER, name, person, staff))
    forms.append(BudgetForm(Scope.DEPLOYMENT, "the deployment", rows.get(Scope.DEPLOYMENT), staff))
    return forms


def _holding(agent: Agent | None, team: Team | None) -> Q:
    held = Q(scope=Scope.DEPLOYMENT)
    if agent is not None:
        held |= Q(agent_id=agent.id)
        if agent.team_id is None and agent.owner_id is not None:
            held |= Q(user_id=agent.owner_id)
    if team is not None:
        held |= Q(team_id=team.id)
    return held


def _per_day(calls: Any, days: list[date]) -> tuple[dict[date, tuple[int, int]], dict[date, float], float]:
    """Tokens (in, out) and cost per day in the window, and the month's cost before it."""
    report = selectors.usage_report(calls, days=len(days))
    tokens: dict[date, tuple[int, int]] = {}
    cost: dict[date, float] = {}
    for row in report["rows"]:
        day = date.fromisoformat(row["day"])
        tokens_in, tokens_out = tokens.get(day, (0, 0))
        tokens[day] = (tokens_in + row["inputTokens"], tokens_out + row["outputTokens"])
        cost[day] = cost.get(day, 0.0) + row["cost"]
    today, month = budgets.period_starts()
    start = today - timedelta(days=len(days) - 1)
    before = 0.0
    if month < start:
        spent = calls.filter(created_at__gte=month, created_at__lt=start).aggregate(cost=Sum("cost"))["cost"]
        before = float(spent or Decimal(0))
    return tokens, cost, before


def _page(request: HttpRequest, subject: Subject, *, status: int = 200) -> HttpResponse:
    try:
        days = _days(request)
    except ValueError as exc:
        return HttpResponseBadRequest(str(exc))
    today, _ = budgets.period_starts()
    window = usage_chart.window(days, today.date())
    report = selectors.usage_report(subject.calls, days=days)
    tokens, cost, before = _per_day(subject.calls, window)
    limits = [limit for form in subject.forms for limit in form.limits]
    context = {
        "subject": subject,
        "agent": subject.agent,
        "team": subject.team,
        "days": days,
        "report": report,
        "rows": sorted(report["rows"], key=lambda row: row["day"], reverse=True),  # the newest day first
        "charts": [
            usage_chart.tokens_chart(tokens, window, limits),
            usage_chart.cost_chart(cost, window, limits, before),
        ],
        "forms": subject.forms,
        "saved": request.GET.get("saved", ""),
        "nav": "teams" if subject.team is not None and subject.agent is None else "agents",
    }
    return render(request, "usage/usage.html", context, status=status)


def api_message(errors: Any) -> str:
    """The serializer's first message, naming its field, as the API's 400 says it."""
    for name, value in errors.items():
        message = first_error(value)
        return message if str(name) in message else f"{name}: {message}"
    return "invalid input"


def _limits(request: HttpRequest) -> dict[str, Any]:
    """The form's two fields as the API's ``budget`` body (empty: no limit): validated by
    ``BudgetInput``, its message raised as the API says it."""
    raw = {key: request.POST.get(key, "").strip() for key in ("dailyTokens", "monthlyCost")}
    data: dict[str, Any] = {key: value or None for key, value in raw.items()}
    if data["dailyTokens"] is not None and (tokens := whole_number(data["dailyTokens"])) is not None:
        data["dailyTokens"] = tokens
    body = BudgetInput(data=data)
    if not body.is_valid():
        raise MarkusError(f"budget: {api_message(body.errors)}")
    return dict(body.validated_data)


def _set(request: HttpRequest, subject: Subject, scope: str) -> None:
    """Set the ``scope`` budget of the page's subject with the API's check of that scope."""
    limits = _limits(request)
    agent, team = subject.agent, subject.team
    if scope == Scope.AGENT and agent is not None:
        permissions.check(request, "agents_partial_update", agent)
        usage_api.budget_set_and_wake(agent=agent, limits=limits)
    elif scope == Scope.TEAM and team is not None:
        usage_api.access_team(request, team.id, "teams_partial_update")
        usage_api.budget_set_and_wake(team=team, limits=limits)
    elif scope == Scope.USER and agent is not None and agent.team_id is None and agent.owner_id is not None:
        person = usage_api.access_person(request, str(agent.owner_id), "users_budget_partial_update")
        usage_api.budget_set_and_wake(user=person, limits=limits)
    elif scope == Scope.DEPLOYMENT:
        permissions.require_staff(request, "budgets_deployment_partial_update")
        usage_api.budget_set_and_wake(deployment=True, limits=limits)
    else:
        raise MarkusError(f"scope: no {scope[:20]!r} budget holds what this page shows")


def _usage(request: HttpRequest, subject: Subject) -> HttpResponse:
    """GET: the page. POST: set one budget (``scope``), then the page again (post/redirect/
    get); refused, the page with the form as typed and the API's message (400 or 403)."""
    if request.method == "GET":
        return _page(request, subject)
    scope = request.POST.get("scope", "")
    try:
        _set(request, subject, scope)
    except (MarkusError, PermissionDenied, exceptions.PermissionDenied) as exc:
        status = exc.status_code if isinstance(exc, MarkusError | exceptions.PermissionDenied) else 403
        message = str(exc.detail) if isinstance(exc, exceptions.PermissionDenied) else str(exc)
        for form in subject.forms:
            if form.scope == scope:
                form.values = {key: request.POST.get(key, "") for key in ("dailyTokens", "monthlyCost")}
                form.error = message
        return _page(request, subject, status=status)
    days = request.GET.get("days")
    return redirect(f"{subject.path}?{f'days={days}&' if days else ''}saved={scope}")


@require_http_methods(["GET", "POST"])
@login_required
def agent_usage(request: HttpRequest, agent_id: str) -> HttpResponse:
    agent = permissions.require(request, "page:agent-usage", agent_id)
    agent = Agent.objects.select_related("team", "owner").get(id=agent.id)
    subject = Subject(
        title=agent.name,
        calls=selectors.agent_calls(agent.id),
        forms=_forms(request, agent, agent.team),
        path=f"/agents/{agent.id}/usage/",
        agent=agent,
        team=agent.team,
    )
    return _usage(request, subject)


@require_http_methods(["GET", "POST"])
@login_required
def team_usage(request: HttpRequest, team_id: str) -> HttpResponse:
    team = usage_api.access_team(request, team_id, "teams_usage")
    subject = Subject(
        title=f"The team {team.name}",
        calls=selectors.team_calls(team.id),
        forms=_forms(request, None, team),
        path=f"/teams/{team.id}/usage/",
        team=team,
    )
    return _usage(request, subject)


@require_http_methods(["GET", "POST"])
@login_required
def deployment_usage(request: HttpRequest) -> HttpResponse:
    permissions.require_staff(request, "page:deployment-usage")
    subject = Subject(
        title="The deployment",
        calls=LLMCall.objects.all(),
        forms=_forms(request, None, None),
        path="/usage/",
    )
    return _usage(request, subject)
