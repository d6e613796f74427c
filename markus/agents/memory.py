"""Working memory, bounded (seed section 21, "Working Memory Injection").

An agent's keyed working memory is written by deliberation (key ``deliberation``), by
triage (``triage-decision``) and by the agent's own tools (``update_working_memory``);
every writer goes through ``remember`` so the bound holds whoever writes:

- an entry's content is cut to ``entry_cap()`` characters (a quarter of the total, at
  most 2000);
- the entries of an agent together (keys and contents) stay within
  ``MARKUS["WORKING_MEMORY_MAX_CHARS"]``: on a write the oldest entries (least recently
  updated) are deleted first, never the one just written.

``trim`` is the same rule on an in-memory list, for the loop's cached copy. Every
system prompt shows the entries with their age (``age_label``).
"""

from __future__ import annotations

from dataclasses import dataclass
from datetime import datetime

from django.conf import settings
from django.db import transaction
from django.utils import timezone

from markus.core.statements import table_statements

from .models import WorkingMemory

KEY_MAX_CHARS = 200  # the column's length
ENTRY_MAX_CHARS = 2000
TRUNCATED = " …[truncated]"


@dataclass(frozen=True)
class Entry:
    key: str
    content: str
    updated_at: datetime

    @property
    def size(self) -> int:
        return len(self.key) + len(self.content)


@dataclass
class Written:
    """What a write kept: the entry as stored, whether its content was cut, and the
    keys of the older entries deleted to stay within the bound."""

    entry: Entry
    truncated: bool
    evicted: list[str]


def total_cap() -> int:
    return max(1, int(settings.MARKUS.get("WORKING_MEMORY_MAX_CHARS", 8000)))


def entry_cap() -> int:
    return max(1, min(ENTRY_MAX_CHARS, total_cap() // 4))


def bound_key(key: str) -> str:
    return key.strip()[:KEY_MAX_CHARS]


def bound_content(content: str) -> tuple[str, bool]:
    """The content cut to the per-entry cap (marked as cut), and whether it was."""
    cap = entry_cap()
    if len(content) <= cap:
        return content, False
    keep = max(0, cap - len(TRUNCATED))
    return content[:keep] + TRUNCATED[: cap - keep], True


def trim(entries: list[Entry], *, keep: str | None = None) -> tuple[list[Entry], list[str]]:
    """The entries that stay within the total cap, the oldest dropped first (never the
    entry ``keep``), and the keys dropped. Order of the survivors is kept."""
    budget = total_cap()
    total = sum(e.size for e in entries)
    dropped: set[str] = set()
    for e in sorted(entries, key=lambda e: (e.updated_at, e.key)):
        if total <= budget:
            break
        if e.key == keep:
            continue
        dropped.add(e.key)
        total -= e.size
    return [e for e in entries if e.key not in dropped], sorted(dropped)


def read(agent_id: str) -> list[Entry]:
    """The agent's entries, by key (one statement)."""
    rows = WorkingMemory.objects.filter(agent_id=agent_id).order_by("key").values_list("key", "content", "updated_at")
    return [Entry(k, c, u) for k, c, u in rows]


def remember(
    agent_id: str, key: str, content: str, *, now: datetime | None = None, known: list[Entry] | None = None
) -> Written:
    """Write (or replace) one entry within the bound, deleting the oldest entries the
    bound leaves no room for. Joins the caller's transaction if there is one. ``known``:
    the agent's entries as the caller read them in this run (the loop's copy); then
    they are not read again."""
    key = bound_key(key)
    if not key:
        raise ValueError("a working-memory key must not be empty")
    content, truncated = bound_content(str(content))
    now = now or timezone.now()
    # Inside the caller's transaction no savepoint of its own: a failure here fails it.
    # The UPDATE and the INSERT are made once per connection (``markus.core.statements``:
    # the loop writes an entry for most items; nothing listens to these saves).
    statements = table_statements(WorkingMemory)
    with transaction.atomic(savepoint=False):
        if not statements.update_where({"agent_id": agent_id, "key": key}, content=content, updated_at=now):
            statements.save_new([WorkingMemory(agent_id=agent_id, key=key, content=content, updated_at=now)])
        if known is None:
            entries = read(agent_id)
        else:
            entries = sorted([*(e for e in known if e.key != key), Entry(key, content, now)], key=lambda e: e.key)
        _, evicted = trim(entries, keep=key)
        if evicted:
            WorkingMemory.objects.filter(agent_id=agent_id, key__in=evicted).delete()
    return Written(Entry(key, content, now), truncated, evicted)


def forget(agent_id: str, key: str) -> int:
    """Delete one entry, or every entry with key ``*``. Returns how many."""
    rows = WorkingMemory.objects.filter(agent_id=agent_id)
    if key != "*":
        rows = rows.filter(key=bound_key(key))
    deleted, _ = rows.delete()
    return deleted


def age_label(updated_at: datetime, now: datetime | None = None) -> str:
    """The age shown in a prompt: just now, 12 min ago, 3 h ago, 1 day ago, 2 days ago."""
    seconds = max(0.0, ((now or timezone.now()) - updated_at).total_seconds())
    if seconds < 60:
        return "just now"
    minutes = int(seconds // 60)
    if minutes < 60:
        return f"{minutes} min ago"
    hours = minutes // 60
    if hours < 24:
        return f"{hours} h ago"
    days = hours // 24
    return "1 day ago" if days == 1 else f"{days} days ago"


def prompt_lines(entries: list[Entry], now: datetime | None = None) -> list[str]:
    """The ``## Working Memory`` section of a system prompt (none without entries)."""
    if not entries:
        return []
    now = now or timezone.now()
    return ["## Working Memory", *(f"- {e.key} ({age_label(e.updated_at, now)}): {e.content}" for e in entries)]
