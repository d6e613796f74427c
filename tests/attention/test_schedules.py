"""The beat schedule as data (issue 16, item 1): the entries are declared in code
(``attention.schedules``) and created when missing, by ``migrate`` (post_migrate, so a
standalone ``celery beat`` on a fresh database has them) and by ``manage.py up``; an
entry an operator changed in the console is never overwritten."""

from __future__ import annotations

import pytest
from django.core.management import call_command
from django_celery_beat.models import CrontabSchedule, IntervalSchedule, PeriodicTask
from django_celery_beat.schedulers import DatabaseScheduler

from attention import schedules
from attention.services import sync_beat_schedule
from markus.celery import app as celery_app

pytestmark = [pytest.mark.django_db, pytest.mark.pg]

DECLARED = {
    "attention.sweep": ("attention.sweep", None),
    "attention.heartbeat": ("attention.heartbeat_all", (5, "minutes")),
    "attention.dream_cycle": ("attention.dream_cycle_all", (4, "hours")),
    "attention.daily_report": ("attention.daily_report_all", (15, "minutes")),
    "attention.stalls": ("attention.stalls", (1, "minutes")),
    "attention.dead_ends": ("attention.dead_ends", (10, "minutes")),
}


def stored() -> dict[str, PeriodicTask]:
    return {t.name: t for t in PeriodicTask.objects.select_related("interval", "crontab")}


def assert_declared(rows: dict[str, PeriodicTask]) -> None:
    for name, (task, every) in DECLARED.items():
        row = rows[name]
        assert row.task == task and row.enabled and row.crontab is None
        if every is not None:
            assert (row.interval.every, row.interval.period) == every
    sweep = rows["attention.sweep"].interval
    assert sweep.period == "seconds" and sweep.every == schedules.sweep_every().every


def interval(every: int, period: str) -> IntervalSchedule:
    return IntervalSchedule.objects.get_or_create(every=every, period=period)[0]


def test_a_freshly_migrated_database_has_every_entry():
    """The test database was just made by ``migrate``: nobody called anything else."""
    assert_declared(stored())


def test_migrate_creates_the_entries_that_are_missing():
    PeriodicTask.objects.filter(name__in=["attention.heartbeat", "attention.daily_report"]).delete()
    call_command("migrate", interactive=False, verbosity=0)
    assert_declared(stored())


def test_a_standalone_beat_on_the_migrated_database_schedules_them():
    """What ``celery -A markus beat`` (django-celery-beat's DatabaseScheduler) loads."""
    scheduler = DatabaseScheduler(app=celery_app, lazy=True)
    loaded = scheduler.all_as_schedule()
    assert set(DECLARED) <= set(loaded)
    assert {name: loaded[name].task for name in DECLARED} == {name: t for name, (t, _) in DECLARED.items()}
    for name in DECLARED:
        assert loaded[name].task in celery_app.tasks, f"{name} sends a task no worker knows"


def test_an_operators_edits_survive_up_and_migrate():
    """The heartbeat tick every 10 minutes, the daily report disabled, the dream cycle
    moved to a crontab: a restart (``up``: sync_beat_schedule; ``migrate``:
    post_migrate) keeps all of it."""
    PeriodicTask.objects.filter(name="attention.heartbeat").update(interval=interval(10, "minutes"))
    PeriodicTask.objects.filter(name="attention.daily_report").update(enabled=False)
    nightly = CrontabSchedule.objects.create(minute="30", hour="2")
    PeriodicTask.objects.filter(name="attention.dream_cycle").update(interval=None, crontab=nightly)

    assert sync_beat_schedule() == {"created": [], "upgraded": []}
    call_command("migrate", interactive=False, verbosity=0)  # post_migrate runs after every migrate

    rows = stored()
    assert (rows["attention.heartbeat"].interval.every, rows["attention.heartbeat"].interval.period) == (
        10,
        "minutes",
    )
    assert rows["attention.daily_report"].enabled is False
    assert rows["attention.dream_cycle"].crontab_id == nightly.id and rows["attention.dream_cycle"].interval is None
    assert PeriodicTask.objects.filter(name__startswith="attention.").count() == len(DECLARED)


def test_an_entry_still_as_an_earlier_release_declared_it_moves_to_todays_declaration():
    """Before issue 16 ``up`` wrote the heartbeat every 30 min, the dream cycle at 03:00
    and the report at 18:00 on weekdays. Rows nobody changed since move to today's
    schedule (the operator's enabled flag kept); a row that differs is left alone. The
    earlier release wrote no description (this one always does)."""
    PeriodicTask.objects.update(description="")
    PeriodicTask.objects.filter(name="attention.heartbeat").update(interval=interval(30, "minutes"), enabled=False)
    old_dream = CrontabSchedule.objects.create(minute="0", hour="3")
    PeriodicTask.objects.filter(name="attention.dream_cycle").update(interval=None, crontab=old_dream)
    edited_report = CrontabSchedule.objects.create(minute="0", hour="19", day_of_week="1-5")
    PeriodicTask.objects.filter(name="attention.daily_report").update(interval=None, crontab=edited_report)

    done = sync_beat_schedule()
    assert sorted(done["upgraded"]) == ["attention.dream_cycle", "attention.heartbeat"]
    rows = stored()
    assert (rows["attention.heartbeat"].interval.every, rows["attention.heartbeat"].enabled) == (5, False)
    assert (rows["attention.dream_cycle"].interval.every, rows["attention.dream_cycle"].crontab) == (4, None)
    assert rows["attention.daily_report"].crontab_id == edited_report.id
    assert sync_beat_schedule() == {"created": [], "upgraded": []}


def test_a_deleted_entry_comes_back_as_declared_at_the_next_start():
    PeriodicTask.objects.filter(name="attention.sweep").delete()
    assert sync_beat_schedule()["created"] == ["attention.sweep"]
    assert_declared(stored())
