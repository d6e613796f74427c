"""The blocking endpoints as plain async Django views, so an idle waiter costs no
worker and no thread: GET ``/api/agents/{id}/agentbus/inbox`` and POST
``/api/agentbus/request``.

DRF's APIView is synchronous, so these authenticate themselves the same way the API
does: ``Authorization: Bearer <agent token>``, ``Authorization: Token <user token>``,
or the session (with the CSRF check DRF applies to session-authenticated writes).
"""
from __future__ import annotations

import json
from typing import Any

from asgiref.sync import sync_to_async
from django.contrib.auth.models import AnonymousUser
from django.core.serializers.json import DjangoJSONEncoder
from django.http import HttpRequest, JsonResponse
from django.middleware.csrf import CsrfViewMiddleware
from django.views.decorators.csrf import csrf_exempt
from rest_framework.authtoken.models import Token

from markus.agents.models import Agent, hash_token
from markus.errors import MarkusError

from . import access, selectors
from .waiting import MAX_WAIT_SECONDS, inbox_wait, stream_request


class _Refusal(Exception):
    def __init__(self, status: int, detail: str) -> None:
        super().__init__(detail)
        self.status = status
        self.detail = detail


def _json(data: dict[str, Any], status: int = 200) -> JsonResponse:
    return JsonResponse(data, status=status, encoder=DjangoJSONEncoder)


def _csrf_refusal(request: HttpRequest) -> str | None:
    check = CsrfViewMiddleware(lambda req: None)
    check.process_request(request)
    response = check.process_view(request, None, (), {})
    return None if response is None else "CSRF Failed"


async def _authenticate(request: HttpRequest) -> tuple[Any, Agent | None]:
    parts = request.headers.get("Authorization", "").split()
    scheme = parts[0].lower() if parts else ""
    if scheme in ("bearer", "token"):
        if len(parts) != 2:
            raise _Refusal(401, "Invalid authorization header.")
        if scheme == "bearer":
            agent = await Agent.objects.filter(token_hash=hash_token(parts[1])).afirst()
            if agent is None:
                raise _Refusal(401, "Invalid agent token.")
            return AnonymousUser(), agent
        token = await Token.objects.select_related("user").filter(key=parts[1]).afirst()
        if token is None or not token.user.is_active:
            raise _Refusal(401, "Invalid token.")
        return token.user, None
    user = await request.auser()
    if not user.is_authenticated:
        raise _Refusal(401, "Authentication credentials were not provided.")
    if request.method not in ("GET", "HEAD", "OPTIONS") and _csrf_refusal(request):
        raise _Refusal(403, "CSRF Failed: session authentication needs the CSRF token.")
    return user, None


def _number(raw: str | None, name: str, default: float, lo: float, hi: float, *, integer: bool = False) -> float:
    if raw in (None, ""):
        return default
    try:
        value = int(raw) if integer else float(raw)
    except ValueError:
        raise _Refusal(400, f"{name} must be a number") from None
    if not lo <= value <= hi:
        raise _Refusal(400, f"{name} must be between {lo:g} and {hi:g}")
    return value


class _ShimRequest:
    """Enough of a DRF request for ``access``: ``.user`` and ``.auth``."""

    def __init__(self, user, agent: Agent | None) -> None:
        self.user = user
        self.auth = agent


def _inbox_target(agent_id: str, user, agent: Agent | None) -> Agent:
    target = Agent.objects.select_related("team").filter(id=agent_id).first()
    if target is None or not access.may_read_inbox(agent=agent, user=user, target=target):
        raise _Refusal(404, "No such agent.")
    return target


@csrf_exempt
async def inbox_view(request: HttpRequest, agent_id: str) -> JsonResponse:
    """GET ?after_cursor&timeout_seconds&limit → {messages, next_cursor, timed_out}."""
    if request.method != "GET":
        return _json({"detail": f'Method "{request.method}" not allowed.'}, 405)
    try:
        user, agent = await _authenticate(request)
        target = await sync_to_async(_inbox_target)(agent_id, user, agent)
        timeout = _number(request.GET.get("timeout_seconds"), "timeout_seconds", 30.0, 0, MAX_WAIT_SECONDS)
        limit = int(_number(request.GET.get("limit"), "limit", selectors.DEFAULT_LIMIT, 1, selectors.MAX_LIMIT,
                            integer=True))
    except _Refusal as refusal:
        return _json({"detail": refusal.detail}, refusal.status)
    actor = f"agent:{agent.id}" if agent is not None else f"user:{user.pk}"
    result = await inbox_wait(
        agent_id=target.id, after_cursor=request.GET.get("after_cursor"), timeout=timeout, limit=limit,
        ack=agent is not None, actor=actor,
    )
    return _json(result)


def _request_parties(body: dict[str, Any], user, agent: Agent | None) -> tuple[Agent, Agent]:
    shim = _ShimRequest(user, agent)
    sender = access.access_acting_agent(shim, body.get("sender"))
    recipient = access.access_recipients(shim, [body.get("recipient")])[0]
    return sender, recipient


@csrf_exempt
async def request_view(request: HttpRequest) -> JsonResponse:
    """POST {sender, recipient, payload, topic?, timeoutSeconds?} → the request, the
    reply and ``timed_out``."""
    if request.method != "POST":
        return _json({"detail": f'Method "{request.method}" not allowed.'}, 405)
    try:
        user, agent = await _authenticate(request)
        try:
            body = json.loads(request.body or b"{}")
        except ValueError:
            raise _Refusal(400, "body must be JSON") from None
        if not isinstance(body, dict):
            raise _Refusal(400, "body must be a JSON object")
        if not isinstance(body.get("payload"), dict):
            raise _Refusal(400, "payload must be a JSON object")
        raw_timeout = body.get("timeoutSeconds", 30)
        if isinstance(raw_timeout, bool) or not isinstance(raw_timeout, (int, float)):
            raise _Refusal(400, "timeoutSeconds must be a number")
        timeout = _number(str(raw_timeout), "timeoutSeconds", 30.0, 0, MAX_WAIT_SECONDS)
        sender, recipient = await sync_to_async(_request_parties)(body, user, agent)
        actor = f"agent:{agent.id}" if agent is not None else f"user:{user.pk}"
        result = await stream_request(sender=sender, recipient=recipient, payload=body["payload"],
                                      topic=body.get("topic"), timeout=timeout, actor=actor)
    except _Refusal as refusal:
        return _json({"detail": refusal.detail}, refusal.status)
    except MarkusError as exc:
        return _json({"detail": str(exc)}, exc.status_code)
    return _json(result)
