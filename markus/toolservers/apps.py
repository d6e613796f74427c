from django.apps import AppConfig


class ToolServersConfig(AppConfig):
    name = "markus.toolservers"
    label = "toolservers"
    verbose_name = "tool servers (MCP)"
    default_auto_field = "django.db.models.BigAutoField"

    def ready(self) -> None:
        from attention.toolbox import register_provider

        from . import runtime
        from .offered import provide

        register_provider(provide)
        runtime.install_shutdown_hooks()
