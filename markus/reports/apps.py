from django.apps import AppConfig


class ReportsConfig(AppConfig):
    name = "markus.reports"
    label = "reports"
    default_auto_field = "django.db.models.BigAutoField"
    verbose_name = "Reports and reminders"
