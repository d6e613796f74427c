"""``POST /api/agents/{id}/chat``: enqueue a human_chat and wait for the reply in an async
view, woken through the channel layer (a one-second re-check of the database is only
the fallback). No worker or thread is held while waiting.

With ``Accept: text/event-stream`` the answer is a server-sent event stream: ``queued``
(the item), ``delta`` ``{text, run}`` as the reply is produced (a new ``run`` starts
the reply over: the item was taken up again), then one ``done`` with the
same JSON the plain answer returns. Deltas are the ``agent:delta`` events of the item
on the agent's group (sent by the loop as a turn produces text); a reply that arrives
without any (a provider that does not stream) is sent as deltas of a few words each
before ``done``, so a client reads one shape whatever the provider.

An outside agent's chat is the same request: the item goes to the agent's bus inbox
(``attention.outside``) and its answer on the bus is the reply, waited for alike.

A follow-up merged into the chat in hand is answered by that chat's one reply: its
answer (plain or ``done``) carries the reply with ``mergedInto`` (the item that led the
merge), and its stream has no deltas of the reply (they stream under the item that led)
but one line saying it was merged (``MERGED_NOTE``), so the reply is shown once.

The text is at most ``CHAT_TEXT_MAX_CHARS`` (400 past it, nothing stored). The chat
``parks`` and takes a wait slot before anything is enqueued (markus.core.waits: 429
past the caps per caller and per server); a stream gives it back when it ends.

Also here: the reads of an agent's chat sessions (``sessions_for``, ``session_messages``)
under the one rule of who sees which session (``visible_sessions``)."""

from __future__ import annotations

import asyncio
import json
import re
import time
from collections.abc import AsyncIterator
from datetime import datetime
from typing import Any

from asgiref.sync import sync_to_async
from channels.layers import get_channel_layer
from django.conf import settings
from django.core.exceptions import PermissionDenied
from django.db.models import Count, OuterRef, Q, QuerySet, Subquery
from django.http import Http404, HttpRequest, JsonResponse, StreamingHttpResponse
from rest_framework.exceptions import APIException

from agentbus.async_views import authenticate
from mailbox import services as mailbox
from mailbox.api import sender_metadata
from mailbox.models import MailboxItem
from mailbox.registry import MailboxType
from mailbox.representation import PRIVATE_TO
from markus.agents import permissions
from markus.agents.auth import AnyRequest, Caller, acting_agent, waiter_for
from markus.agents.models import Agent, ChatMessage, ChatSession
from markus.agents.services import main_session
from markus.core.api import error, error_response, first_error, unknown_fields
from markus.core.channel_layer import event_of
from markus.core.errors import MarkusError
from markus.core.events import agent_group
from markus.core.input import json_body
from markus.core.limits import CHAT_TEXT_MAX_CHARS
from markus.core.waits import WAITS, TooManyWaits, parks

from .replies import DELTA_EVENT, chat_group, chat_reply_for
from .serializers import ChatIn

SSE = "text/event-stream"
_JSON_TYPES = frozenset({"application/json", "application/*", "*/*"})
_WORDS = re.compile(r"\s*\S+\s*")
WORDS_PER_DELTA = 3


def _error(detail: str, status: int, code: str) -> JsonResponse:
    return error(detail, status, code)


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


def serialize_message(m: ChatMessage) -> dict[str, Any]:
    return {"id": m.pk, "role": m.role, "content": m.content, "metadata": m.metadata or {}, "createdAt": m.created_at}


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


def visible_session(caller: AnyRequest, agent: Agent, session_id: str) -> ChatSession:
    session = visible_sessions(caller, agent).filter(id=session_id).first()
    if session is None:
        raise Http404("No such chat session.")
    return session


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


def conversation(session: ChatSession) -> QuerySet[ChatMessage]:
    """What a person reads as the conversation: the session's messages without the
    activity-log lines the loop writes into the main session (the mind view has those)."""
    # Not ``exclude(metadata__activityLog=True)``: on SQLite that also leaves out every
    # message without the key (NOT of a NULL comparison).
    rows = ChatMessage.objects.filter(session=session)
    return rows.filter(Q(metadata__activityLog__isnull=True) | Q(metadata__activityLog=False))


# ``conversation``'s rule from a session's side: the messages its count counts.
SHOWN_MESSAGES = Q(messages__metadata__activityLog__isnull=True) | Q(messages__metadata__activityLog=False)


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


# ---------------------------------------------------------------------------- chat


def _authenticate(request: HttpRequest, agent_id: str) -> tuple[Caller, Agent] | JsonResponse:
    """The caller and the agent, or the error response."""
    try:
        # As a DRF view: agent bearer, user token, or the session with its CSRF check.
        caller = Caller(*authenticate(request))
    except (APIException, MarkusError) as exc:  # 401 / 403; 400 or 413 for the body
        return error_response(exc)
    try:
        agent = permissions.require(caller, "agents_chat", agent_id)
    except Http404:
        return _error("No such agent.", 404, "not_found")
    except PermissionDenied as exc:
        return error_response(exc)
    return caller, agent


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


def _enqueue(caller: Caller, agent: Agent, text: str, session_id: str | None) -> tuple[MailboxItem, str]:
    """The human_chat item, and the session it is said in. A reply to a notification
    about a task or a requirement carries their ids (``taskId``/``requirementId`` in
    the payload, ``notifyContext`` in the metadata): the chat runs with them."""
    target = session_id or main_session(agent.id).id
    payload: dict[str, Any] = {"summary": text[:120], "content": text}
    extra: dict[str, Any] = {"sessionId": session_id} if session_id else {}
    context = notify_context(target)
    if context is not None:
        extra["notifyContext"] = context
        payload |= {k: v for k, v in (("taskId", context["taskId"]), ("requirementId", context["requirementId"])) if v}
    session = ChatSession.objects.filter(id=target).first() if session_id else None
    item = mailbox.mailbox_enqueue(
        agent_id=agent.id,
        source_type=MailboxType.HUMAN_CHAT,
        payload=payload,
        metadata=sender_metadata(caller, extra),
        marks=session_marks(session),
    )
    return item, target


def _parse(request: HttpRequest) -> tuple[str, str | None] | JsonResponse:
    """The text and the session id of the body (validated by ChatIn), or the error response."""
    try:
        body = json_body(request)  # NUL bytes and lone surrogates refused like the API's parser
    except MarkusError as exc:  # BodyTooLarge (413) is one
        return error_response(exc)
    if not isinstance(body, dict):
        return _error("body must be a JSON object", 400, "invalid")
    serializer = ChatIn(data=body)
    refusal = unknown_fields(body, serializer.fields)
    if refusal is not None:
        return error_response(refusal)
    if not serializer.is_valid():
        return error(first_error(serializer.errors), 400, "invalid", fields=serializer.errors)
    data: dict[str, Any] = serializer.validated_data
    if len(data["text"]) > CHAT_TEXT_MAX_CHARS:
        message = f"text is longer than {CHAT_TEXT_MAX_CHARS} characters"
        return error(message, 400, "invalid", fields={"text": [message]}, limit=CHAT_TEXT_MAX_CHARS)
    return data["text"], data["sessionId"]


def wants_stream(accept: str) -> bool | None:
    """Whether ``Accept`` asks for the event stream (True), JSON (False: also no
    header, or a wildcard), or neither (None)."""
    types = {part.split(";", 1)[0].strip().lower() for part in accept.split(",") if part.strip()}
    if not types:
        return False
    if SSE in types:
        return True
    return False if types & _JSON_TYPES else None


def word_chunks(text: str, words: int = WORDS_PER_DELTA) -> list[str]:
    """``text`` in pieces of a few words (whitespace kept: they join to ``text``)."""
    parts = _WORDS.findall(text)  # each word with the whitespace around it: they join to text
    if not parts:
        return [text] if text else []
    return ["".join(parts[i : i + words]) for i in range(0, len(parts), words)]


def _is_for(event: dict[str, Any], item_id: str) -> bool:
    """Is the delta the reply to this item? Its first id is the item the turn works on;
    the others were merged into it, and their streams do not repeat its reply."""
    ids = event.get("mailboxItemIds") or [event.get("mailboxItemId")]
    return bool(ids) and ids[0] == item_id


# What the stream of a message merged into another says instead of the reply (which
# streams under the message that led the merge, and is in its ``done`` all the same).
MERGED_NOTE = "↳ merged into your earlier message: the reply there answers it too."


async def _watch(item_id: str, channel: str, timeout: float) -> AsyncIterator[tuple[str, Any]]:
    """``("delta", {text, run})`` for each ``agent:delta`` of the item (``run``: the
    activity that wrote it; a run after Pause and Resume starts the reply over), then one
    ``("reply", reply or None)``: the stored reply, or None when none came in time.
    The database is read at the start, on a ``chat:reply``, and once a second while
    nothing arrives (the fallback), never per delta."""
    layer = get_channel_layer()
    deadline = time.monotonic() + timeout
    check = True
    while True:
        if check:
            reply = await sync_to_async(chat_reply_for)(item_id)
            if reply is not None:
                yield "reply", reply
                return
        remaining = deadline - time.monotonic()
        if remaining <= 0:
            yield "reply", None
            return
        try:
            message = await asyncio.wait_for(layer.receive(channel), timeout=min(1.0, remaining))
        except TimeoutError:
            check = True
            continue
        try:
            event = event_of(message)
        except (KeyError, TypeError, ValueError):
            event = {}
        if event.get("type") == DELTA_EVENT:
            check = False
            if _is_for(event, item_id) and isinstance(event.get("text"), str) and event["text"]:
                yield "delta", {"text": event["text"], "run": event.get("activityId")}
        else:
            check = event.get("type") == "chat:reply" or not event


def _sse(event: str, data: dict[str, Any]) -> str:
    return f"event: {event}\ndata: {json.dumps(data, default=str)}\n\n"


def _answer(reply: dict[str, Any] | None, item_id: str, session_id: str) -> dict[str, Any]:
    if reply is None:
        return {"reply": None, "mailboxItemId": item_id, "sessionId": session_id, "pending": True}
    answer = {"reply": reply["reply"], "mailboxItemId": item_id, "sessionId": reply["sessionId"] or session_id}
    if reply.get("mergedInto"):
        answer["mergedInto"] = reply["mergedInto"]  # answered by that item's reply
    return answer


@parks
async def chat_view(request: HttpRequest, agent_id: str) -> JsonResponse | StreamingHttpResponse:
    if request.method != "POST":
        return _error(f'Method "{request.method}" not allowed.', 405, "method_not_allowed")
    auth: tuple[Caller, Agent] | JsonResponse = await sync_to_async(_authenticate)(request, agent_id)
    if isinstance(auth, JsonResponse):
        return auth
    caller, agent = auth
    stream = wants_stream(request.headers.get("Accept", ""))
    if stream is None:
        return _error("Accept must allow application/json or text/event-stream", 406, "not_acceptable")
    parsed = _parse(request)
    if isinstance(parsed, JsonResponse):
        return parsed
    text, sid = parsed
    if agent.status != Agent.RunStatus.RUNNING:
        return _error(f"this agent is {agent.status}; resume or start it to chat", 409, "conflict")
    if sid is not None and not await sync_to_async(visible_sessions(caller, agent).filter(id=sid).exists)():
        return _error(f"sessionId: no chat session {sid[:80]!r} of this agent", 400, "invalid")
    waiter = await sync_to_async(waiter_for)(caller)
    try:  # a person's chat may take the chat reserve; an agent token's chat is one of its bus waits
        slot = WAITS.claim(waiter, chat=acting_agent(caller) is None)
    except TooManyWaits as exc:
        return error_response(exc)
    layer = get_channel_layer()
    channel = await layer.new_channel()
    groups = [chat_group(agent.id), *([agent_group(agent.id)] if stream else [])]
    for group in groups:
        await layer.group_add(group, channel)
    timeout = float(settings.MARKUS["CHAT_TIMEOUT_S"])
    try:
        item, session_id = await sync_to_async(_enqueue)(caller, agent, text, sid)
    except BaseException:
        slot.release()
        for group in groups:
            await layer.group_discard(group, channel)
        raise

    async def release() -> None:
        slot.release()
        for group in groups:
            await layer.group_discard(group, channel)

    if stream:

        async def events() -> AsyncIterator[str]:
            try:
                yield _sse("queued", {"mailboxItemId": item.id, "sessionId": session_id})
                streamed = False
                async for kind, value in _watch(item.id, channel, timeout):
                    if kind == "delta":
                        streamed = True
                        yield _sse("delta", value)
                        continue
                    answer = _answer(value, item.id, session_id)
                    if answer.get("mergedInto"):  # the reply streamed under the message it joined
                        yield _sse("delta", {"text": MERGED_NOTE})
                    elif not streamed and answer["reply"]:  # a provider that does not stream
                        for chunk in word_chunks(answer["reply"]):
                            yield _sse("delta", {"text": chunk})
                    yield _sse("done", answer)
            finally:
                await release()

        response = StreamingHttpResponse(events(), content_type=SSE)
        response["Cache-Control"] = "no-cache"
        response["X-Accel-Buffering"] = "no"  # a proxy must pass each event on at once
        return response
    try:
        reply = None
        async for kind, value in _watch(item.id, channel, timeout):
            if kind == "reply":
                reply = value
    finally:
        await release()
    data = _answer(reply, item.id, session_id)
    return JsonResponse(data, status=200 if data["reply"] is not None else 202)
