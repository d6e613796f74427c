"""Teams, agents, user API tokens, chat sessions and working memory."""

from __future__ import annotations

import hashlib

from django.conf import settings
from django.db import models
from django.utils import timezone

from markus.core import ids


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
    id = models.CharField(primary_key=True, max_length=64, default=ids.team_id)
    name = models.CharField(max_length=200)
    owner = models.ForeignKey(settings.AUTH_USER_MODEL, on_delete=models.PROTECT, related_name="owned_teams")
    members = models.ManyToManyField(settings.AUTH_USER_MODEL, related_name="teams", blank=True)
    created_at = models.DateTimeField(default=timezone.now)

    class Meta:
        db_table = "teams"

    def __str__(self) -> str:
        return self.name


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

    class Meta:
        db_table = "agents"
        ordering = ["created_at", "id"]

    def __str__(self) -> str:
        return f"{self.name} ({self.id})"


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
    session = models.ForeignKey(ChatSession, on_delete=models.CASCADE, related_name="messages")
    role = models.CharField(max_length=16)  # user | assistant | system
    content = models.TextField(default="")
    metadata = models.JSONField(default=dict, blank=True)
    created_at = models.DateTimeField(default=timezone.now)

    class Meta:
        db_table = "chat_messages"
        indexes = [models.Index(fields=["session", "created_at"], name="idx_chat_messages_session")]

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
