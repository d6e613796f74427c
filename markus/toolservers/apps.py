from django.apps import AppConfig


class ToolServersConfig(AppConfig):
    name = "markus.toolservers"
    label = "toolservers"
    verbose_name = "tool servers (MCP)"
    default_auto_field = "django.db.models.BigAutoField"

    def ready(self) -> None:
        from markus.core.signals import on, tools_wanted

        from . import runtime
        from .offered import provide

        on(tools_wanted, provide, "toolservers.offered")
        runtime.install_shutdown_hooks()
