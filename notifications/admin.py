from __future__ import annotations

from django.contrib import admin

from .models import Approval, UserNotification


@admin.register(UserNotification)
class UserNotificationAdmin(admin.ModelAdmin):
    list_display = ("id", "user", "type", "title", "priority", "read", "created_at")
    list_filter = ("type", "priority", "read")
    search_fields = ("title", "body")


@admin.register(Approval)
class ApprovalAdmin(admin.ModelAdmin):
    list_display = ("id", "user", "agent", "title", "status", "selected_option", "created_at")
    list_filter = ("status",)
    raw_id_fields = ("user", "agent", "mailbox_item")
