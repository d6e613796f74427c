"""``POST /api/agents/{id}/chat``: enqueue a human_chat and wait for the reply in an async
view, woken through the channel layer (a one-second re-check of the database is only
the fallback). No worker or thread is held while waiting."""

from __future__ import annotations

import asyncio
import json
import time
from collections.abc import AsyncIterator
from typing import Any

from asgiref.sync import sync_to_async
from channels.layers import get_channel_layer
from django.conf import settings
from django.http import Http404, HttpRequest, JsonResponse, StreamingHttpResponse
from rest_framework.exceptions import APIException

from mailbox import services as mailbox
from mailbox.api import sender_metadata
from mailbox.models import MailboxItem
from mailbox.registry import MailboxType
from markus.agents.auth import Caller, access_agent, authenticate_plain_request
from markus.agents.models import Agent, ChatSession
from markus.core.api import first_error
from markus.core.errors import MarkusError
from markus.core.input import json_body
from markus.core.limits import BodyTooLarge

from .replies import chat_group, chat_reply_for
from .serializers import ChatIn


def _authenticate(request: HttpRequest, agent_id: str) -> tuple[Caller, Agent] | JsonResponse:
    """The caller and the agent, or the error response."""
    try:
        caller = Caller(*authenticate_plain_request(request))
    except APIException as exc:
        return JsonResponse({"detail": str(exc.detail)}, status=exc.status_code)
    try:
        agent = access_agent(caller, agent_id)
    except Http404:
        return JsonResponse({"detail": "No such agent."}, status=404)
    return caller, agent


def _enqueue(drf: Caller, agent: Agent, text: str, session_id: str | None) -> MailboxItem:
    metadata = sender_metadata(drf, {"sessionId": session_id} if session_id else {})
    return mailbox.mailbox_enqueue(
        agent_id=agent.id,
        source_type=MailboxType.HUMAN_CHAT,
        payload={"summary": text[:120], "content": text},
        metadata=metadata,
    )


def _parse(request: HttpRequest) -> tuple[str, str | None] | JsonResponse:
    """The text and the session id of the body (validated by ChatIn), or the error response."""
    try:
        body = json_body(request)  # NUL bytes and lone surrogates refused like the API's parser
    except BodyTooLarge as exc:
        return JsonResponse(exc.body, status=exc.status_code)
    except MarkusError as exc:
        return JsonResponse({"detail": str(exc)}, status=exc.status_code)
    if not isinstance(body, dict):
        return JsonResponse({"detail": "body must be a JSON object"}, status=400)
    serializer = ChatIn(data=body)
    if not serializer.is_valid():
        return JsonResponse({"detail": first_error(serializer.errors)}, status=400)
    data: dict[str, Any] = serializer.validated_data
    return data["text"], data["sessionId"]


async def _wait_reply(agent_id: str, item_id: str, channel: str, timeout: float) -> dict[str, Any] | None:
    layer = get_channel_layer()
    deadline = time.monotonic() + timeout
    while True:
        reply = await sync_to_async(chat_reply_for)(item_id)
        if reply is not None:
            return reply
        remaining = deadline - time.monotonic()
        if remaining <= 0:
            return None
        try:
            await asyncio.wait_for(layer.receive(channel), timeout=min(1.0, remaining))
        except TimeoutError:
            pass


async def chat_view(request: HttpRequest, agent_id: str) -> JsonResponse | StreamingHttpResponse:
    if request.method != "POST":
        return JsonResponse({"detail": f'Method "{request.method}" not allowed.'}, status=405)
    auth: tuple[Caller, Agent] | JsonResponse = await sync_to_async(_authenticate)(request, agent_id)
    if isinstance(auth, JsonResponse):
        return auth
    drf, agent = auth
    parsed = _parse(request)
    if isinstance(parsed, JsonResponse):
        return parsed
    text, sid = parsed
    if agent.kind != Agent.Kind.INTERNAL:
        return JsonResponse({"detail": "this agent is external: reach it over the AgentBus"}, status=409)
    if agent.status != Agent.RunStatus.RUNNING:
        return JsonResponse({"detail": f"this agent is {agent.status}; resume or start it to chat"}, status=409)
    if sid and not await sync_to_async(ChatSession.objects.filter(id=sid, agent=agent).exists)():
        return JsonResponse({"detail": "No such chat session."}, status=404)
    layer = get_channel_layer()
    channel = await layer.new_channel()
    await layer.group_add(chat_group(agent.id), channel)
    timeout = float(settings.MARKUS["CHAT_TIMEOUT_S"])
    item: MailboxItem = await sync_to_async(_enqueue)(drf, agent, text, sid)

    async def finish() -> dict[str, Any]:
        try:
            reply = await _wait_reply(agent.id, item.id, channel, timeout)
        finally:
            await layer.group_discard(chat_group(agent.id), channel)
        if reply is None:
            return {"reply": None, "mailboxItemId": item.id, "sessionId": sid, "pending": True}
        return {"reply": reply["reply"], "mailboxItemId": item.id, "sessionId": reply["sessionId"] or sid}

    if "text/event-stream" in request.headers.get("Accept", ""):

        async def events() -> AsyncIterator[str]:
            yield f"event: queued\ndata: {json.dumps({'mailboxItemId': item.id})}\n\n"
            data = await finish()
            yield f"event: {'reply' if data['reply'] is not None else 'pending'}\ndata: {json.dumps(data)}\n\n"
            yield "event: done\ndata: {}\n\n"

        return StreamingHttpResponse(events(), content_type="text/event-stream")
    data = await finish()
    return JsonResponse(data, status=200 if data["reply"] is not None else 202)
