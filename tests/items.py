"""Many mailbox items at once, for the tests of what must not grow with them."""

from __future__ import annotations

from datetime import timedelta
from typing import Any

from django.utils import timezone

from mailbox.models import MailboxItem
from mailbox.registry import MailboxType, Status


def many_items(agent_id: str, n: int, *, status: str = Status.QUEUED, **fields: Any) -> list[MailboxItem]:
    """``n`` system events of the agent in one bulk INSERT, queued a millisecond apart
    from an hour ago (the first is the oldest)."""
    start = timezone.now() - timedelta(hours=1)
    return MailboxItem.objects.bulk_create(
        MailboxItem(
            agent_id=agent_id,
            source_type=MailboxType.SYSTEM_EVENT,
            status=status,
            payload={"summary": f"item {i}"},
            queued_at=start + timedelta(milliseconds=i),
            **fields,
        )
        for i in range(n)
    )
