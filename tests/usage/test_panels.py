"""The mind view and the console dashboard say what an agent spent and, when a budget
is used up, why it takes no LLM work."""

from __future__ import annotations

import pytest
from django.test import Client

from markus.llm.base import Usage
from markus.usage.services import budget_set, record_call

pytestmark = pytest.mark.django_db


def text(response) -> str:
    assert response.status_code == 200
    return " ".join(response.content.decode().split())


def spend(agent, n: int = 1) -> None:
    for _ in range(n):
        record_call(agent_id=agent.id, model="gpt-4o-mini", scenario="chat", usage=Usage(1000, 200, cached=400))


def test_the_mind_view_shows_todays_usage_and_the_reason_a_used_up_budget_stops_the_agent(agent, alice):
    spend(agent, 2)
    client = Client()
    client.force_login(alice)

    page = text(client.get(f"/agents/{agent.id}/mind/"))
    assert "Today: 2 LLM calls, 2400 tokens (800 cached input)" in page
    assert "Takes no LLM work" not in page

    budget_set(agent=agent, limits={"dailyTokens": 2000})
    page = text(client.get(f"/agents/{agent.id}/mind/"))
    assert "Takes no LLM work:" in page
    assert "the daily token budget of the agent ada is used up: 2400 of 2000 tokens today" in page


def test_the_console_dashboard_lists_budgets_used_up_first_and_todays_calls_per_agent(agent, team, django_user_model):
    spend(agent, 3)
    budget_set(team=team, limits={"monthlyCost": 100})
    budget_set(agent=agent, limits={"dailyTokens": 1000})
    staff = django_user_model.objects.create_user("root", password="x", is_staff=True, is_superuser=True)
    client = Client()
    client.force_login(staff)

    page = text(client.get("/admin/dashboard/"))

    panel = page[page.index('id="usage-panel"') :]
    assert panel.index('data-budget="ada"') < panel.index(f'data-budget="{team.id}"')  # used up first
    assert "takes no LLM work: the daily token budget of the agent ada is used up: 3600 of 1000" in panel
    assert '<td class="calls">3</td>' in panel and '<td class="tokens">3600</td>' in panel
    assert '<td class="cached">1200</td>' in panel


def test_staff_set_the_deployment_budget_in_the_console_and_the_dashboard_names_each_scope(
    agent, bob, django_user_model
):
    spend(agent, 1)
    budget_set(user=bob, limits={"monthlyCost": 5})
    staff = django_user_model.objects.create_user("root", password="x", is_staff=True, is_superuser=True)
    client = Client()
    client.force_login(staff)

    added = client.post("/admin/usage/budget/add/", {"scope": "deployment", "daily_tokens": 1000, "monthly_cost": ""})
    refused = client.post("/admin/usage/budget/add/", {"scope": "deployment", "daily_tokens": 5, "monthly_cost": ""})
    mixed = client.post("/admin/usage/budget/add/", {"scope": "deployment", "user": bob.pk, "daily_tokens": 5})

    assert added.status_code == 302
    assert "The deployment has one budget" in text(refused)
    assert "Set the column of its scope" in text(mixed)
    panel = text(client.get("/admin/dashboard/"))
    panel = panel[panel.index('id="usage-panel"') :]
    assert "takes no LLM work: the daily token budget of the deployment is used up: 1200 of 1000" in panel
    assert "person bob (their agents outside any team)" in panel and "the deployment (every agent)" in panel
