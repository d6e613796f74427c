from django.apps import AppConfig


class MemoryConfig(AppConfig):
    name = "markus.memory"
    label = "memory"
    verbose_name = "long-term memory"
    default_auto_field = "django.db.models.BigAutoField"
