"""Reminders (issue 16, deliverable 6): an item an agent puts in its own future.

``schedule_reminder`` stores a ``reminder`` mailbox item, deferred until its time
(``deferred_until``). When it comes due, the loop's idle cycle re-queues it
(``mailbox.lifecycle.resurface_due``: one conditional UPDATE from ``deferred``, so it
fires once however many sweeps and runs look) and the agent acts on it in the reminder
scenario. A reminder is *pending* while it is still deferred until the time it was
set for; it can be cancelled (dropped) only then.
"""

from __future__ import annotations

import re
from dataclasses import dataclass
from datetime import UTC, date, datetime, time, timedelta
from typing import Any

from django.db import transaction
from django.db.models import QuerySet
from django.utils import timezone

from mailbox import lifecycle
from mailbox import services as mailbox
from mailbox.models import MailboxItem
from mailbox.registry import MailboxType, Status
from markus.agents.models import Agent
from markus.core.errors import ConflictError, MarkusError

from .clock import agent_zone, zone_named

MAX_AHEAD = timedelta(days=365)
TEXT_MAX_CHARS = 2000
PENDING, FIRED, CANCELLED = "pending", "fired", "cancelled"
WHEN_FORMS = (
    "an ISO date-time (2026-12-02T09:00, in your time zone unless it names an offset), a date (09:00 that day), "
    "'in 2h' / 'in 30 minutes' / 'in 1d 4h', 'tomorrow at 9', 'tomorrow 14:30', 'today at 5pm' or 'at 9am'"
)


class ReminderError(MarkusError):
    """Bad reminder input (400), the message safe to show."""


class ReminderNotFound(MarkusError):
    status_code = 404


class ReminderFired(ConflictError):
    """The reminder is no longer pending (409); nothing may be done to it."""

    def __init__(self, message: str) -> None:
        super().__init__(message)
        self.extra: dict[str, Any] = {"allowed": []}


# ---------------------------------------------------------------------------- when

_UNITS = {
    "m": "minutes",
    "min": "minutes",
    "mins": "minutes",
    "minute": "minutes",
    "minutes": "minutes",
    "h": "hours",
    "hr": "hours",
    "hrs": "hours",
    "hour": "hours",
    "hours": "hours",
    "d": "days",
    "day": "days",
    "days": "days",
    "w": "weeks",
    "week": "weeks",
    "weeks": "weeks",
}
_SPAN = re.compile(r"(\d+)\s*([a-z]+)")
_CLOCK = re.compile(r"^(\d{1,2})(?::(\d{2}))?\s*(am|pm)?$")
_DAY_WORDS = re.compile(r"^(today|tomorrow)?\s*(?:at\s+)?(.*)$")


def _relative(rest: str) -> timedelta:
    spans = _SPAN.findall(rest)
    leftover = _SPAN.sub("", rest).replace("and", "").replace(",", "").strip()
    if not spans or leftover:
        raise ReminderError(f"cannot read 'in {rest}'; use {WHEN_FORMS}")
    too_far = ReminderError(f"'in {rest[:60]}' is more than a year ahead; a reminder may be at most 365 days ahead")
    delta = timedelta()
    for amount, unit in spans:
        if unit not in _UNITS:
            raise ReminderError(f"unknown unit {unit!r} in 'in {rest}'; use minutes, hours, days or weeks")
        if len(amount.lstrip("0")) > 7:  # past any year; a number no date holds must not fail further in
            raise too_far
        delta += timedelta(**{_UNITS[unit]: int(amount)})
        if delta > MAX_AHEAD:
            raise too_far
    return delta


def _clock(text: str) -> time:
    found = _CLOCK.match(text.strip())
    if not found:
        raise ReminderError(f"cannot read the time {text!r}; use {WHEN_FORMS}")
    hour, minute, half = int(found.group(1)), int(found.group(2) or 0), found.group(3)
    if half:
        if not 1 <= hour <= 12:
            raise ReminderError(f"{text!r}: an am/pm hour is 1 to 12")
        hour = hour % 12 + (12 if half == "pm" else 0)
    if hour > 23 or minute > 59:
        raise ReminderError(f"{text!r} is not a time of day")
    return time(hour, minute)


def parse_when(text: str, *, agent: Agent, now: datetime) -> datetime:
    """The aware moment ``text`` names, read in the agent's time zone."""
    zone = agent_zone(agent)
    raw = (text or "").strip()
    lowered = raw.lower()
    if not lowered:
        raise ReminderError(f"when is empty; use {WHEN_FORMS}")
    if lowered.startswith("in "):
        return now + _relative(lowered[3:].strip())
    try:
        moment = datetime.fromisoformat(raw.replace("Z", "+00:00") if raw.endswith("Z") else raw)
    except ValueError:
        moment = None
    if moment is not None:
        if len(raw) == 10:  # a date alone: 09:00 that day
            moment = datetime.combine(moment.date(), time(9, 0))
        return moment if moment.tzinfo is not None else moment.replace(tzinfo=zone)
    words = _DAY_WORDS.match(lowered)
    if words is None or (not words.group(1) and not lowered.startswith("at ")):
        raise ReminderError(f"cannot read {raw!r}; use {WHEN_FORMS}")
    day_word, clock_text = words.group(1), words.group(2).strip()
    today = now.astimezone(zone).date()
    at = _clock(clock_text) if clock_text else time(9, 0)
    if day_word == "tomorrow":
        return datetime.combine(date.fromordinal(today.toordinal() + 1), at, tzinfo=zone)
    moment = datetime.combine(today, at, tzinfo=zone)
    if day_word is None and moment <= now:  # "at 9": the next 9 o'clock
        moment = datetime.combine(date.fromordinal(today.toordinal() + 1), at, tzinfo=zone)
    return moment


def check_when(moment: datetime, now: datetime) -> None:
    if moment <= now:
        raise ReminderError(
            f"{moment.isoformat()} is in the past (it is {now.isoformat(timespec='minutes')} now); a reminder must "
            "be in the future: for a time from now, say it as 'in 2h'"
        )
    if moment - now > MAX_AHEAD:
        raise ReminderError(f"{moment.isoformat()} is more than a year ahead; a reminder may be at most 365 days ahead")


# ---------------------------------------------------------------------------- schedule


def reminder_schedule(
    *,
    agent: Agent,
    text: str,
    when: str,
    source_item_id: str | None = None,
    related_task_id: str | None = None,
    now: datetime | None = None,
) -> MailboxItem:
    """Store the reminder: a ``reminder`` item deferred until its time. The person the
    item being handled came from (if a person) is remembered as its sender, so that
    ``notify_user`` without a target reaches them when it fires."""
    now = now or timezone.now()
    body = (text or "").strip()
    if not body:
        raise ReminderError("the reminder text is empty")
    if len(body) > TEXT_MAX_CHARS:
        raise ReminderError(f"the reminder text is {len(body)} characters; at most {TEXT_MAX_CHARS}")
    moment = parse_when(when, agent=agent, now=now)
    check_when(moment, now)
    zone = agent_zone(agent)
    local = moment.astimezone(zone)
    metadata: dict[str, Any] = {"senderRole": "agent", "senderId": agent.id, "senderName": agent.name}
    source = MailboxItem.objects.filter(agent_id=agent.id, id=source_item_id).first() if source_item_id else None
    if source is not None and (source.metadata or {}).get("senderRole") == "user":
        meta = source.metadata or {}
        metadata = {k: meta[k] for k in ("senderRole", "senderId", "senderName") if k in meta}
    if source is not None:
        metadata["scheduledFrom"] = source.id
    content = body + (f"\n\n(about task {related_task_id})" if related_task_id else "")
    payload = {
        "summary": body[:120],
        "content": content,
        "extra": {
            "remindAt": moment.astimezone(UTC).isoformat(),
            "timezone": zone.key,
            "localTime": local.isoformat(),
            "scheduledAt": now.isoformat(),
            **({"relatedTaskId": related_task_id} if related_task_id else {}),
        },
    }
    with transaction.atomic():
        item = mailbox.mailbox_enqueue(
            agent_id=agent.id, source_type=MailboxType.REMINDER, payload=payload, metadata=metadata
        )
        lifecycle.defer(item.id, until=moment, from_statuses=[Status.QUEUED])
    item.refresh_from_db()
    return item


# ---------------------------------------------------------------------------- list / cancel


def _remind_at(item: MailboxItem) -> datetime | None:
    raw = item.extra.get("remindAt")
    try:
        return datetime.fromisoformat(raw) if isinstance(raw, str) else None
    except ValueError:
        return None


def reminder_state(item: MailboxItem) -> str:
    """pending: still deferred until its own time; cancelled: dropped before it fired;
    fired: anything else (re-queued, processed, deferred again by the agent…)."""
    remind_at = _remind_at(item)
    if item.status == Status.DEFERRED and remind_at is not None and item.deferred_until == remind_at:
        return PENDING
    if item.status == Status.DROPPED and remind_at is not None and item.deferred_until == remind_at:
        return CANCELLED  # dropped while it still waited for its time (firing clears deferred_until)
    return FIRED


def reminders_of(agent_id: str) -> QuerySet[MailboxItem]:
    return MailboxItem.objects.filter(agent_id=agent_id, source_type=MailboxType.REMINDER)


@dataclass(frozen=True)
class ReminderView:
    item: MailboxItem
    state: str

    def as_dict(self) -> dict[str, Any]:
        extra = self.item.extra
        zone = zone_named(extra.get("timezone"))
        remind_at = _remind_at(self.item)
        return {
            "id": self.item.id,
            "text": self.item.content,
            "remindAt": remind_at,
            "localTime": remind_at.astimezone(zone).isoformat() if remind_at and zone else extra.get("localTime"),
            "timezone": extra.get("timezone", ""),
            "state": self.state,
            "mailboxStatus": self.item.status,
            "createdAt": self.item.queued_at if self.state == PENDING else extra.get("scheduledAt"),
        }


def reminder_list(agent_id: str, *, limit: int = 100, offset: int = 0) -> list[ReminderView]:
    """The agent's reminders, ``limit`` of them from ``offset``: the ones still deferred
    first (soonest first: the pending ones, and any the agent deferred again), then the
    rest, newest first. The database orders both parts, so successive pages neither
    repeat nor skip one; ``reminder_count`` is the total they page through."""
    waiting = reminders_of(agent_id).filter(status=Status.DEFERRED)
    n_waiting = waiting.count()
    rows = list(waiting.order_by("deferred_until", "id")[offset : offset + limit]) if offset < n_waiting else []
    if len(rows) < limit:
        start = max(0, offset - n_waiting)
        rest = reminders_of(agent_id).exclude(status=Status.DEFERRED).order_by("-queued_at", "-id")
        rows += list(rest[start : start + limit - len(rows)])
    return [ReminderView(item, reminder_state(item)) for item in rows]


def reminder_count(agent_id: str) -> int:
    """How many reminders the agent set (every state)."""
    return reminders_of(agent_id).count()


def pending_reminders(agent_id: str, *, limit: int = 50) -> list[ReminderView]:
    """The reminders still waiting for their time, soonest first (one query)."""
    return pending_window(agent_id, limit=limit)[0]


def pending_window(agent_id: str, *, limit: int = 50) -> tuple[list[ReminderView], int]:
    """The soonest ``limit`` pending reminders and how many are pending in all: one
    query, and a second (``pending_count``) only when the first did not see them all."""
    window = limit * 2
    rows = list(reminders_of(agent_id).filter(status=Status.DEFERRED).order_by("deferred_until", "id")[:window])
    pending = [v for v in (ReminderView(item, reminder_state(item)) for item in rows) if v.state == PENDING]
    total = len(pending) if len(rows) < window else max(pending_count(agent_id), len(pending))
    return pending[:limit], total


def pending_count(agent_id: str) -> int:
    """How many reminders are pending (deferred until the very time they were set for);
    reads two fields of the deferred ones."""
    rows = reminders_of(agent_id).filter(status=Status.DEFERRED)
    n = 0
    for until, raw in rows.values_list("deferred_until", "payload__extra__remindAt").iterator():
        try:
            remind_at = datetime.fromisoformat(raw) if isinstance(raw, str) else None
        except ValueError:
            remind_at = None
        n += remind_at is not None and until == remind_at
    return n


def reminder_cancel(*, agent_id: str, item_id: str, by: str) -> MailboxItem:
    """Drop a pending reminder. 404 for an item that is not one of the agent's
    reminders, 409 once it fired (or was cancelled)."""
    item = reminders_of(agent_id).filter(id=item_id).first()
    if item is None:
        raise ReminderNotFound(f"no reminder {item_id!r} of agent {agent_id}")
    state = reminder_state(item)
    if state != PENDING:
        raise ReminderFired(f"reminder {item_id} is {state}; only a pending reminder can be cancelled")
    remind_at = _remind_at(item)
    with transaction.atomic():
        locked = MailboxItem.objects.select_for_update().filter(id=item.id, status=Status.DEFERRED).first()
        if locked is None or locked.deferred_until != remind_at:
            raise ReminderFired(f"reminder {item_id} fired; only a pending reminder can be cancelled")
        lifecycle.drop(item.id, reason=f"reminder cancelled by {by}"[:300], from_statuses=[Status.DEFERRED])
    item.refresh_from_db()
    return item
