"""User notifications (seed section 12.1) and approval requests (human in the loop)."""

from __future__ import annotations

from django.conf import settings
from django.db import models
from django.utils import timezone

from markus.core import ids

from .registry import PRIORITIES, USER_NOTIFICATION_TYPE_REGISTRY


class UserNotification(models.Model):
    id = models.CharField(primary_key=True, max_length=64, default=ids.notification_id)
    user = models.ForeignKey(
        settings.AUTH_USER_MODEL, on_delete=models.CASCADE, db_column="user_id", related_name="notifications"
    )
    type = models.CharField(
        max_length=32, choices=[(t.value, d.label) for t, d in USER_NOTIFICATION_TYPE_REGISTRY.items()]
    )
    title = models.CharField(max_length=300)
    body = models.TextField(default="", blank=True)
    priority = models.CharField(max_length=8, choices=[(p, p) for p in PRIORITIES], default="normal")
    read = models.BooleanField(default=False)
    action_type = models.CharField(max_length=16, null=True, blank=True)
    action_target = models.JSONField(null=True, blank=True)
    metadata = models.JSONField(default=dict, blank=True)
    created_at = models.DateTimeField(default=timezone.now)

    class Meta:
        db_table = "user_notifications"
        indexes = [models.Index(fields=["user", "read", "-created_at"], name="idx_notifications_user")]

    def __str__(self) -> str:
        return f"{self.title} ({self.id})"


class Approval(models.Model):
    """A decision requested from a human. The requesting mailbox item is parked
    (deferred) while it waits; the answer re-queues it with the tool result."""

    class State(models.TextChoices):
        PENDING = "pending"
        ANSWERED = "answered"
        CANCELLED = "cancelled"

    id = models.CharField(primary_key=True, max_length=64, default=ids.approval_id)
    user = models.ForeignKey(settings.AUTH_USER_MODEL, on_delete=models.CASCADE, related_name="approvals")
    agent = models.ForeignKey("agents.Agent", null=True, blank=True, on_delete=models.SET_NULL)
    mailbox_item = models.ForeignKey("mailbox.MailboxItem", null=True, blank=True, on_delete=models.SET_NULL)
    title = models.CharField(max_length=300)
    description = models.TextField(default="", blank=True)
    options = models.JSONField(default=list)
    allow_freeform = models.BooleanField(default=False)
    status = models.CharField(max_length=16, choices=State.choices, default=State.PENDING)
    selected_option = models.CharField(max_length=200, blank=True, default="")
    comment = models.TextField(blank=True, default="")
    created_at = models.DateTimeField(default=timezone.now)
    answered_at = models.DateTimeField(null=True, blank=True)

    class Meta:
        db_table = "approvals"

    def __str__(self) -> str:
        return f"{self.title} ({self.id})"
