"""The writes of usage and budgets: ``record_call`` after every LLM call, ``budget_set``
from the API and the admin."""

from __future__ import annotations

from dataclasses import dataclass, field
from datetime import datetime
from decimal import Decimal
from typing import Any

from django.contrib.auth.models import User
from django.db import connection, transaction
from django.utils import timezone

from markus.agents.models import Agent, Team
from markus.llm.base import Provider, Usage

from .models import Budget, LLMCall
from .prices import cost_of


def model_of(provider: Provider, requested: str = "") -> str:
    """The model a call went to: the one it asked for, the provider's configured one, or
    (the offline brain, the scripted one) the provider's name."""
    return requested or str(getattr(provider, "model", "") or provider.name)


@dataclass(frozen=True)
class Call:
    """One LLM call to record (``record_calls``)."""

    agent_id: str
    model: str
    scenario: str
    usage: Usage
    mailbox_item_id: str = ""
    at: datetime = field(default_factory=timezone.now)
    #: Why the call failed ("" when answered); its usage then estimated from the request.
    error: str = ""
    estimated: bool = False


_COLUMNS = ["agent_id", "team_id", "model", "scenario", "input_tokens", "output_tokens", "cached_tokens"]
_COLUMNS += ["cost", "mailbox_item_id", "created_at", "error", "estimated"]


# The most calls one INSERT carries: SQLite joins at most 500 SELECTs in a compound
# statement (PostgreSQL's limit, 65,535 parameters, is 5,461 calls).
CALLS_PER_STATEMENT = 500


def record_calls(calls: list[Call]) -> None:
    """One row per LLM call, its team the agent's at this moment, its cost from the
    prices, all in one INSERT … SELECT (each agent's team read in the same statement),
    one per CALLS_PER_STATEMENT calls. Not ``bulk_create``: it wraps its INSERT in a
    transaction of its own (BEGIN and COMMIT: 3 statements, not 1, after every network
    call) and fails on a deleted agent's call, which this one drops."""
    for start in range(0, len(calls), CALLS_PER_STATEMENT):
        _insert(calls[start : start + CALLS_PER_STATEMENT])


def _insert(calls: list[Call]) -> None:
    meta, qn, ops = LLMCall._meta, connection.ops.quote_name, connection.ops
    selects, params = [], []
    for call in calls:
        usage = call.usage
        values: list[Any] = [
            call.model[:200],
            call.scenario[:64] or "unknown",
            max(0, usage.prompt_tokens),
            max(0, usage.completion_tokens),
            max(0, usage.cached),
            ops.adapt_decimalfield_value(cost_of(call.model, usage), 14, 6),
            call.mailbox_item_id[:64],
            ops.adapt_datetimefield_value(call.at),
            call.error[:300],
            call.estimated,
        ]
        selects.append(
            f"SELECT id, team_id, {', '.join(['%s'] * len(values))} FROM {qn(Agent._meta.db_table)} WHERE id = %s"
        )
        params += [*values, call.agent_id]
    sql = f"INSERT INTO {qn(meta.db_table)} ({', '.join(qn(c) for c in _COLUMNS)}) {' UNION ALL '.join(selects)}"
    with connection.cursor() as cursor:
        cursor.execute(sql, params)


def record_call(*, agent_id: str, model: str, scenario: str, usage: Usage | None, mailbox_item_id: str = "") -> None:
    record_calls([Call(agent_id, model, scenario, usage or Usage(), mailbox_item_id)])


def _decimal(value: Any) -> Decimal | None:
    return None if value is None else Decimal(str(value))


@transaction.atomic
def budget_set(
    *,
    agent: Agent | None = None,
    team: Team | None = None,
    user: User | None = None,
    deployment: bool = False,
    limits: dict[str, Any],
) -> Budget:
    """Set the limits sent (``dailyTokens``, ``monthlyCost``; null: no limit) of the
    budget of one scope: the agent's, the team's, the person's (their row: the default
    holds them no more) or the deployment's; the others stay. A budget raised above what
    is used lets the agents work again: the caller wakes them (``covered_agents``)."""
    scopes = {Budget.Scope.AGENT: agent, Budget.Scope.TEAM: team, Budget.Scope.USER: user}
    chosen = [scope for scope, value in scopes.items() if value is not None]
    assert len(chosen) + deployment == 1, "one scope"
    scope = chosen[0] if chosen else Budget.Scope.DEPLOYMENT
    budget, _ = Budget.objects.select_for_update().get_or_create(scope=scope, agent=agent, team=team, user=user)
    if "dailyTokens" in limits:
        budget.daily_tokens = limits["dailyTokens"]
    if "monthlyCost" in limits:
        budget.monthly_cost = _decimal(limits["monthlyCost"])
    budget.updated_at = timezone.now()
    budget.save(update_fields=["daily_tokens", "monthly_cost", "updated_at"])
    return budget


def budget_data(budget: Budget | None) -> dict[str, Any]:
    if budget is None:
        return {"dailyTokens": None, "monthlyCost": None}
    return {
        "dailyTokens": budget.daily_tokens,
        "monthlyCost": float(budget.monthly_cost) if budget.monthly_cost is not None else None,
    }
