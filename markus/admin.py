"""The project's own admin module, imported last of all (``markus`` is the last app):
the admins other apps registered get the console's rule for bad URLs and bad forms,
and django-celery-beat's forms answer what they cannot take with a field's error."""

from __future__ import annotations

from typing import Any

from celery.schedules import ParseException
from django.contrib import admin
from django_celery_beat.admin import CrontabScheduleAdmin, PeriodicTaskAdmin, PeriodicTaskForm
from django_celery_beat.models import CrontabSchedule, PeriodicTask

from markus.console.modeladmin import refuse_regex_lookups


class CheckedPeriodicTaskForm(PeriodicTaskForm):
    """django-celery-beat's form read the custom task's cleaned value even when that field
    failed (over its 200 characters): a KeyError, a 500; then the field's own error
    stands. Headers are JSON, as beat reads them, and empty ones are ``{}`` (its model
    saved them as NULL into a column that may not be)."""

    def clean(self) -> dict[str, Any]:
        if "task" not in self.cleaned_data:
            return self.cleaned_data
        return super().clean()

    def clean_headers(self) -> str:
        if not self.cleaned_data.get("headers"):
            return "{}"
        return str(self._clean_json("headers"))


class CheckedPeriodicTaskAdmin(PeriodicTaskAdmin):
    form = CheckedPeriodicTaskForm


class CheckedCrontabScheduleAdmin(CrontabScheduleAdmin):
    @admin.display(description="human readable")
    def human_readable(self, obj: CrontabSchedule) -> str:
        """The schedule in words; for one the form refused (shown again with its errors),
        that it is none (the model's description raised)."""
        try:
            return str(obj.human_readable)
        except (ParseException, ValueError):
            return "not a valid schedule"


for model, model_admin in ((PeriodicTask, CheckedPeriodicTaskAdmin), (CrontabSchedule, CheckedCrontabScheduleAdmin)):
    admin.site.unregister(model)
    admin.site.register(model, model_admin)
refuse_regex_lookups(admin.site)
