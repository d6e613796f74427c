"""The tools an agent is offered from its tool servers (the loop's provider), and what a
call of one does: ``<server>__<tool>`` with the server's own description and schema,
its policy (``deny``: not offered; ``ask``: a person approves each call first), and its
result bounded in size.

What a worker sees of a server (its listing, its state, its last error) is written to
its row as it happens, so the console and ``GET /api/tool-servers/`` show it; never a
secret of the server's (its env and header values read ``[secret]`` there and in the
errors a call answers)."""

from __future__ import annotations

import functools
import json
import logging
import re
from datetime import timedelta
from typing import Any
from urllib.parse import urlsplit

from django.contrib.auth.models import User
from django.db.models import Q
from django.utils import timezone
from jsonschema import Draft202012Validator, SchemaError

from attention.scenarios import (
    A2A,
    CHAT,
    COMMENT_RESPONSE,
    MENTION_RESPONSE,
    REQUIREMENT_ACTION,
    REVIEW,
    SESSION_RESPONSE,
    TASK_EXECUTION,
)
from attention.toolbox import Tool, ToolContext, ToolError
from mailbox.models import MailboxItem
from markus.agents.models import Agent
from notifications.services import approval_create

from .addresses import refusal
from .models import SEPARATOR, Policy, ServerState, ToolServer, Transport
from .runtime import ServerDown, ServerRefused, Spec, runtime

log = logging.getLogger(__name__)

# What a failing server with no tools to offer is offered as, after its name: a tool
# whose call says why (and tries it again).
UNAVAILABLE = "__unavailable"
# The scenarios that work (people and colleagues wait on them): not the rhythm's own
# (check-ins, reports, dreams, reminders) nor triage.
WORKING_SCENARIOS = frozenset(
    {CHAT, TASK_EXECUTION, REVIEW, COMMENT_RESPONSE, REQUIREMENT_ACTION, A2A, SESSION_RESPONSE, MENTION_RESPONSE}
)
# A listing older than this is read again from the server on the next use.
LISTING_SECONDS = 600
# What a call's result may be, in characters, before it is cut (with a note).
RESULT_MAX_CHARS = 16_000
# A function name as the LLM APIs accept it.
FUNCTION_NAME = re.compile(r"^[A-Za-z0-9_-]{1,64}$")
# What an approval quotes of a call's arguments.
APPROVAL_ARGS_CHARS = 2_000
# A secret value shorter than this is left in errors (replacing it would blank words).
SECRET_MIN_CHARS = 4
SECRET = "[secret]"


def spec_of(server: ToolServer) -> Spec:
    """What the runtime connects with; ServerDown if an http server's URL now reaches
    this machine or its networks (``addresses``: its DNS answer may have changed)."""
    why = refusal(server.url) if server.transport == Transport.HTTP else ""
    if why:
        raise ServerDown(f"tool server {server.name} is not connected to: {why}")
    return Spec(
        name=server.name,
        transport=server.transport,
        command=server.command,
        args=tuple(str(a) for a in server.args or []),
        env=tuple(sorted((str(k), str(v)) for k, v in (server.env or {}).items())),
        url=server.url,
        headers=tuple(sorted((str(k), str(v)) for k, v in (server.headers or {}).items())),
        timeout=float(server.timeout_seconds or 30),
    )


def attached_servers(agent_id: str) -> list[ToolServer]:
    """The enabled servers attached to the agent or to its team, in one query."""
    where = Q(agents__id=agent_id) | Q(teams__agents__id=agent_id)
    return list(ToolServer.objects.filter(where, enabled=True).distinct().order_by("name"))


def scrubbed(server: ToolServer, text: str) -> str:
    """``text`` with every env and header value of the server replaced by ``[secret]``
    (a server's stderr, in its error, may print them)."""
    values = {str(v) for v in [*(server.env or {}).values(), *(server.headers or {}).values()]}
    for value in sorted((v for v in values if len(v) >= SECRET_MIN_CHARS), key=len, reverse=True):
        text = text.replace(value, SECRET)
    return text


def record_state(server: ToolServer, state: str, error: str = "", *, tools: list[dict[str, Any]] | None = None) -> None:
    """What a worker just saw of the server, on its row (outside any transaction of the
    loop: the operator sees it even if the item's work rolls back); its secrets never."""
    error = scrubbed(server, error)
    now = timezone.now()
    fields: dict[str, Any] = {"state": state, "last_error": error[:2000], "state_at": now}
    if tools is not None:
        fields.update(tools=tools, listed_at=now)
        server.tools, server.listed_at = tools, now
    ToolServer.objects.filter(pk=server.pk).update(**fields)
    server.state, server.last_error = state, error


def listing(server: ToolServer, *, keep: bool = True) -> list[dict[str, Any]]:
    """The server's tools: as last listed if that is recent (``LISTING_SECONDS``), else
    listed now (its first use, or its configuration changed); a server that cannot list
    them now keeps offering what it listed last (its calls answer what is wrong).
    ``keep`` False: a process that makes no calls (the web server) lists through a
    connection it closes at once."""
    fresh = server.listed_at is not None and timezone.now() - server.listed_at < timedelta(seconds=LISTING_SECONDS)
    if fresh:
        return list(server.tools or [])
    return refresh(server, keep=keep) or list(server.tools or [])


def refresh(server: ToolServer, *, keep: bool = True) -> list[dict[str, Any]]:
    """List the server's tools now and keep the listing; [] (and its state) if it fails."""
    try:
        tools = runtime().list_tools(spec_of(server))
    except (ServerDown, ServerRefused) as exc:
        record_state(server, ServerState.FAILING, str(exc))
        return []
    finally:
        if not keep:
            runtime().forget(server.name)
    record_state(server, ServerState.READY, tools=tools)
    return tools


def tool_name(server: ToolServer, tool: dict[str, Any]) -> str:
    return f"{server.name}{SEPARATOR}{tool.get('name', '')}"


NO_ARGUMENTS: dict[str, Any] = {"type": "object", "properties": {}}
# What one tool may take of every request it is offered in: its description is cut past
# this many characters, and a tool whose input schema is longer is not offered.
TOOL_DESCRIPTION_CHARS = 2_000
SCHEMA_MAX_CHARS = 16_000


def offerable(server: ToolServer, tool: dict[str, Any]) -> bool:
    return not not_offered(server, tool)


def not_offered(server: ToolServer, tool: dict[str, Any]) -> str:
    """Why an LLM API would refuse the tool as its server lists it ("": it may be
    offered): its name, or its input schema. The providers refuse a whole request for
    one such tool, so it is left out, not sent."""
    name = tool_name(server, tool)
    if not FUNCTION_NAME.match(name):
        return f"its name {name} is not one an LLM API accepts (letters, digits, _ and -, at most 64)"
    return schema_problem(json.dumps(tool.get("inputSchema") or NO_ARGUMENTS, sort_keys=True, default=str))


@functools.lru_cache(maxsize=1024)
def schema_problem(schema_json: str) -> str:
    """What is wrong with a tool's input schema for an LLM API ("" nothing): it must be a
    JSON Schema (draft 2020-12, as MCP says) of an object, and short enough to go with
    every request (``SCHEMA_MAX_CHARS``). By its JSON text, once: a check costs about a
    millisecond, and a working scenario's item offers every tool."""
    if len(schema_json) > SCHEMA_MAX_CHARS:
        return (
            f"its input schema is {len(schema_json):,} characters, "
            f"past the {SCHEMA_MAX_CHARS:,} a tool may take in every request"
        )
    schema = json.loads(schema_json)
    if not isinstance(schema, dict) or schema.get("type") != "object":
        return 'its input schema is not of "type": "object"'
    try:
        Draft202012Validator.check_schema(schema)
    except SchemaError as exc:
        return f"its input schema is not a JSON Schema: {exc.message}"
    return ""


def provide(agent_id: str, scenario: str, *, stored: bool = False) -> list[Tool]:
    """The loop's provider: the agent's MCP tools in a working scenario; past
    ``MARKUS["TOOLSERVER_INLINE_TOOLS"]`` of them, ``tool_search`` and ``tool_load``
    instead, which find and load them on demand (``on_demand``). ``stored``: as last
    listed, no server started (``catalog``)."""
    from .on_demand import finders, inline_limit

    if scenario not in WORKING_SCENARIOS:
        return []
    servers = attached_servers(agent_id)  # one statement per item of a working scenario
    found = catalog(servers, stored=stored)
    # A failing server with nothing listed would vanish: the model is told it is there.
    missing = [unavailable(s) for s in servers if s.state == ServerState.FAILING and not s.tools]
    if len(found) <= inline_limit():
        return [*found.values(), *missing]
    return [*finders(found, [(s.name, s.description) for s in servers]), *missing]


def catalog(servers: list[ToolServer], *, stored: bool = False) -> dict[str, Tool]:
    """The servers' tools the agent may call, by name, as they are offered: not a denied
    one (nor one an LLM API would refuse: ``not_offered``); an ``ask`` one with its approval.
    ``stored``: the tools as last listed, none listed now (nothing is started)."""
    found: dict[str, Tool] = {}
    for server in servers:
        for listed in list(server.tools or []) if stored else listing(server):
            policy = server.policy_of(listed)
            if policy != Policy.DENY and offerable(server, listed):
                t = as_tool(server, listed, policy)
                found.setdefault(t.name, t)
    return found


def as_tool(server: ToolServer, listed: dict[str, Any], policy: str) -> Tool:
    name, remote = tool_name(server, listed), str(listed["name"])
    schema = listed.get("inputSchema") or NO_ARGUMENTS

    def handler(ctx: ToolContext, args: dict[str, Any]) -> Any:
        return call(server, remote, args)

    description = bounded(str(listed.get("description") or listed.get("title") or remote), TOOL_DESCRIPTION_CHARS)
    if server.description:  # what the operator says the server is for (which repository, …)
        description += f"\n(Tool server {server.name}: {server.description})"
    return Tool(
        name,
        description,
        schema,
        handler,
        transactional=False,  # its effect is the server's: recorded as started before it is made
        # Made again after a crash only when the operator or the tool says so: a read-only
        # hint is no promise that a second call changes nothing (issue 35: one that wrote).
        idempotent=server.repeatable(listed),
        approval=(lambda ctx, args: ask(ctx, server, remote, args)) if policy == Policy.ASK else None,
        source=server.name,
    )


def failing_note(server: ToolServer, *, why: bool = True) -> str:
    """What is said of a failing server: ``why`` its last error (to the model, and on the
    pages to whoever controls the agent), scrubbed of its secrets when it was recorded."""
    note = f"tool server {server.name} is failing"
    if not why:
        return note
    error = server.last_error.removeprefix(f"tool server {server.name} ").strip()
    return f"{note}: {error or 'it could not be used'}"


def unavailable(server: ToolServer) -> Tool:
    """What a failing server that never listed its tools is offered as: a call tries it
    again, and says why it is failing or, should it start now, loads its tools into
    what the item is offered (as ``tool_load`` does)."""

    def handler(ctx: ToolContext, args: dict[str, Any]) -> Any:
        found = catalog([server]) if refresh(server) else {}
        if not found:
            raise ToolError(failing_note(server))
        if ctx.offered is not None:
            for name, t in found.items():
                ctx.offered.setdefault(name, t)
        return {"loaded": list(found), "note": f"tool server {server.name} started: call these from your next turn on."}

    description = (
        f"The tool server {server.name} is failing: none of its tools can be offered now. Call this to learn why "
        "and to try it again (its tools are loaded if it starts)."
    )
    if server.description:
        description += f"\n(Tool server {server.name}: {server.description})"
    parameters = {"type": "object", "properties": {}}
    return Tool(
        f"{server.name}{UNAVAILABLE}",
        description,
        parameters,
        handler,
        transactional=False,
        idempotent=True,  # it starts the server and lists its tools: made again after a crash, no harm
        source=server.name,
    )


def call(server: ToolServer, tool: str, args: dict[str, Any]) -> Any:
    """Call the tool; its result as the LLM reads it, or ToolError saying what went wrong."""
    try:
        result = runtime().call_tool(spec_of(server), tool, args)
    except ServerDown as exc:
        record_state(server, ServerState.FAILING, str(exc))
        raise ToolError(failing_note(server)) from None
    except ServerRefused as exc:
        raise ToolError(scrubbed(server, str(exc))) from None
    if server.state != ServerState.READY:
        record_state(server, ServerState.READY)
    text = "\n".join(content_text(c) for c in result.get("content") or [] if isinstance(c, dict))
    if result.get("isError"):
        raise ToolError(bounded(f"{server.name}{SEPARATOR}{tool} failed: {text or 'no message'}"))
    answer: dict[str, Any] = {"content": bounded(text)}
    structured = result.get("structuredContent")
    if structured is not None and structured != {"result": text}:  # not only the text again
        quoted = json.dumps(structured, default=str)
        answer["structuredContent"] = structured if len(quoted) <= RESULT_MAX_CHARS else bounded(quoted)
    return answer


_MEDIA = {"image": "an image", "audio": "an audio clip"}


def content_text(content: dict[str, Any]) -> str:
    """One content block of a result as the model reads it: a text as it is, an embedded
    text resource's text under its address, a resource link's name and address; what
    cannot be read as text (an image, audio, a binary resource) is named, not shown."""
    kind = str(content.get("type", "content"))
    if kind == "text":
        return str(content.get("text", ""))
    if kind in _MEDIA:
        return f"[{', '.join(filter(None, [_MEDIA[kind], content.get('mimeType')]))}, not shown]"
    if kind == "resource":
        resource = content.get("resource") or {}
        head = ", ".join(filter(None, [str(resource.get("uri") or ""), resource.get("mimeType")]))
        if "text" in resource:
            return f"[resource {head}]\n{resource['text']}"
        return f"[resource {head}, not shown]"
    if kind == "resource_link":
        return f"[resource link: {', '.join(filter(None, [content.get(k) for k in ('name', 'uri', 'mimeType')]))}]"
    return f"[{kind} not shown]"


def bounded(text: str, most: int = RESULT_MAX_CHARS) -> str:
    if len(text) <= most:
        return text
    return f"{text[:most]}\n[cut: the first {most:,} of {len(text):,} characters]"


# ---------------------------------------------------------------------------- asking


def _endpoint(url: str) -> str:
    """An http server's URL as a person may read it: no credentials, no query."""
    parts = urlsplit(url)
    return f"{parts.scheme}://{parts.hostname or ''}{f':{parts.port}' if parts.port else ''}{parts.path}"


def _sender(ctx: ToolContext) -> User | None:
    """The person the item being worked came from (None: an agent, the system)."""
    item = MailboxItem.objects.filter(id=ctx.mailbox_item_id).first()
    meta = (item.metadata or {}) if item else {}
    sender_id = str(meta.get("senderId", ""))
    if meta.get("senderRole") != "user" or not (sender_id.isascii() and sender_id.isdigit()):
        return None
    return User.objects.filter(pk=sender_id, is_active=True).first()


def approver(ctx: ToolContext, agent: Agent, server: ToolServer) -> User:
    """Who approves the agent's call of one of the server's tools (the permission table's
    ``tool:approve_call``): someone who answers for that server where the agent is, never
    the agent's owner for owning it (they may have set it up to make the call).

    1. The person the item came from, if staff.
    2. The owner of the agent's team, if the server is offered to it (or one of its own).
    3. The server's owner (the staff user who registered it).
    4. The first active staff user; with none, nobody: a tool error."""
    sender = _sender(ctx)
    if sender is not None and sender.is_staff:
        return sender
    team = agent.team
    if team is not None and team.owner.is_active:
        offered = server.offered_to.filter(pk=team.pk).exists() or server.teams.filter(pk=team.pk).exists()
        if offered:
            return team.owner
    owner = server.owner
    if owner is not None and owner.is_staff and owner.is_active:
        return owner
    staff = User.objects.filter(is_staff=True, is_active=True).order_by("pk").first()
    if staff is None:
        raise ToolError(
            f"nobody may approve this call: the tool server {server.name} is not offered to the agent's team "
            "and there is no staff user"
        )
    return staff


def ask(ctx: ToolContext, server: ToolServer, tool: str, args: dict[str, Any]) -> str:
    """The approval a call of an ``ask`` tool waits for: it names the tool, its server
    and its arguments. Its id."""
    agent = Agent.objects.select_related("team__owner").get(id=ctx.agent_id)
    quoted = json.dumps(args, ensure_ascii=False, indent=1, default=str)
    if len(quoted) > APPROVAL_ARGS_CHARS:
        quoted = quoted[:APPROVAL_ARGS_CHARS] + f"… [{len(quoted):,} characters in all]"
    where = _endpoint(server.url) if server.transport == Transport.HTTP else server.command
    approval = approval_create(
        user=approver(ctx, agent, server),
        title=f"{agent.name} asks to call {tool} on {server.name}",
        description=(
            f"{agent.name} wants to call the tool {tool!r} of the tool server {server.name!r} ({where}) "
            f"with these arguments:\n{quoted}\n\nApprove to let it run once; reject and the agent is told "
            "that you declined."
        ),
        agent=agent,
        mailbox_item=MailboxItem.objects.filter(id=ctx.mailbox_item_id).first(),
        metadata={"toolCall": {"server": server.name, "tool": tool, "name": f"{server.name}{SEPARATOR}{tool}"}},
    )
    return approval.id
