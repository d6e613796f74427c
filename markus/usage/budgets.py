"""Budgets, checked before every LLM call: an agent's own, its team's (an agent outside
any team: its owner's person budget, their own row or the default
``MARKUS["BUDGET_PERSON_DAILY_TOKENS"]``, ``["BUDGET_PERSON_MONTHLY_COST"]``) and the
deployment's; tokens per day and cost per calendar month (the server's time zone).
``gate`` reads them: one statement when none is set (one more to find a teamless agent's
owner when a default per person is set and the owner has no row), one more per budget.
At a limit the call is refused (``BudgetExhausted``) and the budget's people are told
once per period; past ``MARKUS["BUDGET_NEAR_SHARE"]`` of a limit the calls the loop may
skip (heartbeats, dreams) are refused too."""

from __future__ import annotations

from dataclasses import dataclass
from datetime import datetime
from decimal import Decimal

from django.conf import settings
from django.contrib.auth.models import User
from django.db.models import F, Q, QuerySet, Sum
from django.utils import timezone

from markus.agents.models import Agent, Team
from notifications.registry import NotificationType
from notifications.services import notify_user

from .models import Budget, BudgetNotice, LLMCall

DAILY_TOKENS = "dailyTokens"
MONTHLY_COST = "monthlyCost"
Scope = Budget.Scope
# The order a gate reads its budgets in, narrowest first: a refusal names the nearest.
ORDER = [Scope.AGENT, Scope.TEAM, Scope.USER, Scope.DEPLOYMENT]


class BudgetExhausted(Exception):
    """An LLM call refused: a budget that holds the agent is used up (or, for a call the
    loop may skip, nearly)."""

    def __init__(self, limit: Limit) -> None:
        super().__init__(limit.reason)
        self.limit = limit


@dataclass(frozen=True)
class Limit:
    """One limit of one budget and what is used of it in its current period."""

    scope: str  # agent | team | user | deployment
    scope_id: str  # the agent's, the team's or the person's id; "" for the deployment
    name: str  # the budget's holder as the reason says it: "the agent ada", "the deployment"
    kind: str  # dailyTokens | monthlyCost
    limit: Decimal
    used: Decimal
    period: str  # 2026-12-02 (a day) or 2026-12 (a month)

    @property
    def share(self) -> float:
        return float(self.used / self.limit) if self.limit > 0 else 1.0

    @property
    def exhausted(self) -> bool:
        return self.used >= self.limit

    @property
    def reason(self) -> str:
        what = f"{self.name} is {'used up' if self.exhausted else 'nearly used up'}"
        if self.kind == DAILY_TOKENS:
            return f"the daily token budget of {what}: {int(self.used)} of {int(self.limit)} tokens today"
        return f"the monthly cost budget of {what}: ${self.used:.4f} of ${self.limit:.2f} this month"


@dataclass(frozen=True)
class Gate:
    """What the budgets say before a call: ``blocked`` (a limit reached) or ``near``
    (a limit past the near share), each the limit that says so, or None."""

    limits: tuple[Limit, ...] = ()

    @property
    def blocked(self) -> Limit | None:
        return next((limit for limit in self.limits if limit.exhausted), None)

    @property
    def near(self) -> Limit | None:
        share = float(settings.MARKUS["BUDGET_NEAR_SHARE"])
        return next((limit for limit in self.limits if limit.share >= share), None)

    def refusal(self, *, skippable: bool) -> Limit | None:
        """The limit that refuses a call (``skippable``: a heartbeat's or a dream's,
        refused from the near share on), or None."""
        return self.blocked or (self.near if skippable else None)


def period_starts(now: datetime | None = None) -> tuple[datetime, datetime]:
    """The start of today and of this month, in the server's time zone."""
    local = timezone.localtime(now or timezone.now())
    day = local.replace(hour=0, minute=0, second=0, microsecond=0)
    return day, day.replace(day=1)


def holder(budget: Budget) -> tuple[str, str]:
    """The budget's scope id and its name in a reason (a person's: ``budget.user`` is read)."""
    if budget.scope == Scope.AGENT:
        return str(budget.agent_id), f"the agent {budget.agent_id}"
    if budget.scope == Scope.TEAM:
        return str(budget.team_id), f"the team {budget.team_id}"
    if budget.scope == Scope.USER:
        return str(budget.user_id), f"the person {budget.user.username if budget.user else budget.user_id}"
    return "", "the deployment"


def calls_of(scope: str, scope_id: str) -> QuerySet[LLMCall]:
    """The calls a budget counts: a person's are those their agents made outside any team."""
    if scope == Scope.AGENT:
        return LLMCall.objects.filter(agent_id=scope_id)
    if scope == Scope.TEAM:
        return LLMCall.objects.filter(team_id=scope_id)
    if scope == Scope.USER:
        return LLMCall.objects.filter(team__isnull=True, agent__owner_id=int(scope_id))
    return LLMCall.objects.all()


def limits_of(budget: Budget, now: datetime) -> list[Limit]:
    """The budget's limits with what is used of each in its period (one statement; none
    when it has no limit)."""
    if budget.daily_tokens is None and budget.monthly_cost is None:
        return []
    day, month = period_starts(now)
    scope_id, name = holder(budget)
    since = month if budget.monthly_cost is not None else day
    used = (
        calls_of(budget.scope, scope_id)
        .filter(created_at__gte=since)
        .aggregate(
            tokens=Sum(F("input_tokens") + F("output_tokens"), filter=Q(created_at__gte=day)),
            cost=Sum("cost"),
        )
    )
    limits = []
    # The month first: once it is used up it says so all month (one notification).
    if budget.monthly_cost is not None:
        cost = Decimal(used["cost"] or 0)
        limits.append(
            Limit(budget.scope, scope_id, name, MONTHLY_COST, budget.monthly_cost, cost, month.strftime("%Y-%m"))
        )
    if budget.daily_tokens is not None:
        tokens = Decimal(used["tokens"] or 0)
        limits.append(
            Limit(
                budget.scope,
                scope_id,
                name,
                DAILY_TOKENS,
                Decimal(budget.daily_tokens),
                tokens,
                day.date().isoformat(),
            )
        )
    return limits


def default_limits() -> tuple[int | None, Decimal | None]:
    """The default per person: tokens per day, USD per month (empty or 0: none)."""
    daily = settings.MARKUS["BUDGET_PERSON_DAILY_TOKENS"] or None
    cost = settings.MARKUS["BUDGET_PERSON_MONTHLY_COST"] or None
    return daily, Decimal(str(cost)) if cost else None


def person_default(user: User) -> Budget | None:
    """The default budget of a person without a row of their own (not saved), or None
    when the settings set none."""
    daily, cost = default_limits()
    if daily is None and cost is None:
        return None
    return Budget(scope=Scope.USER, user=user, daily_tokens=daily, monthly_cost=cost)


def person_budget(user: User) -> Budget | None:
    """The budget that holds a person's teamless agents: their row, else the default."""
    return Budget.objects.filter(user=user).select_related("user").first() or person_default(user)


def budgets_of(agent_id: str) -> list[Budget]:
    """The budgets that hold the agent, narrowest first: its own, its team's or (outside
    any team) its owner's, and the deployment's. One statement; one more to find its
    owner when a default per person is set and the owner has no row."""
    rows = list(
        Budget.objects.filter(
            Q(agent_id=agent_id)
            | Q(team__agents__id=agent_id)
            | Q(user__agents__id=agent_id, user__agents__team__isnull=True)
            | Q(scope=Scope.DEPLOYMENT)
        ).select_related("user")
    )
    if any(default_limits()) and not any(budget.scope == Scope.USER for budget in rows):
        agent = Agent.objects.select_related("owner").filter(id=agent_id, team=None, owner__isnull=False).first()
        default = person_default(agent.owner) if agent is not None and agent.owner is not None else None
        rows += [default] if default is not None else []
    return sorted(rows, key=lambda budget: ORDER.index(Scope(budget.scope)))


def held_sql(agent_id: str) -> tuple[str, list[str]]:
    """An SQL condition and its parameters: does a budget with a limit hold the agent
    (``budgets_of``'s rule: its own, its team's, outside any team its owner's, the
    deployment's)? With a default per person set, a teamless agent's owner without a row
    of their own holds it by that default. The lease's take answers it in its own
    statement (``attention.lease_take``), so a run of an agent that no budget holds does not
    read them."""
    budgets, agents = Budget._meta.db_table, Agent._meta.db_table
    sql = (
        f"EXISTS (SELECT 1 FROM {budgets} WHERE (daily_tokens IS NOT NULL OR monthly_cost IS NOT NULL)"
        f" AND (scope = '{Scope.DEPLOYMENT.value}' OR agent_id = %s"
        f" OR team_id = (SELECT team_id FROM {agents} WHERE id = %s)"
        f" OR user_id = (SELECT owner_id FROM {agents} WHERE id = %s AND team_id IS NULL)))"
    )
    if not any(default_limits()):
        return sql, [agent_id, agent_id, agent_id]
    by_default = (  # ``budgets_of``'s default: a teamless agent's owner with no row
        f"EXISTS (SELECT 1 FROM {agents} WHERE id = %s AND team_id IS NULL AND owner_id IS NOT NULL"
        f" AND NOT EXISTS (SELECT 1 FROM {budgets} WHERE user_id = {agents}.owner_id))"
    )
    return f"({sql} OR {by_default})", [agent_id, agent_id, agent_id, agent_id]


def gate(agent_id: str, *, now: datetime | None = None) -> Gate:
    now = now or timezone.now()
    return Gate(tuple(limit for budget in budgets_of(agent_id) for limit in limits_of(budget, now)))


def budget_gate(budget: Budget | None, *, now: datetime | None = None) -> Gate:
    """What one budget says now (a team's, a person's, the deployment's answers)."""
    return Gate(tuple(limits_of(budget, now or timezone.now()))) if budget is not None else Gate()


def check_call(agent_id: str, *, skippable: bool = False) -> None:
    """Before an LLM call: raise BudgetExhausted if a budget refuses it (and tell the
    budget's people, once per period, when a limit is reached)."""
    refused = gate(agent_id).refusal(skippable=skippable)
    if refused is None:
        return
    if refused.exhausted:
        tell_owner(refused)
    raise BudgetExhausted(refused)


def people_of(limit: Limit) -> tuple[list[User], str]:
    """Who is told that a budget is used up, and where their notification leads: the
    agent's owner, the team's owner, the person, every active staff member for the
    deployment's."""
    if limit.scope == Scope.AGENT:
        agent = Agent.objects.select_related("owner").filter(id=limit.scope_id).first()
        owner = agent.owner if agent is not None else None
        return ([owner] if owner is not None else []), f"/agents/{limit.scope_id}/mind/"
    if limit.scope == Scope.TEAM:
        team = Team.objects.select_related("owner").filter(id=limit.scope_id).first()
        return ([team.owner] if team is not None else []), "/agents/"
    if limit.scope == Scope.USER:
        return list(User.objects.filter(pk=limit.scope_id, is_active=True)), "/agents/"
    return list(User.objects.filter(is_staff=True, is_active=True).order_by("pk")), "/admin/dashboard/"


def tell_owner(limit: Limit) -> bool:
    """The ``budget_exhausted`` notification to the budget's people (``people_of``), at
    most once per period: inserting its ``BudgetNotice`` decides who sends it. True if
    this call sent it."""
    _, claimed = BudgetNotice.objects.get_or_create(scope=limit.scope, scope_id=limit.scope_id, period=limit.period)
    if not claimed:
        return False
    people, path = people_of(limit)
    for person in people:
        notify_user(
            user=person,
            type=NotificationType.BUDGET_EXHAUSTED,
            title=f"Budget used up: {limit.name}",
            body=f"{limit.reason[0].upper()}{limit.reason[1:]}. The agents it holds take no LLM work until the "
            "budget is raised or the next period begins; their items wait in the queue.",
            action_target={"path": path},
            metadata={"scope": limit.scope, "scopeId": limit.scope_id, "kind": limit.kind, "period": limit.period},
        )
    return True
