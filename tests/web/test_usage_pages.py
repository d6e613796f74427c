"""Usage and budgets on a page (issue 37, point 4): an agent's, a team's and (staff) the
deployment's calls per day and model as a table and as inline SVG charts, each budget's
limit drawn as a line with what is left, and a form per budget the caller may set, with
the API's rules: an agent's by whoever controls it, a team's by its owner and staff, a
person's and the deployment's by staff; 404 for whoever may not see it.

alice owns team Core and its agent ada; bob is a member; charlie an outsider; sam staff."""

from __future__ import annotations

from datetime import timedelta
from decimal import Decimal

import pytest
from django.test import Client
from django.utils import timezone

from markus.agents.services import agent_create
from markus.usage.models import Budget, LLMCall

from .conftest import signed_in

pytestmark = pytest.mark.django_db


@pytest.fixture
def sam(django_user_model):
    return django_user_model.objects.create_user("sam", password="pw-sam", is_staff=True)


def call(agent, *, days_ago=0, model="gpt-x", tokens_in=200, tokens_out=100, cost="0.0100"):
    return LLMCall.objects.create(
        agent=agent,
        team=agent.team,
        model=model,
        scenario="human_chat",
        input_tokens=tokens_in,
        output_tokens=tokens_out,
        cost=Decimal(cost),
        created_at=timezone.now() - timedelta(days=days_ago),
    )


def set_budget(client: Client, path: str, scope: str, daily="", monthly=""):
    return client.post(path, {"scope": scope, "dailyTokens": daily, "monthlyCost": monthly})


def test_the_mind_view_and_the_team_pages_link_the_usage_pages_not_the_api(alice, agent, team):
    client = signed_in(alice)
    mind = client.get("/agents/ada/mind/").content.decode()
    assert 'href="/agents/ada/usage/"' in mind and "/api/agents/ada/usage" not in mind
    assert f'href="/teams/{team.id}/usage/"' in client.get("/teams/").content.decode()
    assert f'href="/teams/{team.id}/usage/"' in client.get(f"/teams/{team.id}/channel/").content.decode()


def test_an_agents_page_shows_each_day_and_model_and_charts_of_tokens_and_cost(alice, agent):
    call(agent, model="gpt-x")
    call(agent, model="claude-y", tokens_in=50, tokens_out=25, cost="0.0050")
    call(agent, days_ago=1, model="gpt-x", tokens_in=1000)
    page = signed_in(alice).get("/agents/ada/usage/").content.decode()
    assert page.count("<svg") == 2 and "<script" not in page.split('id="usage"')[1]
    assert "gpt-x" in page and "claude-y" in page
    rows = signed_in(alice).get("/agents/ada/usage/").context["rows"]
    assert [(r["model"], r["inputTokens"]) for r in rows] == [("claude-y", 50), ("gpt-x", 200), ("gpt-x", 1000)]
    assert f"{timezone.localdate()}: 250 input tokens" in page  # today's bar, both models
    assert "3 LLM calls, 1250 tokens in" in page


def test_each_budget_limit_is_drawn_as_a_line_with_what_is_left(alice, agent, team):
    Budget.objects.create(scope="agent", agent=agent, daily_tokens=1000)
    Budget.objects.create(scope="team", team=team, monthly_cost=Decimal("2"))
    call(agent)  # 300 tokens, $0.01
    page = signed_in(alice).get("/agents/ada/usage/").content.decode()
    assert page.count('class="limit"') == 2
    assert "agent: 1,000 tokens a day, 700 left today" in page
    assert "team: $2.00 a month, $1.9900 left this month" in page
    assert "300 of 1000 tokens today: 700 left" in page


def test_a_used_up_limit_says_so(alice, agent):
    Budget.objects.create(scope="agent", agent=agent, daily_tokens=100)
    call(agent)
    page = signed_in(alice).get("/agents/ada/usage/").content.decode()
    assert 'class="limit limit-exhausted"' in page and "0 left today (used up)" in page


def test_who_sees_an_agents_page_is_who_sees_the_agent(alice, bob, charlie, agent):
    assert signed_in(bob).get("/agents/ada/usage/").status_code == 200
    assert signed_in(charlie).get("/agents/ada/usage/").status_code == 404
    assert signed_in(charlie).get("/agents/nobody/usage/").status_code == 404
    assert Client().get("/agents/ada/usage/").status_code == 302  # to the login page


def test_whoever_controls_the_agent_sets_its_budget_and_it_is_woken(
    alice, agent, monkeypatch, django_capture_on_commit_callbacks
):
    woken = []
    monkeypatch.setattr("markus.usage.api.wake", woken.append)
    with django_capture_on_commit_callbacks(execute=True):
        response = set_budget(signed_in(alice), "/agents/ada/usage/?days=7", "agent", daily="5000", monthly="3.5")
    assert response.status_code == 302 and response["Location"] == "/agents/ada/usage/?days=7&saved=agent"
    budget = Budget.objects.get(agent=agent)
    assert (budget.daily_tokens, budget.monthly_cost) == (5000, Decimal("3.5"))
    assert woken == ["ada"]
    set_budget(signed_in(alice), "/agents/ada/usage/", "agent", daily="", monthly="3.5")
    assert Budget.objects.get(agent=agent).daily_tokens is None  # empty: no limit


def test_a_teammate_sees_the_budgets_but_may_set_none(alice, bob, agent, team):
    page = signed_in(bob).get("/agents/ada/usage/")
    assert page.status_code == 200 and 'name="dailyTokens"' not in page.content.decode()
    for scope in ("agent", "team", "deployment"):
        refused = set_budget(signed_in(bob), "/agents/ada/usage/", scope, daily="9")
        assert refused.status_code == 403, scope
    assert "Only its owner, its team&#x27;s owner and staff may change an agent." in refused_text(bob, "agent")
    assert not Budget.objects.exists()


def refused_text(user, scope: str) -> str:
    return set_budget(signed_in(user), "/agents/ada/usage/", scope, daily="9").content.decode()


def test_a_bad_budget_keeps_the_input_and_says_the_apis_message(alice, agent):
    response = set_budget(signed_in(alice), "/agents/ada/usage/", "agent", daily="12abc", monthly="2")
    page = response.content.decode()
    assert response.status_code == 400
    assert 'id="budget-error-agent"' in page and "budget: dailyTokens" in page
    assert 'value="12abc"' in page and 'value="2"' in page
    negative = set_budget(signed_in(alice), "/agents/ada/usage/", "agent", monthly="-1").content.decode()
    assert "monthlyCost" in negative and "greater than or equal to 0" in negative
    assert not Budget.objects.exists()


def test_the_budget_form_needs_the_csrf_token(alice, agent):
    client = Client(enforce_csrf_checks=True)
    client.force_login(alice)
    assert set_budget(client, "/agents/ada/usage/", "agent", daily="5").status_code == 403
    assert not Budget.objects.exists()


def test_a_team_budget_is_set_by_its_owner_and_staff_not_a_member(alice, bob, charlie, sam, agent, team):
    path = f"/teams/{team.id}/usage/"
    assert signed_in(bob).get(path).status_code == 200
    assert signed_in(charlie).get(path).status_code == 404
    assert set_budget(signed_in(bob), path, "team", daily="10").status_code == 403
    assert set_budget(signed_in(alice), path, "team", daily="10").status_code == 302
    assert set_budget(signed_in(sam), path, "team", daily="20").status_code == 302
    assert Budget.objects.get(team=team).daily_tokens == 20
    assert set_budget(signed_in(alice), path, "deployment", daily="10").status_code == 403
    assert set_budget(signed_in(alice), path, "agent", daily="10").status_code == 400  # no agent on a team's page


def test_a_persons_budget_is_set_by_staff_on_their_teamless_agents_page(alice, sam):
    agent_create(name="Solo", owner=alice, agent_id="solo")
    assert 'id="budget-user"' in signed_in(alice).get("/agents/solo/usage/").content.decode()
    assert set_budget(signed_in(alice), "/agents/solo/usage/", "user", daily="10").status_code == 403
    assert set_budget(signed_in(sam), "/agents/solo/usage/", "user", daily="10").status_code == 302
    assert Budget.objects.get(user=alice).daily_tokens == 10


def test_the_deployments_page_is_staffs(alice, sam, agent):
    call(agent)
    assert 'href="/usage/"' in signed_in(sam).get("/teams/").content.decode()
    assert 'href="/usage/"' not in signed_in(alice).get("/teams/").content.decode()
    assert signed_in(alice).get("/usage/").status_code == 403
    page = signed_in(sam).get("/usage/")
    assert page.status_code == 200 and "1 LLM call," in page.content.decode()
    assert set_budget(signed_in(sam), "/usage/", "deployment", monthly="100").status_code == 302
    assert Budget.objects.get(scope="deployment").monthly_cost == Decimal("100")


def test_days_out_of_range_is_refused_with_a_message(alice, agent):
    response = signed_in(alice).get("/agents/ada/usage/?days=93")
    assert response.status_code == 400 and b"days must be a whole number from 1 to 92" in response.content
    assert signed_in(alice).get("/agents/ada/usage/?days=92").status_code == 200
