"""``manage.py mcp``: the MCP door over stdio, for harnesses that launch their servers.

    python manage.py mcp --agent ID                      # this Markus: as agent ID
    python manage.py mcp --hub URL --token TOKEN         # a remote Markus: its /mcp/

Locally it serves the tools of ``agentbus.mcp_door`` as the agent named (trusted like
``manage.py agentbus``: whoever runs it on this machine may act as that agent). Against a
hub it relays every request to the hub's ``/mcp/`` with the token: the hub decides who
the caller is and what it may do, exactly as for a client that speaks HTTP to it. Nothing
but the protocol is written to standard output; a failure (a bad token, a hub that cannot
be reached, the relay broken while serving) is one JSON object on stderr and a non-zero
exit, as for ``manage.py agentbus``: the hub's own refusal (its status, code and detail)
when it answered one."""

from __future__ import annotations

import sys
from typing import Any

import anyio
from django.contrib.auth.models import AnonymousUser
from django.core.management.base import CommandParser

from agentbus.cli import CliError, JsonCommand, hub_error, usage_error
from agentbus.hub import HubClient, HubError, hub_refusal
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
            try:
                anyio.run(relay, HubClient(hub, token).base_url, token)
            except HubError as exc:
                raise hub_error(exc) from None
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


def _leaves(exc: BaseException) -> list[BaseException]:
    """The exceptions a task group's failure is made of, each followed by its causes."""
    if isinstance(exc, BaseExceptionGroup):
        return [leaf for sub in exc.exceptions for leaf in _leaves(sub)]
    chain = [exc]
    while (cause := chain[-1].__cause__ or chain[-1].__context__) is not None and cause not in chain:
        chain.append(cause)
    return chain


def _failure(exc: BaseException, base_url: str) -> HubError:
    """Why the relay stopped, in one line: a hub that cannot be reached, else the first failure."""
    import httpx2

    leaves = _leaves(exc)
    for leaf in leaves:
        if isinstance(leaf, httpx2.TransportError):
            return HubError(f"cannot reach the hub at {base_url}: {leaf or type(leaf).__name__}", code="unreachable")
    return HubError(f"the relay to the hub at {base_url} failed: {leaves[0] or type(leaves[0]).__name__}")


async def relay(base_url: str, token: str) -> None:
    """A stdio MCP server whose every tool is the hub's: listed and called over HTTP.
    Raises HubError when it cannot connect (the hub's refusal, as it answered it) or breaks."""
    import httpx2
    from mcp import Client
    from mcp import types as mt
    from mcp.client.streamable_http import streamable_http_client
    from mcp.server.lowlevel import Server
    from mcp.server.stdio import stdio_server

    refused: list[HubError] = []  # the hub's first refusal while connecting

    async def remember_refusal(response: httpx2.Response) -> None:
        if response.status_code >= 400 and not refused:
            refusal = hub_refusal(response.status_code, await response.aread(), response.reason_phrase)
            refusal.args = (f"the hub at {base_url} answered {refusal}",)
            refused.append(refusal)

    http = httpx2.AsyncClient(
        headers={"Authorization": f"Bearer {token}"},
        timeout=httpx2.Timeout(3700),
        event_hooks={"response": [remember_refusal]},
    )
    try:
        async with http, Client(streamable_http_client(base_url + "/mcp/", http_client=http)) as hub:
            # Connected: a refusal met on the way (none is expected) no longer explains a failure.
            http.event_hooks = {"response": []}
            refused.clear()

            async def list_tools(ctx: Any, params: mt.PaginatedRequestParams | None) -> mt.ListToolsResult:
                return await hub.list_tools(cursor=params.cursor if params else None)

            async def call_tool(ctx: Any, params: mt.CallToolRequestParams) -> mt.CallToolResult:
                return await hub.call_tool(params.name, params.arguments or {}, read_timeout_seconds=3700)

            server: Server[Any] = Server(
                "markus", instructions=hub.instructions, on_list_tools=list_tools, on_call_tool=call_tool
            )
            async with stdio_server() as (read, write):
                await server.run(read, write, server.create_initialization_options())
    except Exception as exc:
        raise (refused[0] if refused else _failure(exc, base_url)) from None
    sys.stdout.flush()
