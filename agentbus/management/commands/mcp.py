"""``manage.py mcp``: the MCP door over stdio, for harnesses that launch their servers.

    python manage.py mcp --agent ID                      # this Markus: as agent ID
    python manage.py mcp --hub URL --token TOKEN         # a remote Markus: its /mcp/

Locally it serves the tools of ``agentbus.mcp_door`` as the agent named (trusted like
``manage.py agentbus``: whoever runs it on this machine may act as that agent). Against a
hub it relays every request to the hub's ``/mcp/`` with the token: the hub decides who
the caller is and what it may do, exactly as for a client that speaks HTTP to it. Nothing
but the protocol is written to standard output; an error before serving is one JSON
object on stderr, as for ``manage.py agentbus``."""

from __future__ import annotations

import sys
from typing import Any

import anyio
from django.contrib.auth.models import AnonymousUser
from django.core.management.base import CommandParser

from agentbus.cli import CliError, JsonCommand, usage_error
from agentbus.mcp_door import build
from markus.agents.auth import Caller
from markus.agents.models import Agent


class Command(JsonCommand):
    help = "Serve the MCP door over stdio: as a local agent (--agent) or relayed to a hub (--hub, --token)."

    def add_arguments(self, parser: CommandParser) -> None:
        parser.add_argument("--agent", help="act as this agent (local)")
        parser.add_argument("--hub", help="relay to this Markus (its base URL)")
        parser.add_argument("--token", help="with --hub: the agent's bearer token (or a user's token)")

    def handle(self, *args: Any, agent: str | None, hub: str | None, token: str | None, **options: Any) -> None:
        if hub:
            if not token:
                raise usage_error("--hub needs --token")
            anyio.run(relay, hub.rstrip("/") + "/mcp/", token)
            return
        if not agent:
            raise usage_error("name the agent (--agent ID), or a hub (--hub URL --token TOKEN)")
        found = Agent.objects.select_related("team").filter(id=agent).first()
        if found is None:
            raise CliError(f"no such agent: {agent}", code="not_found")
        caller = Caller(AnonymousUser(), found)

        async def identify(ctx: object) -> Caller:
            return caller

        build(identify).run("stdio")


async def relay(url: str, token: str) -> None:
    """A stdio MCP server whose every tool is the hub's: listed and called over HTTP."""
    import httpx2
    from mcp import Client
    from mcp import types as mt
    from mcp.client.streamable_http import streamable_http_client
    from mcp.server.lowlevel import Server
    from mcp.server.stdio import stdio_server

    http = httpx2.AsyncClient(headers={"Authorization": f"Bearer {token}"}, timeout=httpx2.Timeout(3700))
    async with http, Client(streamable_http_client(url, http_client=http)) as hub:

        async def list_tools(ctx: Any, params: mt.PaginatedRequestParams | None) -> mt.ListToolsResult:
            return await hub.list_tools(cursor=params.cursor if params else None)

        async def call_tool(ctx: Any, params: mt.CallToolRequestParams) -> mt.CallToolResult:
            return await hub.call_tool(params.name, params.arguments or {}, read_timeout_seconds=3700)

        server: Server[Any] = Server(
            "markus", instructions=hub.instructions, on_list_tools=list_tools, on_call_tool=call_tool
        )
        async with stdio_server() as (read, write):
            await server.run(read, write, server.create_initialization_options())
    sys.stdout.flush()
