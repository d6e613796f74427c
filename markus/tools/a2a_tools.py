"""Talking to colleagues (seed sections 11 and 25): direct messages, replies, delegated
tasks, status broadcasts and group chats.

Every message is written on the AgentBus (ARCHITECTURE decision 7): one record serves
the bus (an external harness reads it from its inbox) and the recipient's mailbox (an
append to an agent the loop runs enqueues an ``a2a_message``). No tool waits for an
answer: an answer arrives later as a mailbox item of its own.

Colleagues are the agents this agent may reach on the bus (its team and its owner's
agents, ``agentbus.access``), named by id or by name.
"""

from __future__ import annotations

from typing import Any

from django.db.models import Q

from agentbus import selectors as bus_selectors
from agentbus import services as bus
from agentbus.access import reachable_agents_for
from agentbus.errors import BusError
from agentbus.models import Stream
from agentbus.pace import Paced, check_pace
from attention import conversations
from attention import scenarios as sc
from attention.toolbox import ToolContext, ToolError, tool
from mailbox.models import MailboxItem
from mailbox.registry import MailboxType, Priority
from mailbox.services import mailbox_enqueue
from markus.agents.models import Agent
from markus.core.actors import Actor
from markus.core.errors import MarkusError
from markus.work import services as work
from markus.work.selectors import requirements_visible_to, tasks_visible_to

S = {"type": "string"}
MAX_TEXT = 20_000
STATUS_TOPIC = "agent.status"
# Where each tool is offered: where the agent works with its colleagues.
# Writing to a colleague: while executing a task, answering a colleague, deliberating
# (inline), when a person in a chat asks the agent to ask someone, and on a system
# notice (a colleague's status broadcast arrives as one).
MESSAGING = frozenset({sc.CHAT, sc.TASK_EXECUTION, sc.A2A, sc.SYSTEM_NOTICE, sc.DELIBERATION})
# Answering the agent message being handled: only an agent message's scenario.
REPLYING = frozenset({sc.A2A})
# Filing a task for a colleague: splitting a task one executes, a requirement one is in
# charge of, or when a person in a chat asks the agent to hand work to someone.
DELEGATING = frozenset({sc.CHAT, sc.TASK_EXECUTION, sc.REQUIREMENT_ACTION})
# Telling the team what one is doing: while executing a task.
BROADCASTING = frozenset({sc.TASK_EXECUTION})
# Group chats: where the agent works with colleagues (not a person's chat, nor a notice).
GROUPS = MESSAGING - {sc.CHAT, sc.SYSTEM_NOTICE}
# Who can be reached (the other tools' errors point to it): wherever one of them is.
COLLEAGUES = MESSAGING | DELEGATING | GROUPS
NO_WAIT = "Do not wait for an answer: it arrives in your mailbox as an agent message."


def _me(ctx: ToolContext) -> Agent:
    return Agent.objects.select_related("team").get(id=ctx.agent_id)


def _text(args: dict[str, Any], key: str = "text") -> str:
    text = args.get(key)
    if not isinstance(text, str) or not text.strip():
        raise ToolError(f"{key} must not be empty")
    if len(text) > MAX_TEXT:
        raise ToolError(f"{key} is too long: at most {MAX_TEXT} characters")
    return text


def _colleague(me: Agent, ref: object) -> Agent:
    """A colleague by id, else by name (case-insensitive), among those this agent may reach."""
    if not isinstance(ref, str) or not ref.strip():
        raise ToolError("name the colleague by id or name")
    ref = ref.strip()
    reachable = reachable_agents_for(agent=me, user=None)
    found = list(reachable.filter(Q(id=ref) | Q(name__iexact=ref))[:5])
    exact = [a for a in found if a.id == ref]
    if exact:
        found = exact
    if not found:
        raise ToolError(f"no colleague {ref!r} you can reach; agent_list_colleagues lists them")
    if len(found) > 1:
        ids = ", ".join(f"{a.id} ({a.name})" for a in found)
        raise ToolError(f"{ref!r} names several colleagues: {ids}; use the id")
    if found[0].id == me.id:
        raise ToolError("that is you: message a colleague")
    return found[0]


def _check_pace(me: Agent, name: str, **to: Any) -> None:
    """The pace of ``agentbus.pace`` for this agent's messages to ``name``, whichever
    tool sends them, as the tool's refusal."""
    try:
        check_pace(me, name, **to)
    except Paced as exc:
        raise ToolError(f"{exc.reached}; if the conversation is done, give your final answer") from None


def _who(agent: Agent) -> dict[str, str]:
    return {"id": agent.id, "name": agent.name}


def _actor(me: Agent) -> str:
    return f"agent:{me.id}"


@tool(
    "agent_list_colleagues",
    "List the colleagues you can message or delegate to (id, name, role, whether they are running).",
    {"type": "object", "properties": {}},
    scenarios=COLLEAGUES,
)
def agent_list_colleagues(ctx: ToolContext, args: dict[str, Any]) -> dict[str, Any]:
    me = _me(ctx)
    rows = reachable_agents_for(agent=me, user=None).exclude(id=me.id).order_by("name", "id")[:100]
    return {
        "colleagues": [
            {**_who(a), "role": a.role, "kind": a.kind, "status": a.status, "sameTeam": a.team_id == me.team_id}
            for a in rows
        ]
    }


@tool(
    "agent_send_message",
    "Message a colleague (id or name) on the agent bus; returns the stream id at once, their answer comes "
    "later to your mailbox. stream_id continues a conversation (one a message returned or you are answering). "
    "await_reply true pauses your work until they reply (the reply is this tool's result) or timeout_minutes "
    f"pass (default {conversations.DEFAULT_TIMEOUT_MINUTES}); not in a chat.",
    {
        "type": "object",
        "properties": {
            "to": S,
            "text": S,
            "topic": S,
            "stream_id": S,
            "await_reply": {"type": "boolean"},
            "timeout_minutes": {"type": "integer", "minimum": 1, "maximum": conversations.MAX_TIMEOUT_MINUTES},
            "wait_for_reply": {"type": "boolean", "description": "deprecated, ignored"},
        },
        "required": ["to", "text"],
    },
    scenarios=MESSAGING,
)
def agent_send_message(ctx: ToolContext, args: dict[str, Any]) -> dict[str, Any]:
    me = _me(ctx)
    text = _text(args)
    recipient = _colleague(me, args["to"])
    stream_id = args.get("stream_id")
    if stream_id is not None and (not isinstance(stream_id, str) or not stream_id.strip()):
        raise ToolError("stream_id must be the id of a conversation you are in")
    awaiting = bool(args.get("await_reply"))
    if awaiting:
        _check_may_wait(ctx)
    _check_pace(me, recipient.name, recipient=recipient)
    try:
        chunk = bus.send_agent_message(
            sender=me,
            recipient=recipient,
            text=text,
            stream_id=stream_id,
            topic=args.get("topic"),
            actor=_actor(me),
        )
    except BusError as exc:
        where = f"stream {stream_id!r}: " if stream_id is not None else ""
        raise ToolError(f"{where}{exc} (a conversation of yours with {recipient.name})") from exc
    result: dict[str, Any] = {"streamId": chunk.stream_id, "to": _who(recipient), "sequence": chunk.sequence}
    if awaiting:
        if chunk.stream.is_group:
            raise ToolError("await_reply waits for one colleague's reply: not in a group conversation")
        minutes = args.get("timeout_minutes") or conversations.DEFAULT_TIMEOUT_MINUTES
        until = conversations.deadline(minutes)
        ctx.effects[conversations.AWAITING] = {
            "streamId": chunk.stream_id,
            "until": until.isoformat(),
            "to": _who(recipient),
            "minutes": minutes,
            "askedAt": chunk.created_at.isoformat(),  # an earlier answer on the stream is not this one's
        }
        result.update(status=conversations.WAITING, waitsUntil=until.isoformat())
        result["note"] = f"Waiting for {recipient.name}'s reply (at most {minutes} minutes): your work pauses here."
    else:
        result["note"] = NO_WAIT
    if "wait_for_reply" in args:
        result["note"] += " (wait_for_reply is deprecated and ignored: use await_reply to wait.)"
    return result


# Where a run may pause for a colleague: not where a person waits for the answer (a chat,
# a mention), nor in a deliberation (it has no session of its own to resume).
NO_WAIT_SCENARIOS = {"chat", "mention_response", "deliberation"}


def _check_may_wait(ctx: ToolContext) -> None:
    if not ctx.mailbox_item_id or ctx.scenario in NO_WAIT_SCENARIOS:
        raise ToolError(
            "await_reply is not available here (a person waits for your answer, or there is no work to pause): "
            "send without it; the reply arrives in your mailbox"
        )


def _item_streams(ctx: ToolContext) -> list[tuple[str, str]]:
    """(stream id, sender name) of the bus messages the current item carries: its own
    and those merged into it, in the order they arrived."""
    item = (
        MailboxItem.objects.filter(id=ctx.mailbox_item_id, agent_id=ctx.agent_id).first()
        if ctx.mailbox_item_id
        else None
    )
    if item is None:
        return []
    rows = [item, *MailboxItem.objects.filter(merged_into=item).order_by("queued_at", "id")]
    seen: dict[str, str] = {}
    for row in rows:
        meta, stream_id = row.metadata or {}, row.marks.get("streamId")
        if row.source_type == MailboxType.A2A_MESSAGE and isinstance(stream_id, str):
            seen.setdefault(stream_id, str(meta.get("senderName") or meta.get("senderId") or "?"))
    return list(seen.items())


@tool(
    "agent_reply",
    "Answer the agent message you are handling: its sender (or a request waiting on it) gets your text; in a "
    "group chat, the group. stream_id picks one when several conversations were merged into this item.",
    {"type": "object", "properties": {"text": S, "stream_id": S}, "required": ["text"]},
    scenarios=REPLYING,
)
def agent_reply(ctx: ToolContext, args: dict[str, Any]) -> dict[str, Any]:
    text = _text(args)
    streams = _item_streams(ctx)
    if not streams:
        raise ToolError(
            "agent_reply answers an agent message, and what you are handling did not come from the bus; "
            "use agent_send_message to write to a colleague"
        )
    chosen = args.get("stream_id")
    if chosen is None and len(streams) > 1:
        listed = ", ".join(f"{sid} (from {name})" for sid, name in streams)
        raise ToolError(f"this item carries several conversations: give stream_id, one of {listed}")
    if chosen is None:
        chosen = streams[0][0]
    elif chosen not in dict(streams):
        raise ToolError(f"stream_id must be one of the conversations you are handling: {', '.join(dict(streams))}")
    me = _me(ctx)
    answered = Stream.objects.filter(id=chosen).select_related("sender").first()
    if answered is not None and answered.is_group:
        _check_pace(me, bus_selectors.group_name(answered), stream=answered)
    elif answered is not None and answered.sender is not None:
        _check_pace(me, answered.sender.name, recipient=answered.sender)
    try:
        chunk = bus.stream_reply(
            responder=me, stream_id=chosen, payload={"text": text, "senderName": me.name}, actor=_actor(me)
        )
    except MarkusError as exc:
        raise ToolError(f"cannot answer {chosen}: {exc}") from exc
    return {"replyStreamId": chunk.stream_id, "replyTo": chosen, "sequence": chunk.sequence}


@tool(
    "agent_delegate_task",
    "File a task for a colleague (id or name); you review it when done. Returns its id.",
    {
        "type": "object",
        "properties": {
            "to": S,
            "title": S,
            "description": S,
            "depends_on": {"type": "array", "items": S},
            "requirement_id": S,
        },
        "required": ["to", "title"],
    },
    scenarios=DELEGATING,
)
def agent_delegate_task(ctx: ToolContext, args: dict[str, Any]) -> dict[str, Any]:
    me = _me(ctx)
    assignee = _colleague(me, args["to"])
    actor = Actor.for_agent(me)
    requirement_id = args.get("requirement_id")
    if requirement_id and not requirements_visible_to(actor).filter(id=requirement_id).exists():
        raise ToolError(f"no requirement {requirement_id!r} that you can see")
    depends_on = args.get("depends_on") or []
    if not all(isinstance(d, str) for d in depends_on):
        raise ToolError("depends_on must be a list of task ids")
    visible = set(tasks_visible_to(actor).filter(id__in=depends_on).values_list("id", flat=True))
    unseen = [d for d in depends_on if d not in visible]
    if unseen:
        raise ToolError(f"depends_on: no task {unseen[0]!r} that you can see")
    task = work.task_create(
        actor=actor,
        title=_text(args, "title"),
        description=args.get("description") or "",
        assignee_id=assignee.id,
        reviewer_agent_id=me.id,
        depends_on=depends_on,
        requirement_id=requirement_id,
    )
    return {"taskId": task.id, "status": task.status, "assignee": _who(assignee), "reviewer": _who(me)}


@tool(
    "agent_broadcast_status",
    "Tell every running colleague in your team what you are doing (a short status update).",
    {"type": "object", "properties": {"text": S}, "required": ["text"]},
    scenarios=BROADCASTING,
)
def agent_broadcast_status(ctx: ToolContext, args: dict[str, Any]) -> dict[str, Any]:
    """Internal colleagues get a ``system_event`` in their mailbox (seed section 11);
    external ones, who read only the bus, a message on it."""
    me = _me(ctx)
    text = _text(args)
    if me.team_id is None:
        raise ToolError("you have no team to broadcast to")
    colleagues = list(
        Agent.objects.filter(team_id=me.team_id, status=Agent.RunStatus.RUNNING).exclude(id=me.id).order_by("id")
    )
    first_line = text.strip().splitlines()[0][:120]
    for colleague in colleagues:
        if colleague.kind == Agent.Kind.INTERNAL:
            mailbox_enqueue(
                agent_id=colleague.id,
                source_type=MailboxType.SYSTEM_EVENT,
                payload={"summary": f"Status from {me.name}: {first_line}", "content": text, "extra": {"status": True}},
                priority=Priority.NORMAL,
                metadata={"senderId": me.id, "senderName": me.name, "senderRole": "agent"},
            )
        else:
            bus.send_agent_message(sender=me, recipient=colleague, text=text, topic=STATUS_TOPIC, actor=_actor(me))
    return {"delivered": len(colleagues), "to": [_who(c) for c in colleagues]}


def _group_data(stream: Stream) -> dict[str, Any]:
    members = Agent.objects.filter(id__in=bus_selectors.stream_audience(stream)).order_by("id")
    return {
        "groupId": stream.id,
        "name": bus_selectors.group_name(stream),
        "members": [_who(m) for m in members],
        "messages": stream.last_sequence,
        "closed": stream.closed_at is not None,
    }


@tool(
    "agent_create_group_chat",
    "Start a group chat with colleagues (ids or names); you are a member. Returns its group id.",
    {
        "type": "object",
        "properties": {"name": S, "members": {"type": "array", "items": S}},
        "required": ["name", "members"],
    },
    scenarios=GROUPS,
)
def agent_create_group_chat(ctx: ToolContext, args: dict[str, Any]) -> dict[str, Any]:
    me = _me(ctx)
    refs = args["members"]
    if not refs:
        raise ToolError("members: name at least one colleague")
    members: dict[str, Agent] = {}
    for ref in refs:
        colleague = _colleague(me, ref)
        members[colleague.id] = colleague
    try:
        stream = bus.group_chat_open(creator=me, members=list(members.values()), name=args["name"], actor=_actor(me))
    except BusError as exc:
        raise ToolError(str(exc)) from exc
    return _group_data(stream)


@tool(
    "agent_list_group_chats",
    "List the group chats you are a member of, with their members.",
    {"type": "object", "properties": {}},
    scenarios=GROUPS,
)
def agent_list_group_chats(ctx: ToolContext, args: dict[str, Any]) -> dict[str, Any]:
    return {"groups": [_group_data(s) for s in bus_selectors.group_chats_of(ctx.agent_id)[:50]]}


@tool(
    "agent_send_group_message",
    "Send a message to a group chat you are a member of; every other member gets it with your name.",
    {"type": "object", "properties": {"group_id": S, "text": S}, "required": ["group_id", "text"]},
    scenarios=GROUPS,
)
def agent_send_group_message(ctx: ToolContext, args: dict[str, Any]) -> dict[str, Any]:
    me = _me(ctx)
    text = _text(args)
    group = bus_selectors.group_chats_of(me.id).filter(id=args["group_id"]).first()
    if group is None:
        raise ToolError(f"no group chat {args['group_id']!r} that you are a member of (see agent_list_group_chats)")
    if group.closed_at is not None:
        raise ToolError(f"the group chat {bus_selectors.group_name(group)!r} is closed")
    _check_pace(me, bus_selectors.group_name(group), stream=group)
    chunk = bus.stream_append(
        stream_id=group.id, sender=me, payload={"text": text, "senderName": me.name}, actor=_actor(me)
    )
    return {"groupId": group.id, "sequence": chunk.sequence, "note": NO_WAIT}
