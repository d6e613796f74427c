from __future__ import annotations

from django.apps import AppConfig


class AgentbusConfig(AppConfig):
    name = "agentbus"
    label = "agentbus"
    default_auto_field = "django.db.models.BigAutoField"

    def ready(self) -> None:
        from markus.core.signals import on, swept, task_status_changed

        from .outbox import sweep_relay

        # The sweep is the backstop for outbox rows the after-commit relay missed.
        on(swept, sweep_relay, "agentbus.swept.relay")

        # Task lifecycle on the bus: each transition writes an outbox row in its own
        # transaction (agentbus/lifecycle.py).

        from .lifecycle import on_task_status_changed

        task_status_changed.connect(on_task_status_changed, dispatch_uid="agentbus.task_lifecycle")

        # The team's group channel: made with the team, its running agents its members.
        from django.db.models.signals import post_delete, post_save

        from markus.agents.models import Agent, Team

        from . import team_channel

        post_save.connect(team_channel.on_team_saved, sender=Team, dispatch_uid="agentbus.team_channel")
        post_delete.connect(team_channel.on_team_deleted, sender=Team, dispatch_uid="agentbus.team_channel_gone")
        post_save.connect(team_channel.on_agent_saved, sender=Agent, dispatch_uid="agentbus.team_channel_member")
