"""What the loop holds while it is focused on one item, and how an item's run ends."""

from __future__ import annotations

import time
from dataclasses import dataclass, field

from mailbox.models import MailboxItem
from markus.agents.models import Agent

from .lease import Lease
from .models import AgentActivity


@dataclass
class Focus:
    """The item being worked on, under which lease, in which scenario."""

    lease: Lease
    item: MailboxItem
    scenario: str
    agent: Agent
    activity: AgentActivity | None = None
    seen: set[str] = field(default_factory=set)  # queued items already decided about
    merged_ids: list[str] = field(default_factory=list)
    last_stop_check: float = 0.0
    stop_flag: bool = False

    def stop_requested(self) -> bool:
        now = time.monotonic()
        if now - self.last_stop_check > 0.1:
            self.last_stop_check = now
            self.stop_flag = not Agent.objects.filter(id=self.agent.id, status=Agent.RunStatus.RUNNING).exists()
        return self.stop_flag


@dataclass
class Outcome:
    """How a run of an item ended. ``kind``: completed | preempted | cancelled |
    stopped | retry | parked."""

    kind: str
    text: str = ""
    detail: str = ""
