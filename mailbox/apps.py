from django.apps import AppConfig


class MailboxConfig(AppConfig):
    name = "mailbox"
    label = "mailbox"
    default_auto_field = "django.db.models.BigAutoField"
