from __future__ import annotations

from django.urls import path

from .api import AgentUsageView, DeploymentBudgetView, PersonBudgetView, TeamUsageView

# A team's budget is set through PATCH /api/teams/{id}/ (the teams' own view calls
# ``markus.usage.api.team_budget_patch``).
urlpatterns = [
    path("api/agents/<str:agent_id>/usage", AgentUsageView.as_view()),
    path("api/teams/<str:team_id>/usage", TeamUsageView.as_view()),
    path("api/users/<str:user_id>/budget/", PersonBudgetView.as_view()),
    path("api/budgets/deployment/", DeploymentBudgetView.as_view()),
]
