"""Budgets with no back door (issue 35, point 4): an agent outside any team counts against
its owner's person budget (their own, or the default from settings), and the deployment's
budget holds every agent. A member whose team budget is spent gets nowhere with a teamless
agent made on the spot: its LLM call is refused and the person is told once."""

from __future__ import annotations

from datetime import UTC, datetime

import pytest
import time_machine
from django.db import connection
from django.test.utils import CaptureQueriesContext

from attention import loop
from markus.agents.services import agent_create
from markus.usage import budgets
from markus.usage.models import LLMCall
from markus.usage.services import budget_set
from notifications.models import UserNotification
from notifications.registry import NotificationType

from .conftest import PER_CALL, llm_requests, notices, statuses

pytestmark = pytest.mark.django_db(transaction=True)
T0 = datetime(2026, 12, 2, 10, 0, tzinfo=UTC)


def exhausted_notices(user) -> list[UserNotification]:
    return list(UserNotification.objects.filter(user=user, type=NotificationType.BUDGET_EXHAUSTED).order_by("id"))


def teamless(owner, agent_id: str):
    return agent_create(name=agent_id.title(), role="engineer", owner=owner, agent_id=agent_id)[0]


def test_a_members_teamless_agent_stops_when_his_person_budget_is_spent_and_he_is_told_once(
    agent, team, bob, alice, stub
):
    with time_machine.travel(T0, tick=True):
        budget_set(team=team, limits={"dailyTokens": 0})  # the team's budget is spent
        budget_set(user=bob, limits={"dailyTokens": 2 * PER_CALL})
        side = teamless(bob, "side")
        notices(side, 3)

        result = loop.run_attention(side.id, budget=10)
        again = loop.run_attention(side.id, budget=10)

        assert result.status == again.status == "blocked"
        assert llm_requests(stub) == 2
        assert statuses(side) == {"completed": 2, "queued": 1}
        assert set(LLMCall.objects.values_list("team_id", flat=True)) == {None}
        [told] = exhausted_notices(bob)
        assert told.metadata == {"scope": "user", "scopeId": str(bob.pk), "kind": "dailyTokens", "period": "2026-12-02"}
        assert "daily token budget of the person bob" in told.body.lower()
        assert exhausted_notices(alice) == []


def test_the_default_person_budget_from_settings_holds_all_of_a_persons_teamless_agents(
    agent, bob, charlie, stub, settings, monkeypatch
):
    monkeypatch.setitem(settings.MARKUS, "BUDGET_PERSON_DAILY_TOKENS", 3 * PER_CALL)
    with time_machine.travel(T0, tick=True):
        one, two = teamless(bob, "one"), teamless(bob, "two")
        budget_set(user=charlie, limits={"dailyTokens": None})  # a row of his own: no limit
        free = teamless(charlie, "free")
        for worker in (one, two, free):
            notices(worker, 2)
        notices(agent, 4)  # alice's agent is in a team: no person budget holds it

        loop.run_attention(one.id, budget=10)
        blocked = loop.run_attention(two.id, budget=10)
        loop.run_attention(free.id, budget=10)
        loop.run_attention(agent.id, budget=10)

        assert blocked.status == "blocked"
        assert statuses(one) == {"completed": 2} and statuses(two) == {"completed": 1, "queued": 1}
        assert statuses(free) == {"completed": 2} and statuses(agent) == {"completed": 4}
        [told] = exhausted_notices(bob)
        assert told.metadata["scope"] == "user" and told.metadata["scopeId"] == str(bob.pk)
        assert loop.run_attention(two.id, budget=10).status == "blocked"
        assert len(exhausted_notices(bob)) == 1


def test_the_deployment_budget_stops_every_agent_and_each_staff_member_is_told_once(
    agent, alice, charlie, stub, django_user_model
):
    root = django_user_model.objects.create_user("root", password="x", is_staff=True)
    ops = django_user_model.objects.create_user("ops", password="x", is_staff=True)
    with time_machine.travel(T0, tick=True):
        budget_set(deployment=True, limits={"dailyTokens": 3 * PER_CALL})
        zed = teamless(charlie, "zed")
        notices(agent, 2)
        notices(zed, 2)

        loop.run_attention(agent.id, budget=10)
        result = loop.run_attention(zed.id, budget=10)
        loop.run_attention(agent.id, budget=10)

        assert result.status == "blocked"
        assert llm_requests(stub) == 3
        assert statuses(zed) == {"completed": 1, "queued": 1}
        for person in (root, ops):
            [told] = exhausted_notices(person)
            assert told.metadata["scope"] == "deployment"
            assert "daily token budget of the deployment is used up" in told.body.lower()
        assert exhausted_notices(alice) == exhausted_notices(charlie) == []
        status = budgets.gate(agent.id)
        assert status.blocked is not None and status.blocked.scope == "deployment"


def test_the_gate_reads_the_budgets_in_one_statement_and_one_more_per_budget(agent, bob, settings, monkeypatch):
    side = teamless(bob, "side")

    def count(agent_id: str) -> int:
        with CaptureQueriesContext(connection) as queries:
            budgets.gate(agent_id)
        return len(queries)

    assert count(side.id) == 1  # no budget, no default
    budget_set(deployment=True, limits={"dailyTokens": 10**6})
    budget_set(user=bob, limits={"monthlyCost": 5})
    assert count(side.id) == 3  # the budgets, the deployment's use, bob's
    assert count(agent.id) == 2  # the budgets, the deployment's use (ada is in a team)
    monkeypatch.setitem(settings.MARKUS, "BUDGET_PERSON_DAILY_TOKENS", 10**6)
    budget_set(user=bob, limits={"monthlyCost": None})
    carl = teamless(agent.owner, "carl")  # alice: no row of her own, the default holds
    assert count(carl.id) == 4  # the budgets, the agent's owner, the deployment's use, alice's
    assert [limit.scope for limit in budgets.gate(carl.id).limits] == ["user", "deployment"]
