"""The chat's rules, next to its rows (``ChatSession``, ``ChatMessage``):
who sees which session, what a session's messages mark on the item they become, what a
person reads as the conversation, and the reply that answered an item.

Below the loop: the chat view (``attention.chat``), the mailbox's API and the A2A door
read and write chats through here, none of them through the loop.

- ``visible_sessions``: the one rule of who sees which session of an agent.
- ``session_marks``: a person's own session makes its items private to that person.
- ``conversation`` / ``session_messages`` / ``messages_after``: the reads, keyset-paged.
- ``reply_store``: the agent's reply, stored naming the item it answers (``reply_to``);
  ``chat_reply_for``: that reply, found by one query on the ``reply_to`` index."""

from __future__ import annotations

from datetime import datetime
from typing import Any

from django.db.models import Count, OuterRef, Q, QuerySet, Subquery
from django.http import Http404
from django.utils import timezone

from mailbox.lifecycle import DELIVERED_ON
from mailbox.models import MailboxItem
from mailbox.registry import Status
from mailbox.representation import PRIVATE_TO
from markus.agents.auth import AnyRequest, acting_agent
from markus.agents.models import Agent, ChatMessage, ChatSession
from markus.agents.services import main_session
from markus.core.errors import MarkusError

# ---------------------------------------------------------------------------- sessions


def _session_user(caller: AnyRequest) -> tuple[int | None, bool]:
    """The caller's user id (None for an agent acting as itself) and whether it sees
    every session of the agent (staff, or the agent itself)."""
    if acting_agent(caller) is not None:
        return None, True
    user = caller.user
    return user.pk, bool(user.is_staff)


def visible_sessions(caller: AnyRequest, agent: Agent) -> QuerySet[ChatSession]:
    """The agent's sessions the caller may see: the main session and the shared ones
    (no user) for everyone who sees the agent; a person's own session for that person
    (and staff, and the agent itself). Anything else answers like a missing one."""
    rows = ChatSession.objects.filter(agent=agent)
    user_id, sees_all = _session_user(caller)
    if sees_all:
        return rows
    return rows.filter(Q(is_main=True) | Q(user__isnull=True) | Q(user_id=user_id))


def visible_session(caller: AnyRequest, agent: Agent, session_id: str) -> ChatSession:
    session = visible_sessions(caller, agent).filter(id=session_id).first()
    if session is None:
        raise Http404("No such chat session.")
    return session


def session_create(caller: AnyRequest, agent: Agent, title: str) -> ChatSession:
    """A new session of the agent, the calling person's own (an agent's: shared)."""
    user_id, _ = _session_user(caller)
    return ChatSession.objects.create(agent=agent, user_id=user_id, title=title)


def session_marks(session: ChatSession | None) -> dict[str, Any]:
    """What a chat said in ``session`` keeps on its item: a person's own session (not
    the main one, not a shared one) makes it private to that person (``PRIVATE_TO``)."""
    if session is None or session.is_main or session.user_id is None:
        return {}
    return {PRIVATE_TO: session.user_id}


def serialize_message(m: ChatMessage) -> dict[str, Any]:
    return {"id": m.pk, "role": m.role, "content": m.content, "metadata": m.metadata or {}, "createdAt": m.created_at}


def conversation(session: ChatSession) -> QuerySet[ChatMessage]:
    """What a person reads as the conversation: the session's messages without the
    activity-log lines the loop writes into the main session (the mind view has those)."""
    # Not ``exclude(metadata__activityLog=True)``: on SQLite that also leaves out every
    # message without the key (NOT of a NULL comparison).
    rows = ChatMessage.objects.filter(session=session)
    return rows.filter(Q(metadata__activityLog__isnull=True) | Q(metadata__activityLog=False))


# ``conversation``'s rule from a session's side: the messages its count counts.
SHOWN_MESSAGES = Q(messages__metadata__activityLog__isnull=True) | Q(messages__metadata__activityLog=False)


def sessions_for(caller: AnyRequest, agent: Agent) -> list[dict[str, Any]]:
    """The caller's view of the agent's sessions: the main session first (created if
    the agent has none yet), then the others by their last message, newest first
    (sessions without a message by creation). Two queries for any number of sessions."""
    main_session(agent.id)
    last = ChatMessage.objects.filter(session=OuterRef("pk")).order_by("-created_at", "-id").values("id")[:1]
    rows = list(
        visible_sessions(caller, agent)
        .annotate(message_count=Count("messages", filter=SHOWN_MESSAGES), last_message_id=Subquery(last))
        .order_by("-is_main", "-last_message_at", "-created_at", "-id")
    )
    last_messages = ChatMessage.objects.in_bulk([s.last_message_id for s in rows if s.last_message_id])
    out = []
    for s in rows:
        m = last_messages.get(s.last_message_id)
        out.append(
            {
                "id": s.id,
                "kind": "main" if s.is_main else "chat",
                "title": s.title,
                "userId": s.user_id,
                "createdAt": s.created_at,
                "lastMessageAt": m.created_at if m is not None else s.last_message_at,
                "lastMessage": None
                if m is None
                else {"id": m.pk, "role": m.role, "content": m.content, "createdAt": m.created_at},
                "messageCount": s.message_count,
            }
        )
    # Sessions whose last_message_at was never stamped sort by creation above; a
    # stored message is the truth for the order.
    main = [r for r in out if r["kind"] == "main"]
    others = sorted(
        (r for r in out if r["kind"] != "main"),
        key=lambda r: (r["lastMessageAt"] or r["createdAt"], r["id"]),
        reverse=True,
    )
    return main + others


MAX_CURSOR = 20  # digits of a message id


def _anchor(session: ChatSession, cursor: str, name: str) -> tuple[datetime, int]:
    """The ``(created_at, id)`` of the message a cursor names, or a 400 naming ``name``."""
    if not (cursor.isascii() and cursor.isdigit()) or len(cursor) > MAX_CURSOR:
        raise MarkusError(f"{name} must be the id of a message of this session (a nextCursor)")
    anchor: list[tuple[datetime, int]] = list(
        ChatMessage.objects.filter(session=session, id=int(cursor)).values_list("created_at", "id")[:1]
    )
    if not anchor:
        raise MarkusError(f"{name}: no message {cursor} in this session")
    return anchor[0]


def recent_conversation(agent_id: str, limit: int = 6) -> list[dict[str, Any]]:
    """The last messages of the agent's main session, oldest first (the mind view's chat
    box): the conversation everybody who sees the agent may read."""
    rows = conversation(main_session(agent_id)).order_by("-created_at", "-id")[:limit]
    return [serialize_message(m) for m in reversed(list(rows))]


def session_messages(
    session: ChatSession, *, limit: int, before: str | None, rows: QuerySet[ChatMessage] | None = None
) -> dict[str, Any]:
    """One page of the session's messages (``rows``: of these), newest first, and the
    cursor of the next (older) page: keyset on ``(created_at, id)``, the order of the
    session's index."""
    rows = (ChatMessage.objects.filter(session=session) if rows is None else rows).order_by("-created_at", "-id")
    if before is not None:
        at, mid = _anchor(session, before, "before")
        rows = rows.filter(Q(created_at__lt=at) | Q(created_at=at, id__lt=mid))
    page = list(rows[: limit + 1])
    more = len(page) > limit
    page = page[:limit]
    return {
        "sessionId": session.id,
        "messages": [serialize_message(m) for m in page],
        "nextCursor": str(page[-1].pk) if more else None,
    }


def messages_after(rows: QuerySet[ChatMessage], session: ChatSession, after: str, *, limit: int) -> list[ChatMessage]:
    """The messages after the one ``after`` names, oldest first (a page catching up)."""
    at, mid = _anchor(session, after, "after")
    newer = rows.filter(Q(created_at__gt=at) | Q(created_at=at, id__gt=mid)).order_by("created_at", "id")
    return list(newer[:limit])


def notify_context(session_id: str) -> dict[str, Any] | None:
    """The context of the notification a message to this session replies to: the
    session's latest message, when it is a ``notify_user`` message about a task or a
    requirement."""
    last = ChatMessage.objects.filter(session_id=session_id).order_by("-created_at", "-id").first()
    meta = (last.metadata or {}) if last is not None else {}
    if last is None or not meta.get("notifyUser"):
        return None
    task_id, requirement_id = meta.get("taskId") or None, meta.get("requirementId") or None
    if not task_id and not requirement_id:
        return None
    return {"messageId": last.pk, "taskId": task_id, "requirementId": requirement_id}


# ---------------------------------------------------------------------------- replies


def reply_store(session_id: str, text: str, *, answered: list[str], metadata: dict[str, Any]) -> ChatMessage:
    """The agent's reply in ``session_id`` to the items ``answered`` (the item that led
    first, then those merged into it): the message names the one that led in its
    ``reply_to`` column, which ``chat_reply_for`` reads, in the same INSERT (the others
    reach it through their merge); ``metadata.mailboxItemIds`` lists them all, as the
    API has always shown."""
    reply = ChatMessage.objects.create(
        session_id=session_id,
        role=ChatMessage.Role.ASSISTANT,
        content=text,
        metadata={"mailboxItemIds": answered, **metadata},
        reply_to=answered[0] if answered else None,
    )
    ChatSession.objects.filter(id=session_id).update(last_message_at=timezone.now())
    return reply


def reply_answering(item_ids: list[str] | set[str], *, session_id: str | None = None) -> ChatMessage | None:
    """The latest reply to any of ``item_ids`` (in ``session_id``, if given): one query
    on the ``reply_to`` index."""
    rows = ChatMessage.objects.filter(reply_to__in=list(item_ids))
    if session_id is not None:
        rows = rows.filter(session_id=session_id)
    return rows.order_by("-id").only("id", "session_id", "content").first()


def chat_reply_for(item_id: str) -> dict[str, Any] | None:
    """The stored reply that answered an item (directly, or through a merge: then
    ``mergedInto`` names the item that led it, whose reply it is), or, for an item
    dropped or completed without one, its status (``reply`` None); None while it waits.
    The item is read (and a merge followed, rarely), then the reply is one query."""
    item = MailboxItem.objects.filter(id=item_id).first()
    seen = set()
    while item is not None and item.status == Status.MERGED and item.merged_into_id and item.id not in seen:
        seen.add(item.id)
        item = MailboxItem.objects.filter(id=item.merged_into_id).first()
    if item is None:
        return None
    lead = {"mergedInto": item.id} if item.id != item_id else {}
    reply = reply_answering({item.id, item_id})
    if reply is not None:
        return {"reply": reply.content, "sessionId": reply.session_id, "mailboxItemId": item_id, **lead}
    if item.status in (Status.DROPPED, Status.COMPLETED) and DELIVERED_ON not in item.marks:
        # (An item delivered to an outside agent's inbox is answered when the agent answers.)
        return {"reply": None, "sessionId": None, "mailboxItemId": item_id, "status": item.status, **lead}
    return None
