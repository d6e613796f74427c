"""Mailbox items in the operator console: read-only rows (the queue changes through
the services), filters by status, category, type and a date range, the decisions and
the activity inline, and the retry / drop actions (semantics in
``markus.console.services``)."""

from __future__ import annotations

from typing import Any

from django.contrib import admin
from django.contrib.admin.utils import quote
from django.db.models import QuerySet
from django.http import HttpRequest
from django.template.response import TemplateResponse
from django.urls import reverse
from django.utils.html import format_html

from attention.models import AgentActivity, AgentDecision
from markus.console import services as console
from markus.console.actions import DropForm, form_action, run_each
from markus.console.filters import date_range_filter
from markus.console.modeladmin import ConsoleModelAdmin

from .models import MailboxItem
from .registry import Category, types_in_category


class CategoryFilter(admin.SimpleListFilter):
    title = "category"
    parameter_name = "category"

    def lookups(self, request: HttpRequest, model_admin: admin.ModelAdmin[Any]) -> list[tuple[str, str]]:
        return [(c.value, c.value.title()) for c in Category]

    def queryset(self, request: HttpRequest, queryset: QuerySet[Any]) -> QuerySet[Any]:
        category = self.value()
        if category:
            return queryset.filter(source_type__in=types_in_category(category))
        return queryset


class ReadOnlyInline(admin.TabularInline):
    extra = 0
    can_delete = False
    show_change_link = True

    def has_add_permission(self, request: HttpRequest, obj: MailboxItem | None = None) -> bool:
        return False

    def has_change_permission(self, request: HttpRequest, obj: MailboxItem | None = None) -> bool:
        return False


class DecisionInline(ReadOnlyInline):
    model = AgentDecision
    fields = ("created_at", "decision_type", "reasoning", "outcome", "lease_epoch")
    ordering = ("created_at", "id")


class ActivityInline(ReadOnlyInline):
    model = AgentActivity
    fields = ("started_at", "ended_at", "type", "label", "total_tokens", "total_tools", "success")
    ordering = ("started_at", "id")


@admin.action(description="Retry selected items", permissions=["change"])
def retry_items(
    modeladmin: admin.ModelAdmin[MailboxItem], request: HttpRequest, queryset: QuerySet[MailboxItem]
) -> None:
    def step(item: MailboxItem) -> str:
        result = console.console_retry_item(item_id=item.id, operator=request.user)
        if result.mode == "resurfaced":
            return f"{item.id} is queued again"
        if result.mode == "merged":
            return f"{item.id} copied as {result.item.id}, merged into queued {result.item.merged_into_id}"
        return f"{item.id} copied as {result.item.id}"

    run_each(modeladmin, request, queryset, "Retry", step)


@admin.action(description="Drop selected items (with a reason)", permissions=["change"])
def drop_items(
    modeladmin: admin.ModelAdmin[MailboxItem], request: HttpRequest, queryset: QuerySet[MailboxItem]
) -> TemplateResponse | None:
    def drop(data: dict[str, Any]) -> None:
        def step(item: MailboxItem) -> None:
            console.console_drop_item(item_id=item.id, reason=data["reason"], operator=request.user)

        run_each(modeladmin, request, queryset, "Drop", step)

    return form_action(
        modeladmin,
        request,
        queryset,
        form_class=DropForm,
        title="Drop mailbox items",
        action="drop_items",
        submit="Drop",
        on_valid=drop,
    )


@admin.register(MailboxItem)
class MailboxItemAdmin(ConsoleModelAdmin):
    list_display = ("summary_text", "agent", "source_type", "priority", "status", "queued_at", "attempts", "id")
    list_filter = ("status", CategoryFilter, "source_type", date_range_filter("queued_at", "queued date"))
    search_fields = ("id", "agent__id", "agent__name", "payload__summary", "drop_reason")
    list_select_related = ("agent",)
    date_hierarchy = "queued_at"
    inlines = [DecisionInline, ActivityInline]
    actions = [retry_items, drop_items]
    fields = (
        "id",
        "agent",
        "source_type",
        "priority",
        "status",
        "summary_text",
        "payload",
        "metadata",
        "marks",
        "queued_at",
        "started_at",
        "completed_at",
        "deferred_until",
        "answer_due_at",
        "merged_into_link",
        "drop_reason",
        "attempts",
        "lease_epoch",
    )
    readonly_fields = fields

    def has_add_permission(self, request: HttpRequest) -> bool:
        return False  # stimuli arrive through mailbox_enqueue (API, bus, services)

    def has_change_permission(self, request: HttpRequest, obj: MailboxItem | None = None) -> bool:
        # Change permission runs the actions; a single item's page is view-only, so a
        # stale form can never write over what the loop did meanwhile.
        return obj is None and super().has_change_permission(request)

    def has_delete_permission(self, request: HttpRequest, obj: MailboxItem | None = None) -> bool:
        return False  # history: drop instead

    @admin.display(description="summary")
    def summary_text(self, obj: MailboxItem) -> str:
        return obj.summary[:80]

    @admin.display(description="merged into")
    def merged_into_link(self, obj: MailboxItem) -> str:
        if not obj.merged_into_id:
            return "—"
        url = reverse("admin:mailbox_mailboxitem_change", args=[quote(obj.merged_into_id)])
        return format_html('<a href="{}">{}</a>', url, obj.merged_into_id)
