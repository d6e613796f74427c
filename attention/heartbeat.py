"""The agent's rhythm: a heartbeat on each agent's own interval.

* **Interval**: per agent (``Agent.heartbeat_interval_minutes``; empty: the default,
  MARKUS["HEARTBEAT_DEFAULT_MINUTES"], 6 h), always within 5 min – 24 h. The operator
  sets it (the console, ``PATCH /api/agents/{id}``), the agent too
  (``set_heartbeat_interval``).
* **Active hours**: optional, in the agent's time zone (``heartbeat_active_start`` to
  ``heartbeat_active_end``, whole hours, the end excluded; a start after the end runs
  past midnight). Outside them no heartbeat is enqueued; the next one waits for the
  window to open.
* **The tick** (beat's ``attention.heartbeat`` entry, every few minutes): each running
  agent whose ``next_heartbeat_at`` has come gets one heartbeat. The period is claimed
  with a conditional UPDATE of ``next_heartbeat_at`` (compare-and-set): a second beat
  running at the same moment, or a retried task, finds it claimed and enqueues nothing.
  At most one heartbeat is open (queued, processing or deferred) per agent: while one
  is, the period passes without a new one.
* **Skips**: a heartbeat does not call the LLM when a person's chat is focused or
  queued, or when nothing changed since the last heartbeat (no new mailbox item, no
  activity, apart from the agent's own periodic items). It completes as skipped, the
  reason in its activity and in the timeline.
* **Deep sleep**: after ``IDLE_BEFORE_SLEEP`` idle heartbeats in a row each further
  idle one doubles the interval (``heartbeat_sleep_depth``), up to 24 h. New work (a
  non-periodic item) wakes the agent to its normal rhythm at the next sweep (seconds) or tick.
"""

from __future__ import annotations

import logging
from dataclasses import dataclass
from datetime import UTC, datetime, time, timedelta
from typing import Any

from django.conf import settings
from django.core.exceptions import ValidationError
from django.db import transaction
from django.db.models import Exists, OuterRef, Q
from django.utils import timezone

from mailbox import lifecycle
from mailbox import services as mailbox
from mailbox.models import MailboxItem
from mailbox.registry import MAILBOX_TYPE_REGISTRY, MailboxType, Status
from markus.agents.models import HEARTBEAT_MAX_MINUTES, HEARTBEAT_MIN_MINUTES, Agent, validate_time_zone
from markus.core.errors import MarkusError
from markus.core.events import agent_group, send_event_on_commit

from .focus import Focus
from .models import AgentActivity

log = logging.getLogger(__name__)

DEFAULT_MINUTES = 6 * 60
# Idle heartbeats in a row after which the agent sleeps deeper.
IDLE_BEFORE_SLEEP = 3
# The items that are the agent's own rhythm, not new work.
PERIODIC_TYPES = [t.value for t, d in MAILBOX_TYPE_REGISTRY.items() if d.periodic]
SUMMARY = "Heartbeat check-in"
HUMAN_WAITING = "a person's chat is waiting; it goes first"
NOTHING_CHANGED = "nothing changed since the last heartbeat"
# Sent to the agent's group when its rhythm changed (interval, time zone, active hours,
# sleep depth): the mind view redraws its header (markus.web.live).
RHYTHM_EVENT = "agent:rhythm"


class RhythmError(MarkusError):
    """A bad interval, time zone or active hours (answered 400 with the message)."""


# ---------------------------------------------------------------------------- the rules


def clamp(minutes: int) -> int:
    return max(HEARTBEAT_MIN_MINUTES, min(HEARTBEAT_MAX_MINUTES, int(minutes)))


def default_minutes() -> int:
    return clamp(settings.MARKUS.get("HEARTBEAT_DEFAULT_MINUTES", DEFAULT_MINUTES))


def base_minutes(agent: Agent) -> int:
    """The agent's normal interval (its own, or the default), within the bounds."""
    own = agent.heartbeat_interval_minutes
    return clamp(own) if own else default_minutes()


def max_depth(base: int) -> int:
    """The sleep depth at which the interval reaches 24 h."""
    depth = 0
    while base * 2**depth < HEARTBEAT_MAX_MINUTES:
        depth += 1
    return depth


def effective_minutes(agent: Agent, depth: int | None = None) -> int:
    """The interval now: the normal one doubled once per level of sleep, at most 24 h."""
    depth = agent.heartbeat_sleep_depth if depth is None else depth
    return min(HEARTBEAT_MAX_MINUTES, base_minutes(agent) * 2 ** min(depth, 16))


def active_hours(agent: Agent) -> tuple[int, int] | None:
    start, end = agent.heartbeat_active_start, agent.heartbeat_active_end
    if start is None or end is None or start == end:
        return None
    return start, end


def in_active_hours(agent: Agent, at: datetime) -> bool:
    window = active_hours(agent)
    if window is None:
        return True
    start, end = window
    hour = at.astimezone(agent.zone()).hour
    return start <= hour < end if start < end else (hour >= start or hour < end)


def window_opens(agent: Agent, at: datetime) -> datetime:
    """The next moment after ``at`` the agent's active hours begin (UTC)."""
    window = active_hours(agent)
    if window is None:
        return at
    zone = agent.zone()
    local = at.astimezone(zone)
    opens = datetime.combine(local.date(), time(window[0]), tzinfo=zone)
    if opens <= local:
        opens = datetime.combine(local.date() + timedelta(days=1), time(window[0]), tzinfo=zone)
    return opens.astimezone(timezone.get_current_timezone())


# ---------------------------------------------------------------------------- the tick


def heartbeat_tick(now: datetime | None = None) -> int:
    """Beat's heartbeat job: wake the sleepers that have new work, then enqueue one
    heartbeat for each running agent that is due. Returns the heartbeats enqueued."""
    now = now or timezone.now()
    wake_sleepers(now)
    due = Agent.objects.running().filter(Q(next_heartbeat_at__isnull=True) | Q(next_heartbeat_at__lte=now))
    n = 0
    for agent in due.order_by("id"):
        try:
            n += _beat(agent, now)
        except Exception:  # one agent's failure must not cost the others their heartbeat
            log.exception("heartbeat: could not enqueue for %s", agent.id)
    return n


def _claim(agent: Agent, next_at: datetime) -> bool:
    """Compare-and-set the agent's next heartbeat: True for the one caller that moved it
    from the value it read (a second beat finds it moved and gets False)."""
    rows = Agent.objects.running().filter(id=agent.id)
    if agent.next_heartbeat_at is None:
        rows = rows.filter(next_heartbeat_at__isnull=True)
    else:
        rows = rows.filter(next_heartbeat_at=agent.next_heartbeat_at)
    return rows.update(next_heartbeat_at=next_at) == 1


def _beat(agent: Agent, now: datetime) -> int:
    if not in_active_hours(agent, now):
        _claim(agent, window_opens(agent, now))
        return 0
    slot = agent.next_heartbeat_at or now
    every = timedelta(minutes=effective_minutes(agent))
    next_at = slot + every if slot + every > now else now + every
    with transaction.atomic():
        if not _claim(agent, next_at):
            log.info("heartbeat: %s's period %s was claimed by another beat", agent.id, slot)
            return 0
        if MailboxItem.objects.filter(
            agent_id=agent.id, source_type=MailboxType.HEARTBEAT, status__in=lifecycle.OPEN_STATUSES
        ).exists():
            log.info("heartbeat: %s has a heartbeat open already; period %s passes", agent.id, slot)
            return 0
        mailbox.mailbox_enqueue(
            agent_id=agent.id,
            source_type=MailboxType.HEARTBEAT,
            payload={
                "summary": SUMMARY,
                "content": _brief(agent),
                "extra": {
                    "period": f"{agent.id}:{slot.astimezone(UTC):%Y-%m-%dT%H:%M:%SZ}",
                    "intervalMinutes": effective_minutes(agent),
                    "sleepDepth": agent.heartbeat_sleep_depth,
                },
            },
            metadata={"senderRole": "system"},
        )
    return 1


def _brief(agent: Agent) -> str:
    every = effective_minutes(agent)
    text = f"{SUMMARY}. Your heartbeat comes every {_span(every)}"
    if agent.heartbeat_sleep_depth:
        text += f" (sleeping deeper: your normal rhythm is every {_span(base_minutes(agent))})"
    return text + "; set_heartbeat_interval changes your rhythm."


def _span(minutes: int) -> str:
    hours, rest = divmod(minutes, 60)
    if not hours:
        return f"{rest} min"
    return f"{hours} h" + (f" {rest} min" if rest else "")


def _new_work(agent_id: Any, since: Any) -> tuple[Any, Any]:
    """Items and activities of the agent after ``since``, its own periodic ones aside."""
    items = MailboxItem.objects.filter(agent_id=agent_id, queued_at__gt=since).exclude(source_type__in=PERIODIC_TYPES)
    activities = AgentActivity.objects.filter(agent_id=agent_id, started_at__gt=since).exclude(
        mailbox_item__source_type__in=PERIODIC_TYPES
    )
    return items, activities


def wake_sleepers(now: datetime) -> list[str]:
    """Agents sleeping deeper that got new work since their last heartbeat go back to
    their normal rhythm: depth and idle streak 0, the next heartbeat within their
    normal interval. Returns their ids."""
    items, activities = _new_work(OuterRef("id"), OuterRef("last_heartbeat_at"))
    sleepers = Agent.objects.filter(
        kind=Agent.Kind.INTERNAL, heartbeat_sleep_depth__gt=0, last_heartbeat_at__isnull=False
    ).filter(Exists(items) | Exists(activities))
    woken = []
    for agent in sleepers:
        normal = now + timedelta(minutes=base_minutes(agent))
        next_at = min(agent.next_heartbeat_at or normal, normal)
        if (
            Agent.objects.filter(id=agent.id, heartbeat_sleep_depth=agent.heartbeat_sleep_depth).update(
                heartbeat_sleep_depth=0, heartbeat_idle_streak=0, next_heartbeat_at=next_at
            )
            == 1
        ):
            woken.append(agent.id)
    if woken:
        log.info("heartbeat: woke %s (new work)", woken)
    for agent_id in woken:
        rhythm_changed(agent_id)
    return woken


def wake_sleepers_now() -> list[str]:
    """The sweep's hook (every MARKUS_SWEEP_SECONDS): new work wakes a deep sleeper within
    seconds, not at the next heartbeat tick."""
    return wake_sleepers(timezone.now())


def rhythm_changed(agent_id: str) -> None:
    """Tell the agent's watchers (the mind view) that its rhythm changed, on commit."""
    send_event_on_commit(agent_group(agent_id), RHYTHM_EVENT, {"agentId": agent_id})


# ---------------------------------------------------------------------------- processing


def quiet_heartbeat(focus: Focus) -> str:
    """Called by the loop before a begun item runs: why a heartbeat has nothing to do
    (it then ends ``Skipped`` without an LLM call: the reason is its activity's label
    and last line, and its line in the main session), or "" to run it. Also keeps the agent's rhythm
    (last heartbeat, idle streak, sleep depth). A resumed heartbeat (its session saved,
    or a retry) runs on; one an operator asked for ("Run a heartbeat now") is not
    skipped for want of news."""
    item = focus.item
    if not focus.row.skips_without_news:
        return ""
    if focus.held.saved or item.marks.get("markerRetries"):
        return ""
    agent = Agent.objects.get(id=item.agent_id)
    now = timezone.now()
    scheduled = bool(item.extra.get("period"))  # from the tick; one an operator asked for always looks around
    reason = ""
    if MailboxItem.objects.filter(
        agent_id=agent.id, source_type=MailboxType.HUMAN_CHAT, status__in=[Status.QUEUED, Status.PROCESSING]
    ).exists():
        reason = HUMAN_WAITING  # busy, not idle: the rhythm is left as it is
    elif (
        scheduled
        and agent.last_heartbeat_at is not None
        and not any(q.exists() for q in _new_work(agent.id, agent.last_heartbeat_at))
    ):
        reason = NOTHING_CHANGED
        _idle(agent, now)
    else:
        _awake(agent, now)
    return reason


def _idle(agent: Agent, now: datetime) -> None:
    streak = agent.heartbeat_idle_streak + 1
    depth = agent.heartbeat_sleep_depth
    fields: dict[str, Any] = {"last_heartbeat_at": now, "heartbeat_idle_streak": streak}
    if streak >= IDLE_BEFORE_SLEEP and depth < max_depth(base_minutes(agent)):
        depth += 1
        fields["heartbeat_sleep_depth"] = depth
        fields["next_heartbeat_at"] = now + timedelta(minutes=effective_minutes(agent, depth))
        log.info("heartbeat: %s sleeps deeper (depth %s)", agent.id, depth)
        rhythm_changed(agent.id)
    Agent.objects.filter(id=agent.id).update(**fields)


def _awake(agent: Agent, now: datetime) -> None:
    """The heartbeat runs: something changed, the agent is on its normal rhythm."""
    fields: dict[str, Any] = {"last_heartbeat_at": now, "heartbeat_idle_streak": 0, "heartbeat_sleep_depth": 0}
    if agent.heartbeat_sleep_depth:
        normal = now + timedelta(minutes=base_minutes(agent))
        fields["next_heartbeat_at"] = min(agent.next_heartbeat_at or normal, normal)
        rhythm_changed(agent.id)
    Agent.objects.filter(id=agent.id).update(**fields)


# ---------------------------------------------------------------------------- settings


def _interval(value: Any, *, clamp_it: bool) -> tuple[int | None, bool]:
    """A valid interval (None: the default) and whether it was clamped."""
    if value is None:
        return None, False
    if isinstance(value, bool) or not isinstance(value, int):
        raise RhythmError("heartbeatIntervalMinutes must be an integer number of minutes")
    if HEARTBEAT_MIN_MINUTES <= value <= HEARTBEAT_MAX_MINUTES:
        return value, False
    if not clamp_it:
        raise RhythmError(
            f"heartbeatIntervalMinutes must be between {HEARTBEAT_MIN_MINUTES} and {HEARTBEAT_MAX_MINUTES} "
            "(5 min to 24 h)"
        )
    return clamp(value), True


_UNSET: Any = object()


def rhythm_update(
    agent_id: str,
    *,
    interval_minutes: Any = _UNSET,
    time_zone: Any = _UNSET,
    active_start: Any = _UNSET,
    active_end: Any = _UNSET,
    clamp_interval: bool = False,
) -> tuple[Agent, bool]:
    """Change an agent's rhythm (the operator's API, the agent's tool). Only the given
    settings change; a bad value raises RhythmError (400) and nothing changes. A new
    interval puts the agent back on its normal rhythm (awake) and its next heartbeat an
    interval after the last one. Returns the agent and whether the interval was
    clamped (``clamp_interval``; otherwise out of range is an error)."""
    clamped = False
    with transaction.atomic():
        agent = Agent.objects.select_for_update().get(id=agent_id)
        if interval_minutes is not _UNSET:
            agent.heartbeat_interval_minutes, clamped = _interval(interval_minutes, clamp_it=clamp_interval)
        if time_zone is not _UNSET:
            if time_zone is None:
                time_zone = ""
            if not isinstance(time_zone, str):
                raise RhythmError("timezone must be a string: an IANA name such as Europe/Berlin")
            try:
                validate_time_zone(time_zone)
            except ValidationError as exc:
                raise RhythmError(exc.messages[0]) from exc
            agent.timezone = time_zone
        for name, value in (("heartbeatActiveStart", active_start), ("heartbeatActiveEnd", active_end)):
            if value is _UNSET or value is None:
                continue
            if isinstance(value, bool) or not isinstance(value, int) or not 0 <= value <= 23:
                raise RhythmError(f"{name} must be an hour from 0 to 23 (or null for all day)")
        if active_start is not _UNSET:
            agent.heartbeat_active_start = active_start
        if active_end is not _UNSET:
            agent.heartbeat_active_end = active_end
        try:
            agent.clean()
        except ValidationError as exc:
            raise RhythmError(exc.messages[0]) from exc
        if interval_minutes is not _UNSET:
            reset_rhythm(agent)
        elif any(value is not _UNSET for value in (time_zone, active_start, active_end)):
            rewindow(agent)
        agent.save()
        rhythm_changed(agent.id)
    return agent, clamped


def reset_rhythm(agent: Agent, now: datetime | None = None) -> None:
    """After a change of interval (not saved here): awake, and the next heartbeat one
    normal interval after the last (or after now, for an agent that never had one)."""
    now = now or timezone.now()
    agent.heartbeat_sleep_depth = 0
    agent.heartbeat_idle_streak = 0
    agent.next_heartbeat_at = (agent.last_heartbeat_at or now) + timedelta(minutes=base_minutes(agent))


def rewindow(agent: Agent, now: datetime | None = None) -> None:
    """After a change of time zone or active hours (not saved here): a next heartbeat
    put off until the old window opened comes back to the rhythm, one interval after
    the last (at the next tick for an agent that never had one). Were the new window
    still closed then, the tick puts it off again until it opens."""
    if agent.next_heartbeat_at is None:
        return
    now = now or timezone.now()
    rhythm_at = (
        agent.last_heartbeat_at + timedelta(minutes=effective_minutes(agent)) if agent.last_heartbeat_at else now
    )
    agent.next_heartbeat_at = min(agent.next_heartbeat_at, rhythm_at)


# ---------------------------------------------------------------------------- reading it


@dataclass(frozen=True)
class Rhythm:
    interval_minutes: int
    effective_minutes: int
    default: bool
    sleep_depth: int
    idle_streak: int
    next_at: datetime | None
    last_at: datetime | None
    time_zone: str
    active_hours: tuple[int, int] | None

    @property
    def every(self) -> str:
        return _span(self.effective_minutes)

    @property
    def normal(self) -> str:
        return _span(self.interval_minutes)

    def as_dict(self) -> dict[str, Any]:
        return {
            "intervalMinutes": self.interval_minutes,
            "effectiveIntervalMinutes": self.effective_minutes,
            "sleepDepth": self.sleep_depth,
            "idleStreak": self.idle_streak,
            "nextHeartbeatAt": self.next_at,
            "lastHeartbeatAt": self.last_at,
            "timezone": self.time_zone,
            "activeHours": list(self.active_hours) if self.active_hours else None,
        }


def rhythm(agent: Agent) -> Rhythm:
    """What the mind view and the API show of the agent's rhythm."""
    return Rhythm(
        interval_minutes=base_minutes(agent),
        effective_minutes=effective_minutes(agent),
        default=not agent.heartbeat_interval_minutes,
        sleep_depth=agent.heartbeat_sleep_depth,
        idle_streak=agent.heartbeat_idle_streak,
        next_at=agent.next_heartbeat_at,
        last_at=agent.last_heartbeat_at,
        time_zone=agent.timezone or settings.TIME_ZONE,
        active_hours=active_hours(agent),
    )
