from __future__ import annotations

from django.contrib import admin

from .models import DailyReport


@admin.register(DailyReport)
class DailyReportAdmin(admin.ModelAdmin):
    list_display = ("agent", "date", "created_at")
    list_filter = ("date",)
    search_fields = ("agent__id", "agent__name", "content")
    readonly_fields = ("created_at", "updated_at")
