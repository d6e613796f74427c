"""The pace of an agent's messages: at most ``MARKUS["AGENT_MESSAGES_PER_HOUR"]`` from one
agent to one agent (``recipient=``) or one group (``stream=``) in the last hour.

Every message to an agent the loop runs is an item its model answers, so two agents that
answer each message with a new one, or an outside agent sending in a loop, would make
it spend without end. Who checks: the agent's tools (``markus.tools.a2a_tools``) for an
agent the loop runs, before the message and its effects (the loop's own answer to a
message that waits for one is never paced: it answers, it starts nothing), and
``agentbus.services.stream_append`` for an outside agent writing to agents the loop runs,
whichever door it came through (REST, MCP, A2A, the CLI). Messages between outside agents
cost no model call and are not paced.

A count of the sender's last hour on the chunks' index (sender, time), at most that many
rows; past it ``Paced``: 429 with ``Retry-After`` (when the newest ``most``-th message
leaves the hour, so fewer than ``most`` are left) and the limit.
"""

from __future__ import annotations

import math
from datetime import timedelta
from typing import Any

from django.conf import settings
from django.utils import timezone

from markus.agents.models import Agent
from markus.core.errors import MarkusError

from .models import Chunk

HOUR = timedelta(hours=1)


class Paced(MarkusError):
    """429: the sender's messages to this agent or group in the last hour reached the pace."""

    status_code = 429
    code = "throttled"

    def __init__(self, reached: str, *, wait: int, limit: int) -> None:
        super().__init__(f"{reached}; try again in {wait} s")
        self.reached = reached  # what was reached, without when to try again (a model cannot wait)
        self.wait = wait  # Retry-After, in whole seconds
        self.extra = {"limit": limit}


def check_pace(sender: Agent, name: str, **to: Any) -> None:
    """Raise ``Paced`` when ``sender`` sent the pace's most to ``name`` (``recipient=`` an
    agent, or ``stream=`` a group) in the last hour."""
    most = settings.MARKUS["AGENT_MESSAGES_PER_HOUR"]
    now = timezone.now()
    times = list(
        Chunk.objects.filter(sender=sender, created_at__gte=now - HOUR, **to)
        .order_by("-created_at")
        .values_list("created_at", flat=True)[:most]
    )
    if len(times) < most:
        return
    wait = max(1, math.ceil((times[-1] + HOUR - now).total_seconds()))
    raise Paced(
        f"not sent: you sent {most} messages to {name} in the last hour (MARKUS_AGENT_MESSAGES_PER_HOUR), "
        "the most one agent sends to one agent or group",
        wait=wait,
        limit=most,
    )
