"""An agent's time zone and local time.

The agent's ``timezone`` field (an IANA name) is read through ``agent_zone`` only: an
agent without one, or with a name this machine does not know, lives in the project's
``TIME_ZONE``.
"""

from __future__ import annotations

from datetime import date, datetime, time
from zoneinfo import ZoneInfo, ZoneInfoNotFoundError

from django.conf import settings

from markus.agents.models import Agent


def zone_named(name: object) -> ZoneInfo | None:
    """The zone of an IANA name, or None for a blank or unknown one."""
    if not isinstance(name, str) or not name.strip():
        return None
    try:
        return ZoneInfo(name.strip())
    except (ZoneInfoNotFoundError, ValueError):
        return None


def agent_zone(agent: Agent) -> ZoneInfo:
    """The agent's time zone: its ``timezone`` attribute when set and known, else the
    project's ``TIME_ZONE``."""
    return zone_named(getattr(agent, "timezone", None)) or ZoneInfo(settings.TIME_ZONE)


def local_now(agent: Agent, now: datetime) -> datetime:
    return now.astimezone(agent_zone(agent))


def local_day_bounds(agent: Agent, day: date) -> tuple[datetime, datetime]:
    """The aware start and end (exclusive) of ``day`` in the agent's time zone."""
    zone = agent_zone(agent)
    start = datetime.combine(day, time.min, tzinfo=zone)
    end = datetime.combine(date.fromordinal(day.toordinal() + 1), time.min, tzinfo=zone)
    return start, end
