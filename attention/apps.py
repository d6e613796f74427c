from django.apps import AppConfig


class AttentionConfig(AppConfig):
    name = "attention"
    label = "attention"
    default_auto_field = "django.db.models.BigAutoField"
