"""A chat's reply: stored with the messages it answers, announced on the chat group,
and found again by the waiting chat view."""

from __future__ import annotations

from collections.abc import Callable
from typing import Any

from django.utils import timezone

from mailbox.merge import MESSAGE_SEPARATOR
from mailbox.models import MailboxItem
from mailbox.registry import Status
from markus.agents.models import ChatMessage, ChatSession
from markus.core.events import agent_group, send_event_on_commit
from markus.llm.base import get_provider

from .focus import Focus
from .lease import fenced
from .models import LLMSession
from .session import focus_chat_session

DELTA_EVENT = "agent:delta"


def delta_sender(focus: Focus, session: LLMSession) -> Callable[[str], None]:
    """``CallContext.on_delta`` for the focus: each piece of a turn's text goes to the
    agent's group as ``agent:delta`` ``{agentId, mailboxItemIds, activityId, turn, text}``.
    Outside a transaction (the loop holds none during an LLM call) it is sent at once."""
    item = focus.item
    group = agent_group(item.agent_id)
    base = {
        "agentId": item.agent_id,
        "mailboxItemIds": [item.id, *focus.merged_ids],
        "activityId": focus.activity.id if focus.activity is not None else None,
    }

    def send(text: str) -> None:
        send_event_on_commit(group, DELTA_EVENT, {**base, "turn": session.turn_count + 1, "text": text})

    return send


def chat_group(agent_id: str) -> str:
    return f"chat.{agent_id}"


def deliver_chat_reply(focus: Focus, text: str) -> None:
    item = focus.item
    sid = focus_chat_session(focus)
    answered = [item.id, *focus.merged_ids]
    merged = [MailboxItem.objects.get(id=mid) for mid in focus.merged_ids]
    with fenced(focus.lease):
        for m in [item, *merged]:
            ChatMessage.objects.create(
                session_id=sid,
                role="user",
                content=own_content(item, merged) if m is item else m.content,
                metadata={"mailboxItemId": m.id, "senderId": (m.metadata or {}).get("senderId")},
            )
        reply = ChatMessage.objects.create(
            session_id=sid,
            role="assistant",
            content=text,
            metadata={"mailboxItemIds": answered, "provider": get_provider().name},
        )
        ChatSession.objects.filter(id=sid).update(last_message_at=timezone.now())
        send_event_on_commit(
            chat_group(item.agent_id),
            "chat:reply",
            {
                "agentId": item.agent_id,
                "mailboxItemIds": answered,
                "sessionId": sid,
                "messageId": reply.id,
                "reply": text,
            },
        )


def own_content(item: MailboxItem, merged: list[MailboxItem]) -> str:
    """What the person wrote in ``item`` itself: its content without the follow-ups
    folded into it (a resumed item is read back with them)."""
    content = item.content
    for m in reversed(merged):
        suffix = f"{MESSAGE_SEPARATOR}{m.content}"
        if content.endswith(suffix):
            content = content[: -len(suffix)]
    return content


def chat_reply_for(item_id: str) -> dict[str, Any] | None:
    """The stored reply that answered an item (directly, or through a merge)."""
    item = MailboxItem.objects.filter(id=item_id).first()
    seen = set()
    while item is not None and item.status == Status.MERGED and item.merged_into_id and item.id not in seen:
        seen.add(item.id)
        item = MailboxItem.objects.filter(id=item.merged_into_id).first()
    if item is None:
        return None
    for msg in ChatMessage.objects.filter(session__agent_id=item.agent_id, role="assistant").order_by("-id")[:50]:
        if item.id in (msg.metadata or {}).get("mailboxItemIds", []) or item_id in (msg.metadata or {}).get(
            "mailboxItemIds", []
        ):
            return {"reply": msg.content, "sessionId": msg.session_id, "mailboxItemId": item_id}
    if item.status in (Status.DROPPED, Status.COMPLETED):
        return {"reply": None, "sessionId": None, "mailboxItemId": item_id, "status": item.status}
    return None
