"""A form of the console given what it cannot take answers with the form again and the
field's error, never a 500 (found by posting junk to every field of every admin's add
and change page): the pieces from other packages included (django-celery-beat's, and
Django's own many-to-many choice on SQLite)."""

from __future__ import annotations

import pytest
from django.urls import reverse

from markus.agents.models import Team

pytestmark = pytest.mark.django_db


def _errors(response) -> dict:
    assert response.status_code == 200, response.status_code
    return response.context["adminform"].form.errors


def test_a_periodic_task_whose_task_name_is_too_long_is_a_form_error(operator, console):
    # django-celery-beat's form reads the task's cleaned value even when the field failed.
    response = operator.post(
        reverse("admin:django_celery_beat_periodictask_add"), {"name": "nightly", "task": "x" * 201}
    )
    assert _errors(response)["task"] == ["Ensure this value has at most 200 characters (it has 201)."]


def test_a_periodic_tasks_headers_must_be_json_and_empty_is_none(operator, console):
    # Its model saved empty headers as NULL into a column that may not be (an
    # IntegrityError), and took headers that are not JSON, which beat then cannot read.
    from django_celery_beat.models import IntervalSchedule, PeriodicTask

    every = IntervalSchedule.objects.create(every=10, period=IntervalSchedule.MINUTES)
    url = reverse("admin:django_celery_beat_periodictask_add")
    form = {"name": "nightly", "task": "attention.sweep", "interval": every.pk, "args": "[]", "kwargs": "{}"}
    form |= {"enabled": "on", "expire_seconds": "", "priority": "", "queue": "", "exchange": "", "routing_key": ""}
    refused = _errors(operator.post(url, {**form, "headers": "{"}))
    assert refused["headers"][0].startswith("Unable to parse JSON")
    saved = operator.post(url, {**form, "headers": ""})
    assert saved.status_code == 302, saved.context["adminform"].form.errors
    assert PeriodicTask.objects.get(name="nightly").headers == "{}"


@pytest.mark.parametrize("field", ["minute", "hour", "day_of_month", "month_of_year", "day_of_week"])
def test_a_crontab_out_of_range_is_a_form_error(operator, console, field):
    # The page shown again with the error read the schedule's description, which raised.
    form = {
        "minute": "0",
        "hour": "4",
        "day_of_month": "*",
        "month_of_year": "*",
        "day_of_week": "*",
        "timezone": "UTC",
    }
    errors = _errors(operator.post(reverse("admin:django_celery_beat_crontabschedule_add"), {**form, field: "-1"}))
    assert field in errors


def test_a_member_id_too_large_for_its_column_is_a_form_error(operator, console, alice):
    # Django checks each id's type, then asks for all of them with one IN: SQLite raised
    # OverflowError for an integer past 64 bits.
    team = Team.objects.get(owner=alice)
    url = reverse("admin:agents_team_change", args=[team.pk])
    errors = _errors(operator.post(url, {"name": team.name, "owner": alice.pk, "members": ["9" * 30]}))
    assert errors["members"] == [f"“{'9' * 30}” is not a valid value."]
