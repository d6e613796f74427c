"""What the mind view shows: filters, the attention header and timeline pages.

Labels, icons, categories and status colours are read from the mailbox registry when a
page or partial is rendered, never written into a template: a type added to the
registry shows up (and is filterable) with no template change.
"""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass
from typing import Any
from urllib.parse import urlencode

from django.db.models import Prefetch, QuerySet
from django.http import QueryDict
from django.shortcuts import get_object_or_404

from attention.loop import attention_snapshot
from attention.models import AgentActivity, AgentActivityLog, AgentDecision
from attention.selectors import timeline_entry
from mailbox.models import MailboxItem
from mailbox.registry import STATUS_COLOURS, Category, MailboxType, Status, descriptor, registry_for_ui
from mailbox.selectors import queue_depth, timeline_queryset
from markus.agents.models import Agent
from markus.llm.base import get_provider

PAGE_SIZE = 30
OFFLINE_BRAIN = "offline"


@dataclass(frozen=True)
class MindFilters:
    """The timeline's filters; values the registry does not know are dropped."""

    category: str = ""
    type: str = ""
    statuses: tuple[str, ...] = ()

    @classmethod
    def from_query(cls, query: QueryDict | Mapping[str, list[str]]) -> MindFilters:
        """``query`` is a QueryDict or a ``parse_qs`` dict (name → list of values)."""

        def values(name: str) -> list[str]:
            raw = query.getlist(name) if hasattr(query, "getlist") else query.get(name, [])
            return [v for part in raw for v in part.split(",") if v]

        category = next((c for c in values("category") if c in Category._value2member_map_), "")
        kind = next((t for t in values("type") if t in MailboxType._value2member_map_), "")
        statuses = tuple(s.value for s in Status if s.value in values("status"))
        return cls(category=category, type=kind, statuses=statuses)

    def query_string(self) -> str:
        pairs = [("category", self.category), ("type", self.type), *(("status", s) for s in self.statuses)]
        return urlencode([(k, v) for k, v in pairs if v])

    def rows(self, agent_id: str) -> QuerySet[MailboxItem]:
        return timeline_queryset(
            agent_id,
            types=[self.type] if self.type else None,
            category=self.category or None,
            statuses=list(self.statuses) or None,
        )

    def matches(self, item: MailboxItem) -> bool:
        return (
            (not self.category or item.category == self.category)
            and (not self.type or item.source_type == self.type)
            and (not self.statuses or item.status in self.statuses)
        )


def filter_groups() -> list[dict[str, Any]]:
    """Categories (in the registry's order of categories), each with its types."""
    groups: dict[str, list[dict[str, Any]]] = {c.value: [] for c in Category}
    for entry in registry_for_ui():
        groups.setdefault(str(entry["category"]), []).append(entry)
    return [{"value": c, "label": c.replace("_", " ").title(), "types": types} for c, types in groups.items() if types]


def status_filters() -> list[dict[str, str]]:
    return [{"value": s.value, "label": s.value.title(), "colour": STATUS_COLOURS[s]} for s in Status]


def filters_context(filters: MindFilters) -> dict[str, Any]:
    return {"filters": filters, "filter_groups": filter_groups(), "status_filters": status_filters()}


def header_context(agent_id: str, *, live: bool = False) -> dict[str, Any]:
    """The attention header, read fresh: state, focus, queue depth, run status, brain."""
    agent = Agent.objects.get(id=agent_id)
    snap = attention_snapshot(agent_id)
    focus = snap["currentFocus"]
    if focus is not None:
        d = descriptor(focus["sourceType"])
        focus = {**focus, "icon": d.icon, "typeLabel": d.label}
    brain = get_provider().name
    return {
        "agent": agent,
        "state": str(snap["state"]),
        "focus": focus,
        "queue_depth": queue_depth(agent_id),
        "brain": brain,
        "offline_brain": brain == OFFLINE_BRAIN,
        "live": live,
    }


def _with_details(rows: QuerySet[MailboxItem]) -> QuerySet[MailboxItem]:
    return rows.prefetch_related(
        Prefetch("decisions", queryset=AgentDecision.objects.order_by("created_at", "id")),
        Prefetch("activities", queryset=AgentActivity.objects.order_by("started_at", "id")),
    )


def _short(n: int) -> str:
    return f"{n / 1000:.1f}k" if n >= 1000 else str(n)


def present(item: MailboxItem) -> dict[str, Any]:
    """A timeline entry (the API's shape) plus what the page draws from the registry."""
    entry = timeline_entry(item)
    entry["icon"] = descriptor(item.source_type).icon
    entry["colour"] = STATUS_COLOURS[Status(item.status)]
    content = item.content.strip()
    entry["content"] = content[:2000] if content and content != item.summary else ""
    if entry["activity"] is not None:
        entry["activity"]["tokensShort"] = _short(entry["activity"]["totalTokens"])
    return entry


def timeline_page(agent_id: str, filters: MindFilters, *, offset: int = 0, limit: int = PAGE_SIZE) -> dict[str, Any]:
    """One page of the timeline, newest first; ``next_offset`` is None on the last."""
    rows = list(_with_details(filters.rows(agent_id))[offset : offset + limit + 1])
    more = len(rows) > limit
    return {"entries": [present(i) for i in rows[:limit]], "next_offset": offset + limit if more else None}


def load_item(agent_id: str, item_id: str) -> MailboxItem | None:
    return _with_details(MailboxItem.objects.filter(agent_id=agent_id, id=item_id)).first()


def activity_logs(agent: Agent, activity_id: str) -> tuple[AgentActivity, list[AgentActivityLog]]:
    activity = get_object_or_404(AgentActivity, agent=agent, id=activity_id)
    return activity, list(AgentActivityLog.objects.filter(activity=activity).order_by("seq"))
