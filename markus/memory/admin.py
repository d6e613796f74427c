"""Long-term memory in the operator console: MEMORY.md sections (edited within the
limits, exported as one markdown file per agent), observations, and the dream state."""

from __future__ import annotations

from typing import Any

from django import forms
from django.contrib import admin
from django.db.models import QuerySet
from django.http import HttpRequest, HttpResponse

from markus.console.modeladmin import ConsoleModelAdmin
from markus.core.errors import MarkusError

from . import selectors
from .document import Section, check_sections, check_title
from .models import MemorySection, MemoryState, Observation


class MemorySectionForm(forms.ModelForm):
    class Meta:
        model = MemorySection
        fields = ("agent", "title", "content", "position")

    def clean(self) -> dict[str, Any]:
        """The API's limits: a section's text, the whole document with this section."""
        data: dict[str, Any] = super().clean() or {}
        agent, title = data.get("agent"), data.get("title")
        if agent is None or title is None:
            return data
        try:
            title = check_title(title)
            others = selectors.sections(agent.id).exclude(id=self.instance.pk)
            if others.filter(title__iexact=title).exists():  # MEMORY.md's titles are one whatever their case
                raise MarkusError(f"{agent.id} already has a section {title!r}")
            doc = [Section(t, c) for t, c in others.values_list("title", "content")]
            check_sections([*doc, Section(title, data.get("content") or "")])
        except MarkusError as exc:
            raise forms.ValidationError(str(exc)) from exc
        data["title"] = title
        return data


@admin.register(MemorySection)
class MemorySectionAdmin(ConsoleModelAdmin):
    form = MemorySectionForm
    list_display = ("agent", "title", "position", "chars", "updated_at")
    list_filter = ("agent",)
    list_select_related = ("agent",)
    search_fields = ("title", "content")
    raw_id_fields = ("agent",)
    actions = ["export_markdown"]

    @admin.display(description="characters")
    def chars(self, obj: MemorySection) -> int:
        return len(obj.content)

    @admin.action(description="Export MEMORY.md of the selected sections' agents")
    def export_markdown(self, request: HttpRequest, queryset: QuerySet[MemorySection]) -> HttpResponse:
        agents = sorted(set(queryset.values_list("agent_id", flat=True)))
        parts = [selectors.markdown(agent_id) for agent_id in agents]
        if len(agents) > 1:
            parts = [f"# MEMORY.md of {a}\n\n{p}" for a, p in zip(agents, parts, strict=True)]
        response = HttpResponse("\n".join(parts), content_type="text/markdown; charset=utf-8")
        name = f"MEMORY-{agents[0]}.md" if len(agents) == 1 else "MEMORY.md"
        response["Content-Disposition"] = f'attachment; filename="{name}"'
        return response


@admin.register(Observation)
class ObservationAdmin(ConsoleModelAdmin):
    list_display = ("id", "agent", "kind", "count", "text", "created_at")
    list_filter = ("kind",)
    list_select_related = ("agent",)
    search_fields = ("content",)
    raw_id_fields = ("agent",)
    readonly_fields = ("mailbox_item_id", "activity_id", "created_at", "updated_at")

    @admin.display(description="content")
    def text(self, obj: Observation) -> str:
        return selectors.one_line(obj.content, 120)


@admin.register(MemoryState)
class MemoryStateAdmin(ConsoleModelAdmin):
    list_display = ("agent", "consolidated_through", "consolidated_at", "dreams")
    list_select_related = ("agent",)
    readonly_fields = ("agent", "consolidated_through", "consolidated_at", "dreams")

    def has_add_permission(self, request: HttpRequest) -> bool:
        return False  # every field is the dream cycle's to write: a row added by hand has no agent
