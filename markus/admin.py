"""The project's own admin module, imported last of all (``markus`` is the last app):
the admins other apps registered get the console's rule for bad URLs, and
django-celery-beat's periodic task form answers a bad task name with its field's error."""

from __future__ import annotations

from typing import Any

from django.contrib import admin
from django_celery_beat.admin import PeriodicTaskAdmin, PeriodicTaskForm
from django_celery_beat.models import PeriodicTask

from markus.console.modeladmin import refuse_regex_lookups


class CheckedPeriodicTaskForm(PeriodicTaskForm):
    """django-celery-beat's form reads the custom task's cleaned value even when that
    field failed (over its 200 characters): a KeyError, a 500. Then the field's own
    error stands, and the rest of its checks wait for a name that fits."""

    def clean(self) -> dict[str, Any]:
        if "task" not in self.cleaned_data:
            return self.cleaned_data
        return super().clean()


class CheckedPeriodicTaskAdmin(PeriodicTaskAdmin):
    form = CheckedPeriodicTaskForm


admin.site.unregister(PeriodicTask)
admin.site.register(PeriodicTask, CheckedPeriodicTaskAdmin)
refuse_regex_lookups(admin.site)
