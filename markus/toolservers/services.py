"""Registering, changing and attaching tool servers (staff register and offer them to
teams or to all; an agent's controller attaches what is offered to its team), and how
they read in the API. Transactions are the callers'."""

from __future__ import annotations

from typing import Any

from django.contrib.auth.models import User
from django.db import IntegrityError, transaction
from django.db.models import Q, QuerySet
from django.utils import timezone

from attention.toolbox import builtin_for
from markus.agents.models import Agent, Team
from markus.core.errors import ConflictError, MarkusError

from .addresses import refusal
from .models import ServerState, ToolServer, Transport, default_policy
from .offered import (
    WORKING_SCENARIOS,
    attached_servers,
    catalog,
    failing_note,
    listing,
    not_offered,
    provide,
    tool_name,
)
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


def check_url(fields: dict[str, Any]) -> None:
    """An http server's URL reaches neither this machine nor its networks (``addresses``)."""
    why = refusal(fields.get("url") or "") if fields["transport"] == Transport.HTTP else ""
    if why:
        raise MarkusError(why)


def _teams(field: str, ids: list[str]) -> list[Team]:
    found = {t.id: t for t in Team.objects.filter(id__in=ids)}
    missing = [i for i in ids if i not in found]
    if missing:
        raise MarkusError(f"{field}: no team {missing[0][:80]!r}")
    return [found[i] for i in dict.fromkeys(ids)]


def _owner(user_id: int | None) -> User | None:
    if user_id is None:
        return None
    owner = User.objects.filter(pk=user_id, is_staff=True, is_active=True).first()
    if owner is None:
        raise MarkusError(f"ownerId: no active staff user {user_id}")
    return owner


_MODEL_FIELDS = {"timeoutSeconds": "timeout_seconds", "offeredToAll": "offered_to_all"}
# Set apart from the plain fields: the team lists (after the save), the owner, the merged maps.
_SET_APART = frozenset({"teams", "offeredTo", "ownerId", "policies", "idempotent"})


def _merged(stored: dict[str, Any] | None, sent: dict[str, Any]) -> dict[str, Any]:
    """``sent`` over ``stored``; a null removes the tool's entry (back to its default)."""
    return {k: v for k, v in {**(stored or {}), **sent}.items() if v is not None}


def _apply(server: ToolServer, body: dict[str, Any]) -> None:
    for key, value in body.items():
        if key not in _SET_APART:
            setattr(server, _MODEL_FIELDS.get(key, key), value)
    if "policies" in body:
        server.policies = _merged(server.policies, body["policies"])
    if "idempotent" in body:
        server.idempotent = _merged(server.idempotent, body["idempotent"])
    if "ownerId" in body:
        server.owner = _owner(body["ownerId"])


def server_create(body: dict[str, Any], *, owner: User | None) -> ToolServer:
    """Register a server; ``owner``: the staff user registering it (``ownerId`` may name another)."""
    fields = {"command": "", "url": "", **body}
    check_transport(fields)
    check_url(fields)
    server = ToolServer(name=body["name"], transport=body["transport"], owner=owner)
    _apply(server, body)
    teams, offered_to = _teams("teams", body.get("teams") or []), _teams("offeredTo", body.get("offeredTo") or [])
    try:
        with transaction.atomic():
            server.save(force_insert=True)
    except IntegrityError:
        raise ConflictError(f"a tool server named {body['name']!r} exists already; PATCH it instead") from None
    server.teams.set(teams)
    server.offered_to.set(offered_to)
    return server


def server_update(server: ToolServer, body: dict[str, Any]) -> ToolServer:
    if "name" in body and body["name"] != server.name:
        raise MarkusError("name cannot change (agents and policies name the server); register a new one")
    _apply(server, body)
    fields = {f: getattr(server, f) for f in ("transport", "command", "args", "env", "url", "headers")}
    check_transport(fields)
    if {"transport", "url"} & set(body):
        check_url(fields)
    server.updated_at = timezone.now()
    if "enabled" in body:
        server.state = ServerState.UNKNOWN if server.enabled else ServerState.DISABLED
    if CONNECTION_FIELDS & set(body):  # another server, perhaps: its tools are listed anew
        server.listed_at = None
    server.save()
    if "teams" in body:
        server.teams.set(_teams("teams", body["teams"]))
    if "offeredTo" in body:
        server.offered_to.set(_teams("offeredTo", body["offeredTo"]))
    transaction.on_commit(lambda: runtime().forget(server.name))  # this process's connection: reopened as edited
    return server


def server_delete(server: ToolServer) -> None:
    name = server.name
    server.delete()
    transaction.on_commit(lambda: runtime().forget(name))


def attachable(agent: Agent, by: User | None) -> QuerySet[ToolServer]:
    """The servers ``by`` may attach to the agent (whose controller they are): staff (or
    the deployment itself, None) any; anybody else those offered to all or to the agent's
    team (a server of the team's counts), and those attached to it already."""
    servers = ToolServer.objects.all()
    if by is None or by.is_staff:
        return servers
    offered = Q(offered_to_all=True) | Q(agents=agent)
    if agent.team_id is not None:
        offered |= Q(offered_to=agent.team_id) | Q(teams=agent.team_id)
    return servers.filter(offered).distinct()


def attach(agent: Agent, names: list[str], *, by: User | None) -> list[str]:
    """Attach exactly these servers to the agent (its team's stay as they are), as ``by``
    may (``attachable``). A name refused reads the same whether it exists or not, and the
    refusal names only what ``by`` may attach."""
    names = list(dict.fromkeys(names))
    if len(names) > MAX_ATTACHED:
        raise MarkusError(f"toolServers: at most {MAX_ATTACHED} servers per agent")
    allowed = attachable(agent, by)
    found = {s.name: s for s in allowed.filter(name__in=names)}
    missing = [n for n in names if n not in found]
    if missing:
        may = ", ".join(allowed.order_by("name").values_list("name", flat=True)[:50]) or "none"
        raise MarkusError(
            f"toolServers: no tool server {missing[0][:80]!r} is offered to this agent; you may attach: {may}"
        )
    ToolServer.agents.through.objects.filter(agent=agent).exclude(toolserver__name__in=names).delete()
    for n in names:
        found[n].agents.add(agent)
    return names


def detach_unoffered(agent: Agent, *, by: User | None) -> list[str]:
    """After the agent moved to another team: the servers attached to it that ``by``
    could not attach now (``attachable``: not offered to all nor to its new team) are
    detached; staff keep what they attached. Their names."""
    if by is None or by.is_staff:
        return []
    offered = Q(offered_to_all=True)
    if agent.team_id is not None:
        offered |= Q(offered_to=agent.team_id) | Q(teams=agent.team_id)
    kept = set(ToolServer.objects.filter(offered, agents=agent).values_list("name", flat=True))
    through = ToolServer.agents.through.objects.filter(agent=agent).exclude(toolserver__name__in=kept)
    dropped = sorted(through.values_list("toolserver__name", flat=True))
    through.delete()
    return dropped


def attached_names(agent_ids: list[str]) -> dict[str, list[str]]:
    """The tool servers attached to each agent (not through its team), by name, in one query."""
    names: dict[str, list[str]] = {a: [] for a in agent_ids}
    rows = ToolServer.agents.through.objects.filter(agent_id__in=agent_ids).values_list("agent_id", "toolserver__name")
    for agent_id, name in rows.order_by("toolserver__name"):
        names[agent_id].append(name)
    return names


# ------------------------------------------------------------------------- reading


def failing_notices(agent_id: str, *, why: bool) -> list[str]:
    """The notice "tool server X is failing" for each server attached to the agent that
    a worker last saw failing, for its pages; ``why`` (the reader controls the agent):
    with the server's last error."""
    return [failing_note(s, why=why) for s in attached_servers(agent_id) if s.state == ServerState.FAILING]


def listed_tools(server: ToolServer) -> list[dict[str, Any]]:
    rows = []
    for listed in server.tools or []:
        default = default_policy(listed)
        rows.append(
            {
                "name": listed.get("name", ""),
                "offeredAs": "" if (why_not := not_offered(server, listed)) else tool_name(server, listed),
                "notOffered": why_not,
                "description": str(listed.get("description") or ""),
                "policy": server.policy_of(listed),
                "defaultPolicy": default,
                "readOnly": (listed.get("annotations") or {}).get("readOnlyHint") is True,
                "repeatable": server.repeatable(listed),
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
        "idempotent": dict(server.idempotent or {}),
        "ownerId": server.owner_id,
        "offeredTo": sorted(t.id for t in server.offered_to.all()),
        "offeredToAll": server.offered_to_all,
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


def agent_tools(agent: Agent, scenario: str, *, list_now: bool) -> dict[str, Any]:
    """What the agent is offered in ``scenario`` (what the loop offers: the built-in
    tools, then its servers'), and its servers' tools it finds on demand (``onDemand``),
    with each tool's policy, and its servers' tools that are denied. ``list_now`` (the
    caller controls the agent): a server not listed lately is listed here through a
    connection closed at once (no calls are made here); else the last listing is read and
    no server is started."""
    servers = {s.name: s for s in attached_servers(agent.id)}
    if list_now:
        for s in servers.values():
            listing(s, keep=False)
    offered = builtin_for(scenario)
    for t in provide(agent.id, scenario, stored=True):
        offered.setdefault(t.name, t)
    # Past MARKUS_TOOLSERVER_INLINE_TOOLS the servers' tools are found on demand
    # (tool_search, tool_load): listed too, each marked so.
    on_demand = {} if scenario not in WORKING_SCENARIOS else catalog(list(servers.values()), stored=True)
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
