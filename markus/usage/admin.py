"""Usage and budgets in the console: the LLM calls (read only) and the budgets, which an
operator edits like the API does (a saved budget wakes the agents it covers)."""

from __future__ import annotations

from typing import Any

from django.contrib import admin
from django.db import transaction
from django.http import HttpRequest

from attention.services import wake
from markus.console.modeladmin import ConsoleModelAdmin

from .models import Budget, BudgetNotice, LLMCall
from .selectors import covered_agents


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
    """Every scope's budget; the deployment's (one row) and a person's are staff's to set,
    as everything in the console is."""

    list_display = ("__str__", "scope", "agent", "team", "user", "daily_tokens", "monthly_cost", "updated_at")
    list_filter = ("scope",)
    list_select_related = ("agent", "team", "user")
    raw_id_fields = ("agent", "team", "user")
    fields = ("scope", "agent", "team", "user", "daily_tokens", "monthly_cost")

    def save_model(self, request: HttpRequest, obj: Budget, form: Any, change: bool) -> None:
        super().save_model(request, obj, form, change)
        agent_ids = list(covered_agents(obj).values_list("id", flat=True))
        transaction.on_commit(lambda: _wake_all(agent_ids))


@admin.register(BudgetNotice)
class BudgetNoticeAdmin(ConsoleModelAdmin):
    list_display = ("scope", "scope_id", "period", "created_at")
    list_filter = ("scope",)

    def has_add_permission(self, request: HttpRequest) -> bool:
        return False

    def has_change_permission(self, request: HttpRequest, obj: Any = None) -> bool:
        return False


def _wake_all(agent_ids: list[str]) -> None:
    for agent_id in agent_ids:
        wake(agent_id)
