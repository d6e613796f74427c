"""Budgets, checked before every LLM call: an agent's own and its team's, tokens per day
and cost per calendar month (the server's time zone). ``gate`` reads them (one statement
when neither is set, one more per budget); at a limit the call is refused
(``BudgetExhausted``) and the budget's owner is told once per period; past
``MARKUS["BUDGET_NEAR_SHARE"]`` of a limit the calls the loop may skip (heartbeats,
dreams) are refused too."""

from __future__ import annotations

from dataclasses import dataclass
from datetime import datetime
from decimal import Decimal

from django.conf import settings
from django.db.models import F, Q, Sum
from django.utils import timezone

from markus.agents.models import Agent, Team
from notifications.registry import NotificationType
from notifications.services import notify_user

from .models import Budget, LLMCall

DAILY_TOKENS = "dailyTokens"
MONTHLY_COST = "monthlyCost"


class BudgetExhausted(Exception):
    """An LLM call refused: the agent's or its team's budget is used up (or, for a call
    the loop may skip, nearly)."""

    def __init__(self, limit: Limit) -> None:
        super().__init__(limit.reason)
        self.limit = limit


@dataclass(frozen=True)
class Limit:
    """One limit of one budget and what is used of it in its current period."""

    budget_id: int
    scope: str  # agent | team
    scope_id: str
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
        what = f"the {self.scope} {self.scope_id} is {'used up' if self.exhausted else 'nearly used up'}"
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


def limits_of(budget: Budget, now: datetime) -> list[Limit]:
    """The budget's limits with what is used of each in its period (one statement)."""
    day, month = period_starts(now)
    scope, scope_id = ("agent", budget.agent_id) if budget.agent_id else ("team", budget.team_id)
    calls = LLMCall.objects.filter(**{f"{scope}_id": scope_id})
    since = month if budget.monthly_cost is not None else day
    used = calls.filter(created_at__gte=since).aggregate(
        tokens=Sum(F("input_tokens") + F("output_tokens"), filter=Q(created_at__gte=day)),
        cost=Sum("cost"),
    )
    limits = []
    # The month first: once it is used up it says so all month (one notification).
    if budget.monthly_cost is not None:
        cost = Decimal(used["cost"] or 0)
        limits.append(
            Limit(budget.pk, scope, str(scope_id), MONTHLY_COST, budget.monthly_cost, cost, month.strftime("%Y-%m"))
        )
    if budget.daily_tokens is not None:
        tokens = Decimal(used["tokens"] or 0)
        limits.append(
            Limit(
                budget.pk,
                scope,
                str(scope_id),
                DAILY_TOKENS,
                Decimal(budget.daily_tokens),
                tokens,
                day.date().isoformat(),
            )
        )
    return limits


def budgets_of(agent_id: str) -> list[Budget]:
    """The agent's own budget and its team's (one statement)."""
    return list(Budget.objects.filter(Q(agent_id=agent_id) | Q(team__agents__id=agent_id)).order_by("team_id"))


def gate(agent_id: str, *, now: datetime | None = None) -> Gate:
    now = now or timezone.now()
    limits: list[Limit] = []
    for budget in budgets_of(agent_id):
        if budget.daily_tokens is None and budget.monthly_cost is None:
            continue
        limits += limits_of(budget, now)
    return Gate(tuple(limits))


def team_gate(team_id: str, *, now: datetime | None = None) -> Gate:
    budget = Budget.objects.filter(team_id=team_id).first()
    return Gate(tuple(limits_of(budget, now or timezone.now()))) if budget is not None else Gate()


def agent_gate_own(agent_id: str, *, now: datetime | None = None) -> Gate:
    budget = Budget.objects.filter(agent_id=agent_id).first()
    return Gate(tuple(limits_of(budget, now or timezone.now()))) if budget is not None else Gate()


def check_call(agent_id: str, *, skippable: bool = False) -> None:
    """Before an LLM call: raise BudgetExhausted if a budget refuses it (and tell the
    budget's owner, once per period, when a limit is reached)."""
    refused = gate(agent_id).refusal(skippable=skippable)
    if refused is None:
        return
    if refused.exhausted:
        tell_owner(refused)
    raise BudgetExhausted(refused)


def tell_owner(limit: Limit) -> bool:
    """The ``budget_exhausted`` notification to the budget's owner (the agent's owner,
    the team's owner), at most once per period: the conditional UPDATE of the budget's
    ``notified_period`` decides who sends it. True if this call sent it."""
    claimed = Budget.objects.filter(pk=limit.budget_id).exclude(notified_period=limit.period)
    if not claimed.update(notified_period=limit.period):
        return False
    if limit.scope == "agent":
        agent = Agent.objects.select_related("owner").filter(id=limit.scope_id).first()
        owner, path = (agent.owner, f"/agents/{agent.id}/mind/") if agent is not None else (None, "")
    else:
        team = Team.objects.select_related("owner").filter(id=limit.scope_id).first()
        owner, path = (team.owner, "/agents/") if team is not None else (None, "")
    if owner is None:
        return True
    notify_user(
        user=owner,
        type=NotificationType.BUDGET_EXHAUSTED,
        title=f"Budget used up: {limit.scope} {limit.scope_id}",
        body=f"{limit.reason[0].upper()}{limit.reason[1:]}. Its agents take no LLM work until the budget is raised "
        "or the next period begins; their items wait in the queue.",
        action_target={"path": path},
        metadata={"scope": limit.scope, "scopeId": limit.scope_id, "kind": limit.kind, "period": limit.period},
    )
    return True
