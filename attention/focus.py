"""What the loop holds while it runs: the run (its lease, the agent, what it read once),
the item it is focused on, and how an item's run ends."""

from __future__ import annotations

import time
from dataclasses import dataclass, field
from datetime import datetime
from typing import TYPE_CHECKING

from django.utils import timezone

from mailbox.models import MailboxItem
from markus.agents import memory as wmem
from markus.agents.models import Agent
from markus.memory import selectors as longterm_selectors
from markus.memory.document import Section

from .lease import Lease
from .models import AgentActivity

if TYPE_CHECKING:
    from .models import LLMSession
    from .records import LogLine


@dataclass
class Run:
    """One run of the loop under one lease: what it reads once and keeps while nothing
    it knows of changes it. ``memory``: the agent's working memory (its entries by
    key), None when it must be read again (a tool ran: tools may write it); ``longterm``
    likewise for the prompt's long-term memory."""

    lease: Lease
    agent: Agent | None = None
    memory: list[wmem.Entry] | None = None
    # MEMORY.md and whether there are observations to search: read again after a tool ran
    longterm: tuple[list[Section], bool] | None = None

    def longterm_state(self) -> tuple[list[Section], bool]:
        if self.longterm is None:
            self.longterm = longterm_selectors.prompt_state(self.lease.agent_id)
        return self.longterm

    def the_agent(self) -> Agent:
        if self.agent is None:
            self.agent = Agent.objects.get(id=self.lease.agent_id)
        return self.agent

    def working_memory(self) -> list[wmem.Entry]:
        if self.memory is None:
            self.memory = wmem.read(self.lease.agent_id)
        return self.memory

    def remember(self, key: str, content: str) -> None:
        """The loop wrote a working-memory entry (through ``markus.agents.memory.remember``):
        keep the cached copy in step, bounded by the same rule."""
        if self.memory is not None:
            key = wmem.bound_key(key)
            content, _ = wmem.bound_content(content)
            entry = wmem.Entry(key, content, timezone.now())
            entries = sorted([*(m for m in self.memory if m.key != key), entry], key=lambda e: e.key)
            self.memory, _ = wmem.trim(entries, keep=key)


@dataclass
class TurnRecords:
    """What a turn leaves to write: its log lines and its token usage, written with what
    follows it (the tool round's first transaction, or the item's outcome in settle)."""

    lines: list[LogLine] = field(default_factory=list)
    tokens: int = 0
    tools: int = 0

    def note(self, line: LogLine) -> None:
        self.lines.append(line)

    def take_lines(self, *also: LogLine) -> list[LogLine]:
        lines, self.lines = [*self.lines, *also], []
        return lines

    def count(self, *, tokens: int, tools: int) -> None:
        self.tokens += tokens
        self.tools += tools

    def take_usage(self) -> tuple[int, int]:
        usage, self.tokens, self.tools = (self.tokens, self.tools), 0, 0
        return usage


@dataclass
class HeldSession:
    """What the focus holds of its item's LLM session: the session (None until it is
    loaded), whether it is stored yet (a new one is inserted by its first save), whether
    it changed since it was saved, and whether the loop's queue read said the item has
    one (None: not known)."""

    session: LLMSession | None = None
    stored: bool = True
    dirty: bool = False
    saved: bool | None = None


@dataclass
class Focus:
    """The item being worked on, under which lease, in which scenario.

    ``seen``: the queued items already there when the focus began (a yield point
    decides only about the others); when the loop read only the head of a long queue
    (``seen_all`` False), an item not in ``seen`` counts as new only if it was queued
    after ``seen_since``. ``queue``: that read (the items waiting, in dequeue order)
    and ``depth`` their number, for the first prompt. ``held``: what it holds of the
    item's LLM session; ``turn``: what the last LLM turn left to write. ``batch``: the
    items processed with it in its session (claimed with it, settled with it; see
    ``attention.batch``)."""

    lease: Lease
    item: MailboxItem
    scenario: str
    agent: Agent
    run: Run | None = None
    batch: list[MailboxItem] = field(default_factory=list)
    batch_context: str = ""  # deliberation's instruction for the batch, if any
    activity: AgentActivity | None = None
    seen: set[str] = field(default_factory=set)
    seen_all: bool = True
    seen_since: datetime | None = None
    queue: list[MailboxItem] | None = None
    depth: int | None = None
    longterm: list[str] | None = None  # the prompt's long-term memory block, read at the first turn
    merged_ids: list[str] = field(default_factory=list)
    last_stop_check: float = 0.0
    stop_flag: bool = False
    chat_session: str | None = None
    held: HeldSession = field(default_factory=HeldSession)
    turn: TurnRecords = field(default_factory=TurnRecords)

    def stop_requested(self) -> bool:
        now = time.monotonic()
        if now - self.last_stop_check > 0.1:
            self.last_stop_check = now
            self.stop_flag = not Agent.objects.running().filter(id=self.agent.id).exists()
        return self.stop_flag

    def is_arrival(self, item: MailboxItem) -> bool:
        """Did this queued item arrive after the focus began?"""
        if item.id in self.seen or item.id == self.item.id:
            return False
        return self.seen_all or self.seen_since is None or item.queued_at >= self.seen_since


@dataclass
class Outcome:
    """How a run of an item ended. ``kind``: completed | preempted | cancelled |
    stopped | retry | parked (for an approval) | awaiting_reply (for a colleague's
    reply, ``detail`` the tool's effect as JSON)."""

    kind: str
    text: str = ""
    detail: str = ""
