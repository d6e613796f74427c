"""MCP tool servers as data: what the operator registered, who owns it and whom it is
offered to, whom it is attached to, the policy of each of its tools, and what the workers
last saw of it (its tools, its state).

``env`` and ``headers`` hold secrets: no answer, page or log line shows their values
(only their names)."""

from __future__ import annotations

from typing import Any

from django.conf import settings
from django.db import models
from django.utils import timezone

from markus.agents.models import Agent, Team


class Transport(models.TextChoices):
    STDIO = "stdio"  # a command the worker starts, spoken to over its stdin and stdout
    HTTP = "http"  # a Streamable HTTP endpoint


class Policy(models.TextChoices):
    AUTO = "auto"  # called when the LLM calls it
    ASK = "ask"  # a person approves each call first
    DENY = "deny"  # never offered


# Between a server's name and its tool's in the name the model calls: ``<server>__<tool>``.
SEPARATOR = "__"


class ServerState(models.TextChoices):
    UNKNOWN = "unknown"  # no worker has used it yet
    READY = "ready"  # the last connection listed its tools or answered a call
    FAILING = "failing"  # the last use failed; calls answer a tool error
    DISABLED = "disabled"


class ToolServer(models.Model):
    name = models.SlugField(
        max_length=32,
        unique=True,
        help_text="lowercase letters, digits and single hyphens; its tools are offered as <name>__<tool>",
    )
    description = models.TextField(
        blank=True, default="", help_text="what it is for: shown to the agent with the tools (e.g. which repository)"
    )
    transport = models.CharField(max_length=8, choices=Transport.choices)
    command = models.CharField(max_length=500, blank=True, default="", help_text="stdio: the executable")
    args = models.JSONField(default=list, blank=True, help_text="stdio: its arguments, a list of strings")
    env = models.JSONField(default=dict, blank=True, help_text="stdio: environment variables (secret: write-only)")
    url = models.URLField(max_length=1000, blank=True, default="", help_text="http: the MCP endpoint")
    headers = models.JSONField(default=dict, blank=True, help_text="http: request headers (secret: write-only)")
    timeout_seconds = models.PositiveIntegerField(default=30, help_text="how long a call may take")
    enabled = models.BooleanField(default=True)
    policies = models.JSONField(
        default=dict, blank=True, help_text='{"<tool>": "auto" | "ask" | "deny"}; a tool not named: its default'
    )
    idempotent = models.JSONField(
        default=dict,
        blank=True,
        help_text='{"<tool>": true | false}: a call in flight at a crash is made again (true); '
        "a tool not named: only if it declares idempotentHint",
    )
    agents = models.ManyToManyField(Agent, blank=True, related_name="tool_servers")
    teams = models.ManyToManyField(
        Team, blank=True, related_name="tool_servers", help_text="attached to every agent of these teams"
    )
    # Who may have it: whoever controls an agent attaches a server offered to its team (a
    # server's ``teams`` count as offered to them) or to all; staff attach any.
    owner = models.ForeignKey(
        settings.AUTH_USER_MODEL,
        null=True,
        blank=True,
        on_delete=models.SET_NULL,
        related_name="owned_tool_servers",
        help_text="the staff user who registered it: approves calls for agents outside the teams it is offered to",
    )
    offered_to = models.ManyToManyField(
        Team, blank=True, related_name="offered_tool_servers", help_text="teams whose agents may have it attached"
    )
    offered_to_all = models.BooleanField(default=False, help_text="any agent may have it attached")
    # What a worker last saw: the tools it listed, and how its last use went.
    tools = models.JSONField(default=list, blank=True, editable=False)
    listed_at = models.DateTimeField(null=True, blank=True, editable=False)
    state = models.CharField(max_length=16, choices=ServerState.choices, default=ServerState.UNKNOWN, editable=False)
    last_error = models.TextField(blank=True, default="", editable=False)
    state_at = models.DateTimeField(null=True, blank=True, editable=False)
    created_at = models.DateTimeField(default=timezone.now, editable=False)
    updated_at = models.DateTimeField(default=timezone.now, editable=False)

    class Meta:
        db_table = "tool_servers"
        ordering = ["name"]

    def __str__(self) -> str:
        return self.name

    def policy_of(self, tool: dict[str, Any]) -> str:
        """A listed tool's policy: the operator's, else its annotations' (read-only: auto)."""
        chosen = (self.policies or {}).get(tool.get("name"))
        return str(chosen) if chosen in Policy.values else default_policy(tool)

    def repeatable(self, tool: dict[str, Any]) -> bool:
        """Whether a call in flight at a crash is made again: the operator's word, else the
        tool's own ``idempotentHint`` (a ``readOnlyHint`` is no promise)."""
        chosen = (self.idempotent or {}).get(tool.get("name"))
        if isinstance(chosen, bool):
            return chosen
        return (tool.get("annotations") or {}).get("idempotentHint") is True


def default_policy(tool: dict[str, Any]) -> str:
    """A tool that says it only reads (``readOnlyHint``) runs at once; any other asks."""
    return Policy.AUTO if (tool.get("annotations") or {}).get("readOnlyHint") is True else Policy.ASK
