"""Agents in the operator console: live attention state, queue depth and pending bus
inbox as columns (annotated, one query per page), and the controls as actions. The run
status changes only through the actions, which call the attention services."""

from __future__ import annotations

from collections.abc import Callable
from typing import Any, TypeAlias

from django.contrib import admin
from django.contrib.admin.utils import quote
from django.db.models import QuerySet
from django.http import HttpRequest
from django.template.response import TemplateResponse
from django.urls import reverse
from django.utils.html import format_html

from attention import heartbeat
from attention import services as attention
from mailbox.selectors import depth_label
from markus.console import selectors
from markus.console import services as console
from markus.console.actions import MessageForm, form_action, run_each
from markus.console.modeladmin import ConsoleModelAdmin

from .models import Agent, ChatMessage, ChatSession, Team, UserToken, WorkingMemory


@admin.register(Team)
class TeamAdmin(ConsoleModelAdmin):
    list_display = ("name", "owner", "agent_task_approval", "created_at", "id")
    list_filter = ("agent_task_approval",)
    search_fields = ("id", "name")
    list_select_related = ("owner",)
    filter_horizontal = ("members",)


@admin.register(UserToken)
class UserTokenAdmin(ConsoleModelAdmin):
    """User API tokens: only their hashes are stored, so the console lists and revokes
    (deletes) them; ``manage.py drf_create_token USER`` issues one and prints it once."""

    list_display = ("name", "user", "created_at", "id")
    list_select_related = ("user",)
    search_fields = ("user__username", "name")
    readonly_fields = ("user", "name", "created_at")

    def has_add_permission(self, request: HttpRequest) -> bool:
        return False

    def has_change_permission(self, request: HttpRequest, obj: UserToken | None = None) -> bool:
        return False


def mind_url(agent_id: str) -> str:
    """The agent's mind view (``/agents/<id>/mind/``; the web app serves it)."""
    return reverse("mind", args=[agent_id])


# A string: ModelAdmin is not subscriptable at run time.
AgentAction: TypeAlias = "Callable[[admin.ModelAdmin[Agent], HttpRequest, QuerySet[Agent]], None]"


def _control(label: str, step: Callable[[Agent], None]) -> AgentAction:
    def action(modeladmin: admin.ModelAdmin[Agent], request: HttpRequest, queryset: QuerySet[Agent]) -> None:
        run_each(modeladmin, request, queryset, label, lambda agent: step(agent))

    action.__name__ = f"agent_{label.lower().replace(' ', '_')}"
    return admin.action(description=f"{label} selected agents", permissions=["change"])(action)


@admin.action(description="Wake selected agents now", permissions=["change"])
def wake_now(modeladmin: admin.ModelAdmin[Agent], request: HttpRequest, queryset: QuerySet[Agent]) -> None:
    def step(agent: Agent) -> None:
        if not agent.is_running:
            raise console.ConsoleError(
                f"{agent.id} is {agent.kind} and {agent.status}; only running internal agents have a loop to wake"
            )
        attention.wake(agent.id)

    run_each(modeladmin, request, queryset, "Wake", step)


@admin.action(description="Run a heartbeat now", permissions=["change"])
def heartbeat_now(modeladmin: admin.ModelAdmin[Agent], request: HttpRequest, queryset: QuerySet[Agent]) -> None:
    def step(agent: Agent) -> str | None:
        item = console.console_heartbeat(agent=agent, operator=request.user)
        return None if agent.status == Agent.RunStatus.RUNNING else f"{item.id} waits until {agent.id} runs"

    run_each(modeladmin, request, queryset, "Heartbeat", step)


@admin.action(description="Send a message to selected agents", permissions=["change"])
def send_message(
    modeladmin: admin.ModelAdmin[Agent], request: HttpRequest, queryset: QuerySet[Agent]
) -> TemplateResponse | None:
    def send(data: dict[str, Any]) -> None:
        def step(agent: Agent) -> None:
            console.console_send_message(agent=agent, text=data["text"], operator=request.user)

        run_each(modeladmin, request, queryset, "Message", step)

    return form_action(
        modeladmin,
        request,
        queryset,
        form_class=MessageForm,
        title="Send a message",
        action="send_message",
        submit="Send",
        on_valid=send,
    )


@admin.register(Agent)
class AgentAdmin(ConsoleModelAdmin):
    list_display = (
        "name",
        "role",
        "kind",
        "status",
        "attention_state",
        "current_focus",
        "queue_depth",
        "pending_inbox",
        "team",
        "owner",
        "mind_link",
        "id",
    )
    list_display_links = ("name",)
    list_filter = ("kind", "status", "team")
    search_fields = ("id", "name", "role")
    list_select_related = ("team", "owner", "attention__current_item")
    raw_id_fields = ("team", "owner")
    readonly_fields = (
        "status",
        "token_hash",
        "created_at",
        "attention_state",
        "current_focus",
        "queue_depth",
        "pending_inbox",
        "mind_link",
        "next_heartbeat_at",
        "last_heartbeat_at",
        "heartbeat_idle_streak",
        "heartbeat_sleep_depth",
        "rhythm",
    )
    fieldsets = (
        # (Read-only date-times are shown through their ``_pretty`` display: ConsoleModelAdmin.)
        (
            None,
            {"fields": ("id", "name", "role", "kind", "status", "team", "owner", "token_hash", "created_at_pretty")},
        ),
        (
            "Rhythm",
            {
                "description": "How often the heartbeat comes (5 min to 24 h; empty: the default), and the "
                "hours it may run in the agent's time zone (both or neither).",
                "fields": (
                    "heartbeat_interval_minutes",
                    "timezone",
                    ("heartbeat_active_start", "heartbeat_active_end"),
                    "rhythm",
                    "next_heartbeat_at_pretty",
                    "last_heartbeat_at_pretty",
                    ("heartbeat_idle_streak", "heartbeat_sleep_depth"),
                ),
            },
        ),
        (
            "Live",
            {"fields": ("attention_state", "current_focus", "queue_depth", "pending_inbox", "mind_link")},
        ),
    )
    actions = [
        _control("Pause", attention.agent_pause),
        _control("Resume", attention.agent_resume),
        _control("Stop", attention.agent_stop),
        wake_now,
        send_message,
        heartbeat_now,
    ]

    def get_queryset(self, request: HttpRequest) -> QuerySet[Agent]:
        return selectors.agents_for_console(super().get_queryset(request))

    def save_model(self, request: HttpRequest, obj: Agent, form: Any, change: bool) -> None:
        """A new interval wakes the agent to it (attention.heartbeat.reset_rhythm); a new
        time zone or new active hours bring back a heartbeat the old window put off
        (``rewindow``); the mind view hears of it (``agent:rhythm``)."""
        if change and "heartbeat_interval_minutes" in form.changed_data:
            heartbeat.reset_rhythm(obj)
        elif change and {"timezone", "heartbeat_active_start", "heartbeat_active_end"} & set(form.changed_data):
            heartbeat.rewindow(obj)
        super().save_model(request, obj, form, change)
        if change:
            heartbeat.rhythm_changed(obj.id)

    @admin.display(description="rhythm")
    def rhythm(self, obj: Agent) -> str:
        if not obj.pk:
            return "—"
        now = heartbeat.rhythm(obj)
        text = f"every {now.every}"
        if now.sleep_depth:
            text += f" (sleeping deeper, depth {now.sleep_depth}; normally every {now.normal})"
        if now.active_hours:
            text += f", {now.active_hours[0]:02d}:00–{now.active_hours[1]:02d}:00 {now.time_zone}"
        return text

    @admin.display(description="mind")
    def mind_link(self, obj: Agent) -> str:
        if not obj.pk:
            return "—"
        return format_html('<a href="{}">Mind view</a>', mind_url(obj.pk))

    @admin.display(description="attention")
    def attention_state(self, obj: Agent) -> str:
        return selectors.live_state(obj).state if obj.pk else "—"

    @admin.display(description="focus")
    def current_focus(self, obj: Agent) -> str:
        item = selectors.live_state(obj).focus if obj.pk else None
        if item is None:
            return "—"
        url = reverse("admin:mailbox_mailboxitem_change", args=[quote(item.pk)])
        return format_html('<a href="{}">{}</a>', url, (item.summary or item.label)[:60])

    @admin.display(description="queue", ordering="queue_depth")
    def queue_depth(self, obj: Agent) -> int | str:
        depth = getattr(obj, "queue_depth", None)
        return "—" if depth is None else depth_label(depth)  # "1000+" past the cap

    @admin.display(description="bus inbox", ordering="pending_inbox")
    def pending_inbox(self, obj: Agent) -> int | str:
        return getattr(obj, "pending_inbox", "—")


class ChatMessageInline(admin.TabularInline):
    model = ChatMessage
    extra = 0
    readonly_fields = ("role", "content", "metadata", "created_at")


@admin.register(ChatSession)
class ChatSessionAdmin(ConsoleModelAdmin):
    list_display = ("title", "agent", "is_main", "last_message_at", "id")
    list_filter = ("is_main",)
    list_select_related = ("agent",)
    raw_id_fields = ("agent", "user")
    inlines = [ChatMessageInline]


@admin.register(WorkingMemory)
class WorkingMemoryAdmin(ConsoleModelAdmin):
    list_display = ("agent", "key", "updated_at")
    list_select_related = ("agent",)
    raw_id_fields = ("agent",)
