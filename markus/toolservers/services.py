"""Registering, changing and attaching tool servers (staff register; an agent's
controller attaches), and how they read in the API. Transactions are the callers'."""

from __future__ import annotations

from typing import Any

from django.db import IntegrityError, transaction
from django.utils import timezone

from attention.toolbox import tools_for
from markus.agents.models import Agent, Team
from markus.core.errors import ConflictError, MarkusError

from .models import ServerState, ToolServer, Transport, default_policy
from .offered import WORKING_SCENARIOS, attached_servers, catalog, listing, offerable, tool_name
from .runtime import runtime

# The fields that make the connection: a change lists the server's tools again.
CONNECTION_FIELDS = frozenset({"transport", "command", "args", "env", "url", "headers"})
# How many tool servers one agent may have attached to it directly.
MAX_ATTACHED = 20


def check_transport(fields: dict[str, Any]) -> None:
    """A stdio server needs a command, an http one a URL; neither takes the other's."""
    transport = fields["transport"]
    if transport == Transport.STDIO:
        if not fields.get("command"):
            raise MarkusError("command is required for a stdio server (the executable to start)")
        if fields.get("url") or fields.get("headers"):
            raise MarkusError("url and headers are for http servers; a stdio server has command, args and env")
    else:
        if not fields.get("url"):
            raise MarkusError("url is required for an http server (its MCP endpoint)")
        if fields.get("command") or fields.get("args") or fields.get("env"):
            raise MarkusError("command, args and env are for stdio servers; an http server has url and headers")


def _teams(ids: list[str]) -> list[Team]:
    found = {t.id: t for t in Team.objects.filter(id__in=ids)}
    missing = [i for i in ids if i not in found]
    if missing:
        raise MarkusError(f"teams: no team {missing[0][:80]!r}")
    return [found[i] for i in dict.fromkeys(ids)]


_MODEL_FIELDS = {"timeoutSeconds": "timeout_seconds"}


def _apply(server: ToolServer, body: dict[str, Any]) -> None:
    for key, value in body.items():
        if key in ("teams", "policies"):
            continue
        setattr(server, _MODEL_FIELDS.get(key, key), value)
    if "policies" in body:  # null: back to the tool's default
        merged = {**(server.policies or {}), **body["policies"]}
        server.policies = {k: v for k, v in merged.items() if v is not None}


def server_create(body: dict[str, Any]) -> ToolServer:
    fields = {"command": "", "url": "", **body}
    check_transport(fields)
    server = ToolServer(name=body["name"], transport=body["transport"])
    _apply(server, body)
    teams = _teams(body.get("teams") or [])
    try:
        with transaction.atomic():
            server.save(force_insert=True)
    except IntegrityError:
        raise ConflictError(f"a tool server named {body['name']!r} exists already; PATCH it instead") from None
    server.teams.set(teams)
    return server


def server_update(server: ToolServer, body: dict[str, Any]) -> ToolServer:
    if "name" in body and body["name"] != server.name:
        raise MarkusError("name cannot change (agents and policies name the server); register a new one")
    _apply(server, body)
    check_transport({f: getattr(server, f) for f in ("transport", "command", "args", "env", "url", "headers")})
    server.updated_at = timezone.now()
    if "enabled" in body:
        server.state = ServerState.UNKNOWN if server.enabled else ServerState.DISABLED
    if CONNECTION_FIELDS & set(body):  # another server, perhaps: its tools are listed anew
        server.listed_at = None
    server.save()
    if "teams" in body:
        server.teams.set(_teams(body["teams"]))
    transaction.on_commit(lambda: runtime().forget(server.name))  # this process's connection: reopened as edited
    return server


def server_delete(server: ToolServer) -> None:
    name = server.name
    server.delete()
    transaction.on_commit(lambda: runtime().forget(name))


def attach(agent: Agent, names: list[str]) -> list[str]:
    """Attach exactly these servers to the agent (its team's stay as they are)."""
    names = list(dict.fromkeys(names))
    if len(names) > MAX_ATTACHED:
        raise MarkusError(f"toolServers: at most {MAX_ATTACHED} servers per agent")
    found = {s.name: s for s in ToolServer.objects.filter(name__in=names)}
    missing = [n for n in names if n not in found]
    if missing:
        known = ", ".join(ToolServer.objects.order_by("name").values_list("name", flat=True)[:50]) or "none"
        raise MarkusError(f"toolServers: no tool server {missing[0][:80]!r}; registered: {known}")
    ToolServer.agents.through.objects.filter(agent=agent).exclude(toolserver__name__in=names).delete()
    for n in names:
        found[n].agents.add(agent)
    return names


def attached_names(agent_ids: list[str]) -> dict[str, list[str]]:
    """The tool servers attached to each agent (not through its team), by name, in one query."""
    names: dict[str, list[str]] = {a: [] for a in agent_ids}
    rows = ToolServer.agents.through.objects.filter(agent_id__in=agent_ids).values_list("agent_id", "toolserver__name")
    for agent_id, name in rows.order_by("toolserver__name"):
        names[agent_id].append(name)
    return names


# ------------------------------------------------------------------------- reading


def listed_tools(server: ToolServer) -> list[dict[str, Any]]:
    rows = []
    for listed in server.tools or []:
        default = default_policy(listed)
        rows.append(
            {
                "name": listed.get("name", ""),
                "offeredAs": tool_name(server, listed) if offerable(server, listed) else "",
                "description": str(listed.get("description") or ""),
                "policy": server.policy_of(listed),
                "defaultPolicy": default,
                "readOnly": (listed.get("annotations") or {}).get("readOnlyHint") is True,
            }
        )
    return rows


def server_data(server: ToolServer) -> dict[str, Any]:
    return {
        "name": server.name,
        "description": server.description,
        "transport": server.transport,
        "command": server.command,
        "args": list(server.args or []),
        "envKeys": sorted(server.env or {}),
        "url": server.url,
        "headerNames": sorted(server.headers or {}),
        "timeoutSeconds": server.timeout_seconds,
        "enabled": server.enabled,
        "policies": dict(server.policies or {}),
        "teams": sorted(t.id for t in server.teams.all()),
        "agents": sorted(a.id for a in server.agents.all()),
        "state": server.state if server.enabled else ServerState.DISABLED,
        "lastError": server.last_error,
        "stateAt": server.state_at,
        "listedAt": server.listed_at,
        "tools": listed_tools(server),
        "createdAt": server.created_at,
        "updatedAt": server.updated_at,
    }


def agent_tools(agent: Agent, scenario: str) -> dict[str, Any]:
    """What the agent is offered in ``scenario`` (what the loop offers: ``tools_for``),
    and its servers' tools it finds on demand (``onDemand``), with each tool's policy, and
    its servers' tools that are denied. A server not listed
    lately is listed here through a connection closed at once (no calls are made here)."""
    servers = {s.name: s for s in attached_servers(agent.id)}
    for s in servers.values():
        listing(s, keep=False)
    offered = tools_for(agent.id, scenario)
    # Past MARKUS_TOOLSERVER_INLINE_TOOLS the servers' tools are found on demand
    # (tool_search, tool_load): listed too, each marked so.
    on_demand = {} if scenario not in WORKING_SCENARIOS else catalog(list(servers.values()))
    tools = []
    for t in [*offered.values(), *(t for name, t in on_demand.items() if name not in offered)]:
        policy = "auto" if t.approval is None else "ask"
        tools.append(
            {
                "name": t.name,
                "origin": t.source,
                "description": t.description,
                "policy": policy,
                "parameters": t.parameters,
                "onDemand": t.name not in offered,
            }
        )
    denied = [row for s in servers.values() for row in listed_tools(s) if row["policy"] == "deny"]
    return {"agentId": agent.id, "scenario": scenario, "tools": tools, "denied": denied}
