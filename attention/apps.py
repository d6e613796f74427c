from django.apps import AppConfig


class AttentionConfig(AppConfig):
    name = "attention"
    label = "attention"
    default_auto_field = "django.db.models.BigAutoField"

    def ready(self) -> None:
        from mailbox.services import item_enqueued

        from .services import on_item_enqueued

        item_enqueued.connect(on_item_enqueued, dispatch_uid="attention.wake_on_enqueue")

        from notifications.services import register_approval_answered_hook

        from .settle import on_approval_answered

        register_approval_answered_hook(on_approval_answered)

        from django.db.models.signals import post_migrate

        from agentbus.services import reply_closed

        from . import tasks  # noqa: F401  registers the Celery tasks in every process (wake finds them by name)
        from .conversations import on_reply_closed, reply_waits_timed_out
        from .heartbeat import wake_sleepers_now
        from .loop import tidy_after_dead_workers
        from .services import sweep_hooks

        # An agent that asked a colleague and keeps its place resumes when the reply closes.
        reply_closed.connect(on_reply_closed, dispatch_uid="attention.reply_closed")

        # A paused or stopped agent's dead run is tidied by the sweep (no run takes its
        # lease); a deep sleeper with new work goes back to its normal rhythm; a wait for
        # a colleague's reply that ran out resumes with a timeout note.
        for hook in (tidy_after_dead_workers, wake_sleepers_now, reply_waits_timed_out):
            if hook not in sweep_hooks:
                sweep_hooks.append(hook)
        from .schedules import on_post_migrate

        # The beat entries exist after every migrate: a standalone beat on a fresh database has them.
        post_migrate.connect(on_post_migrate, sender=self, dispatch_uid="attention.beat_schedule")
