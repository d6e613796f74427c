from django.apps import AppConfig


class AttentionConfig(AppConfig):
    name = "attention"
    label = "attention"
    default_auto_field = "django.db.models.BigAutoField"

    def ready(self) -> None:
        from markus.core.signals import approval_answered, hub_answered, item_enqueued, on, reply_closed, swept

        from .services import on_item_enqueued

        item_enqueued.connect(on_item_enqueued, dispatch_uid="attention.wake_on_enqueue")

        from .settle import on_approval_answered

        on(approval_answered, on_approval_answered, "attention.approval_answered")

        from django.db.models.signals import post_migrate

        from . import (
            outside,
            tasks,  # noqa: F401  registers the Celery tasks in every process (wake finds them by name)
        )
        from .conversations import on_reply_closed, reply_waits_timed_out
        from .heartbeat import wake_sleepers_now
        from .loop import end_overdue, tidy_after_dead_workers

        # An agent that asked a colleague and keeps its place resumes when the reply closes.
        reply_closed.connect(on_reply_closed, dispatch_uid="attention.reply_closed")

        # A paused or stopped agent's dead run is tidied by the sweep (no run takes its
        # lease); a deep sleeper with new work goes back to its normal rhythm; a wait for
        # a colleague's reply that ran out resumes with a timeout note.
        # An outside agent's items not yet delivered to its bus inbox are delivered, and
        # a person's chat it did not answer in time is ended with an answer saying so.
        # An item kept past its time limit by a holder that froze is ended.

        for hook in (
            tidy_after_dead_workers,
            wake_sleepers_now,
            reply_waits_timed_out,
            outside.deliver_shelved,
            outside.answers_overdue,
            end_overdue,
        ):
            on(swept, hook, f"attention.swept.{hook.__name__}")

        # What is addressed to an outside agent reaches its bus inbox (no loop drains its
        # mailbox); its answer on the bus to a person's chat is the chat's reply.
        from django.db.models.signals import post_delete, post_save

        from markus.agents.models import Agent

        item_enqueued.connect(outside.on_item_enqueued, dispatch_uid="attention.outside_delivery")
        hub_answered.connect(outside.on_hub_answered, dispatch_uid="attention.outside_chat_reply")
        # The delivery knows an agent's kind as it was saved in this process.
        post_save.connect(outside.on_agent_saved, sender=Agent, dispatch_uid="attention.outside_kind")
        post_delete.connect(outside.on_agent_deleted, sender=Agent, dispatch_uid="attention.outside_kind_gone")
        from .schedules import on_post_migrate

        # The beat entries exist after every migrate: a standalone beat on a fresh database has them.
        post_migrate.connect(on_post_migrate, sender=self, dispatch_uid="attention.beat_schedule")
