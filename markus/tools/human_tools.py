"""Talking to humans: ``notify_user`` (a chat message plus a notification) and
``request_user_approval``, which parks the item instead of holding a worker: the item is
deferred until the person answers, then re-queued with the answer as the tool result
(ARCHITECTURE decision 4)."""

from __future__ import annotations

from django.contrib.auth import get_user_model
from django.contrib.auth.models import User

from attention.scenarios import ASKING_SCENARIOS, HUMAN_GUIDANCE_SCENARIOS
from attention.toolbox import ToolContext, ToolError, tool
from mailbox.models import MailboxItem
from markus.agents.auth import user_may_see_agent
from markus.agents.models import Agent
from markus.agents.services import agent_message_post, main_session
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
    """The named user, else the person this item came from, else the agent's owner, else
    its team's owner. Only users who may see the agent can be addressed."""
    agent = Agent.objects.select_related("team").get(id=ctx.agent_id)
    User = get_user_model()
    if target_user_id:
        target = (
            User.objects.filter(pk=target_user_id).first()
            if str(target_user_id).isascii() and str(target_user_id).isdigit()
            else None
        )
        if target is None or not user_may_see_agent(target, agent):
            raise ToolError(f"no user {target_user_id!r} you can reach")
        return target
    item = MailboxItem.objects.filter(id=ctx.mailbox_item_id).first()
    meta = (item.metadata or {}) if item else {}
    if (
        meta.get("senderRole") == "user"
        and str(meta.get("senderId", "")).isascii()
        and str(meta.get("senderId", "")).isdigit()
    ):
        sender = User.objects.filter(pk=meta["senderId"]).first()
        if sender is not None and user_may_see_agent(sender, agent):
            return sender
    if agent.owner is not None:
        return agent.owner
    if agent.team is not None:  # select_related above: no query
        return agent.team.owner
    raise ToolError("nobody to notify: this agent has no owner or team")


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


@tool(
    "request_user_approval",
    "Ask a person to decide. Your work pauses until they answer; the answer comes back as this tool's result.",
    {
        "type": "object",
        "properties": {
            "title": S,
            "description": S,
            "options": {"type": "array"},
            "allow_freeform": {"type": "boolean"},
            "related_task_id": S,
            "priority": {"type": "string", "enum": list(PRIORITIES)},
        },
        "required": ["title", "description"],
    },
    scenarios=APPROVAL_SCENARIOS,
)
def request_user_approval(ctx: ToolContext, args: dict) -> dict:
    options = args.get("options") or [{"id": "approve", "label": "Approve"}, {"id": "reject", "label": "Reject"}]
    if not all(isinstance(o, dict) and isinstance(o.get("id"), str) and o["id"] for o in options):
        raise ToolError("options must be objects with an id and a label")
    user = _target_user(ctx, None)
    approval = approval_create(
        user=user,
        title=args["title"],
        description=args["description"],
        options=options,
        allow_freeform=bool(args.get("allow_freeform")),
        agent=Agent.objects.get(id=ctx.agent_id),
        mailbox_item=MailboxItem.objects.filter(id=ctx.mailbox_item_id).first(),
        priority=_priority(args.get("priority")),
        metadata={"taskId": args.get("related_task_id")},
    )
    ctx.effects["parked_approval"] = approval.id
    return {"status": "waiting_for_user", "approvalId": approval.id}
