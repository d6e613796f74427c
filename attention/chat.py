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

The chat's rules (who sees which session, the marks a session puts on its item, the
reply that answered an item) are ``markus.agents.chat``'s; this module is the view."""

from __future__ import annotations

import asyncio
import json
import re
import time
from collections.abc import AsyncIterator, Awaitable, Callable
from typing import Any

from asgiref.sync import sync_to_async
from channels.layers import get_channel_layer
from django.conf import settings
from django.core.exceptions import PermissionDenied
from django.http import Http404, HttpRequest, JsonResponse, StreamingHttpResponse
from rest_framework.exceptions import APIException

from agentbus.async_views import authenticate
from mailbox import idempotency
from mailbox import services as mailbox
from mailbox.api import sender_metadata
from mailbox.models import MailboxItem
from mailbox.registry import MailboxType
from markus.agents import permissions
from markus.agents.auth import Caller, acting_agent, waiter_for
from markus.agents.chat import chat_reply_for, notify_context, session_marks, visible_sessions
from markus.agents.chat_stream import KEEP, KEEP_S, Kept, Piece, deltas_after
from markus.agents.models import Agent, ChatSession
from markus.agents.services import main_session
from markus.core.api import error, error_response, first_error, unknown_fields
from markus.core.channel_layer import event_of
from markus.core.db import read_while_waiting
from markus.core.errors import MarkusError
from markus.core.events import agent_group
from markus.core.input import json_body
from markus.core.limits import CHAT_TEXT_MAX_CHARS
from markus.core.waits import WAITS, TooManyWaits, parks
from markus.llm.base import word_chunks

from .replies import DELTA_EVENT, chat_group
from .serializers import ChatIn

SSE = "text/event-stream"
_JSON_TYPES = frozenset({"application/json", "application/*", "*/*"})
WORDS_PER_DELTA = 3  # a reply that came whole is streamed in pieces of this many words


def _error(detail: str, status: int, code: str) -> JsonResponse:
    return error(detail, status, code)


# ---------------------------------------------------------------------------- chat


def _authenticate(
    request: HttpRequest, agent_id: str, operation: str = "agents_chat"
) -> tuple[Caller, Agent] | JsonResponse:
    """The caller and the agent, or the error response."""
    try:
        # As a DRF view: agent bearer, user token, or the session with its CSRF check.
        caller = Caller(*authenticate(request))
    except (APIException, MarkusError) as exc:  # 401 / 403; 400 or 413 for the body
        return error_response(exc)
    try:
        agent = permissions.require(caller, operation, agent_id)
    except Http404:
        return _error("No such agent.", 404, "not_found")
    except PermissionDenied as exc:
        return error_response(exc)
    return caller, agent


def _enqueue(
    caller: Caller,
    agent: Agent,
    text: str,
    session_id: str | None,
    keyed: idempotency.Keyed | None = None,
    earlier: MailboxItem | None = None,
) -> tuple[MailboxItem, str, bool]:
    """The human_chat item, the session it is said in, and whether a send with the key
    stored it before (``earlier``: the item the view found by it; nothing is stored). A
    reply to a notification about a task or a requirement carries their ids (``taskId``/
    ``requirementId`` in the payload, ``notifyContext`` in the metadata)."""
    target = session_id or main_session(agent.id).id
    if earlier is not None:
        return earlier, target, True
    payload: dict[str, Any] = {"summary": text[:120], "content": text}
    extra: dict[str, Any] = {"sessionId": session_id} if session_id else {}
    context = notify_context(target)
    if context is not None:
        extra["notifyContext"] = context
        payload |= {k: v for k, v in (("taskId", context["taskId"]), ("requirementId", context["requirementId"])) if v}

    def store() -> MailboxItem:
        session = ChatSession.objects.filter(id=target).first() if session_id else None
        return mailbox.mailbox_enqueue(
            agent_id=agent.id,
            source_type=MailboxType.HUMAN_CHAT,
            payload=payload,
            metadata=sender_metadata(caller, extra),
            marks=session_marks(session),
        )

    item, replayed = idempotency.store_once(agent.id, keyed, store, looked=True)
    return item, target, replayed


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


def _is_for(event: dict[str, Any], item_id: str) -> bool:
    """Is the delta the reply to this item? Its first id is the item the turn works on;
    the others were merged into it, and their streams do not repeat its reply."""
    ids = event.get("mailboxItemIds") or [event.get("mailboxItemId")]
    return bool(ids) and ids[0] == item_id


# What the stream of a message merged into another says instead of the reply (which
# streams under the message that led the merge, and is in its ``done`` all the same).
MERGED_NOTE = "↳ merged into your earlier message: the reply there answers it too."


def _reply_of(event: dict[str, Any], item_id: str) -> dict[str, Any] | None:
    """The reply a ``chat:reply`` event carries, when it answers this item (as
    ``chat_reply_for`` would find it: ``mergedInto`` the item that led the reply)."""
    ids = event.get("mailboxItemIds")
    if not isinstance(ids, list) or item_id not in ids or not isinstance(event.get("reply"), str):
        return None
    reply = {"reply": event["reply"], "sessionId": event.get("sessionId"), "mailboxItemId": item_id}
    return reply | ({"mergedInto": ids[0]} if ids[0] != item_id else {})


def _piece(p: Piece) -> tuple[str, Any, int | None]:
    return "delta", {"text": p.text, "run": p.run}, p.seq


async def _follow(
    item_id: str, channel: str, timeout: float, after: int = 0, *, pieces: bool = True
) -> AsyncIterator[tuple[str, Any, int | None]]:
    """``("delta", {text, run}, seq)`` for each piece of the item's reply after the
    ``seq`` ``after`` (the kept ones first, ``markus.agents.chat_stream``, then the live
    ``agent:delta`` events: a ``seq`` already sent is skipped, a gap filled from the kept
    ones; ``run``: the activity that wrote it, a run after Pause and Resume starts the
    reply over), then one ``("reply", reply or None, n)``: the reply (from the
    ``chat:reply`` event, or stored: ``chat_reply_for``) with ``n`` the last ``seq``
    written for it, or None when none came in time with ``n`` the last ``seq`` sent.
    The database is read at the start, on a ``chat:reply`` for another item, and once a
    second while nothing arrives (the fallback), never per delta. Without ``pieces`` (a
    waiter for the plain answer) the kept pieces are not read."""
    layer = get_channel_layer()
    deadline = time.monotonic() + timeout
    sent = after

    # Reads once the message is stored: the database down (read as "nothing yet") does
    # not end the wait; it ends as pending, which the person may resume.
    async def missed(item_id: str, after: int) -> Kept:
        if not pieces:
            return Kept([], 0, 1)
        return await sync_to_async(read_while_waiting)(Kept([], after, after + 1), deltas_after, item_id, after)

    if after:
        for p in (await missed(item_id, sent)).pieces:
            sent = p.seq
            yield _piece(p)
    check = True
    while True:
        reply = await sync_to_async(read_while_waiting)(None, chat_reply_for, item_id) if check else None
        if reply is not None:
            kept = await missed(item_id, sent)  # pieces the live events have not brought
            for p in kept.pieces:
                yield _piece(p)
            yield "reply", reply, kept.last
            return
        remaining = deadline - time.monotonic()
        if remaining <= 0:
            yield "reply", None, sent
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
        kind, text, seq = event.get("type"), event.get("text"), event.get("seq")
        if kind == DELTA_EVENT:
            check = False
            if not (_is_for(event, item_id) and isinstance(text, str) and text):
                continue
            if not isinstance(seq, int) or isinstance(seq, bool):  # a piece nobody kept
                yield "delta", {"text": text, "run": event.get("activityId")}, None
                continue
            if seq > sent + 1:  # pieces this channel did not bring: the kept ones
                for p in (await missed(item_id, sent)).pieces:
                    sent = p.seq
                    yield _piece(p)
            if seq > sent:
                sent = seq
                yield "delta", {"text": text, "run": event.get("activityId")}, seq
        elif kind == "chat:reply" and (answered := _reply_of(event, item_id)) is not None:
            kept = await missed(item_id, sent)
            for p in kept.pieces:
                yield _piece(p)
            yield "reply", answered, kept.last
            return
        else:
            check = kind == "chat:reply" or not event


async def _watch(item_id: str, channel: str, timeout: float) -> AsyncIterator[tuple[str, Any]]:
    """``_follow`` from the start, without the ``seq``s: ``("delta", {text, run})``s,
    then one ``("reply", reply or None)``."""
    async for kind, value, _ in _follow(item_id, channel, timeout):
        yield kind, value


def _sse(event: str, data: dict[str, Any], event_id: str | None = None) -> str:
    head = f"id: {event_id}\n" if event_id is not None else ""
    return f"{head}event: {event}\ndata: {json.dumps(data, default=str)}\n\n"


def _answer(reply: dict[str, Any] | None, item_id: str, session_id: str) -> dict[str, Any]:
    if reply is None:
        return {"reply": None, "mailboxItemId": item_id, "sessionId": session_id, "pending": True}
    answer = {"reply": reply["reply"], "mailboxItemId": item_id, "sessionId": reply["sessionId"] or session_id}
    if reply.get("mergedInto"):
        answer["mergedInto"] = reply["mergedInto"]  # answered by that item's reply
    return answer


async def _stream(
    item_id: str, session_id: str, channel: str, timeout: float, after: int, release: Callable[[], Awaitable[None]]
) -> AsyncIterator[str]:
    """The event stream of the item's reply after the event ``<item_id>:<after>``: each
    event's ``id:`` is ``<item_id>:<n>``, ``n`` 0 for ``queued``, the piece's ``seq`` for
    a ``delta``, and past the last piece for what the stream makes itself (a reply that
    came whole in word deltas, the merged note, ``done``), so a resumed stream sends
    each of them once too. A ``done`` still pending keeps the id of the last piece sent
    (a resume after it goes on waiting)."""
    try:
        if after == 0:
            yield _sse("queued", {"mailboxItemId": item_id, "sessionId": session_id}, f"{item_id}:0")
        streamed = False
        async for kind, value, n in _follow(item_id, channel, timeout, after):
            if kind == "delta":
                streamed = True
                yield _sse("delta", value, None if n is None else f"{item_id}:{n}")
                continue
            answer = _answer(value, item_id, session_id)
            if value is None:
                yield _sse("done", answer, f"{item_id}:{n}")
                return
            tail: list[tuple[str, dict[str, Any]]] = []
            if answer.get("mergedInto"):  # the reply streamed under the message it joined
                tail.append(("delta", {"text": MERGED_NOTE}))
            elif not streamed and not n and answer["reply"]:  # a provider that does not stream
                tail += [("delta", {"text": chunk}) for chunk in word_chunks(answer["reply"], WORDS_PER_DELTA)]
            tail.append(("done", answer))
            for number, (event, data) in enumerate(tail, start=(n or 0) + 1):
                if number > after:
                    yield _sse(event, data, f"{item_id}:{number}")
    finally:
        await release()


def _streaming(events: AsyncIterator[str]) -> StreamingHttpResponse:
    response = StreamingHttpResponse(events, content_type=SSE)
    response["Cache-Control"] = "no-cache"
    response["X-Accel-Buffering"] = "no"  # a proxy must pass each event on at once
    return response


async def _listen(agent_id: str, stream: bool) -> tuple[str, Callable[[], Awaitable[None]]]:
    """A channel in the agent's chat group (and its agent group, for a stream's deltas),
    and the function that leaves them."""
    layer = get_channel_layer()
    channel = await layer.new_channel()
    groups = [chat_group(agent_id), *([agent_group(agent_id)] if stream else [])]
    for group in groups:
        await layer.group_add(group, channel)

    async def leave() -> None:
        for group in groups:
            await layer.group_discard(group, channel)

    return channel, leave


@parks
async def chat_view(request: HttpRequest, agent_id: str) -> JsonResponse | StreamingHttpResponse:
    if request.method == "GET":
        return await _resume(request, agent_id)
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
    try:  # sent again with its key: answered as the first send, whatever the agent does now
        keyed = idempotency.keyed(
            request.headers, sender_metadata(caller, {}), {"door": "chat", "text": text, "sid": sid}
        )
        earlier = await sync_to_async(idempotency.stored)(agent.id, keyed) if keyed is not None else None
    except MarkusError as exc:  # a malformed key (400), the key of another request (422)
        return error_response(exc)
    if earlier is None and agent.status != Agent.RunStatus.RUNNING:
        return _error(f"this agent is {agent.status}; resume or start it to chat", 409, "conflict")
    if (
        earlier is None
        and sid is not None
        and not await sync_to_async(visible_sessions(caller, agent).filter(id=sid).exists)()
    ):
        return _error(f"sessionId: no chat session {sid[:80]!r} of this agent", 400, "invalid")
    waiter = await sync_to_async(waiter_for)(caller)
    try:  # a person's chat may take the chat reserve; an agent token's chat is one of its bus waits
        slot = WAITS.claim(waiter, chat=acting_agent(caller) is None)
    except TooManyWaits as exc:
        return error_response(exc)
    channel, leave = await _listen(agent.id, bool(stream))
    timeout = float(settings.MARKUS["CHAT_TIMEOUT_S"])
    try:
        item, session_id, replayed = await sync_to_async(_enqueue)(caller, agent, text, sid, keyed, earlier)
    except BaseException as exc:
        slot.release()
        await leave()
        if isinstance(exc, MarkusError):  # a racing send with the key stored another request
            return error_response(exc)
        raise

    async def release() -> None:
        slot.release()
        await leave()

    answer: JsonResponse | StreamingHttpResponse
    if stream:
        answer = _streaming(_stream(item.id, session_id, channel, timeout, 0, release))
    else:
        answer = await _wait(item.id, session_id, channel, timeout, release)
    if replayed:
        answer[idempotency.REPLAYED] = "true"
    return answer


async def _wait(
    item_id: str, session_id: str, channel: str, timeout: float, release: Callable[[], Awaitable[None]]
) -> JsonResponse:
    """The plain answer: the reply (200), or ``pending`` (202) when none came in time."""
    try:
        reply = None
        async for kind, value, _ in _follow(item_id, channel, timeout, pieces=False):
            if kind == "reply":
                reply = value
    finally:
        await release()
    data = _answer(reply, item_id, session_id)
    return JsonResponse(data, status=200 if data["reply"] is not None else 202)


# ---------------------------------------------------------------------------- resume

LAST_EVENT_ID = re.compile(r"(?P<item>[A-Za-z0-9_-]{1,64}):(?P<n>[0-9]{1,9})")


def _last_event_id(request: HttpRequest) -> tuple[str, int] | JsonResponse:
    """The item and the ``n`` of ``Last-Event-ID`` (or ``?lastEventId=``, for a client
    that cannot set the header), or the 400."""
    raw = (request.headers.get("Last-Event-ID") or request.GET.get("lastEventId") or "").strip()
    found = LAST_EVENT_ID.fullmatch(raw)
    if found is None:
        return _error(
            "Last-Event-ID must be the id of an event of a chat's stream (<mailboxItemId>:<n>): "
            "GET resumes that stream after it",
            400,
            "invalid",
        )
    return found["item"], int(found["n"])


def _own_chat(caller: Caller, agent: Agent, item_id: str) -> tuple[str, str] | None:
    """The item and its session, when the item is a chat the caller said to the agent."""
    item = MailboxItem.objects.filter(id=item_id, agent=agent, source_type=MailboxType.HUMAN_CHAT).first()
    if item is None or (item.metadata or {}).get("senderId") != sender_metadata(caller, {})["senderId"]:
        return None
    return item.id, (item.metadata or {}).get("sessionId") or main_session(agent.id).id


async def _resume(request: HttpRequest, agent_id: str) -> JsonResponse | StreamingHttpResponse:
    """``GET /api/agents/{id}/chat`` with ``Last-Event-ID: <mailboxItemId>:<n>``: the
    stream of that chat's reply after event ``n`` (the pieces missed, then live, then
    ``done``), or with ``Accept: application/json`` its plain answer when it comes. Only
    who said the chat resumes it (404 otherwise); past the kept pieces, 409."""
    auth: tuple[Caller, Agent] | JsonResponse = await sync_to_async(_authenticate)(
        request, agent_id, "agents_chat_resume"
    )
    if isinstance(auth, JsonResponse):
        return auth
    caller, agent = auth
    stream = wants_stream(request.headers.get("Accept", SSE))
    if stream is None:
        return _error("Accept must allow application/json or text/event-stream", 406, "not_acceptable")
    last = _last_event_id(request)
    if isinstance(last, JsonResponse):
        return last
    item_id, after = last
    own = await sync_to_async(_own_chat)(caller, agent, item_id)
    if own is None:
        return _error("No such chat of yours to resume.", 404, "not_found")
    item_id, session_id = own
    if stream:
        kept = await sync_to_async(deltas_after)(item_id, after)
        if after + 1 < kept.first:
            return error(
                f"the pieces after {after} are no longer kept (a reply keeps its last {KEEP} pieces for "
                f"{KEEP_S} s): read the whole reply with Accept: application/json, or the session's messages",
                409,
                "conflict",
                alternatives=["Accept: application/json", f"GET /api/agents/{agent.id}/sessions/{session_id}/messages"],
            )
    waiter = await sync_to_async(waiter_for)(caller)
    try:
        slot = WAITS.claim(waiter, chat=acting_agent(caller) is None)
    except TooManyWaits as exc:
        return error_response(exc)
    channel, leave = await _listen(agent.id, bool(stream))

    async def release() -> None:
        slot.release()
        await leave()

    timeout = float(settings.MARKUS["CHAT_TIMEOUT_S"])
    if stream:
        return _streaming(_stream(item_id, session_id, channel, timeout, after, release))
    return await _wait(item_id, session_id, channel, timeout, release)
