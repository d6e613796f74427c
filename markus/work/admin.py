from __future__ import annotations

from django.contrib import admin

from .models import Requirement, RequirementComment, Task, TaskComment


class TaskCommentInline(admin.TabularInline):
    model = TaskComment
    extra = 0
    raw_id_fields = ("author_agent", "author_user", "reply_to")


@admin.register(Task)
class TaskAdmin(admin.ModelAdmin):
    list_display = ("id", "title", "status", "assignee", "reviewer_agent", "updated_at")
    list_filter = ("status",)
    search_fields = ("id", "title")
    list_select_related = ("assignee", "reviewer_agent")
    raw_id_fields = ("assignee", "reviewer_agent", "reviewer_user", "created_by_agent", "created_by_user", "requirement")
    inlines = [TaskCommentInline]


class RequirementCommentInline(admin.TabularInline):
    model = RequirementComment
    extra = 0
    raw_id_fields = ("author_agent", "author_user", "reply_to")


@admin.register(Requirement)
class RequirementAdmin(admin.ModelAdmin):
    list_display = ("id", "title", "status", "created_by_agent", "updated_at")
    list_filter = ("status",)
    search_fields = ("id", "title")
    inlines = [RequirementCommentInline]
