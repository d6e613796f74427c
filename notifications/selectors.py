"""Reads of notifications and approvals; always scoped to one user."""

from __future__ import annotations

from django.contrib.auth.models import User
from django.db.models import QuerySet

from markus.core.errors import MarkusError

from .models import Approval, UserNotification
from .registry import NotificationType


def notifications_for(user: User, *, type: str | None = None) -> QuerySet[UserNotification]:
    rows = UserNotification.objects.filter(user=user)
    if type:
        if type not in NotificationType._value2member_map_:
            known = ", ".join(t.value for t in NotificationType)
            raise MarkusError(f"unknown notification type {type!r}; expected one of: {known}")
        rows = rows.filter(type=type)
    return rows.order_by("-created_at", "-id")


def unread_count(user: User) -> int:
    return UserNotification.objects.filter(user=user, read=False).count()


def approvals_for(user: User, *, status: str | None = None) -> QuerySet[Approval]:
    rows = Approval.objects.filter(user=user)
    if status:
        if status not in Approval.State.values:
            raise MarkusError(f"unknown status {status!r}; expected one of: {', '.join(Approval.State.values)}")
        rows = rows.filter(status=status)
    return rows.order_by("-created_at", "-id")


def awaited(approval: Approval) -> str:
    """What an item parked for ``approval`` waits for, said to whoever waits for the
    item's answer (an A2A task's input-required, an outside agent's request)."""
    return f"Waiting for {approval.user.get_username()}'s answer to {approval.title!r} (approval {approval.id})."
