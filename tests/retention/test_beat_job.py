"""The beat job: declared with the other entries (created at migrate), a task the worker
knows, pruning by the policy in settings (off when RETENTION["ENABLED"] is false), and its
run shown on the console dashboard."""

from __future__ import annotations

import pytest
from django.urls import reverse
from django_celery_beat.models import PeriodicTask
from django_celery_beat.schedulers import DatabaseScheduler

from mailbox.models import MailboxItem
from markus.celery import app as celery_app
from markus.retention.models import PruneRun
from markus.retention.tasks import PRUNE_TASK, beat_prune

from .rows import item, with_history

pytestmark = [pytest.mark.django_db, pytest.mark.pg]


def test_the_prune_job_is_on_the_beat_schedule_hourly():
    row = PeriodicTask.objects.select_related("interval").get(name="retention.prune")
    assert row.task == PRUNE_TASK and row.enabled
    assert celery_app.tasks[PRUNE_TASK].name == PRUNE_TASK  # the worker knows it
    assert (row.interval.every, row.interval.period) == (1, "hours")
    loaded = DatabaseScheduler(app=celery_app, lazy=True).all_as_schedule()
    assert loaded["retention.prune"].task in celery_app.tasks


def test_the_job_prunes_and_records_a_beat_run(agent):
    with_history(item(agent))
    assert beat_prune() == 7
    run = PruneRun.objects.get()
    assert run.trigger == PruneRun.Trigger.BEAT and not run.dry_run and run.total == 7
    assert MailboxItem.objects.count() == 0


def test_the_job_does_nothing_when_retention_is_off(agent, settings):
    settings.MARKUS = {**settings.MARKUS, "RETENTION": {**settings.MARKUS["RETENTION"], "ENABLED": False}}
    with_history(item(agent))
    assert beat_prune() == 0
    assert MailboxItem.objects.count() == 1 and not PruneRun.objects.exists()


def test_the_console_dashboard_shows_the_last_prune(agent, admin_client):
    page = admin_client.get(reverse("console:dashboard"))
    assert "Last prune:" in page.content.decode() and "never" in page.content.decode()

    with_history(item(agent))
    beat_prune()
    page = admin_client.get(reverse("console:dashboard"), HTTP_HX_REQUEST="true")
    html = page.content.decode()
    run = PruneRun.objects.get()
    assert page.context["last_prune"] == run
    assert 'data-table="mailbox_items">mailbox_items 1<' in html and "removed 7 rows" in html
    assert admin_client.get(reverse("admin:retention_prunerun_change", args=[run.pk])).status_code == 200
