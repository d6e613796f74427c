from django.apps import AppConfig


class WorkConfig(AppConfig):
    name = "markus.work"
    label = "work"
    default_auto_field = "django.db.models.BigAutoField"

    def ready(self) -> None:
        from notifications.services import register_approval_answered_hook

        from . import history
        from .review import on_approval_answered, on_filing_answered
        from .signals import requirement_status_changed, task_status_changed

        register_approval_answered_hook(on_approval_answered)
        register_approval_answered_hook(on_filing_answered)
        task_status_changed.connect(history.on_task_status_changed, dispatch_uid="work.task_history")
        requirement_status_changed.connect(history.on_requirement_status_changed, dispatch_uid="work.req_history")
