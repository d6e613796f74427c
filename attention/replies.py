"""A chat's reply: stored with the messages it answers, announced on the chat group,
found again by ``markus.agents.chat.chat_reply_for``; and the notice to a person whose chat
waits behind a used-up budget. (The answer to whoever waits for an item the loop gives up on
is an ending: ``attention.endings.given_up``.)"""

from __future__ import annotations

from collections.abc import Callable
from typing import Any

from mailbox.models import MailboxItem
from mailbox.registry import MESSAGE_SEPARATOR
from mailbox.representation import private_to
from markus.agents.chat import reply_store
from markus.agents.chat_stream import log_delta
from markus.agents.models import ChatMessage
from markus.agents.services import agent_message_post
from markus.core.events import agent_group, send_event_on_commit, send_json_on_commit
from markus.llm.base import get_provider

from .focus import Focus
from .lease import Fence
from .models import LLMSession
from .scenarios import row_for
from .session import chat_session_id, focus_chat_session

DELTA_EVENT = "agent:delta"


def delta_sender(focus: Focus, session: LLMSession) -> Callable[[str], None]:
    """``CallContext.on_delta`` for the focus: each piece of a turn's text goes to the
    agent's group as ``agent:delta`` ``{agentId, mailboxItemIds, activityId, turn, text, seq?}``
    (``seq``: a person's chat's pieces are kept for a stream that resumes,
    ``markus.agents.chat_stream``). Outside a transaction (the loop holds none during an
    LLM call) it is sent at once."""
    item = focus.item
    group = agent_group(item.agent_id)
    agent_id, ids = str(item.agent_id), [str(item.id), *map(str, focus.merged_ids)]
    owner = private_to(item)  # a private conversation's reply reaches only who may read it
    run = focus.activity.id if focus.activity is not None else None
    activity_id = str(run) if run is not None else None

    def send(text: str) -> None:
        # JSON values only (strings, numbers, None, a fresh list): sent as made, not
        # encoded and decoded again to check (a turn streams a piece a word).
        event = {
            "type": DELTA_EVENT,
            "agentId": agent_id,
            "mailboxItemIds": list(ids),
            "activityId": activity_id,
            "turn": session.turn_count + 1,
            "text": text,
        }
        seq = log_delta(item, text, run)  # kept for a stream that resumes
        if seq is not None:
            event["seq"] = seq
        send_json_on_commit(group, event, private_to=owner)

    return send


def chat_group(agent_id: str) -> str:
    return f"chat.{agent_id}"


def deliver_chat_reply(tx: Fence, focus: Focus, text: str) -> None:
    found = MailboxItem.objects.in_bulk(focus.merged_ids) if focus.merged_ids else {}
    merged = [found[mid] for mid in focus.merged_ids if mid in found]
    store_chat_reply(tx, focus.item, merged, text, session_id=focus_chat_session(focus))


def store_chat_reply(
    tx: Fence, item: MailboxItem, merged: list[MailboxItem], text: str, *, session_id: str, failed: bool = False
) -> ChatMessage:
    """The person's messages (the item and the follow-ups merged into it) and the reply
    that answers them, stored in their chat session and announced on the chat group.
    ``failed``: the reply says the item could not be finished."""
    answered = [item.id, *(m.id for m in merged)]
    tx.check()
    for m in [item, *merged]:
        ChatMessage.objects.create(
            session_id=session_id,
            role=ChatMessage.Role.USER,
            content=own_content(item, merged) if m is item else m.content,
            metadata={"mailboxItemId": m.id, "senderId": (m.metadata or {}).get("senderId")},
        )
    metadata: dict[str, Any] = {"provider": get_provider().name}
    if failed:
        metadata["failed"] = True
    return post_chat_reply(item.agent_id, session_id, text, answered=answered, metadata=metadata)


def post_chat_reply(
    agent_id: str, session_id: str, text: str, *, answered: list[str], metadata: dict[str, Any]
) -> ChatMessage:
    """The agent's reply to the person's items ``answered``, stored in their session and
    announced on the chat group (``chat:reply``, on commit): the loop's reply, or an
    outside agent's answer on the bus (``attention.outside``)."""
    reply = reply_store(session_id, text, answered=answered, metadata=metadata)
    send_event_on_commit(
        chat_group(agent_id),
        "chat:reply",
        {
            "agentId": agent_id,
            "mailboxItemIds": answered,
            "sessionId": session_id,
            "messageId": reply.id,
            "reply": text,
            **({"failed": True} if metadata.get("failed") else {}),
        },
    )
    return reply


def tell_budget_wait(tx: Fence, items: list[MailboxItem], reason: str, period: str) -> int:
    """Each person whose chat waits behind a used-up budget is told so in their chat
    session, once per item and budget period (the notice's metadata is the record):
    the agent takes no LLM work, and nobody waits in silence. The chat itself stays
    queued and is answered when the budget allows. Returns how many were told."""
    waiting = [i for i in items if row_for(i).in_chat and (i.metadata or {}).get("senderId")]
    if not waiting:
        return 0
    told = set(
        ChatMessage.objects.filter(
            session__agent_id=waiting[0].agent_id,
            metadata__budgetNotice=True,
            metadata__budgetPeriod=period,
            metadata__mailboxItemId__in=[i.id for i in waiting],
        ).values_list("metadata__mailboxItemId", flat=True)
    )
    tx.check()
    for item in waiting:
        if item.id in told:
            continue
        agent_message_post(
            agent_id=item.agent_id,
            session_id=chat_session_id(item),
            content=f"I cannot answer yet: {reason}. Your message waits in my queue; "
            "I answer it as soon as the budget is raised or its next period begins.",
            metadata={
                "budgetNotice": True,
                "budgetPeriod": period,
                "mailboxItemId": item.id,
                "mailboxItemIds": [item.id],
            },
            user_id=int((item.metadata or {})["senderId"]),
        )
    return len(waiting) - len(told)


def own_content(item: MailboxItem, merged: list[MailboxItem]) -> str:
    """What the person wrote in ``item`` itself: its content without the follow-ups
    folded into it (a resumed item is read back with them)."""
    content = item.content
    for m in reversed(merged):
        suffix = f"{MESSAGE_SEPARATOR}{m.content}"
        if content.endswith(suffix):
            content = content[: -len(suffix)]
    return content
