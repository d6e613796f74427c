"""The AgentBus tables: streams, their members, chunks, the inbox clock, consumer
cursors, the audit trail and the outbox.

The inbox position (why chunks carry ``position``)
--------------------------------------------------
The seed orders an agent's inbox by ``(created_at, id)`` and uses that pair as the
cursor. Under concurrent writers that has a hole: a chunk stamped at t=1 can commit
after a chunk stamped at t=2; a reader that already saw t=2 and moved its cursor past
it never sees the t=1 chunk.

Here every chunk gets its inbox ``position`` from one counter row
(``agentbus_inbox_clock``), incremented as the last step of the append transaction
with ``UPDATE … SET value = value + 1 … RETURNING value``. The UPDATE holds the row's
lock until the transaction ends, so the next appender cannot take a position before
this one has committed (or rolled back, giving its number back). Positions are
therefore handed out in commit order, and the set of committed positions is always a
prefix of the counter: a reader that sees position N has seen, or can see, every
committed position below N. On PostgreSQL the row lock does this (a committed
transaction is visible before its locks are released); on SQLite every write
transaction is IMMEDIATE, so writers are serialised by the database lock anyway.
``created_at`` is stamped after the position is taken, so ``(created_at, id)`` order
agrees with position order, as the seed wants. The price is that appends are
serialised on one row for the lock's short tail (the position is the last write);
see ``services.stream_append``.

Other additions to the seed's tables: ``Stream.reply_to`` (a reply is a new stream
from the responder back to the requester, which ``request`` waits on),
``Stream.last_sequence`` (the per-stream counter, under the stream's row lock),
``Chunk.recipient`` (the direct recipient, copied from the stream for the inbox's
index), a null sender meaning the virtual operator persona (``OPERATOR_ID``).
"""

from __future__ import annotations

from typing import TYPE_CHECKING

from django.db import models
from django.utils import timezone

from markus.core.ids import new_id
from markus.core.limits import IDEMPOTENCY_KEY_MAX_CHARS

if TYPE_CHECKING:
    from markus.agents.models import Agent

# The hub's virtual operator persona: it has no agent row (a null sender). The colon
# cannot appear in an agent id, so it never collides with one.
OPERATOR_ID = "markus:operator"
OPERATOR_NAME = "Markus operator"
# The hub's conversations with outside agents (``attention.outside``): what is said to one
# reaches its inbox on a stream of this prefix, from the operator persona. A person's
# chat is ``hub.chat.<session>``, the one kind the agent answers on the bus (a stream
# with ``reply_to`` it and no recipient); the others it answers where they were said.
HUB_STREAM_PREFIX = "hub."
HUB_CHAT_PREFIX = "hub.chat."
INBOX_TOPIC = "agentbus.inbox"
DEFAULT_TOPIC = "agent.message"


def stream_id() -> str:
    return new_id("stm")


class Stream(models.Model):
    """A conversation: direct (one ``recipient``) or group (``members``, the sender
    included). Only the sender closes it."""

    id = models.CharField(primary_key=True, max_length=128, default=stream_id)
    sender = models.ForeignKey(
        "agents.Agent",
        null=True,
        blank=True,
        on_delete=models.CASCADE,
        db_column="sender_id",
        related_name="+",
    )
    recipient = models.ForeignKey(
        "agents.Agent",
        null=True,
        blank=True,
        on_delete=models.CASCADE,
        db_column="recipient_id",
        related_name="+",
    )
    topic = models.CharField(max_length=200, default=DEFAULT_TOPIC)
    is_group = models.BooleanField(default=False)
    members: models.ManyToManyField[Agent, StreamMember] = models.ManyToManyField(
        "agents.Agent", through="StreamMember", related_name="+"
    )
    reply_to = models.CharField(max_length=128, null=True, blank=True)
    last_sequence = models.PositiveIntegerField(default=0)
    closed_at = models.DateTimeField(null=True, blank=True)
    created_at = models.DateTimeField(default=timezone.now)

    class Meta:
        db_table = "agentbus_streams"
        indexes = [
            models.Index(fields=["recipient", "created_at"], name="idx_agentbus_streams_rcpt"),
            models.Index(fields=["reply_to"], name="idx_agentbus_streams_reply"),
        ]

    def __str__(self) -> str:
        return self.id

    @property
    def sender_ref(self) -> str:
        return self.sender_id or OPERATOR_ID


class StreamMember(models.Model):
    stream = models.ForeignKey(Stream, on_delete=models.CASCADE, db_column="stream_id")
    agent = models.ForeignKey("agents.Agent", on_delete=models.CASCADE, db_column="agent_id", related_name="+")
    joined_at = models.DateTimeField(default=timezone.now)

    class Meta:
        db_table = "agentbus_stream_members"
        constraints = [models.UniqueConstraint(fields=["stream", "agent"], name="uniq_agentbus_member")]
        indexes = [models.Index(fields=["agent", "stream"], name="idx_agentbus_member_agent")]

    def __str__(self) -> str:
        return f"{self.agent_id} in {self.stream_id}"


class Chunk(models.Model):
    """One message on a stream. ``sequence`` is per stream; ``position`` orders the
    inbox across streams (see the module docstring)."""

    stream = models.ForeignKey(Stream, on_delete=models.CASCADE, db_column="stream_id", related_name="chunks")
    sequence = models.PositiveIntegerField()
    sender = models.ForeignKey(
        "agents.Agent",
        null=True,
        blank=True,
        on_delete=models.CASCADE,
        db_column="sender_id",
        related_name="+",
    )
    recipient = models.ForeignKey(
        "agents.Agent",
        null=True,
        blank=True,
        on_delete=models.CASCADE,
        db_column="recipient_id",
        related_name="+",
    )
    topic = models.CharField(max_length=200)
    payload = models.JSONField(default=dict)
    position = models.BigIntegerField(unique=True)
    created_at = models.DateTimeField(default=timezone.now)
    # The sender's ``Idempotency-Key`` of the append that stored it (none: sent without
    # one), its own per stream: sent again with it, the message is stored once.
    request_key = models.CharField(max_length=IDEMPOTENCY_KEY_MAX_CHARS, null=True, blank=True)

    class Meta:
        db_table = "agentbus_chunks"
        constraints = [
            models.UniqueConstraint(fields=["stream", "sequence"], name="uniq_agentbus_chunk_seq"),
            models.UniqueConstraint(
                fields=["stream", "sender", "request_key"],
                condition=models.Q(request_key__isnull=False),
                name="uniq_agentbus_chunk_request_key",
            ),
        ]
        indexes = [
            models.Index(fields=["recipient", "position"], name="idx_agentbus_chunks_rcpt"),
            # An agent's messages of the last hour (markus.tools.a2a_tools: the pace of its tools).
            models.Index(fields=["sender", "created_at"], name="idx_agentbus_chunks_sent"),
            # A sender's keyed message that began a stream (services.stream_send_once).
            models.Index(
                fields=["sender", "request_key"],
                condition=models.Q(request_key__isnull=False),
                name="idx_agentbus_chunks_sender_key",
            ),
        ]

    def __str__(self) -> str:
        return f"{self.stream_id}#{self.sequence}"

    @property
    def sender_ref(self) -> str:
        return self.sender_id or OPERATOR_ID


class InboxClock(models.Model):
    """The single counter row that hands out inbox positions in commit order."""

    id = models.PositiveSmallIntegerField(primary_key=True, default=1)
    value = models.BigIntegerField(default=0)

    class Meta:
        db_table = "agentbus_inbox_clock"

    def __str__(self) -> str:
        return f"inbox clock {self.value}"


class ConsumerCursor(models.Model):
    """The consumed position of an agent's inbox, kept at the server for ``drain``.
    ``cursor`` is the opaque value clients see; it is updated by compare-and-set."""

    agent = models.ForeignKey("agents.Agent", on_delete=models.CASCADE, db_column="agent_id", related_name="+")
    topic = models.CharField(max_length=100, default=INBOX_TOPIC)
    cursor = models.CharField(max_length=512)
    position = models.BigIntegerField(default=0)
    updated_at = models.DateTimeField(default=timezone.now)

    class Meta:
        db_table = "agentbus_consumer_cursors"
        constraints = [models.UniqueConstraint(fields=["agent", "topic"], name="uniq_agentbus_consumer")]

    def __str__(self) -> str:
        return f"{self.agent_id} {self.topic} @ {self.position}"


class AuditAction(models.TextChoices):
    OPEN = "open"
    APPEND = "append"
    CLOSE = "close"
    DRAIN = "drain"
    PEEK = "peek"
    ACK = "ack"
    REQUEST = "request"
    RELAY = "relay"


class AuditEvent(models.Model):
    """Every bus action. Plain string references, so the trail outlives the rows."""

    action = models.CharField(max_length=16, choices=AuditAction.choices)
    actor = models.CharField(max_length=200)  # "agent:<id>", "user:<pk>", "cli", OPERATOR_ID
    agent_id = models.CharField(max_length=128, null=True, blank=True)  # the agent acted as / for
    stream_id = models.CharField(max_length=128, null=True, blank=True)
    detail = models.JSONField(default=dict, blank=True)
    created_at = models.DateTimeField(default=timezone.now)

    class Meta:
        db_table = "agentbus_audit"
        indexes = [
            models.Index(fields=["stream_id", "created_at"], name="idx_agentbus_audit_stream"),
            models.Index(fields=["agent_id", "created_at"], name="idx_agentbus_audit_agent"),
        ]

    def __str__(self) -> str:
        return f"{self.action} by {self.actor}"


class OutboxStatus(models.TextChoices):
    PENDING = "pending"
    RELAYED = "relayed"
    FAILED = "failed"  # the payload does not match its schema: retrying cannot help


class OutboxRecord(models.Model):
    """A record to publish on the bus, written inside the transaction that caused it
    and relayed after commit (``agentbus.outbox``). ``audience`` is resolved when the
    row is written. ``available_at`` is both the retry back-off and the claim."""

    topic = models.CharField(max_length=200)
    schema = models.CharField(max_length=200)
    payload = models.JSONField(default=dict)
    audience = models.JSONField(default=list)
    status = models.CharField(max_length=16, choices=OutboxStatus.choices, default=OutboxStatus.PENDING)
    attempts = models.PositiveIntegerField(default=0)
    last_error = models.TextField(blank=True, default="")
    available_at = models.DateTimeField(default=timezone.now)
    created_at = models.DateTimeField(default=timezone.now)
    relayed_at = models.DateTimeField(null=True, blank=True)

    class Meta:
        db_table = "agentbus_outbox"
        indexes = [
            models.Index(
                fields=["available_at", "id"],
                condition=models.Q(status="pending"),
                name="idx_agentbus_outbox_pending",
            )
        ]

    def __str__(self) -> str:
        return f"{self.topic} ({self.status})"
