"""Teams, agents, user API tokens, chat sessions and working memory."""

from __future__ import annotations

import hashlib
from typing import TYPE_CHECKING, ClassVar
from zoneinfo import ZoneInfo, ZoneInfoNotFoundError, available_timezones

from django.conf import settings
from django.core.exceptions import ValidationError
from django.core.validators import MaxValueValidator, MinValueValidator
from django.db import models
from django.utils import timezone

from markus.core import ids

if TYPE_CHECKING:
    from django.contrib.auth.models import User

# The bounds of a heartbeat interval, in minutes (5 min to 24 h).
HEARTBEAT_MIN_MINUTES = 5
HEARTBEAT_MAX_MINUTES = 24 * 60


def zone_named(name: str) -> ZoneInfo:
    """The IANA time zone ``name`` ("" or unknown: the server's TIME_ZONE)."""
    try:
        return ZoneInfo(name or settings.TIME_ZONE)
    except (ZoneInfoNotFoundError, ValueError):
        return ZoneInfo(settings.TIME_ZONE)


def validate_time_zone(value: str) -> None:
    """An IANA time zone name such as ``Europe/Berlin`` ("" allowed: the server's)."""
    if value and value not in available_timezones():
        raise ValidationError(f"unknown time zone {value!r}: expected an IANA name such as Europe/Berlin")


def hash_token(raw: str) -> str:
    return hashlib.sha256(raw.encode()).hexdigest()


class UserToken(models.Model):
    """A user's API token (``Authorization: Token <key>``), stored only as the SHA-256
    of the key (``hash_token``, as agent tokens are): the key is shown once, when it is
    issued (``manage.py drf_create_token``), and cannot be read back. A user may hold
    several; deleting one revokes it."""

    user = models.ForeignKey(settings.AUTH_USER_MODEL, on_delete=models.CASCADE, related_name="api_tokens")
    key_hash = models.CharField(max_length=64, unique=True, editable=False)
    name = models.CharField(max_length=100, blank=True, default="")
    created_at = models.DateTimeField(default=timezone.now)

    class Meta:
        db_table = "user_tokens"
        ordering = ["created_at", "id"]

    def __str__(self) -> str:
        return f"API token {self.pk} of {self.user}"


class Team(models.Model):
    """A team of people and agents. ``agent_task_approval``: a task one of its agents
    files (for itself or a teammate) waits ``pending`` until a person approves it."""

    id = models.CharField(primary_key=True, max_length=64, default=ids.team_id)
    name = models.CharField(max_length=200)
    owner = models.ForeignKey(settings.AUTH_USER_MODEL, on_delete=models.PROTECT, related_name="owned_teams")
    members = models.ManyToManyField(settings.AUTH_USER_MODEL, related_name="teams", blank=True)
    agent_task_approval = models.BooleanField(
        default=True, help_text="Tasks an agent files wait for a person's approval before they start."
    )
    created_at = models.DateTimeField(default=timezone.now)

    class Meta:
        db_table = "teams"

    def __str__(self) -> str:
        return self.name


class AgentQuerySet(models.QuerySet["Agent"]):
    def running(self) -> AgentQuerySet:
        """The agents the attention loop runs now: internal and running (the one
        definition; the lease's raw statements use ``Agent.RUNS``)."""
        return self.filter(**Agent.RUNS)


class Agent(models.Model):
    """An agent. ``kind`` internal: the attention loop runs it; external: a harness (a
    coding CLI) that reads its inbox over the AgentBus. The API token is stored hashed
    and shown once, on creation."""

    class Kind(models.TextChoices):
        INTERNAL = "internal"
        EXTERNAL = "external"

    class RunStatus(models.TextChoices):
        RUNNING = "running"
        PAUSED = "paused"
        STOPPED = "stopped"

    id = models.CharField(primary_key=True, max_length=64)
    name = models.CharField(max_length=200)
    role = models.CharField(max_length=200, blank=True, default="")
    kind = models.CharField(max_length=16, choices=Kind.choices, default=Kind.INTERNAL)
    status = models.CharField(max_length=16, choices=RunStatus.choices, default=RunStatus.RUNNING)
    team = models.ForeignKey(Team, null=True, blank=True, on_delete=models.SET_NULL, related_name="agents")
    owner = models.ForeignKey(
        settings.AUTH_USER_MODEL, null=True, blank=True, on_delete=models.SET_NULL, related_name="agents"
    )
    token_hash = models.CharField(max_length=64, unique=True, null=True, blank=True, editable=False)
    created_at = models.DateTimeField(default=timezone.now)
    # The agent's rhythm (attention.heartbeat). The interval is set by the operator (the
    # console, PATCH /api/agents/{id}) or by the agent itself (set_heartbeat_interval);
    # empty: MARKUS["HEARTBEAT_DEFAULT_MINUTES"].
    heartbeat_interval_minutes = models.PositiveIntegerField(
        null=True,
        blank=True,
        validators=[MinValueValidator(HEARTBEAT_MIN_MINUTES), MaxValueValidator(HEARTBEAT_MAX_MINUTES)],
        help_text=f"minutes between heartbeats, {HEARTBEAT_MIN_MINUTES} to {HEARTBEAT_MAX_MINUTES}; "
        "empty: the default (6 h)",
    )
    # (Declared after created_at: in the class body the name hides django.utils.timezone.)
    timezone = models.CharField(
        "time zone",
        max_length=64,
        blank=True,
        default="",
        validators=[validate_time_zone],
        help_text="IANA name, e.g. Europe/Berlin; empty: the server's time zone",
    )
    heartbeat_active_start = models.PositiveSmallIntegerField(
        null=True,
        blank=True,
        validators=[MaxValueValidator(23)],
        help_text="first hour (0-23, the agent's time zone) heartbeats may run; empty: all day",
    )
    heartbeat_active_end = models.PositiveSmallIntegerField(
        null=True,
        blank=True,
        validators=[MaxValueValidator(23)],
        help_text="the hour (0-23) heartbeats stop; before the start hour: the window runs past midnight",
    )
    # Kept by the heartbeat itself.
    next_heartbeat_at = models.DateTimeField(null=True, blank=True, help_text="empty: at the next beat tick")
    last_heartbeat_at = models.DateTimeField(null=True, blank=True)
    heartbeat_idle_streak = models.PositiveSmallIntegerField(default=0)
    heartbeat_sleep_depth = models.PositiveSmallIntegerField(
        default=0, help_text="each level doubles the interval (at most 24 h); new work resets it"
    )

    objects = AgentQuerySet.as_manager()

    # What "the loop runs this agent" means, as field values (``AgentQuerySet.running``).
    RUNS: ClassVar[dict[str, str]] = {"kind": Kind.INTERNAL.value, "status": RunStatus.RUNNING.value}

    class Meta:
        db_table = "agents"
        ordering = ["created_at", "id"]

    def __str__(self) -> str:
        return f"{self.name} ({self.id})"

    @property
    def answerable_person(self) -> User | None:
        """The person who answers for this agent: its owner, else its team's owner
        (select ``owner`` and ``team__owner`` with it to read this without a query)."""
        return self.owner or (self.team.owner if self.team is not None else None)

    @property
    def is_running(self) -> bool:
        """The attention loop runs it (``AgentQuerySet.running``), as this instance says."""
        return all(getattr(self, name) == value for name, value in self.RUNS.items())

    def clean(self) -> None:
        super().clean()
        start, end = self.heartbeat_active_start, self.heartbeat_active_end
        if (start is None) != (end is None):
            raise ValidationError("active hours need both a start and an end hour (or neither)")
        if start is not None and start == end:
            raise ValidationError("active hours: the start and the end hour must differ")

    def zone(self) -> ZoneInfo:
        """The agent's time zone (the server's when none is set)."""
        return zone_named(self.timezone)


class ChatSession(models.Model):
    """A chat session; each agent has exactly one main session (its activity log)."""

    id = models.CharField(primary_key=True, max_length=64, default=ids.session_id)
    agent = models.ForeignKey(Agent, on_delete=models.CASCADE, related_name="chat_sessions")
    user = models.ForeignKey(settings.AUTH_USER_MODEL, null=True, blank=True, on_delete=models.SET_NULL)
    is_main = models.BooleanField(default=False)
    title = models.CharField(max_length=200, blank=True, default="")
    created_at = models.DateTimeField(default=timezone.now)
    last_message_at = models.DateTimeField(null=True, blank=True)

    class Meta:
        db_table = "chat_sessions"
        constraints = [
            models.UniqueConstraint(
                fields=["agent"], condition=models.Q(is_main=True), name="one_main_session_per_agent"
            )
        ]

    def __str__(self) -> str:
        return f"{self.title or 'Session'} ({self.id})"


class ChatMessage(models.Model):
    class Role(models.TextChoices):
        USER = "user"  # the person chatting
        ASSISTANT = "assistant"  # the agent's reply
        SYSTEM = "system"  # activity lines the loop writes into the main session

    session = models.ForeignKey(ChatSession, on_delete=models.CASCADE, related_name="messages")
    role = models.CharField(max_length=16, choices=Role.choices)
    content = models.TextField(default="")
    metadata = models.JSONField(default=dict, blank=True)
    created_at = models.DateTimeField(default=timezone.now)
    # A reply: the mailbox item it answers (the one that led; the follow-ups merged into
    # it reach it through their merge), read by one query on its index
    # (``markus.agents.chat.chat_reply_for``). Only a reply sets it: a message that merely
    # names an item (a budget's notice) does not. No foreign key: a reply outlives the
    # retention of the item it answered.
    reply_to = models.CharField(max_length=64, null=True, blank=True)

    class Meta:
        db_table = "chat_messages"
        indexes = [
            models.Index(fields=["session", "created_at"], name="idx_chat_messages_session"),
            models.Index(fields=["reply_to"], condition=models.Q(reply_to__isnull=False), name="idx_chat_reply_to"),
        ]

    def __str__(self) -> str:
        return f"{self.role} message {self.pk} in {self.session_id}"


class WorkingMemory(models.Model):
    """Keyed working memory (persisted; the seed leaves it volatile)."""

    agent = models.ForeignKey(Agent, on_delete=models.CASCADE, related_name="working_memory")
    key = models.CharField(max_length=200)
    content = models.TextField(default="")
    updated_at = models.DateTimeField(default=timezone.now)

    class Meta:
        db_table = "agent_working_memory"
        verbose_name = "working memory"
        verbose_name_plural = "working memories"
        constraints = [models.UniqueConstraint(fields=["agent", "key"], name="uniq_working_memory_key")]

    def __str__(self) -> str:
        return f"{self.agent_id}: {self.key}"
