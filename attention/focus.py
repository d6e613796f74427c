"""What the loop holds while it runs: the run (its lease, the agent, what it read once),
the item it is focused on, and how an item's run ends."""

from __future__ import annotations

import json
import time
from dataclasses import dataclass, field
from datetime import datetime
from typing import TYPE_CHECKING, Any, ClassVar, TypeAlias

from django.utils import timezone

from mailbox.models import MailboxItem
from markus.agents import memory as wmem
from markus.agents.models import Agent
from markus.core.shutdown import worker_stopping
from markus.memory import selectors as longterm_selectors
from markus.memory.document import Section

from .lease import Lease
from .models import AgentActivity
from .scenarios import Scenario, row

if TYPE_CHECKING:
    from .models import LLMSession
    from .records import LogLine


def agent_is_running(agent_id: str) -> bool:
    return Agent.objects.running().filter(id=agent_id).exists()


def must_let_go(agent_id: str) -> bool:
    """A run lets go of its work at its next safe point: its worker is stopping, or its
    agent was paused or stopped (what a model call's cancel watch asks)."""
    return worker_stopping() or not agent_is_running(agent_id)


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

    @property
    def row(self) -> Scenario:
        """The scenario's row: what the loop does differently for it."""
        return row(self.scenario)

    def stop_requested(self) -> bool:
        now = time.monotonic()
        if now - self.last_stop_check > 0.1:
            self.last_stop_check = now
            self.stop_flag = must_let_go(self.agent.id)
        return self.stop_flag

    def is_arrival(self, item: MailboxItem) -> bool:
        """Did this queued item arrive after the focus began?"""
        if item.id in self.seen or item.id == self.item.id:
            return False
        since = self.arrivals_since
        return since is None or item.queued_at >= since

    @property
    def arrivals_since(self) -> datetime | None:
        """Since when a queued item not in ``seen`` is new to the focus (None: any such
        item, the focus's read having held the whole queue); a yield point reads only
        what was queued since then (``lifecycle.queued_or_come_due``)."""
        return None if self.seen_all else self.seen_since


# ---------------------------------------------------------------------------- how a run ends
# One frozen class per way a run of an item can end; ``Outcome`` is their union, and
# ``attention.settle`` settles it with one ``match`` a type checker holds exhaustive.
# ``kind`` and ``detail`` are what the activity's status line and the trace say.


@dataclass(frozen=True)
class Completed:
    """The run ended with its final answer (``text``): the scenario's ending answers
    whoever waits with it."""

    text: str = ""
    kind: ClassVar[str] = "completed"

    @property
    def detail(self) -> str:
        return ""


@dataclass(frozen=True)
class Preempted:
    """A more urgent item took over (``reason``: by which): it resumes later."""

    reason: str = ""
    kind: ClassVar[str] = "preempted"

    @property
    def detail(self) -> str:
        return self.reason


@dataclass(frozen=True)
class Cancelled:
    """What it was for went away (``reason``): it ends, and whoever waits for its answer
    is told why (``attention.endings.given_up``). ``task_left``: its task left
    in_progress (a revoked execution); the cancel decision saying so is written as it
    settles."""

    reason: str = ""
    task_left: bool = False
    kind: ClassVar[str] = "cancelled"

    @property
    def detail(self) -> str:
        return self.reason


@dataclass(frozen=True)
class Stopped:
    """The agent was stopped or paused, or a budget refused the next call (``reason``
    "budget: …"): back to the queue with its session."""

    reason: str = ""
    kind: ClassVar[str] = "stopped"

    @property
    def detail(self) -> str:
        return self.reason


@dataclass(frozen=True)
class Retry:
    """The attempt failed (``reason``): run again from a clean start, a few times."""

    reason: str
    kind: ClassVar[str] = "retry"

    @property
    def detail(self) -> str:
        return self.reason


@dataclass(frozen=True)
class Failed:
    """It may not try again (its ceiling was reached, ``reason``): it ends failed now."""

    reason: str
    kind: ClassVar[str] = "failed"

    @property
    def detail(self) -> str:
        return self.reason


@dataclass(frozen=True)
class Parked:
    """It waits for a person's answer to the approval ``approval_id``."""

    approval_id: str
    kind: ClassVar[str] = "parked"

    @property
    def detail(self) -> str:
        return self.approval_id


@dataclass(frozen=True)
class AwaitingReply:
    """It asked a colleague and waits for the reply (``effect``: what the asking tool
    left, ``attention.conversations``)."""

    effect: dict[str, Any]
    kind: ClassVar[str] = "awaiting_reply"

    @property
    def detail(self) -> str:
        return json.dumps(self.effect)


@dataclass(frozen=True)
class Skipped:
    """It had nothing to do (``reason``: a heartbeat with no news, or a person's chat
    waiting): completed as skipped without an LLM call, its activity's label saying why."""

    reason: str
    kind: ClassVar[str] = "skipped"

    @property
    def detail(self) -> str:
        return self.reason


Outcome: TypeAlias = Completed | Preempted | Cancelled | Stopped | Retry | Failed | Parked | AwaitingReply | Skipped
