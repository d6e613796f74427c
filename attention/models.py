"""Attention state with its fenced lease, decisions, activities, their logs, and
persisted LLM sessions."""

from __future__ import annotations

from django.db import models
from django.utils import timezone

from markus.core import ids


class AttentionState(models.TextChoices):
    IDLE = "idle"
    FOCUSED = "focused"
    DECIDING = "deciding"


class DecisionType(models.TextChoices):
    PICK = "pick"
    CONTINUE = "continue"
    PREEMPT = "preempt"
    CANCEL = "cancel"
    MERGE = "merge"
    DEFER = "defer"
    DELEGATE = "delegate"
    DROP = "drop"
    # Triage (seed section 21): a deliberation's choice, or its abort for a human; an
    # item the agent handled inline while it deliberated.
    DELIBERATE = "deliberate"
    INLINE = "inline"
    # The operator paused (or stopped) the agent while an item was in flight: the item
    # goes back to the queue with its session; picked again with a saved session, an
    # item is resumed (after a preempt, a pause, an approval, a lost worker).
    PAUSE = "pause"
    RESUME = "resume"


class ActivityOutcome(models.TextChoices):
    """How an activity ended when it neither completed nor failed (``success`` says
    which of those): its run was cancelled (its task left in_progress, or the judge
    cancelled it) or stopped (the agent paused or stopped mid-turn). Blank otherwise.
    Neither counts as a failure."""

    NONE = "", "-"
    CANCELLED = "cancelled"
    STOPPED = "stopped"


class AgentAttention(models.Model):
    """One row per agent: attention state and the lease (ARCHITECTURE decision 2).

    The lease is taken, renewed and released with conditional UPDATEs; ``lease_epoch``
    only ever grows, and every loop write about an item is fenced by it.
    """

    agent = models.OneToOneField("agents.Agent", primary_key=True, on_delete=models.CASCADE, related_name="attention")
    state = models.CharField(max_length=16, choices=AttentionState.choices, default=AttentionState.IDLE)
    lease_owner = models.CharField(max_length=200, blank=True, default="")
    lease_expires_at = models.DateTimeField(null=True, blank=True)
    lease_epoch = models.BigIntegerField(default=0)
    current_item = models.ForeignKey(
        "mailbox.MailboxItem", null=True, blank=True, on_delete=models.SET_NULL, related_name="+"
    )
    focus_started_at = models.DateTimeField(null=True, blank=True)
    # Set by stop/pause: the holder sees it at its next yield point.
    cancel_requested = models.BooleanField(default=False)
    updated_at = models.DateTimeField(default=timezone.now)

    class Meta:
        db_table = "agent_attention"
        verbose_name = "agent attention"
        verbose_name_plural = "agent attention"

    def __str__(self) -> str:
        return f"{self.agent_id} [{self.state}]"


class AgentDecision(models.Model):
    id = models.CharField(primary_key=True, max_length=64, default=ids.decision_id)
    agent = models.ForeignKey("agents.Agent", on_delete=models.CASCADE, db_column="agent_id", related_name="decisions")
    decision_type = models.CharField(max_length=16, choices=DecisionType.choices)
    mailbox_item = models.ForeignKey(
        "mailbox.MailboxItem", on_delete=models.CASCADE, db_column="mailbox_item_id", related_name="decisions"
    )
    context = models.JSONField(default=dict)
    reasoning = models.TextField(default="")
    outcome = models.TextField(null=True, blank=True)
    created_at = models.DateTimeField(default=timezone.now)
    # Addition: the lease epoch the decision was taken under (invariant tests count it).
    lease_epoch = models.BigIntegerField(null=True, blank=True)

    class Meta:
        db_table = "agent_decisions"
        indexes = [
            models.Index(fields=["agent", "-created_at"], name="idx_decisions_agent"),
            models.Index(fields=["mailbox_item"], name="idx_decisions_mailbox_item"),
        ]

    def __str__(self) -> str:
        return f"{self.id} {self.decision_type}"


class AgentActivity(models.Model):
    id = models.CharField(primary_key=True, max_length=64, default=ids.activity_id)
    agent = models.ForeignKey("agents.Agent", on_delete=models.CASCADE, db_column="agent_id", related_name="activities")
    mailbox_item = models.ForeignKey(
        "mailbox.MailboxItem",
        null=True,
        blank=True,
        on_delete=models.SET_NULL,
        db_column="mailbox_item_id",
        related_name="activities",
    )
    type = models.CharField(max_length=32)
    label = models.CharField(max_length=300)
    task_id = models.CharField(max_length=64, null=True, blank=True)
    started_at = models.DateTimeField(default=timezone.now)
    ended_at = models.DateTimeField(null=True, blank=True)
    total_tokens = models.IntegerField(default=0)
    total_tools = models.IntegerField(default=0)
    success = models.BooleanField(default=True)
    # Set (with success False) when the run was cancelled or stopped, not failed.
    outcome = models.CharField(max_length=16, choices=ActivityOutcome.choices, blank=True, default="")
    created_at = models.DateTimeField(default=timezone.now)
    lease_epoch = models.BigIntegerField(null=True, blank=True)
    # Whose private conversation the activity works on (mailbox.representation's
    # privateTo of its item, or of the items a deliberation weighed; 0: several
    # people's); null: none. Its label and logs are shown to that person, staff and the
    # agent (markus.agents.permissions.Reader).
    private_to = models.IntegerField(null=True, blank=True)

    # Not a field: the last activity-log sequence number, cached on the instance by
    # records.start_activity/log (absent until one of them sets it).
    _log_seq: int

    class Meta:
        db_table = "agent_activities"
        verbose_name_plural = "agent activities"
        indexes = [
            models.Index(fields=["agent", "-started_at"], name="idx_activities_agent"),
            models.Index(fields=["mailbox_item"], name="idx_activities_mailbox_item"),
        ]

    def __str__(self) -> str:
        return f"{self.id} {self.type}"


class ActivityLogType(models.TextChoices):
    STATUS = "status"
    TEXT = "text"
    TOOL_START = "tool_start"
    TOOL_END = "tool_end"
    ERROR = "error"
    LLM_REQUEST = "llm_request"


class AgentActivityLog(models.Model):
    id = models.BigAutoField(primary_key=True)
    # No index of its own: idx_activity_logs_activity (activity_id, seq) serves its lookups
    # in order; a one-column index beside it is one the PostgreSQL planner prefers, then sorts.
    activity = models.ForeignKey(
        AgentActivity, on_delete=models.CASCADE, db_column="activity_id", related_name="logs", db_index=False
    )
    seq = models.IntegerField()
    type = models.CharField(max_length=16, choices=ActivityLogType.choices)
    content = models.TextField(default="")
    metadata = models.JSONField(default=dict, null=True, blank=True)
    created_at = models.DateTimeField(default=timezone.now)

    class Meta:
        db_table = "agent_activity_logs"
        indexes = [models.Index(fields=["activity", "seq"], name="idx_activity_logs_activity")]

    def __str__(self) -> str:
        return f"{self.activity_id} #{self.seq} {self.type}"


class LLMSession(models.Model):
    """A persisted LLM tool-loop session: preempt saves it, any worker resumes it."""

    id = models.CharField(primary_key=True, max_length=64)
    agent = models.ForeignKey("agents.Agent", on_delete=models.CASCADE, related_name="llm_sessions")
    mailbox_item = models.ForeignKey(
        "mailbox.MailboxItem", null=True, blank=True, on_delete=models.SET_NULL, related_name="llm_sessions"
    )
    messages = models.JSONField(default=list)
    # Items merged into this session's item whose content the session already carries;
    # any other absorbed item is appended when the session resumes.
    absorbed_ids = models.JSONField(default=list)
    turn_count = models.IntegerField(default=0)
    scenario = models.CharField(max_length=32, default="")
    updated_at = models.DateTimeField(default=timezone.now)
    # This session's attempt: its tool calls are journaled under it (``ToolCallRecord``);
    # a session started afresh for the same item is a new attempt.
    attempt = models.CharField(max_length=64, default=ids.attempt_id)

    class Meta:
        db_table = "llm_sessions"
        verbose_name = "LLM session"
        verbose_name_plural = "LLM sessions"

    def __str__(self) -> str:
        return self.id


class ToolCallState(models.TextChoices):
    AWAITING = "awaiting"  # a call a person must approve first; its item is parked
    STARTED = "started"  # recorded before a call whose effect leaves the transaction
    DONE = "done"  # its result recorded


class ToolCallRecord(models.Model):
    """The journal of an item's turns (ARCHITECTURE decision 14): one row per tool call
    of an item's LLM session, keyed by the item, the session's attempt, the turn and
    the call's position in that turn (the LLM's call id is kept, but providers do not all
    make it unique). A call whose tool writes only to this database is recorded with
    its result in the very transaction of its effect; any other is recorded ``started``
    before the call and ``done`` with its result after it. A resumed, recovered or
    retried item replays a recorded result instead of calling the tool again."""

    id = models.BigAutoField(primary_key=True)
    mailbox_item = models.ForeignKey(
        "mailbox.MailboxItem", on_delete=models.CASCADE, db_column="mailbox_item_id", related_name="tool_calls"
    )
    attempt = models.CharField(max_length=64)
    turn = models.IntegerField()
    position = models.IntegerField()
    call_id = models.CharField(max_length=200, blank=True, default="")
    name = models.CharField(max_length=200)
    arguments = models.JSONField(default=dict)
    state = models.CharField(max_length=16, choices=ToolCallState.choices, default=ToolCallState.DONE)
    ok = models.BooleanField(null=True)
    result = models.TextField(default="")
    # What the call left to the loop (a parked approval), replayed with the result.
    effects = models.JSONField(default=dict)
    activity_id = models.CharField(max_length=64, null=True, blank=True)
    lease_epoch = models.BigIntegerField(null=True, blank=True)
    started_at = models.DateTimeField(default=timezone.now)
    completed_at = models.DateTimeField(null=True, blank=True)

    class Meta:
        db_table = "tool_calls"
        constraints = [
            models.UniqueConstraint(
                fields=["mailbox_item", "attempt", "turn", "position"], name="uniq_tool_call_per_turn"
            )
        ]

    def __str__(self) -> str:
        return f"{self.mailbox_item_id} turn {self.turn} {self.name} [{self.state}]"
