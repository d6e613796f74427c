from __future__ import annotations

from django.contrib import admin

from .models import Agent, ChatMessage, ChatSession, Team, WorkingMemory


@admin.register(Team)
class TeamAdmin(admin.ModelAdmin):
    list_display = ("id", "name", "owner", "created_at")
    search_fields = ("id", "name")
    filter_horizontal = ("members",)


@admin.register(Agent)
class AgentAdmin(admin.ModelAdmin):
    list_display = ("id", "name", "role", "kind", "status", "team", "owner")
    list_filter = ("kind", "status", "team")
    search_fields = ("id", "name", "role")
    list_select_related = ("team", "owner")
    readonly_fields = ("token_hash", "created_at")


class ChatMessageInline(admin.TabularInline):
    model = ChatMessage
    extra = 0
    readonly_fields = ("role", "content", "metadata", "created_at")


@admin.register(ChatSession)
class ChatSessionAdmin(admin.ModelAdmin):
    list_display = ("id", "agent", "is_main", "title", "last_message_at")
    list_filter = ("is_main",)
    raw_id_fields = ("agent", "user")
    inlines = [ChatMessageInline]


@admin.register(WorkingMemory)
class WorkingMemoryAdmin(admin.ModelAdmin):
    list_display = ("agent", "key", "updated_at")
    raw_id_fields = ("agent",)
