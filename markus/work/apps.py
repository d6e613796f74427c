from django.apps import AppConfig


class WorkConfig(AppConfig):
    name = "markus.work"
    label = "work"
    default_auto_field = "django.db.models.BigAutoField"
