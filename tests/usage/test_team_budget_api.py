"""PATCH /api/teams/{id}/ {"budget": …}: the team's owner and staff set it (a member gets
403, an outsider 404); raising it wakes the team's agents and their waiting items run."""

from __future__ import annotations

import pytest

from attention import loop
from markus.usage.services import budget_set
from tests.conftest import client_for

from .conftest import PER_CALL, llm_requests, notices, statuses

pytestmark = pytest.mark.django_db(transaction=True)


def test_the_team_owner_raises_the_team_budget_and_its_agents_are_woken_and_resume(
    agent, bea, team, alice_client, stub, monkeypatch
):
    woken: list[str] = []
    monkeypatch.setattr("markus.usage.api.wake", lambda agent_id, **kw: woken.append(agent_id))
    budget_set(team=team, limits={"dailyTokens": PER_CALL})
    notices(agent, 2)
    loop.run_attention(agent.id, budget=10)
    assert statuses(agent) == {"completed": 1, "queued": 1}

    response = alice_client.patch(f"/api/teams/{team.id}/", {"budget": {"dailyTokens": 50 * PER_CALL}}, format="json")

    assert response.status_code == 200, response.content
    body = response.json()
    assert body["budget"] == {"dailyTokens": 50 * PER_CALL, "monthlyCost": None}
    assert body["budgetStatus"]["blocked"] is False
    assert sorted(woken) == ["ada", "bea"]
    loop.run_attention(agent.id, budget=10)
    assert statuses(agent) == {"completed": 2}
    assert llm_requests(stub) == 2
    usage = alice_client.get(f"/api/teams/{team.id}/usage").json()
    assert usage["budget"]["dailyTokens"] == 50 * PER_CALL and usage["totals"]["calls"] == 2


def test_only_the_team_owner_and_staff_set_its_budget(team, bob, charlie, django_user_model):
    url = f"/api/teams/{team.id}/"
    body = {"budget": {"monthlyCost": 10}}
    assert client_for(bob).patch(url, body, format="json").status_code == 403  # a member
    assert client_for(charlie).patch(url, body, format="json").status_code == 404  # an outsider
    staff = django_user_model.objects.create_user("root", password="x", is_staff=True)
    assert client_for(staff).patch(url, body, format="json").json()["budget"] == {
        "dailyTokens": None,
        "monthlyCost": 10.0,
    }
    refused = client_for(staff).patch(url, {"budget": {"monthly": 10}}, format="json")
    assert refused.status_code == 400 and "monthly" in refused.json()["detail"]
