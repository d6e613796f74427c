"""Reads of the mailbox: the queue in dequeue order and the filtered history. (The
timeline enriched with decisions and activities is the loop's: attention.selectors.)"""

from __future__ import annotations

from typing import Any

from django.db.models import QuerySet

from markus.core.errors import MarkusError

from .lifecycle import queued
from .models import MailboxItem
from .registry import MAILBOX_TYPE_REGISTRY, Category, Status, is_known_type, types_in_category
from .representation import serialize_item


def queue_depth(agent_id: str) -> int:
    return MailboxItem.objects.filter(agent_id=agent_id, status=Status.QUEUED).count()


def queued_items(agent_id: str) -> list[dict[str, Any]]:
    return [serialize_item(i) for i in queued(agent_id)]


def timeline_queryset(
    agent_id: str,
    *,
    types: list[str] | None = None,
    category: str | None = None,
    statuses: list[str] | None = None,
) -> QuerySet[MailboxItem]:
    rows = MailboxItem.objects.filter(agent_id=agent_id)
    if types:
        unknown = [t for t in types if not is_known_type(t)]
        if unknown:
            raise MarkusError(f"unknown type {unknown[0]!r}; expected one of: {', '.join(MAILBOX_TYPE_REGISTRY)}")
        rows = rows.filter(source_type__in=types)
    if category:
        if category not in Category._value2member_map_:
            raise MarkusError(f"unknown category {category!r}; expected one of: {', '.join(c.value for c in Category)}")
        rows = rows.filter(source_type__in=types_in_category(category))
    if statuses:
        bad = [s for s in statuses if s not in Status._value2member_map_]
        if bad:
            raise MarkusError(f"unknown status {bad[0]!r}; expected one of: {', '.join(s.value for s in Status)}")
        rows = rows.filter(status__in=statuses)
    return rows.order_by("-queued_at", "-id")
