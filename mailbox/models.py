"""The mailbox_items table (seed section 6.2).

Additions to the seed's columns, needed by the Django design:
- ``attempts``: how many times the loop has started processing the item (restart
  recovery re-queues a human's in-flight item at most twice).
- ``lease_epoch``: the agent lease epoch the item was claimed under; every write the
  loop makes about the item is conditional on it (ARCHITECTURE decision 2).
- ``drop_reason``: why an item was dropped (recovery, retry cleanup, a tool, a judge).
- ``marks``: what the system keeps on an item for itself, apart from the caller's
  ``metadata``: its crashes and retries, the approval it is parked for, its batch, the
  bus stream it carries, why the sweep re-queued it. Never written by a caller (the API
  writes ``metadata`` only) and never copied into a retried copy, so no list of
  reserved keys guards it.
"""

from __future__ import annotations

from django.db import models
from django.utils import timezone

from markus.core import ids
from markus.core.limits import IDEMPOTENCY_KEY_MAX_CHARS

from .registry import COMMENT_TYPES, STATUS_CHOICES, MailboxType, Status, category_choices, descriptor, type_choices


class MailboxItem(models.Model):
    id = models.CharField(primary_key=True, max_length=64, default=ids.mailbox_id)
    # No index of its own: every composite index below begins with agent_id and serves
    # its lookups; a one-column index beside them is one the PostgreSQL planner prefers
    # and then filters or sorts (tests/mailbox/test_hot_query_indexes.py).
    agent = models.ForeignKey(
        "agents.Agent", on_delete=models.CASCADE, db_column="agent_id", related_name="mailbox_items", db_index=False
    )
    source_type = models.CharField(max_length=32, choices=type_choices())
    priority = models.PositiveSmallIntegerField(default=2)
    status = models.CharField(max_length=16, choices=STATUS_CHOICES, default=Status.QUEUED)
    payload = models.JSONField(default=dict)
    metadata = models.JSONField(default=dict, null=True, blank=True)
    marks = models.JSONField(default=dict, blank=True)
    queued_at = models.DateTimeField(default=timezone.now)
    started_at = models.DateTimeField(null=True, blank=True)
    completed_at = models.DateTimeField(null=True, blank=True)
    deferred_until = models.DateTimeField(null=True, blank=True)
    # A person waits for an outside agent's answer to this delivered item until then (set at
    # delivery, cleared by the answer; attention.outside): not a deferral.
    answer_due_at = models.DateTimeField(null=True, blank=True)
    merged_into = models.ForeignKey(
        "self",
        null=True,
        blank=True,
        on_delete=models.SET_NULL,
        db_column="merged_into",
        related_name="absorbed",
    )
    attempts = models.PositiveSmallIntegerField(default=0)
    lease_epoch = models.BigIntegerField(null=True, blank=True)
    drop_reason = models.CharField(max_length=300, blank=True, default="")

    class Meta:
        db_table = "mailbox_items"
        indexes = [
            models.Index(fields=["agent", "status"], name="idx_mailbox_agent_status"),
            # The timeline: its order (-queued_at, -id) whole, so a page by cursor is one
            # index seek and a deep offset skips index entries, not rows.
            models.Index(fields=["agent", "-queued_at", "-id"], name="idx_mailbox_agent_timeline"),
            models.Index(fields=["agent", "source_type", "-queued_at"], name="idx_mailbox_agent_type"),
            # The head-of-queue query: no temp B-tree sort, only queued rows.
            models.Index(
                fields=["agent", "priority", "queued_at", "id"],
                condition=models.Q(status="queued"),
                name="idx_mailbox_queue_head",
            ),
            # Deferred items by when they come due, across agents: the sweep's backstops
            # (a colleague's reply that timed out, a deferred item come due) seek it
            # instead of walking every item of every agent.
            models.Index(
                fields=["deferred_until", "agent"],
                condition=models.Q(status="deferred"),
                name="idx_mailbox_deferred_due",
            ),
            # A person's chat delivered to an outside agent, by when its answer is due
            # (set at delivery, cleared by the answer): the sweep's backstop seeks the
            # overdue ones; only those still awaited are in it.
            models.Index(
                fields=["answer_due_at"],
                condition=models.Q(status="completed", answer_due_at__isnull=False),
                name="idx_mailbox_answer_due",
            ),
        ]

    def __str__(self) -> str:
        return f"{self.id} {self.source_type} [{self.status}]"

    @property
    def summary(self) -> str:
        return str((self.payload or {}).get("summary", ""))

    @property
    def content(self) -> str:
        return str((self.payload or {}).get("content", ""))

    @property
    def extra(self) -> dict:
        extra = (self.payload or {}).get("extra")
        return extra if isinstance(extra, dict) else {}

    @property
    def task_id(self) -> str | None:
        return (self.payload or {}).get("taskId") or None

    @property
    def requirement_id(self) -> str | None:
        return (self.payload or {}).get("requirementId") or None

    @property
    def triggers_execution(self) -> bool:
        return bool(self.extra.get("triggerExecution"))

    @property
    def category(self) -> str:
        return descriptor(self.source_type).category.value

    @property
    def label(self) -> str:
        return descriptor(self.source_type).label

    @property
    def is_user_interaction(self) -> bool:
        """A human's chat, or a comment a human wrote (sender role ``user``)."""
        if self.source_type == MailboxType.HUMAN_CHAT:
            return True
        return self.source_type in COMMENT_TYPES and (self.metadata or {}).get("senderRole") == "user"


class RequestKey(models.Model):
    """An ``Idempotency-Key`` a caller sent with the request that stored ``item``
    (``mailbox.idempotency``): the caller's own per agent, kept as long as the item."""

    agent = models.ForeignKey("agents.Agent", on_delete=models.CASCADE, db_index=False, related_name="+")
    # Who sent it: "<senderRole>:<senderId>", as the item's metadata names the caller.
    sender = models.CharField(max_length=100)
    key = models.CharField(max_length=IDEMPOTENCY_KEY_MAX_CHARS)
    item = models.ForeignKey(MailboxItem, on_delete=models.CASCADE, related_name="+")
    # The request's SHA-256: the same key with another request is refused.
    fingerprint = models.CharField(max_length=64)
    created_at = models.DateTimeField(default=timezone.now)

    class Meta:
        db_table = "mailbox_request_keys"
        constraints = [models.UniqueConstraint(fields=["agent", "sender", "key"], name="uniq_mailbox_request_key")]

    def __str__(self) -> str:
        return f"{self.sender} {self.key} → {self.item_id}"


__all__ = ["MailboxItem", "RequestKey", "category_choices"]
