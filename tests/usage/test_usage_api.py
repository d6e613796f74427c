"""GET /api/agents/{id}/usage and GET /api/teams/{id}/usage: the calls per day and model
(tokens in, out and cached, calls, cost from the prices), within a stated window, for
those who may see the agent or the team; PATCH budget validation."""

from __future__ import annotations

from datetime import UTC, datetime, timedelta

import pytest
import time_machine

from attention import loop
from markus.usage.services import budget_set

from .conftest import COST_PER_CALL, PER_CALL, notices

pytestmark = pytest.mark.django_db(transaction=True)
T0 = datetime(2026, 12, 2, 10, 0, tzinfo=UTC)


def test_the_agent_usage_counts_each_day_and_model_with_cached_tokens_and_cost(agent, alice_client, stub):
    with time_machine.travel(T0, tick=True) as traveller:
        notices(agent, 2)
        loop.run_attention(agent.id, budget=10)
        traveller.shift(timedelta(days=1))
        notices(agent, 1)
        loop.run_attention(agent.id, budget=10)

        body = alice_client.get(f"/api/agents/{agent.id}/usage", {"days": 7}).json()

    assert body["agentId"] == agent.id and body["days"] == 7
    rows = [
        {k: r[k] for k in ("day", "model", "calls", "inputTokens", "outputTokens", "cachedTokens")}
        for r in body["rows"]
    ]
    assert rows == [
        {
            "day": "2026-12-02",
            "model": "stub-model",
            "calls": 2,
            "inputTokens": 200,
            "outputTokens": 40,
            "cachedTokens": 80,
        },
        {
            "day": "2026-12-03",
            "model": "stub-model",
            "calls": 1,
            "inputTokens": 100,
            "outputTokens": 20,
            "cachedTokens": 40,
        },
    ]
    assert [r["cost"] for r in body["rows"]] == pytest.approx([2 * COST_PER_CALL, COST_PER_CALL])
    assert body["totals"]["calls"] == 3
    assert body["totals"]["cost"] == pytest.approx(3 * COST_PER_CALL)
    assert body["budget"] == {"dailyTokens": None, "monthlyCost": None}
    assert body["budgetStatus"] == {"blocked": False, "near": False, "reason": None, "limits": []}


def test_the_window_is_bounded_and_counts_back_from_today(agent, alice_client, stub):
    with time_machine.travel(T0, tick=True) as traveller:
        notices(agent, 1)
        loop.run_attention(agent.id, budget=10)
        traveller.shift(timedelta(days=3))

        assert alice_client.get(f"/api/agents/{agent.id}/usage", {"days": 3}).json()["rows"] == []
        assert len(alice_client.get(f"/api/agents/{agent.id}/usage", {"days": 4}).json()["rows"]) == 1
        for bad in ("0", "93", "x"):
            refused = alice_client.get(f"/api/agents/{agent.id}/usage", {"days": bad})
            assert refused.status_code == 400, bad
            assert "days" in refused.json()["detail"]


def test_the_budget_status_says_why_the_agent_waits(agent, alice_client, stub):
    with time_machine.travel(T0, tick=True):
        budget_set(agent=agent, limits={"dailyTokens": PER_CALL})
        notices(agent, 2)
        loop.run_attention(agent.id, budget=10)

        status = alice_client.get(f"/api/agents/{agent.id}/usage").json()["budgetStatus"]

    assert status["blocked"] is True
    assert "daily token budget of the agent ada is used up: 120 of 120" in status["reason"]
    assert status["limits"] == [
        {
            "scope": "agent",
            "scopeId": agent.id,
            "kind": "dailyTokens",
            "limit": PER_CALL,
            "used": PER_CALL,
            "period": "2026-12-02",
            "exhausted": True,
        }
    ]


def test_the_team_usage_adds_up_its_agents_for_its_people_and_is_missing_for_others(
    agent, bea, team, alice_client, charlie_client, stub, bob
):
    from tests.conftest import client_for

    notices(agent, 2)
    notices(bea, 1)
    loop.run_attention(agent.id, budget=10)
    loop.run_attention(bea.id, budget=10)

    mine = alice_client.get(f"/api/teams/{team.id}/usage").json()
    assert mine["teamId"] == team.id
    assert mine["totals"]["calls"] == 3 and mine["totals"]["inputTokens"] == 300
    assert client_for(bob).get(f"/api/teams/{team.id}/usage").status_code == 200  # a member
    assert charlie_client.get(f"/api/teams/{team.id}/usage").status_code == 404
    assert charlie_client.get(f"/api/agents/{agent.id}/usage").status_code == 404
    assert alice_client.get("/api/teams/no-such-team/usage").status_code == 404


def test_a_budget_patch_refuses_unknown_fields_negative_limits_and_an_empty_budget(agent, alice_client, bob):
    from tests.conftest import client_for

    url = f"/api/agents/{agent.id}/"
    unknown = alice_client.patch(url, {"budget": {"dailyToken": 5}}, format="json")
    assert unknown.status_code == 400
    assert "dailyToken" in unknown.json()["detail"]
    assert "budget" in unknown.json()["fields"]
    negative = alice_client.patch(url, {"budget": {"monthlyCost": -1}}, format="json")
    assert negative.status_code == 400 and "fields" in negative.json()
    assert alice_client.patch(url, {"budget": {}}, format="json").status_code == 400
    assert client_for(bob).patch(url, {"budget": {"dailyTokens": 5}}, format="json").status_code == 403  # a teammate
    cleared = alice_client.patch(url, {"budget": {"dailyTokens": 5, "monthlyCost": "2.50"}}, format="json")
    assert cleared.json()["budget"] == {"dailyTokens": 5, "monthlyCost": 2.5}
    again = alice_client.patch(url, {"budget": {"dailyTokens": None}}, format="json")
    assert again.json()["budget"] == {"dailyTokens": None, "monthlyCost": 2.5}
