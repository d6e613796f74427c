from django.apps import AppConfig


class MarkusConfig(AppConfig):
    name = "markus"
    label = "markus"
