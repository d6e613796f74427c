"""``python manage.py task show ID``: a task, with its owner's ``pending_inbox``, locally
or against a hub."""

from __future__ import annotations

from typing import Any

from django.core.management.base import CommandParser

from agentbus import cli


class Command(cli.JsonCommand):
    help = "Show a task, with what waits in its owner's AgentBus inbox."

    def add_arguments(self, parser: CommandParser) -> None:
        sub = parser.add_subparsers(dest="subcommand", required=True, metavar="SUBCOMMAND")
        p = sub.add_parser("show", help="one task, with the owner's pending_inbox")
        p.add_argument("task_id")
        cli.add_hub_arguments(p)

    def handle(self, *args: Any, **options: Any) -> None:
        bus = cli.backend(options)
        self.stdout.write(cli.dumps(cli.run(bus.task_show, options["task_id"])))
