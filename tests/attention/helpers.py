"""Helpers the triage and deliberation tests share: an item enqueued as if it had waited
a while, and the summaries of the items the loop picked, in order."""

from __future__ import annotations

from datetime import timedelta
from typing import Any

from django.utils import timezone

from attention.models import AgentDecision
from mailbox.models import MailboxItem
from mailbox.services import mailbox_enqueue
from markus.agents.models import Agent


def enqueue(
    agent: Agent,
    kind: str,
    summary: str,
    priority: int | None = None,
    minutes_ago: float = 0,
    payload: dict[str, Any] | None = None,
    **meta: Any,
) -> MailboxItem:
    item = mailbox_enqueue(
        agent_id=agent.id,
        source_type=kind,
        priority=priority,
        payload={"summary": summary, "content": summary, **(payload or {})},
        metadata=meta or None,
    )
    if minutes_ago:
        MailboxItem.objects.filter(id=item.id).update(queued_at=timezone.now() - timedelta(minutes=minutes_ago))
    return item


def picked(agent: Agent) -> list[str]:
    rows = AgentDecision.objects.filter(agent=agent, decision_type="pick").select_related("mailbox_item")
    return [d.mailbox_item.summary for d in rows.order_by("created_at", "id")]
