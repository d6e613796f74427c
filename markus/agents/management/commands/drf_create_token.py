"""``manage.py drf_create_token USER [-r]``: issue a user API token and print it once.

The name and the output (``Generated token <key> for user <name>``) are those of DRF's
own command, so scripts keep working; the key is stored only as a hash, so it is
printed here once and never again. Each run issues a new token; ``-r`` revokes the
user's other tokens first.
"""

from __future__ import annotations

from typing import Any

from django.contrib.auth import get_user_model
from django.core.management.base import BaseCommand, CommandError, CommandParser

from markus.agents.services import user_token_create


class Command(BaseCommand):
    help = "Issue an API token for a user and print it (once: only its hash is stored)."

    def add_arguments(self, parser: CommandParser) -> None:
        parser.add_argument("username", type=str)
        parser.add_argument(
            "-r", "--reset", action="store_true", dest="reset", help="revoke the user's other tokens first"
        )
        parser.add_argument("--name", default="", help="a label for the token (shown in the admin)")

    def handle(self, *args: Any, **options: Any) -> None:
        username = options["username"]
        user = get_user_model().objects.filter(**{get_user_model().USERNAME_FIELD: username}).first()
        if user is None:
            raise CommandError(f"Cannot create the Token for user {username}: no such user")
        _, raw = user_token_create(user, name=options["name"], replace=options["reset"])
        self.stdout.write(f"Generated token {raw} for user {username}")
