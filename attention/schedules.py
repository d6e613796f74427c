"""The beat schedule as data: the entries are declared here and created in
django-celery-beat's tables when they are missing, after every ``migrate``
(``post_migrate``, so a standalone ``celery -A markus beat`` on a fresh database has
them) and at ``manage.py up``. An existing entry is never overwritten: what an operator
changed in the console (its interval, enabled flag, arguments) survives restarts.

The one exception is an entry still exactly as an earlier release wrote it (its task
and its schedule untouched, and no description: earlier releases wrote none, this one
always does): it is moved to today's declaration, since nobody chose it.

The effects are idempotent whichever beat sends them (two beats by mistake, a retried
task): the heartbeat claims each agent's period with a conditional UPDATE
(``attention.heartbeat``), the other jobs check for their period's item.
"""

from __future__ import annotations

import json
import logging
from dataclasses import dataclass
from typing import Any

from django.conf import settings
from django.db import DEFAULT_DB_ALIAS, connections, transaction

log = logging.getLogger(__name__)

# How often beat asks which agents are due for a heartbeat (each agent has its own
# interval, attention.heartbeat); the tick itself is cheap when nobody is due.
HEARTBEAT_TICK_MINUTES = 5
DREAM_CYCLE_HOURS = 4
DAILY_REPORT_TICK_MINUTES = 15
DEAD_END_TICK_MINUTES = 10  # markus.work.dead_ends: the transitions mark at once; this catches the rest
STALL_TICK_MINUTES = 1  # attention.stalls: one query per kind for all the running agents
RETENTION_TICK_HOURS = 1  # markus.retention: each run's batches are small when it runs often

SECONDS, MINUTES, HOURS = "seconds", "minutes", "hours"  # IntervalSchedule periods


@dataclass(frozen=True)
class Every:
    """An interval schedule: ``every`` ``period`` (seconds, minutes, hours, days)."""

    every: int
    period: str


@dataclass(frozen=True)
class Crontab:
    """A crontab schedule (UTC), as an earlier release declared some entries."""

    minute: str
    hour: str
    day_of_week: str = "*"
    day_of_month: str = "*"
    month_of_year: str = "*"


Schedule = Every | Crontab


@dataclass(frozen=True)
class Entry:
    """One beat entry: its unique name, the Celery task it sends, its schedule, and the
    schedules earlier releases declared for it (an entry still on one of them, with the
    same task, is moved to ``schedule``)."""

    name: str
    task: str
    schedule: Schedule
    description: str = ""
    earlier: tuple[tuple[str, Schedule], ...] = ()


def sweep_every() -> Every:
    return Every(max(1, int(settings.MARKUS["SWEEP_SECONDS"])), SECONDS)


def entries() -> list[Entry]:
    """The declared entries (the sweep's interval follows MARKUS["SWEEP_SECONDS"])."""
    return [
        Entry(
            "attention.sweep",
            "attention.sweep",
            sweep_every(),
            "The backstop: kicks agents with due work and no live loop, repairs task liveness.",
        ),
        Entry(
            "attention.heartbeat",
            "attention.heartbeat_all",
            Every(HEARTBEAT_TICK_MINUTES, MINUTES),
            "Enqueues a heartbeat for each running agent whose own interval has come (at most one per "
            "agent and period, whichever beat sends it).",
            earlier=(("attention.heartbeat_all", Every(30, MINUTES)),),
        ),
        Entry(
            "attention.dream_cycle",
            "attention.dream_cycle_all",
            Every(DREAM_CYCLE_HOURS, HOURS),
            "Checks which agents are due to consolidate their memory (the dream cycle).",
            earlier=(("attention.dream_cycle_all", Crontab("0", "3")),),
        ),
        Entry(
            "attention.daily_report",
            "attention.daily_report_all",
            Every(DAILY_REPORT_TICK_MINUTES, MINUTES),
            "Checks which manager agents are due to write today's report (after 20:00 in their time zone).",
            earlier=(("attention.daily_report_all", Crontab("0", "18", day_of_week="1-5")),),
        ),
        Entry(
            "attention.dead_ends",
            "attention.dead_ends",
            Every(DEAD_END_TICK_MINUTES, MINUTES),
            "Marks the waiting tasks that can never start (a dependency failed, rejected, cancelled; a cycle) "
            "and tells their creator once; unmarks those that can again.",
        ),
        Entry(
            "attention.stalls",
            "attention.stalls",
            Every(STALL_TICK_MINUTES, MINUTES),
            "Tells each running agent's owner, once per stall, that it has made no progress for a while "
            "(the same item too long, the same tool failing, waiting on a person).",
        ),
        Entry(
            "retention.prune",
            "retention.prune",
            Every(RETENTION_TICK_HOURS, HOURS),
            "Prunes what the retention policy (MARKUS['RETENTION']) lets go, in short batches; "
            "each run is recorded (Retention > Prune runs).",
        ),
    ]


def _schedule_fields(schedule: Schedule, using: str) -> dict[str, Any]:
    from django_celery_beat.models import CrontabSchedule, IntervalSchedule

    if isinstance(schedule, Every):
        interval, _ = IntervalSchedule.objects.using(using).get_or_create(every=schedule.every, period=schedule.period)
        return {"interval": interval, "crontab": None}
    crontab, _ = CrontabSchedule.objects.using(using).get_or_create(
        minute=schedule.minute,
        hour=schedule.hour,
        day_of_week=schedule.day_of_week,
        day_of_month=schedule.day_of_month,
        month_of_year=schedule.month_of_year,
    )
    return {"crontab": crontab, "interval": None}


def _is_on(row: Any, schedule: Schedule) -> bool:
    """Does the stored entry run exactly on ``schedule``?"""
    if isinstance(schedule, Every):
        interval = row.interval
        return (
            row.crontab_id is None
            and interval is not None
            and (interval.every, interval.period) == (schedule.every, schedule.period)
        )
    crontab = row.crontab
    return (
        row.interval_id is None
        and crontab is not None
        and (crontab.minute, crontab.hour, crontab.day_of_week, crontab.day_of_month, crontab.month_of_year)
        == (schedule.minute, schedule.hour, schedule.day_of_week, schedule.day_of_month, schedule.month_of_year)
    )


def beat_tables_exist(using: str = DEFAULT_DB_ALIAS) -> bool:
    from django_celery_beat.models import PeriodicTask

    return PeriodicTask._meta.db_table in connections[using].introspection.table_names()


def ensure_beat_schedule(using: str = DEFAULT_DB_ALIAS) -> dict[str, list[str]]:
    """Create the declared entries that are missing; move an entry still on an earlier
    release's declaration to today's. Nothing else is touched. Returns the names
    ``created`` and ``upgraded``."""
    from django_celery_beat.models import PeriodicTask  # its save() tells a running beat

    done: dict[str, list[str]] = {"created": [], "upgraded": []}
    with transaction.atomic(using=using):
        for entry in entries():
            row = (
                PeriodicTask.objects.using(using).select_related("interval", "crontab").filter(name=entry.name).first()
            )
            if row is None:
                PeriodicTask.objects.using(using).create(
                    name=entry.name,
                    task=entry.task,
                    args=json.dumps([]),
                    description=entry.description,
                    **_schedule_fields(entry.schedule, using),
                )
                done["created"].append(entry.name)
            elif not row.description and any(row.task == task and _is_on(row, old) for task, old in entry.earlier):
                # An earlier release wrote no description; this one always does, so a row
                # it wrote and an operator set back to an old schedule stays as set.
                for field, value in _schedule_fields(entry.schedule, using).items():
                    setattr(row, field, value)
                row.task, row.description = entry.task, entry.description or row.description
                row.save()
                done["upgraded"].append(entry.name)
    if done["created"] or done["upgraded"]:
        log.info("beat schedule: created %s, upgraded %s", done["created"], done["upgraded"])
    return done


def on_post_migrate(using: str = DEFAULT_DB_ALIAS, **kwargs: Any) -> None:
    """``post_migrate`` receiver: the entries exist after every ``migrate`` (and after a
    test database's flush), once django-celery-beat's tables do."""
    if beat_tables_exist(using):
        ensure_beat_schedule(using)
