from __future__ import annotations

from django.contrib import admin
from django.http import HttpRequest

from .models import PruneRun


@admin.register(PruneRun)
class PruneRunAdmin(admin.ModelAdmin):
    """The record of each prune, read-only: runs are made by beat and ``manage.py prune``."""

    list_display = ("started_at", "trigger", "dry_run", "total", "batches", "finished_at", "error")
    list_filter = ("trigger", "dry_run")
    readonly_fields = ("started_at", "finished_at", "trigger", "dry_run", "counts", "batches", "error")

    @admin.display(description="rows")
    def total(self, run: PruneRun) -> int:
        return run.total

    def has_add_permission(self, request: HttpRequest) -> bool:
        return False

    def has_change_permission(self, request: HttpRequest, obj: PruneRun | None = None) -> bool:
        return False
