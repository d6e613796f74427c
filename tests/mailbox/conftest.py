"""Helpers for the mailbox rules: enqueue through the service, or store a row as it
would be found in the database after a restart (bypassing enqueue-time dedup)."""

from __future__ import annotations

from typing import Any

import pytest
from django.utils import timezone

from mailbox.models import MailboxItem
from mailbox.registry import Status, descriptor
from mailbox.services import mailbox_enqueue
from markus.agents.services import agent_create


def payload_for(summary: str, content: str, **fields: Any) -> dict[str, Any]:
    return {"summary": summary, "content": content, **fields}


@pytest.fixture
def enqueue(agent):
    """``enqueue(type, summary=..., content=..., priority=..., metadata=..., **payload)``."""

    def _enqueue(
        source_type, *, summary="summary", content="content", priority=None, metadata=None, agent_id=None, **fields
    ):
        return mailbox_enqueue(
            agent_id=agent_id or agent.id,
            source_type=source_type,
            payload=payload_for(summary, content, **fields),
            priority=priority,
            metadata=metadata,
        )

    return _enqueue


@pytest.fixture
def store(agent):
    """Insert a row directly, as restart recovery finds it in the table."""

    def _store(
        source_type,
        *,
        status=Status.QUEUED,
        summary="summary",
        content="content",
        priority=None,
        metadata=None,
        attempts=0,
        **fields,
    ):
        now = timezone.now()
        return MailboxItem.objects.create(
            agent=agent,
            source_type=source_type,
            status=status,
            priority=int(descriptor(source_type).default_priority) if priority is None else priority,
            payload=payload_for(summary, content, **fields),
            metadata=metadata or {},
            queued_at=now,
            started_at=now if status == Status.PROCESSING else None,
            attempts=attempts,
        )

    return _store


@pytest.fixture
def other_agent(alice):
    a, _ = agent_create(name="Grace", role="reviewer", owner=alice, agent_id="grace")
    return a


def statuses(*items: MailboxItem) -> list[str]:
    for item in items:
        item.refresh_from_db()
    return [item.status for item in items]
