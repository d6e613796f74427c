"""Usage and budgets in the console: the LLM calls (read only) and the budgets, which an
operator edits like the API does (a saved budget wakes the agents it covers)."""

from __future__ import annotations

from typing import Any

from django.contrib import admin
from django.db import transaction
from django.http import HttpRequest

from attention.services import wake
from markus.agents.models import Agent
from markus.console.modeladmin import ConsoleModelAdmin

from .models import Budget, LLMCall


@admin.register(LLMCall)
class LLMCallAdmin(ConsoleModelAdmin):
    list_display = (
        "created_at",
        "agent",
        "team",
        "model",
        "scenario",
        "input_tokens",
        "cached_tokens",
        "output_tokens",
        "cost",
        "mailbox_item_id",
    )
    list_filter = ("scenario", "model")
    search_fields = ("agent__id", "agent__name", "mailbox_item_id")
    list_select_related = ("agent", "team")
    date_hierarchy = "created_at"
    ordering = ("-created_at", "-id")

    def has_add_permission(self, request: HttpRequest) -> bool:
        return False

    def has_change_permission(self, request: HttpRequest, obj: Any = None) -> bool:
        return False


@admin.register(Budget)
class BudgetAdmin(ConsoleModelAdmin):
    list_display = ("__str__", "agent", "team", "daily_tokens", "monthly_cost", "notified_period", "updated_at")
    list_select_related = ("agent", "team")
    raw_id_fields = ("agent", "team")
    fields = ("agent", "team", "daily_tokens", "monthly_cost", "notified_period")
    readonly_fields = ("notified_period",)

    def save_model(self, request: HttpRequest, obj: Budget, form: Any, change: bool) -> None:
        super().save_model(request, obj, form, change)
        covered = Agent.objects.filter(id=obj.agent_id) if obj.agent_id else Agent.objects.filter(team_id=obj.team_id)
        agent_ids = list(covered.values_list("id", flat=True))
        transaction.on_commit(lambda: _wake_all(agent_ids))


def _wake_all(agent_ids: list[str]) -> None:
    for agent_id in agent_ids:
        wake(agent_id)
