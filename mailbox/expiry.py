"""Expiry of stale queued items (upstream drops queued items older than 3 days at
recovery: a heartbeat queued 8 days ago is not worth a call).

Each type's expiry is in the registry (``MailboxTypeDescriptor.expires_after``; None:
never). Whatever somebody waits for never expires, whatever its type: a person's chat
or comment, an execution trigger, a review request, a reminder, an item that asks for
action (``is_awaited``, ``is_strict``). An expired item is dropped with a reason that
starts with ``EXPIRED``; recovery (``services.mailbox_recover``) and the loop, when the
queue it read holds one (``is_expired``, no query), call ``expire_stale``.
"""

from __future__ import annotations

from datetime import datetime, timedelta

from django.utils import timezone

from . import lifecycle
from .merge import is_strict
from .models import MailboxItem
from .registry import MAILBOX_TYPE_REGISTRY, Status, descriptor

EXPIRED = "expired:"
_EXPIRING = {t.value: d.expires_after for t, d in MAILBOX_TYPE_REGISTRY.items() if d.expires_after is not None}
_SHORTEST = min(_EXPIRING.values(), default=None)


def never_expires(item: MailboxItem) -> bool:
    return lifecycle.is_awaited(item) or is_strict(item)


def expiry_of(item: MailboxItem) -> timedelta | None:
    """How long the item may wait in the queue; None: as long as it takes."""
    if never_expires(item):
        return None
    return descriptor(item.source_type).expires_after


def is_expired(item: MailboxItem, now: datetime | None = None) -> bool:
    """Has this queued item waited longer than its type's expiry? (No query.)"""
    after = expiry_of(item)
    return after is not None and item.status == Status.QUEUED and item.queued_at < (now or timezone.now()) - after


def _span(delta: timedelta) -> str:
    if delta >= timedelta(days=1):
        n, unit = delta.days, "day"
    elif delta >= timedelta(hours=1):
        n, unit = int(delta.total_seconds() // 3600), "hour"
    else:
        n, unit = max(1, int(delta.total_seconds() // 60)), "minute"
    return f"{n} {unit}{'s' if n != 1 else ''}"


def expiry_reason(item: MailboxItem, now: datetime) -> str:
    after = expiry_of(item)
    assert after is not None
    return (
        f"{EXPIRED} queued {_span(now - item.queued_at)} ago, longer than a {item.label.lower()} "
        f"is worth waiting ({_span(after)}); not worth a call any more"
    )


def expire_stale(agent_id: str, *, now: datetime | None = None) -> list[MailboxItem]:
    """Drop the agent's queued items that waited longer than their type's expiry, each
    with its reason (a conditional UPDATE: an item claimed meanwhile is left alone).
    Returns the items dropped, with their status and reason as written."""
    if _SHORTEST is None:
        return []
    now = now or timezone.now()
    rows = MailboxItem.objects.filter(
        agent_id=agent_id, status=Status.QUEUED, source_type__in=list(_EXPIRING), queued_at__lt=now - _SHORTEST
    ).order_by("queued_at", "id")
    dropped = []
    for item in rows:
        reason = expiry_reason(item, now)[:300] if is_expired(item, now) else ""
        if reason and lifecycle.drop(item.id, reason=reason, from_statuses=[Status.QUEUED]):
            item.status, item.drop_reason = Status.DROPPED, reason
            dropped.append(item)
    return dropped
