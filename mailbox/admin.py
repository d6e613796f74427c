from __future__ import annotations

from django.contrib import admin

from .models import MailboxItem
from .registry import Category, types_in_category


class CategoryFilter(admin.SimpleListFilter):
    title = "category"
    parameter_name = "category"

    def lookups(self, request, model_admin):
        return [(c.value, c.value.title()) for c in Category]

    def queryset(self, request, queryset):
        if self.value():
            return queryset.filter(source_type__in=types_in_category(self.value()))
        return queryset


@admin.register(MailboxItem)
class MailboxItemAdmin(admin.ModelAdmin):
    list_display = ("id", "agent", "source_type", "priority", "status", "summary_text", "queued_at", "attempts")
    list_filter = ("status", CategoryFilter, "source_type", "queued_at")
    search_fields = ("id", "payload__summary")
    list_select_related = ("agent",)
    raw_id_fields = ("agent", "merged_into")
    readonly_fields = ("queued_at", "started_at", "completed_at", "lease_epoch", "attempts")
    date_hierarchy = "queued_at"

    @admin.display(description="summary")
    def summary_text(self, obj: MailboxItem) -> str:
        return obj.summary[:80]
