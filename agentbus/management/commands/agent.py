"""``python manage.py agent show ID`` (with ``pending_inbox``) and
``agent list [--inbox]`` (with ``pending_inbox_count``), locally or against a hub; and
connecting an outside agent: ``agent connect NAME [--role R] [--team T] [--id ID]``
creates it (``kind`` external), ``agent rotate-token ID`` gives it a new token,
``agent revoke-token ID`` leaves it without one. ``connect`` and ``rotate-token`` print
the token, once, with the configuration of ``markus.agents.connect`` (``snippets``; the
connect page's); ``--text`` prints them as blocks to copy instead of one JSON object."""

from __future__ import annotations

import os
from typing import Any

from django.core.management.base import CommandParser

from agentbus import cli
from markus.agents import connect

# Where a hub is, for the snippets of a local connect (``manage.py up``'s default).
LOCAL_BASE_URL = "http://127.0.0.1:8000"
TITLES = {
    "claudeMcpAdd": "Claude Code: its MCP server",
    "mcpJson": "or the project's .mcp.json (keep it out of version control)",
    "hookInstall": "Claude Code hooks: fetch the hook script",
    "claudeSettings": "and add to ~/.claude/settings.json (or .claude/settings.local.json)",
    "mcpUrl": "Any MCP client: URL",
    "mcpHeader": "and header",
    "stdioRelay": "Over stdio, relayed to this server",
    "a2aDirectory": "A2A directory card (with the token as Bearer)",
    "a2aCard": "this agent's A2A card (a person reaches it as a chat)",
}


class Command(cli.JsonCommand):
    help = "Show or list agents, with what waits in their AgentBus inbox; connect an outside agent, rotate its token."

    def add_arguments(self, parser: CommandParser) -> None:
        sub = parser.add_subparsers(dest="subcommand", required=True, metavar="SUBCOMMAND")
        p = sub.add_parser("show", help="one agent, with pending_inbox")
        p.add_argument("agent_id")
        cli.add_hub_arguments(p)
        p = sub.add_parser("list", help="every agent (--inbox: with pending_inbox_count)")
        p.add_argument("--inbox", action="store_true")
        cli.add_hub_arguments(p)
        p = sub.add_parser("connect", help="add an outside agent: its token (once) and its configuration")
        p.add_argument("name")
        p.add_argument("--role", default="")
        p.add_argument("--team", default=None, help="the team's id (a hub: one where the token's user may create)")
        p.add_argument("--id", dest="new_id", default=None, help="the agent's id (default: generated)")
        p.add_argument("--owner", default=None, help="local only: the owning user's name (a hub: the token's user)")
        self._connect_arguments(p)
        p = sub.add_parser("rotate-token", help="a new token (once), the old one refused at once")
        p.add_argument("agent_id")
        self._connect_arguments(p)
        p = sub.add_parser("revoke-token", help="leave the agent without a token")
        p.add_argument("agent_id")
        cli.add_hub_arguments(p)

    def _connect_arguments(self, parser: CommandParser) -> None:
        cli.add_hub_arguments(parser)
        parser.add_argument(
            "--base-url", default=None, help=f"the server the snippets name (default: the hub, else {LOCAL_BASE_URL})"
        )
        parser.add_argument("--text", action="store_true", help="print blocks to copy instead of one JSON object")

    def handle(self, *args: Any, **options: Any) -> None:
        bus = cli.backend(options)
        command = options["subcommand"]
        if command == "show":
            data = cli.run(bus.agent_show, options["agent_id"])
        elif command == "list":
            data = cli.run(bus.agent_list, inbox=options["inbox"])
        elif command == "revoke-token":
            data = cli.run(bus.agent_revoke_token, options["agent_id"])
        else:
            if command == "connect":
                data = cli.run(
                    bus.agent_connect,
                    options["name"],
                    role=options["role"],
                    team_id=options["team"],
                    agent_id=options["new_id"],
                    owner=options["owner"],
                )
            else:
                data = cli.run(bus.agent_rotate_token, options["agent_id"])
            base = options["base_url"] or options["hub"] or os.environ.get("MARKUS_HUB_URL") or LOCAL_BASE_URL
            data["snippets"] = connect.snippets(base_url=base, agent_id=data["id"], token=data["token"])
            if options["text"]:
                self.stdout.write(as_text(data))
                return
        self.stdout.write(cli.dumps(data))


def as_text(data: dict[str, Any]) -> str:
    head = f"Agent {data['name']} ({data['id']}). Its token, shown this once: {data['token']}"
    blocks = [f"# {TITLES[key]}\n{text}" for key, text in data["snippets"].items()]
    return "\n\n".join([head, *blocks]) + "\n"
