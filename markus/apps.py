from django.apps import AppConfig


class MarkusConfig(AppConfig):
    name = "markus"
    label = "markus"

    def ready(self) -> None:
        from .core import schema  # noqa: F401  registers the OpenAPI auth extension
