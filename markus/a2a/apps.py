from django.apps import AppConfig


class A2AConfig(AppConfig):
    name = "markus.a2a"
    label = "a2a"
    default_auto_field = "django.db.models.BigAutoField"
    verbose_name = "A2A: agent cards and tasks"
