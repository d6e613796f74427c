"""The bus in the operator console: read-mostly."""

from __future__ import annotations

from django.contrib import admin

from markus.console.modeladmin import ConsoleModelAdmin

from .models import AuditEvent, Chunk, ConsumerCursor, OutboxRecord, Stream, StreamMember
from .team_channel import TEAM_CHANNEL_PREFIX


class ChunkInline(admin.TabularInline):
    model = Chunk
    extra = 0
    fields = ("sequence", "sender", "topic", "payload", "position", "created_at")
    readonly_fields = fields
    can_delete = False


class StreamMemberInline(admin.TabularInline):
    """A group's members (a team's channel: its running agents, kept in step by
    ``agentbus.team_channel``)."""

    model = StreamMember
    extra = 0
    fields = ("agent", "joined_at")
    readonly_fields = fields
    can_delete = False

    def has_add_permission(self, request, obj=None):  # type: ignore[no-untyped-def]
        return False


@admin.register(Stream)
class StreamAdmin(ConsoleModelAdmin):
    list_display = ("id", "sender", "recipient", "is_group", "topic", "last_sequence", "closed_at", "created_at")
    list_filter = ("is_group",)
    search_fields = ("id", "topic", "sender__id", "recipient__id")
    list_select_related = ("sender", "recipient")
    raw_id_fields = ("sender", "recipient")
    readonly_fields = ("last_sequence", "created_at")
    inlines = [StreamMemberInline, ChunkInline]

    def view_on_site(self, obj: Stream) -> str | None:
        """A team's channel opens on its page."""
        if obj.id.startswith(TEAM_CHANNEL_PREFIX) and obj.sender_id is None:
            return f"/teams/{obj.id[len(TEAM_CHANNEL_PREFIX) :]}/channel/"
        return None


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
