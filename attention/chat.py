"""``POST /api/agents/{id}/chat``: enqueue a human_chat and wait for the reply in an async
view, woken through the channel layer (a one-second re-check of the database is only
the fallback). No worker or thread is held while waiting."""

from __future__ import annotations

import asyncio
import json
import time

from asgiref.sync import sync_to_async
from channels.layers import get_channel_layer
from django.conf import settings
from django.core.exceptions import RequestDataTooBig
from django.http import Http404, JsonResponse, StreamingHttpResponse
from rest_framework.exceptions import APIException

from mailbox import services as mailbox
from mailbox.api import sender_metadata
from mailbox.registry import MailboxType
from markus.agents.auth import Caller, access_agent, authenticate_plain_request
from markus.agents.models import Agent, ChatSession

from .replies import chat_group, chat_reply_for


def _authenticate(request, agent_id: str):
    try:
        caller = Caller(*authenticate_plain_request(request))
    except APIException as exc:
        return None, JsonResponse({"detail": str(exc.detail)}, status=exc.status_code)
    try:
        agent = access_agent(caller, agent_id)
    except Http404:
        return None, JsonResponse({"detail": "No such agent."}, status=404)
    return (caller, agent), None


def _enqueue(drf, agent, text: str, session_id: str | None):
    metadata = sender_metadata(drf, {"sessionId": session_id} if session_id else {})
    return mailbox.mailbox_enqueue(
        agent_id=agent.id,
        source_type=MailboxType.HUMAN_CHAT,
        payload={"summary": text[:120], "content": text},
        metadata=metadata,
    )


def _parse(request) -> tuple[dict | None, JsonResponse | None]:
    try:
        raw = request.body
    except RequestDataTooBig:
        return None, JsonResponse({"detail": "Request body is too large."}, status=413)
    try:
        body = json.loads(raw or b"{}")
    except (json.JSONDecodeError, UnicodeDecodeError):
        return None, JsonResponse({"detail": "body must be valid JSON"}, status=400)
    if not isinstance(body, dict):
        return None, JsonResponse({"detail": "body must be a JSON object"}, status=400)
    text = body.get("text")
    if not isinstance(text, str) or not text.strip():
        return None, JsonResponse({"detail": "text is required and must be a non-empty string"}, status=400)
    sid = body.get("sessionId")
    if sid is not None and not isinstance(sid, str):
        return None, JsonResponse({"detail": "sessionId must be a string"}, status=400)
    return body, None


async def _wait_reply(agent_id: str, item_id: str, channel: str, timeout: float) -> dict | None:
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


async def chat_view(request, agent_id: str):
    if request.method != "POST":
        return JsonResponse({"detail": f'Method "{request.method}" not allowed.'}, status=405)
    ok, error = await sync_to_async(_authenticate)(request, agent_id)
    if error is not None:
        return error
    drf, agent = ok
    body, error = _parse(request)
    if error is not None:
        return error
    if agent.kind != Agent.Kind.INTERNAL:
        return JsonResponse({"detail": "this agent is external: reach it over the AgentBus"}, status=409)
    if agent.status != Agent.RunStatus.RUNNING:
        return JsonResponse({"detail": f"this agent is {agent.status}; resume or start it to chat"}, status=409)
    sid = body.get("sessionId")
    if sid and not await sync_to_async(ChatSession.objects.filter(id=sid, agent=agent).exists)():
        return JsonResponse({"detail": "No such chat session."}, status=404)
    layer = get_channel_layer()
    channel = await layer.new_channel()
    await layer.group_add(chat_group(agent.id), channel)
    timeout = float(settings.MARKUS["CHAT_TIMEOUT_S"])
    item = await sync_to_async(_enqueue)(drf, agent, body["text"], sid)

    async def finish() -> dict:
        try:
            reply = await _wait_reply(agent.id, item.id, channel, timeout)
        finally:
            await layer.group_discard(chat_group(agent.id), channel)
        if reply is None:
            return {"reply": None, "mailboxItemId": item.id, "sessionId": sid, "pending": True}
        return {"reply": reply["reply"], "mailboxItemId": item.id, "sessionId": reply["sessionId"] or sid}

    if "text/event-stream" in request.headers.get("Accept", ""):

        async def events():
            yield f"event: queued\ndata: {json.dumps({'mailboxItemId': item.id})}\n\n"
            data = await finish()
            yield f"event: {'reply' if data['reply'] is not None else 'pending'}\ndata: {json.dumps(data)}\n\n"
            yield "event: done\ndata: {}\n\n"

        return StreamingHttpResponse(events(), content_type="text/event-stream")
    data = await finish()
    return JsonResponse(data, status=200 if data["reply"] is not None else 202)
