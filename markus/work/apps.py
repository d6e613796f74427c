from django.apps import AppConfig


class WorkConfig(AppConfig):
    name = "markus.work"
    label = "work"
    default_auto_field = "django.db.models.BigAutoField"

    def ready(self) -> None:
        from markus.core.signals import approval_answered, on, requirement_status_changed, task_status_changed

        from . import history
        from .review import on_approval_answered, on_filing_answered

        on(approval_answered, on_approval_answered, "work.review_answered")
        on(approval_answered, on_filing_answered, "work.filing_answered")
        task_status_changed.connect(history.on_task_status_changed, dispatch_uid="work.task_history")
        requirement_status_changed.connect(history.on_requirement_status_changed, dispatch_uid="work.req_history")
