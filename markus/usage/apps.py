from __future__ import annotations

from django.apps import AppConfig


class UsageConfig(AppConfig):
    name = "markus.usage"
    label = "usage"
    verbose_name = "Usage and budgets"
    default_auto_field = "django.db.models.BigAutoField"
