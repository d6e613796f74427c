"""Daily reports (issue 16, deliverable 5): which agents owe one, the mailbox item that
asks for it, storing what the agent wrote and sending it to its owner.

A manager agent (``is_manager``) owes a report for its local day once it is past
``MARKUS["DAILY_REPORT_HOUR"]`` (20:00) in its time zone, unless the day's report
exists or a ``daily_report`` item for that day was already enqueued (whatever became of
it but a drop by restart recovery: once per local day). The beat runs ``attention.daily_report_all`` every 15 minutes;
the check and the enqueue hold the agent's lock for the job, so two beats at the same
moment enqueue one item.
"""

from __future__ import annotations

import logging
import re
from collections.abc import Callable
from datetime import date, datetime
from typing import Any

from django.conf import settings
from django.contrib.auth.models import User
from django.db import transaction
from django.utils import timezone

from mailbox import services as mailbox
from mailbox.models import MailboxItem
from mailbox.registry import MailboxType, Status
from markus.agents.models import Agent
from markus.core.errors import MarkusError
from notifications.registry import NotificationType
from notifications.services import notify_user

from .clock import agent_zone, local_day_bounds, local_now
from .models import DailyReport

log = logging.getLogger(__name__)

# An agent is a manager when its role names it one ("Engineering Manager", "manager").
MANAGER_ROLE = re.compile(r"\bmanager\b", re.I)
REPORT_MAX_CHARS = 20_000
# The line after which the daily-report item lists the day's activities, one per line.
ACTIVITY_HEADING = "Today's activities:"
LOCK_KEY = "daily-report"

# (agent id, start, end) → the digest of the agent's activities in that span: see
# ``attention.selectors.day_activity``, which the beat's task passes in (the attention
# records live above this app).
DayDigest = Callable[[str, datetime, datetime], dict[str, Any]]


class ReportError(MarkusError):
    """Bad input for a report (400), the message safe to show."""


def is_manager(agent: Agent) -> bool:
    return bool(MANAGER_ROLE.search(agent.role or ""))


def report_hour() -> int:
    return int(settings.MARKUS.get("DAILY_REPORT_HOUR", 20))


def report_due(agent: Agent, now: datetime) -> date | None:
    """The local date the agent owes a report for at ``now``, or None."""
    if not is_manager(agent):
        return None
    local = local_now(agent, now)
    if local.hour < report_hour():
        return None
    day = local.date()
    if DailyReport.objects.filter(agent=agent, date=day).exists():
        return None
    asked = MailboxItem.objects.filter(
        agent_id=agent.id, source_type=MailboxType.DAILY_REPORT, payload__extra__date=day.isoformat()
    )
    # An item restart recovery dropped (its worker died in it) asked for nothing: the
    # next check asks again, as the dream cycle does (``memory.dream.due_agents``).
    asked = asked.exclude(status=Status.DROPPED, drop_reason__startswith="recovery:")
    return None if asked.exists() else day


def digest_lines(digest: dict[str, Any]) -> list[str]:
    """The day's activities as the report item lists them (and the offline brain reads)."""
    lines = [
        f"- {a.get('time', '')} {a.get('type', '')}: {a.get('label', '')} "
        f"({'ok' if a.get('success') else 'failed' if a.get('success') is False else 'open'})".replace("  ", " ")
        for a in digest.get("activities", [])
    ]
    return lines or ["- (no activity recorded today)"]


def report_request(agent: Agent, day: date, now: datetime, digest: dict[str, Any]) -> dict[str, Any]:
    """The payload of the ``daily_report`` item for ``day``."""
    zone = agent_zone(agent)
    local = local_now(agent, now)
    total, ok = int(digest.get("total", 0)), int(digest.get("succeeded", 0))
    content = "\n".join(
        [
            f"It is {local:%H:%M} on {day.isoformat()} ({zone.key}). Write your daily report for today: what you "
            "did, what came of it, what is still open and what comes next. Submit it with submit_daily_report; "
            "your owner receives it.",
            f"Summary: {total} activities, {ok} succeeded.",
            "",
            ACTIVITY_HEADING,
            *digest_lines(digest),
        ]
    )
    return {
        "summary": f"Daily report for {day.isoformat()}",
        "content": content,
        "extra": {"period": day.isoformat(), "date": day.isoformat(), "timezone": zone.key},
    }


def enqueue_due_reports(*, now: datetime | None = None, digest: DayDigest | None = None) -> int:
    """A ``daily_report`` item for every running manager agent that owes one. Returns the
    items enqueued."""
    now = now or timezone.now()
    n = 0
    agents = Agent.objects.running()
    for agent in agents:
        if not is_manager(agent):
            continue
        with transaction.atomic():
            mailbox.mailbox_lock_group(agent.id, MailboxType.DAILY_REPORT, LOCK_KEY)
            day = report_due(agent, now)
            if day is None:
                continue
            start, _end = local_day_bounds(agent, day)
            seen = digest(agent.id, start, now) if digest is not None else {}
            mailbox.mailbox_enqueue(
                agent_id=agent.id,
                source_type=MailboxType.DAILY_REPORT,
                payload=report_request(agent, day, now, seen),
                metadata={"senderRole": "system"},
            )
        log.info("daily report: asked %s for %s", agent.id, day)
        n += 1
    return n


def report_recipient(agent: Agent) -> User | None:
    """Who receives the agent's reports: its owner, else its team's owner."""
    if agent.owner is not None:
        return agent.owner
    return agent.team.owner if agent.team is not None else None


def report_store(*, agent: Agent, day: date, content: str, activity: dict[str, Any]) -> tuple[DailyReport, bool]:
    """Store the agent's report for ``day`` (a second one the same day replaces the
    text). The first one of the day goes to the owner as an ``agent_report``
    notification. Returns (report, created)."""
    text = (content or "").strip()
    if not text:
        raise ReportError("the report is empty")
    if len(text) > REPORT_MAX_CHARS:
        raise ReportError(f"the report is {len(text)} characters; at most {REPORT_MAX_CHARS}")
    with transaction.atomic():
        report, created = DailyReport.objects.select_for_update().get_or_create(
            agent=agent, date=day, defaults={"content": text, "activity": activity}
        )
        if not created:
            report.content, report.activity, report.updated_at = text, activity, timezone.now()
            report.save(update_fields=["content", "activity", "updated_at"])
            return report, False
        recipient = report_recipient(agent)
        if recipient is not None:
            notify_user(
                user=recipient,
                type=NotificationType.AGENT_REPORT,
                title=f"{agent.name}: daily report for {day.isoformat()}",
                body=text,
                action_target={"agentId": agent.id, "reportDate": day.isoformat()},
                metadata={"agentId": agent.id, "reportId": report.pk, "reportDate": day.isoformat()},
            )
    return report, True


def serialize_report(report: DailyReport) -> dict[str, Any]:
    return {
        "id": report.pk,
        "agentId": report.agent_id,
        "date": report.date.isoformat(),
        "content": report.content,
        "activity": report.activity,
        "createdAt": report.created_at,
        "updatedAt": report.updated_at,
    }


def reports_of(agent_id: str, *, limit: int = 30, offset: int = 0) -> tuple[list[DailyReport], int]:
    rows = DailyReport.objects.filter(agent_id=agent_id).order_by("-date", "-id")
    return list(rows[offset : offset + limit]), rows.count()


def latest_reports(agent_id: str, *, limit: int) -> list[DailyReport]:
    return list(DailyReport.objects.filter(agent_id=agent_id).order_by("-date", "-id")[:limit])


def parse_day(value: str) -> date:
    try:
        return date.fromisoformat(value)
    except ValueError as exc:
        raise ReportError(f"{value!r} is not a date (YYYY-MM-DD)") from exc
