"""The blocking endpoints as plain async Django views, so an idle waiter costs no
worker and no thread: GET ``/api/agents/{id}/agentbus/inbox`` and POST
``/api/agentbus/request``. Both ``parks`` (markus.core.waits: the server runs them
without a thread of their own) and take a wait slot: past a cap (per caller, per
person, per server, or the chat reserve) a wait answers 429 with ``Retry-After`` and
starts nothing. An inbox read with ``timeout_seconds=0`` does not wait and takes none.

DRF's APIView is synchronous, so these authenticate themselves the same way the API
does: ``Authorization: Bearer <agent token>``, ``Authorization: Token <user token>``,
or the session (with the CSRF check DRF applies to session-authenticated writes: a
write without the ``X-CSRFToken`` header answers 403). Errors answer in the API's
shape, ``{"detail", "code"}``.
"""

from __future__ import annotations

from typing import Any

from asgiref.sync import sync_to_async
from django.contrib.auth.models import AnonymousUser, User
from django.core.serializers.json import DjangoJSONEncoder
from django.http import Http404, HttpRequest, JsonResponse
from django.views.decorators.csrf import csrf_exempt
from rest_framework.exceptions import APIException, NotAuthenticated

from mailbox import idempotency
from markus.agents.auth import Caller, acting_agent, waiter_for
from markus.agents.models import Agent
from markus.core.api import api_request, error, error_response, refuse_unknown_fields
from markus.core.errors import MarkusError
from markus.core.input import json_body
from markus.core.waits import WAITS, Waiter, parks

from . import access, selectors
from .waiting import MAX_WAIT_SECONDS, answer, deadline_after, inbox_park, inbox_start, stream_request
from .wakeup import InboxWaiter


class _Refusal(Exception):
    def __init__(self, status: int, detail: str, code: str = "invalid") -> None:
        super().__init__(detail)
        self.status = status
        self.detail = detail
        self.code = code

    def response(self) -> JsonResponse:
        return error(self.detail, self.status, self.code)


def _json(data: dict[str, Any], status: int = 200) -> JsonResponse:
    return JsonResponse(data, status=status, encoder=DjangoJSONEncoder)


def authenticate(request: HttpRequest) -> tuple[User | AnonymousUser, Agent | None]:
    """The API's own authenticators (agent bearer, user token, session with CSRF), run
    exactly as a DRF view runs them (``api_request``: with the API's parsers, which the
    CSRF check of a session needs). Raises APIException (401 / 403, 400 for a body the
    check cannot parse) or BodyTooLarge. Synchronous."""
    drf = api_request(request)
    user, agent = drf.user, acting_agent(drf)
    if agent is None and not (user and user.is_authenticated):
        raise NotAuthenticated()
    return user, agent


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


def _inbox_target(agent_id: str, user: User | AnonymousUser, agent: Agent | None) -> Agent:
    target = Agent.objects.select_related("team").filter(id=agent_id).first()
    if target is None or not access.may_read_inbox(agent=agent, user=user, target=target):
        raise _Refusal(404, "No such agent.", "not_found")
    return target


def _inbox_open(request: HttpRequest, agent_id: str) -> tuple[Waiter, dict[str, Any], int, float]:
    """Everything an inbox call does before it may park, in one thread hop: who calls,
    the inbox they may read, the parameters, the ack, the cursor and the first read
    (``waiting.inbox_start``). Raises _Refusal, APIException or MarkusError. The target
    is the requested id itself (the check refuses any other), so the wake-up a wait
    registers afterwards is for the inbox the caller was allowed."""
    user, agent = authenticate(request)
    target = _inbox_target(agent_id, user, agent)
    timeout = _number(request.GET.get("timeout_seconds"), "timeout_seconds", 30.0, 0, MAX_WAIT_SECONDS)
    limit = int(
        _number(request.GET.get("limit"), "limit", selectors.DEFAULT_LIMIT, 1, selectors.MAX_LIMIT, integer=True)
    )
    waiter = waiter_for(Caller(user, agent))
    first = inbox_start(
        agent_id=target.id,
        after_cursor=request.GET.get("after_cursor"),
        limit=limit,
        ack=agent is not None,
        actor=waiter.caller,
    )
    return waiter, first, limit, timeout


@csrf_exempt
@parks
async def inbox_view(request: HttpRequest, agent_id: str) -> JsonResponse:
    """GET ?after_cursor&timeout_seconds&limit → {messages, next_cursor, timed_out}.

    One thread hop (``_inbox_open``: who calls, whether they may read this inbox, the
    first read) answers a call that does not wait or finds messages at once. A call
    that must wait then takes its wait slot (429 past a cap), registers its wake-up
    (only now: a refused caller registers nothing) and reads once more from the first
    read's position (a second hop: what came between the two reads is not lost), then
    parks; none after a wake-up that carries the message (``waiting``)."""
    if request.method != "GET":
        return error(f'Method "{request.method}" not allowed.', 405, "method_not_allowed")
    try:
        waiter, first, limit, timeout = await sync_to_async(_inbox_open)(request, agent_id)
    except _Refusal as refusal:
        return refusal.response()
    except (APIException, MarkusError) as exc:
        return error_response(exc)
    deadline = deadline_after(timeout)
    if first["messages"] or timeout <= 0:
        return _json(answer(first))
    try:
        slot = WAITS.claim(waiter)
    except APIException as exc:  # TooManyWaits: 429
        return error_response(exc)
    with slot:
        async with InboxWaiter(agent_id) as inbox:  # before the read it waits from: never lost
            again = await sync_to_async(selectors.inbox_read_from)(agent_id, first["position"], limit=limit)
            return _json(answer(await inbox_park(inbox, again, deadline=deadline, limit=limit)))


# The fields of a request's body (``request_view``).
REQUEST_FIELDS = ("sender", "recipient", "payload", "topic", "timeoutSeconds")


def _request_parties(body: dict[str, Any], user: User | AnonymousUser, agent: Agent | None) -> tuple[Agent, Agent]:
    shim = Caller(user, agent)
    sender = access.access_acting_agent(shim, body.get("sender"))
    recipient = access.access_recipients(shim, [body.get("recipient")])[0]
    return sender, recipient


def _request_open(request: HttpRequest) -> tuple[dict[str, Any], float, Agent, Agent, Waiter, str | None]:
    """Who calls, the body, its parties, whose wait it is and the request's key: one
    thread hop."""
    user, agent = authenticate(request)
    key = idempotency.header_key(request.headers)  # 400 stating the rule, before anything is read
    body = json_body(request)  # 413 over the limit; 400 for bad JSON, NUL bytes, lone surrogates
    if not isinstance(body, dict):
        raise _Refusal(400, "body must be a JSON object")
    refuse_unknown_fields(body, REQUEST_FIELDS)
    if not isinstance(body.get("payload"), dict):
        raise _Refusal(400, "payload must be a JSON object")
    raw_timeout = body.get("timeoutSeconds", 30)
    if isinstance(raw_timeout, bool) or not isinstance(raw_timeout, (int, float)):
        raise _Refusal(400, "timeoutSeconds must be a number")
    timeout = _number(str(raw_timeout), "timeoutSeconds", 30.0, 0, MAX_WAIT_SECONDS)
    sender, recipient = _request_parties(body, user, agent)
    return body, timeout, sender, recipient, waiter_for(Caller(user, agent)), key


@csrf_exempt
@parks
async def request_view(request: HttpRequest) -> JsonResponse:
    """POST {sender, recipient, payload, topic?, timeoutSeconds?} → the request, the
    reply and ``timed_out``. Sent again with its ``Idempotency-Key``: the first
    request's, waited for again (``Idempotent-Replayed: true``)."""
    if request.method != "POST":
        return error(f'Method "{request.method}" not allowed.', 405, "method_not_allowed")
    try:
        body, timeout, sender, recipient, waiter, key = await sync_to_async(_request_open)(request)
        with WAITS.claim(waiter):  # TooManyWaits (429) before the stream is opened
            result = await stream_request(
                sender=sender,
                recipient=recipient,
                payload=body["payload"],
                topic=body.get("topic"),
                timeout=timeout,
                actor=waiter.caller,
                request_key=key,
            )
    except _Refusal as refusal:
        return refusal.response()
    except (APIException, MarkusError, Http404) as exc:  # BodyTooLarge (413) is a MarkusError
        return error_response(exc)
    response = _json({k: v for k, v in result.items() if k != "replayed"})
    if result["replayed"]:
        response[idempotency.REPLAYED] = "true"
    return response
