"""``python manage.py agent show ID`` (with ``pending_inbox``) and
``agent list [--inbox]`` (with ``pending_inbox_count``), locally or against a hub."""

from __future__ import annotations

from typing import Any

from django.core.management.base import CommandParser

from agentbus import cli


class Command(cli.JsonCommand):
    help = "Show or list agents, with what waits in their AgentBus inbox."

    def add_arguments(self, parser: CommandParser) -> None:
        sub = parser.add_subparsers(dest="subcommand", required=True, metavar="SUBCOMMAND")
        p = sub.add_parser("show", help="one agent, with pending_inbox")
        p.add_argument("agent_id")
        cli.add_hub_arguments(p)
        p = sub.add_parser("list", help="every agent (--inbox: with pending_inbox_count)")
        p.add_argument("--inbox", action="store_true")
        cli.add_hub_arguments(p)

    def handle(self, *args: Any, **options: Any) -> None:
        bus = cli.backend(options)
        if options["subcommand"] == "show":
            data = cli.run(bus.agent_show, options["agent_id"])
        else:
            data = cli.run(bus.agent_list, inbox=options["inbox"])
        self.stdout.write(cli.dumps(data))
