from django.apps import AppConfig


class WorkConfig(AppConfig):
    name = "markus.work"
    label = "work"
    default_auto_field = "django.db.models.BigAutoField"

    def ready(self) -> None:
        from notifications.services import register_approval_answered_hook

        from .review import on_approval_answered

        register_approval_answered_hook(on_approval_answered)
