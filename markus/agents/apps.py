from django.apps import AppConfig


class AgentsConfig(AppConfig):
    name = "markus.agents"
    label = "agents"
    default_auto_field = "django.db.models.BigAutoField"

    def ready(self) -> None:
        from django.db.models.signals import post_delete, post_save

        from .models import Agent
        from .signals import on_agent_deleted, on_agent_saved

        post_save.connect(on_agent_saved, sender=Agent, dispatch_uid="agents.created_event")
        post_delete.connect(on_agent_deleted, sender=Agent, dispatch_uid="agents.removed_event")
