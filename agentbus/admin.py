"""The bus in the operator console: read-mostly."""

from __future__ import annotations

from django.contrib import admin

from markus.console.modeladmin import ConsoleModelAdmin

from .models import AuditEvent, Chunk, ConsumerCursor, OutboxRecord, Stream


class ChunkInline(admin.TabularInline):
    model = Chunk
    extra = 0
    fields = ("sequence", "sender", "topic", "payload", "position", "created_at")
    readonly_fields = fields
    can_delete = False


@admin.register(Stream)
class StreamAdmin(ConsoleModelAdmin):
    list_display = ("id", "sender", "recipient", "is_group", "topic", "last_sequence", "closed_at", "created_at")
    list_filter = ("is_group",)
    search_fields = ("id", "topic", "sender__id", "recipient__id")
    list_select_related = ("sender", "recipient")
    raw_id_fields = ("sender", "recipient")
    readonly_fields = ("last_sequence", "created_at")
    inlines = [ChunkInline]


@admin.register(ConsumerCursor)
class ConsumerCursorAdmin(ConsoleModelAdmin):
    list_display = ("agent", "topic", "position", "updated_at")
    raw_id_fields = ("agent",)
    readonly_fields = ("cursor", "position", "updated_at")


@admin.register(AuditEvent)
class AuditEventAdmin(ConsoleModelAdmin):
    list_display = ("created_at", "action", "actor", "agent_id", "stream_id")
    list_filter = ("action",)
    search_fields = ("actor", "agent_id", "stream_id")
    readonly_fields = ("action", "actor", "agent_id", "stream_id", "detail", "created_at")


@admin.register(OutboxRecord)
class OutboxRecordAdmin(ConsoleModelAdmin):
    list_display = ("id", "topic", "status", "attempts", "available_at", "relayed_at")
    list_filter = ("status", "schema")
    readonly_fields = ("topic", "schema", "payload", "audience", "attempts", "last_error", "created_at", "relayed_at")
