from django.apps import AppConfig


class RetentionConfig(AppConfig):
    name = "markus.retention"
    label = "retention"
    default_auto_field = "django.db.models.BigAutoField"
    verbose_name = "Retention"
