from django.apps import AppConfig


class AgentbusConfig(AppConfig):
    name = "agentbus"
    label = "agentbus"
    default_auto_field = "django.db.models.BigAutoField"
