"""The attention records in the operator console, all read-only: they are the
history of what each agent decided and did, written only by the loop."""

from __future__ import annotations

from django.contrib import admin
from django.contrib.admin.utils import quote
from django.db.models import Model
from django.http import HttpRequest
from django.urls import reverse
from django.utils.html import format_html

from markus.console.modeladmin import ConsoleModelAdmin

from .models import AgentActivity, AgentActivityLog, AgentAttention, AgentDecision, LLMSession


class ReadOnlyAdmin(ConsoleModelAdmin):
    def has_add_permission(self, request: HttpRequest, obj: Model | None = None) -> bool:
        return False

    def has_change_permission(self, request: HttpRequest, obj: Model | None = None) -> bool:
        return False

    def has_delete_permission(self, request: HttpRequest, obj: Model | None = None) -> bool:
        return False


def item_link(item_id: str | None) -> str:
    if not item_id:
        return "—"
    return format_html(
        '<a href="{}">{}</a>', reverse("admin:mailbox_mailboxitem_change", args=[quote(item_id)]), item_id
    )


@admin.register(AgentAttention)
class AgentAttentionAdmin(ReadOnlyAdmin):
    list_display = (
        "agent",
        "state",
        "current_item",
        "lease_owner",
        "lease_expires_at",
        "lease_epoch",
        "cancel_requested",
        "updated_at",
    )
    list_filter = ("state", "cancel_requested")
    list_select_related = ("agent", "current_item")
    search_fields = ("agent__id", "agent__name", "lease_owner")


@admin.register(AgentDecision)
class AgentDecisionAdmin(ReadOnlyAdmin):
    list_display = ("id", "agent", "decision_type", "item", "reasoning_text", "created_at")
    list_filter = ("decision_type",)
    search_fields = ("id", "agent__id", "mailbox_item__id", "reasoning")
    list_select_related = ("agent",)
    date_hierarchy = "created_at"

    @admin.display(description="mailbox item")
    def item(self, obj: AgentDecision) -> str:
        return item_link(obj.mailbox_item_id)

    @admin.display(description="reasoning")
    def reasoning_text(self, obj: AgentDecision) -> str:
        return obj.reasoning[:100]


class ActivityLogInline(admin.TabularInline):
    model = AgentActivityLog
    extra = 0
    can_delete = False
    fields = ("seq", "type", "content", "metadata", "created_at")
    readonly_fields = fields
    ordering = ("seq", "id")

    def has_add_permission(self, request: HttpRequest, obj: AgentActivity | None = None) -> bool:
        return False

    def has_change_permission(self, request: HttpRequest, obj: AgentActivity | None = None) -> bool:
        return False


@admin.register(AgentActivity)
class AgentActivityAdmin(ReadOnlyAdmin):
    list_display = (
        "label",
        "agent",
        "type",
        "item",
        "success",
        "total_tokens",
        "total_tools",
        "started_at",
        "ended_at",
    )
    list_filter = ("type", "success")
    search_fields = ("id", "agent__id", "mailbox_item__id", "label", "task_id")
    list_select_related = ("agent",)
    date_hierarchy = "started_at"
    inlines = [ActivityLogInline]

    @admin.display(description="mailbox item")
    def item(self, obj: AgentActivity) -> str:
        return item_link(obj.mailbox_item_id)


@admin.register(LLMSession)
class LLMSessionAdmin(ReadOnlyAdmin):
    list_display = ("id", "agent", "scenario", "turn_count", "item", "updated_at")
    list_filter = ("scenario",)
    search_fields = ("id", "agent__id", "mailbox_item__id")
    list_select_related = ("agent",)

    @admin.display(description="mailbox item")
    def item(self, obj: LLMSession) -> str:
        return item_link(obj.mailbox_item_id)
