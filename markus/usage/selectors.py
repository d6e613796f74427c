"""Reads of usage: per day and model for an agent or a team, and the totals the panels
show."""

from __future__ import annotations

from datetime import datetime, timedelta
from decimal import Decimal
from typing import Any

from django.db.models import Count, F, Q, QuerySet, Sum
from django.db.models.functions import TruncDate
from django.utils import timezone

from markus.agents.models import Agent

from .budgets import Gate, Limit, gate, holder, limits_of, period_starts
from .models import Budget, LLMCall

#: The longest window ``GET …/usage?days=N`` answers.
MAX_DAYS = 92


def _rows(calls: QuerySet[LLMCall], days: int, now: datetime) -> list[dict[str, Any]]:
    today, _ = period_starts(now)
    since = today - timedelta(days=days - 1)
    grouped = (
        calls.filter(created_at__gte=since)
        .annotate(day=TruncDate("created_at", tzinfo=timezone.get_current_timezone()))
        .values("day", "model")
        .annotate(
            calls=Count("id"),
            input=Sum("input_tokens"),
            output=Sum("output_tokens"),
            cached=Sum("cached_tokens"),
            cost=Sum("cost"),
            failed=Count("id", filter=~Q(error="")),
            estimated=Sum("input_tokens", filter=Q(estimated=True)),
        )
        .order_by("day", "model")
    )
    return [
        {
            "day": row["day"].isoformat(),
            "model": row["model"],
            "calls": row["calls"],
            "inputTokens": row["input"] or 0,
            "outputTokens": row["output"] or 0,
            "cachedTokens": row["cached"] or 0,
            "cost": float(row["cost"] or Decimal(0)),
            # Calls the provider did not answer (a timeout, a cut stream …), and the input
            # tokens counted from their requests because the provider said nothing.
            "failedCalls": row["failed"] or 0,
            "estimatedInputTokens": row["estimated"] or 0,
        }
        for row in grouped
    ]


def _totals(rows: list[dict[str, Any]]) -> dict[str, Any]:
    keys = ("calls", "inputTokens", "outputTokens", "cachedTokens", "failedCalls", "estimatedInputTokens")
    totals: dict[str, Any] = {key: sum(r[key] for r in rows) for key in keys}
    totals["cost"] = round(sum(r["cost"] for r in rows), 6)
    return totals


def limit_data(limit: Limit) -> dict[str, Any]:
    number = int if limit.kind == "dailyTokens" else float
    return {
        "scope": limit.scope,
        "scopeId": limit.scope_id,
        "kind": limit.kind,
        "limit": number(limit.limit),
        "used": number(limit.used),
        "period": limit.period,
        "exhausted": limit.exhausted,
    }


def gate_data(gate: Gate) -> dict[str, Any]:
    """What the budgets say now: ``blocked`` (takes no LLM work), ``near`` (heartbeats
    and dreams skipped), the reason, and each limit's use."""
    blocked, near = gate.blocked, gate.near
    says = blocked or near
    return {
        "blocked": blocked is not None,
        "near": near is not None,
        "reason": says.reason if says is not None else None,
        "limits": [limit_data(limit) for limit in gate.limits],
    }


def usage_report(calls: QuerySet[LLMCall], *, days: int, now: datetime | None = None) -> dict[str, Any]:
    now = now or timezone.now()
    rows = _rows(calls, days, now)
    return {"days": days, "rows": rows, "totals": _totals(rows)}


def agent_calls(agent_id: str) -> QuerySet[LLMCall]:
    return LLMCall.objects.filter(agent_id=agent_id)


def team_calls(team_id: str) -> QuerySet[LLMCall]:
    return LLMCall.objects.filter(team_id=team_id)


def today_by_agent(now: datetime | None = None) -> list[dict[str, Any]]:
    """Today's tokens, calls and cost per agent (the console's panel), most tokens first."""
    today, _ = period_starts(now)
    rows = (
        LLMCall.objects.filter(created_at__gte=today)
        .values("agent_id", "agent__name")
        .annotate(
            calls=Count("id"),
            tokens=Sum(F("input_tokens") + F("output_tokens")),
            cached=Sum("cached_tokens"),
            cost=Sum("cost"),
        )
        .order_by("-tokens", "agent_id")
    )
    return [
        {
            "id": r["agent_id"],
            "name": r["agent__name"],
            "calls": r["calls"],
            "tokens": r["tokens"] or 0,
            "cached": r["cached"] or 0,
            "cost": float(r["cost"] or 0),
        }
        for r in rows
    ]


def budget_rows(now: datetime | None = None) -> list[dict[str, Any]]:
    """Every budget with its limits' use now, those used up first (the console's panel)."""
    now = now or timezone.now()
    rows = []
    for budget in Budget.objects.select_related("agent", "team", "user").order_by("scope", "id"):
        read = Gate(tuple(limits_of(budget, now)))
        says = read.blocked or read.near
        scope_id, _ = holder(budget)
        holding = budget.agent or budget.team
        rows.append(
            {
                "scope": budget.scope,
                "id": scope_id,
                "name": holding.name if holding else budget.user.username if budget.user else "",
                "limits": [limit_data(limit) for limit in read.limits],
                "blocked": read.blocked is not None,
                "reason": says.reason if says is not None else "",
            }
        )
    return sorted(rows, key=lambda r: not r["blocked"])


def covered_agents(budget: Budget) -> QuerySet[Agent]:
    """The agents a budget holds (those a raised budget wakes)."""
    if budget.scope == Budget.Scope.AGENT:
        return Agent.objects.filter(id=budget.agent_id)
    if budget.scope == Budget.Scope.TEAM:
        return Agent.objects.filter(team_id=budget.team_id)
    if budget.scope == Budget.Scope.USER:
        return Agent.objects.filter(owner_id=budget.user_id, team=None)
    return Agent.objects.all()


def agent_panel(agent_id: str, now: datetime | None = None) -> dict[str, Any]:
    """The mind view's panel: the agent's calls, tokens and cost today and this month, and
    what its budgets say now (why it takes no LLM work, when it does not)."""
    now = now or timezone.now()
    today, month = period_starts(now)
    used = LLMCall.objects.filter(agent_id=agent_id, created_at__gte=month).aggregate(
        n_calls=Count("id", filter=Q(created_at__gte=today)),
        n_tokens=Sum(F("input_tokens") + F("output_tokens"), filter=Q(created_at__gte=today)),
        n_cached=Sum("cached_tokens", filter=Q(created_at__gte=today)),
        day_cost=Sum("cost", filter=Q(created_at__gte=today)),
        month_cost=Sum("cost"),
    )
    return {
        "today": {
            "calls": used["n_calls"] or 0,
            "tokens": used["n_tokens"] or 0,
            "cached": used["n_cached"] or 0,
            "cost": float(used["day_cost"] or 0),
        },
        "month_cost": float(used["month_cost"] or 0),
        "status": gate_data(gate(agent_id, now=now)),
    }
