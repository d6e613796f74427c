"""The deployment's budget (``/api/budgets/deployment/``) and a person's
(``/api/users/{id}/budget/``): staff set both; a person reads their own (the default from
settings while staff set none); everybody else 403, an agent's token too."""

from __future__ import annotations

import pytest
from rest_framework.test import APIClient

from markus.agents.services import agent_create
from markus.usage.models import Budget
from tests.conftest import client_for

pytestmark = pytest.mark.django_db

DEPLOYMENT = "/api/budgets/deployment/"


@pytest.fixture
def root(django_user_model):
    return django_user_model.objects.create_user("root", password="x", is_staff=True)


def bearer(token: str) -> APIClient:
    client = APIClient()
    client.credentials(HTTP_AUTHORIZATION=f"Bearer {token}")
    return client


def test_staff_set_and_read_the_deployment_budget(root, monkeypatch, django_capture_on_commit_callbacks):
    woken: list[str] = []
    monkeypatch.setattr("markus.usage.api.wake", lambda agent_id, **kw: woken.append(agent_id))
    agent_create(name="Zed", owner=root, agent_id="zed")

    with django_capture_on_commit_callbacks(execute=True):
        response = client_for(root).patch(DEPLOYMENT, {"budget": {"monthlyCost": 100}}, format="json")

    assert response.status_code == 200, response.content
    body = response.json()
    assert body["scope"] == "deployment"
    assert body["budget"] == {"dailyTokens": None, "monthlyCost": 100.0}
    assert body["budgetStatus"]["blocked"] is False and body["budgetStatus"]["limits"][0]["scope"] == "deployment"
    assert woken == ["zed"]  # a raised budget lets every agent work again
    assert client_for(root).get(DEPLOYMENT).json()["budget"] == body["budget"]
    assert Budget.objects.filter(scope=Budget.Scope.DEPLOYMENT).count() == 1


def test_only_staff_read_or_set_the_deployment_budget(alice, bob, team, agent_with_token):
    _, token = agent_with_token
    for client in (client_for(alice), client_for(bob), bearer(token)):
        for method in ("get", "patch"):
            refused = getattr(client, method)(DEPLOYMENT, {"budget": {"dailyTokens": 10**9}}, format="json")
            assert refused.status_code == 403, (method, refused.content)
            assert "Only staff may" in refused.json()["detail"]
    assert APIClient().get(DEPLOYMENT).status_code in (401, 403)
    assert not Budget.objects.exists()


def test_staff_set_a_persons_budget_and_the_person_reads_it(root, bob, settings, monkeypatch):
    monkeypatch.setitem(settings.MARKUS, "BUDGET_PERSON_MONTHLY_COST", 5)
    url = f"/api/users/{bob.pk}/budget/"

    before = client_for(bob).get(url)

    assert before.status_code == 200, before.content
    assert before.json()["default"] is True
    assert before.json()["budget"] == {"dailyTokens": None, "monthlyCost": 5.0}
    assert before.json()["budgetStatus"]["limits"][0]["scope"] == "user"

    response = client_for(root).patch(url, {"budget": {"dailyTokens": 5000}}, format="json")

    assert response.status_code == 200, response.content
    assert response.json() == {**response.json(), "scope": "user", "userId": bob.pk, "default": False}
    assert response.json()["budget"] == {"dailyTokens": 5000, "monthlyCost": None}  # his own row: the default no more
    assert client_for(bob).get(url).json()["budget"] == {"dailyTokens": 5000, "monthlyCost": None}


def test_a_person_may_not_set_their_own_budget_nor_read_anothers(alice, bob, charlie, team, agent_with_token):
    _, token = agent_with_token
    own, other = f"/api/users/{bob.pk}/budget/", f"/api/users/{alice.pk}/budget/"
    refused = client_for(bob).patch(own, {"budget": {"dailyTokens": 10**9}}, format="json")
    assert refused.status_code == 403 and "Only staff may" in refused.json()["detail"]
    assert client_for(bob).get(other).status_code == 403
    assert client_for(charlie).get(own).status_code == 403
    assert client_for(alice).get(own).status_code == 403  # his team's owner: not his person budget
    assert bearer(token).get(own).status_code == 403
    assert not Budget.objects.exists()


def test_a_missing_person_answers_404_to_staff(root):
    assert client_for(root).get("/api/users/999999/budget/").status_code == 404
    assert client_for(root).patch("/api/users/none/budget/", {"budget": {}}, format="json").status_code == 404
