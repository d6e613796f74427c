"""Talking to humans: ``notify_user`` (a chat message plus a notification) and
``request_user_approval``, which parks the item instead of holding a worker: the item is
deferred until the person answers, then re-queued with the answer as the tool result
(ARCHITECTURE decision 4)."""

from __future__ import annotations

from django.conf import settings
from django.contrib.auth import get_user_model
from django.contrib.auth.models import User

from attention.models import ToolCallRecord
from attention.scenarios import ASKING_SCENARIOS, HUMAN_GUIDANCE_SCENARIOS
from attention.toolbox import ToolContext, ToolError, tool
from mailbox.models import MailboxItem
from mailbox.registry import MailboxType
from markus.agents.models import Agent
from markus.agents.permissions import user_may_do
from markus.agents.services import agent_message_post, main_session
from notifications.models import Approval
from notifications.registry import PRIORITIES, NotificationType
from notifications.services import approval_create
from notifications.services import notify_user as send_notification

S = {"type": "string"}
# Telling a person: wherever the prompt's guidance names notify_user.
TELLING = HUMAN_GUIDANCE_SCENARIOS
# Asking a person parks the item: the scenarios whose guidance says so. Not a chat (a
# person waits for the reply; parking it would leave them hanging).
APPROVAL_SCENARIOS = ASKING_SCENARIOS


def _target_user(ctx: ToolContext, target_user_id: str | None) -> User:
    """Whom ``notify_user`` reaches (seed 25.1), among the people the permission table
    lets it address (``tool:notify_user``): the user named, else the person this item
    came from (whom it talks to now), else the last person who chatted with it, else its
    owner, else its team's owner."""
    agent = Agent.objects.select_related("team").get(id=ctx.agent_id)
    if target_user_id:
        found = _users([str(target_user_id)])
        target = found[0] if found else None
        if target is None or not user_may_do(target, "tool:notify_user", agent):
            raise ToolError(f"no user {target_user_id!r} you can reach")
        return target
    item = MailboxItem.objects.filter(id=ctx.mailbox_item_id).first()
    talking = [_person(item.metadata)] if item is not None else []
    chatted = (
        MailboxItem.objects.filter(agent_id=agent.id, source_type=MailboxType.HUMAN_CHAT, metadata__senderRole="user")
        .order_by("-queued_at", "-id")
        .values_list("metadata", flat=True)[:LAST_CHATTERS]
    )
    people = _users([p for p in [*talking, *(_person(m) for m in chatted)] if p])
    people += [u for u in (agent.owner, agent.team.owner if agent.team is not None else None) if u is not None]
    for person in people:
        if user_may_do(person, "tool:notify_user", agent):
            return person
    raise ToolError("nobody to notify: this agent has no owner or team")


# How many of the latest chats are looked through for the last person who chatted.
LAST_CHATTERS = 20


def _person(metadata: dict | None) -> str:
    """The user id a person's item names (its sender), or ""."""
    meta = metadata or {}
    sender = str(meta.get("senderId", ""))
    return sender if meta.get("senderRole") == "user" and sender.isascii() and sender.isdigit() else ""


def _users(ids: list[str]) -> list[User]:
    """The users of ``ids`` that exist, in that order, each once (one query)."""
    wanted = list(dict.fromkeys(i for i in ids if i.isascii() and i.isdigit()))
    found = get_user_model().objects.in_bulk([int(i) for i in wanted])
    return [found[int(i)] for i in wanted if int(i) in found]


def _priority(value: str | None) -> str | None:
    if value is not None and value not in PRIORITIES:
        raise ToolError(f"priority must be one of {', '.join(PRIORITIES)}")
    return value


def _related_id(args: dict, name: str) -> str | None:
    value = args.get(name)
    if value in (None, ""):
        return None
    if not isinstance(value, str):
        raise ToolError(f"{name} must be a string id")
    return value


def notify_context_comment(task_id: str | None, requirement_id: str | None) -> str:
    """The context line a notification carries in its text (seed 13.1), so the agent
    sees what it was about when the person replies (the history keeps only the text)."""
    refs = [f"task_id={task_id}" if task_id else "", f"requirement_id={requirement_id}" if requirement_id else ""]
    refs = [r for r in refs if r]
    return f"\n<!-- notify_context: {', '.join(refs)} -->" if refs else ""


@tool(
    "notify_user",
    "Message a person: it appears in your chat with them and rings their bell. Name the task or requirement it "
    "is about: their reply then carries it.",
    {
        "type": "object",
        "properties": {
            "title": S,
            "body": S,
            "priority": {"type": "string", "enum": list(PRIORITIES)},
            "related_task_id": S,
            "related_requirement_id": S,
            "target_user_id": S,
        },
        "required": ["title", "body"],
    },
    scenarios=TELLING,
)
def notify_user(ctx: ToolContext, args: dict) -> dict:
    _check_notices(ctx)
    priority = _priority(args.get("priority"))
    task_id = _related_id(args, "related_task_id")
    requirement_id = _related_id(args, "related_requirement_id")
    user = _target_user(ctx, args.get("target_user_id"))
    session = main_session(ctx.agent_id)
    message = agent_message_post(
        agent_id=ctx.agent_id,
        session_id=session.id,
        content=f"**{args['title']}**\n\n{args['body']}{notify_context_comment(task_id, requirement_id)}",
        metadata={
            "notifyUser": True,
            "priority": priority or "normal",
            "taskId": task_id,
            "requirementId": requirement_id,
            "targetUserId": user.pk,
        },
        user_id=user.pk,
    )
    chat_target = {"agentId": ctx.agent_id, "sessionId": session.id, "messageId": message.pk}
    target = {"path": f"/work?task={task_id}", **chat_target} if task_id else chat_target
    n = send_notification(
        user=user,
        type=NotificationType.SYSTEM,
        title=args["title"],
        body=args["body"],
        priority=priority,
        action_type="navigate" if task_id else "open_chat",
        action_target=target,
        metadata={"agentId": ctx.agent_id, "taskId": task_id, "requirementId": requirement_id, **chat_target},
    )
    return {"notificationId": n.id, "userId": user.pk, "sessionId": session.id, "messageId": message.pk}


def _check_notices(ctx: ToolContext) -> None:
    """At most ``MARKUS["ITEM_MAX_NOTICES"]`` notices from one piece of work (all its
    attempts): a model telling a person something a little different every turn rang
    their bell dozens of times, no two calls alike."""
    if not ctx.mailbox_item_id:
        return
    most = settings.MARKUS["ITEM_MAX_NOTICES"]
    made = ToolCallRecord.objects.filter(mailbox_item_id=ctx.mailbox_item_id, name="notify_user", ok=True)
    if made[:most].count() >= most:
        raise ToolError(
            f"not sent: this work told people {most} times already (MARKUS_ITEM_MAX_NOTICES); "
            "say the rest in your final answer"
        )


def _check_asked(ctx: ToolContext, title: str) -> None:
    """A piece of work asks a person a question once, and a few questions at most (its
    ``MARKUS["ITEM_MAX_NOTICES"]``, as its notices): a small model, its deploy approved,
    asked the same approval again after each answer, each ringing the person's bell."""
    if not ctx.mailbox_item_id:
        return
    asked = Approval.objects.filter(mailbox_item_id=ctx.mailbox_item_id)
    answered = asked.filter(title=str(title)[:300], status=Approval.State.ANSWERED).select_related("user")
    if (earlier := answered.order_by("-answered_at").first()) is not None:
        said = earlier.selected_option + (f": {earlier.comment}" if earlier.comment else "")
        raise ToolError(f"not asked: {earlier.user.get_username()} answered this already ({said}); act on that answer")
    most = settings.MARKUS["ITEM_MAX_NOTICES"]
    if asked[:most].count() >= most:
        raise ToolError(
            f"not asked: this work asked people {most} times already (MARKUS_ITEM_MAX_NOTICES); "
            "decide with what you know, and say in your final answer what you could not ask"
        )


@tool(
    "request_user_approval",
    "Ask a person to decide. Your work pauses until they answer; the answer comes back as this tool's result.",
    {
        "type": "object",
        "properties": {
            "title": S,
            "description": S,
            "options": {
                "type": "array",
                "items": {"type": "string"},
                "description": "the choices (default: Approve, Reject)",
            },
            "allow_freeform": {"type": "boolean"},
            "related_task_id": S,
            "priority": {"type": "string", "enum": list(PRIORITIES)},
        },
        "required": ["title", "description"],
    },
    scenarios=APPROVAL_SCENARIOS,
)
def request_user_approval(ctx: ToolContext, args: dict) -> dict:
    _check_asked(ctx, args["title"])
    user = _target_user(ctx, None)
    approval = approval_create(  # options: objects or plain labels (notifications.services.approval_options)
        user=user,
        title=args["title"],
        description=args["description"],
        options=args.get("options") or None,
        allow_freeform=bool(args.get("allow_freeform")),
        agent=Agent.objects.get(id=ctx.agent_id),
        mailbox_item=MailboxItem.objects.filter(id=ctx.mailbox_item_id).first(),
        priority=_priority(args.get("priority")),
        metadata={"taskId": args.get("related_task_id")},
    )
    ctx.effects["parked_approval"] = approval.id
    return {"status": "waiting_for_user", "approvalId": approval.id}
