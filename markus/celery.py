"""The Celery app. The database is the queue; the broker only carries wake-ups."""

from __future__ import annotations

import os

from celery import Celery

os.environ.setdefault("DJANGO_SETTINGS_MODULE", "markus.settings")

app = Celery("markus")
app.config_from_object("django.conf:settings", namespace="CELERY")
app.autodiscover_tasks()
