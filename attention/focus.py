"""What the loop holds while it runs: the run (its lease, the agent, what it read once),
the item it is focused on, and how an item's run ends."""

from __future__ import annotations

import time
from dataclasses import dataclass, field
from datetime import datetime
from typing import TYPE_CHECKING, Any

from mailbox.models import MailboxItem
from markus.agents.models import Agent, WorkingMemory

from .lease import Lease
from .models import AgentActivity

if TYPE_CHECKING:
    from .models import LLMSession
    from .records import LogLine


@dataclass
class Run:
    """One run of the loop under one lease: what it reads once and keeps while nothing
    it knows of changes it. ``memory``: the agent's working memory as (key, content),
    None when it must be read again (a tool ran: tools may write it)."""

    lease: Lease
    agent: Agent | None = None
    memory: list[tuple[str, str]] | None = None

    def the_agent(self) -> Agent:
        if self.agent is None:
            self.agent = Agent.objects.get(id=self.lease.agent_id)
        return self.agent

    def working_memory(self) -> list[tuple[str, str]]:
        if self.memory is None:
            self.memory = list(
                WorkingMemory.objects.filter(agent_id=self.lease.agent_id).order_by("key").values_list("key", "content")
            )
        return self.memory

    def remember(self, key: str, content: str) -> None:
        """The loop wrote a working-memory entry: keep the cached copy in step."""
        if self.memory is not None:
            self.memory = sorted([*(m for m in self.memory if m[0] != key), (key, content)])


@dataclass
class Focus:
    """The item being worked on, under which lease, in which scenario.

    ``seen``: the queued items already there when the focus began (a yield point
    decides only about the others); when the loop read only the head of a long queue
    (``seen_all`` False), an item not in ``seen`` counts as new only if it was queued
    after ``seen_since``. ``queue``: that read (the items waiting, in dequeue order)
    and ``depth`` their number, for the first prompt. ``pending_logs`` and
    ``pending_usage``: what the last LLM turn produced, written with the item's outcome
    in its settle transaction."""

    lease: Lease
    item: MailboxItem
    scenario: str
    agent: Agent
    run: Run | None = None
    activity: AgentActivity | None = None
    seen: set[str] = field(default_factory=set)
    seen_all: bool = True
    seen_since: datetime | None = None
    queue: list[MailboxItem] | None = None
    depth: int | None = None
    merged_ids: list[str] = field(default_factory=list)
    last_stop_check: float = 0.0
    stop_flag: bool = False
    chat_session: str | None = None
    saved_session: bool | None = None  # has the item a saved session? None: unknown
    session: LLMSession | None = None
    session_stored: bool = True
    session_dirty: bool = False
    pending_logs: list[LogLine] = field(default_factory=list)
    pending_usage: dict[str, int] = field(default_factory=dict)

    def stop_requested(self) -> bool:
        now = time.monotonic()
        if now - self.last_stop_check > 0.1:
            self.last_stop_check = now
            self.stop_flag = not Agent.objects.filter(id=self.agent.id, status=Agent.RunStatus.RUNNING).exists()
        return self.stop_flag

    def is_arrival(self, item: MailboxItem) -> bool:
        """Did this queued item arrive after the focus began?"""
        if item.id in self.seen or item.id == self.item.id:
            return False
        return self.seen_all or self.seen_since is None or item.queued_at >= self.seen_since

    def take_usage(self) -> dict[str, Any]:
        usage, self.pending_usage = self.pending_usage, {}
        return usage


@dataclass
class Outcome:
    """How a run of an item ended. ``kind``: completed | preempted | cancelled |
    stopped | retry | parked."""

    kind: str
    text: str = ""
    detail: str = ""
