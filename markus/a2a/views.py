"""The A2A door's views: the cards, and the JSON-RPC endpoint of each agent.

``rpc_view`` does what the SDK's JSON-RPC dispatcher does (which needs Starlette), with
the SDK's pieces: the JSON-RPC envelope check (``json-rpc``'s ``JSONRPC20Request``), the
method table and request types, the version rule, the error answers, and the
``RequestHandler`` (``handler.MailboxRequestHandler``). Who calls and which agent are
checked first, as at every door: no token 401, an agent the caller may not reach 404
like a missing one (``access``). A streaming method answers server-sent events, each
with ``id:`` its update's sequence; ``Last-Event-ID`` resumes after one.
"""

from __future__ import annotations

import asyncio
import contextlib
import json
from collections.abc import AsyncGenerator, AsyncIterator
from typing import Any

from a2a.auth.user import User as A2AUser
from a2a.server.context import ServerCallContext
from a2a.server.events.event_queue import Event
from a2a.server.jsonrpc_models import JSONParseError, JSONRPCError
from a2a.server.request_handlers.response_helpers import build_error_response
from a2a.server.routes.common import serialize_list_tasks_response
from a2a.server.routes.jsonrpc_dispatcher import JsonRpcDispatcher
from a2a.types import SendMessageResponse
from a2a.utils.constants import PROTOCOL_VERSION_1_0
from a2a.utils.errors import A2AError, InvalidParamsError, InvalidRequestError, MethodNotFoundError
from a2a.utils.proto_utils import to_stream_response
from a2a.utils.version_validator import validate_version
from asgiref.sync import sync_to_async
from django.core.exceptions import PermissionDenied
from django.http import Http404, HttpRequest, JsonResponse, StreamingHttpResponse
from django.views.decorators.csrf import csrf_exempt
from google.protobuf.json_format import MessageToDict, ParseDict  # type: ignore[import-untyped]
from jsonrpc.jsonrpc2 import JSONRPC20Request, JSONRPC20Response  # type: ignore[import-untyped]
from rest_framework.exceptions import APIException
from rest_framework.request import Request
from rest_framework.response import Response
from rest_framework.views import APIView

from agentbus.pace import Paced
from markus.agents.auth import Caller, acting_agent, caller_ref, waiter_for
from markus.agents.models import Agent
from markus.core.api import error, error_response
from markus.core.errors import MarkusError
from markus.core.input import json_body
from markus.core.waits import WAITS, parks

from . import cards
from .access import access_agent, reachable_agents
from .auth import AUTHENTICATION, authenticate
from .handler import MailboxRequestHandler
from .progress import sequence_of

SSE = "text/event-stream"
METHODS: dict[str, type] = JsonRpcDispatcher.METHOD_TO_MODEL
STREAMING = frozenset({"SendStreamingMessage", "SubscribeToTask"})
HANDLER = MailboxRequestHandler()
PING_SECONDS = 15.0


def _caller(request: Request) -> Caller:
    return Caller(request.user, acting_agent(request))


def _base(request: Request | HttpRequest) -> str:
    return request.build_absolute_uri("/")


# ------------------------------------------------------------------------------ cards


class AgentCardView(APIView):
    authentication_classes = AUTHENTICATION
    schema = None  # the A2A door is not the REST API (README: "A2A: agent cards and tasks")

    def get(self, request: Request, agent_id: str) -> Response:
        agent = access_agent(_caller(request), "a2a:card", agent_id)
        return Response(cards.agent_card_json(agent, _base(request)))


class DirectoryView(APIView):
    authentication_classes = AUTHENTICATION
    schema = None

    def get(self, request: Request) -> Response:
        running = reachable_agents(_caller(request)).filter(status=Agent.RunStatus.RUNNING)
        agents = running.select_related("team").order_by("name", "id")
        return Response(cards.directory_json(list(agents), _base(request)))


# --------------------------------------------------------------------------- JSON-RPC


class _A2ACaller(A2AUser):
    """The caller, as the SDK's call context names it (``agent:<id>``, ``user:<pk>``)."""

    def __init__(self, caller: Caller) -> None:
        self._name = caller_ref(caller)

    @property
    def is_authenticated(self) -> bool:
        return True

    @property
    def user_name(self) -> str:
        return self._name


def _rpc_error(request_id: str | int | None, exc: A2AError | JSONRPCError) -> JsonResponse:
    return JsonResponse(build_error_response(request_id, exc))


def _parties(request: HttpRequest, agent_id: str) -> tuple[Caller, Agent]:
    caller = authenticate(request)
    return caller, access_agent(caller, "a2a:rpc", agent_id)


async def _door(request: HttpRequest, agent_id: str) -> tuple[Caller, Agent] | JsonResponse:
    try:
        return await sync_to_async(_parties)(request, agent_id)
    except Http404:
        return error("No such agent.", 404, "not_found")
    except (APIException, MarkusError, PermissionDenied) as exc:  # 401 / 403; 413 for the body
        response = error_response(exc)
        if response.status_code == 401:
            response["WWW-Authenticate"] = "Bearer"
        return response


def _request_id(body: Any) -> str | int | None:
    rid = body.get("id") if isinstance(body, dict) else None
    return rid if isinstance(rid, str | int) and not isinstance(rid, bool) else None


def _envelope(body: Any) -> tuple[str, Any]:
    """The method and the parameters of a JSON-RPC 2.0 request, checked as the SDK's
    dispatcher checks them (-32600, -32601, -32602)."""
    try:
        base = JSONRPC20Request.from_data(body)
    except Exception as exc:
        raise InvalidRequestError(data={"parseError": str(exc)}) from None
    if not isinstance(base, JSONRPC20Request) or body.get("jsonrpc") != "2.0" or isinstance(base._id, bool):
        raise InvalidRequestError(message="Invalid request: one JSON-RPC 2.0 request (jsonrpc '2.0', a method)")
    if base.method not in METHODS:
        raise MethodNotFoundError
    try:
        params = ParseDict(body.get("params", {}), METHODS[base.method](), ignore_unknown_fields=True)
    except Exception as exc:
        raise InvalidParamsError(data={"parseError": str(exc)}) from None
    return str(base.method), params


def _after(request: HttpRequest) -> int | None:
    raw = request.headers.get("Last-Event-ID")
    if raw is None or raw.strip() == "":
        return None
    raw = raw.strip()
    if not (raw.isascii() and raw.isdigit()) or len(raw) > 9:
        raise InvalidParamsError(message="Last-Event-ID must be the id (a sequence number) of an event received")
    return int(raw)


@validate_version(PROTOCOL_VERSION_1_0)
async def _check_version(context: ServerCallContext) -> None:
    """The SDK's rule: the A2A-Version header must be 1.x (none means 0.3)."""


async def _result(method: str, params: Any, context: ServerCallContext) -> dict[str, Any]:
    """A non-streaming method's result, as the SDK's dispatcher serialises it."""
    if method == "SendMessage":
        task = await HANDLER.on_message_send(params, context)
        return dict(MessageToDict(SendMessageResponse(task=task)))
    if method == "ListTasks":
        listed = await HANDLER.on_list_tasks(params, context)
        return dict(serialize_list_tasks_response(listed, params.include_artifacts))
    calls = {
        "GetTask": HANDLER.on_get_task,
        "CancelTask": HANDLER.on_cancel_task,
        "CreateTaskPushNotificationConfig": HANDLER.on_create_task_push_notification_config,
        "GetTaskPushNotificationConfig": HANDLER.on_get_task_push_notification_config,
        "ListTaskPushNotificationConfigs": HANDLER.on_list_task_push_notification_configs,
        "DeleteTaskPushNotificationConfig": HANDLER.on_delete_task_push_notification_config,
        "GetExtendedAgentCard": HANDLER.on_get_extended_agent_card,
    }
    answer = await calls[method](params, context)
    return {} if answer is None else dict(MessageToDict(answer, preserving_proto_field_name=False))


def _waits(method: str, params: Any) -> bool:
    return method in STREAMING or (method == "SendMessage" and not params.configuration.return_immediately)


def _sse(request_id: str | int | None, event: Event) -> str:
    data = JSONRPC20Response(result=MessageToDict(to_stream_response(event)), _id=request_id).data
    return f"id: {sequence_of(event)}\ndata: {json.dumps(data)}\n\n"


async def _with_pings(stream: AsyncGenerator[Event]) -> AsyncIterator[Event | None]:
    """The stream's events, and None each time it stays silent for ``PING_SECONDS``
    (the next event is awaited on, not cancelled, meanwhile)."""
    pending: asyncio.Future[Event] | None = None
    try:
        while True:
            if pending is None:
                pending = asyncio.ensure_future(stream.__anext__())
            done, _ = await asyncio.wait({pending}, timeout=PING_SECONDS)
            if not done:
                yield None
                continue
            finished, pending = pending, None
            try:
                event = finished.result()
            except StopAsyncIteration:
                return
            yield event
    finally:
        if pending is not None:
            pending.cancel()
            with contextlib.suppress(BaseException):
                await pending
        await stream.aclose()


async def _stream(request_id: str | int | None, stream: AsyncGenerator[Event]) -> AsyncIterator[str]:
    """SSE frames: an event per update, a comment while nothing happens (so no proxy
    takes the connection for dead), an ``error`` event for a refusal midway."""
    try:
        async for event in _with_pings(stream):
            yield ": waiting\n\n" if event is None else _sse(request_id, event)
    except A2AError as exc:
        yield f"event: error\ndata: {json.dumps(build_error_response(request_id, exc))}\n\n"


@csrf_exempt
@parks
async def rpc_view(request: HttpRequest, agent_id: str) -> JsonResponse | StreamingHttpResponse:
    if request.method != "POST":
        return error(f'Method "{request.method}" not allowed.', 405, "method_not_allowed")
    door = await _door(request, agent_id)
    if isinstance(door, JsonResponse):
        return door
    caller, agent = door
    try:
        body = json_body(request)
    except MarkusError as exc:  # not JSON (the body's size was checked at the door)
        return _rpc_error(None, JSONParseError(message=str(exc)))
    request_id = _request_id(body)
    try:
        method, params = _envelope(body)
        headers = {name.lower(): value for name, value in request.headers.items()}
        state = {"caller": caller, "agent": agent, "headers": headers, "after": _after(request), "method": method}
        context = ServerCallContext(state=state, user=_A2ACaller(caller))
        await _check_version(context)
        slot = WAITS.claim(await sync_to_async(waiter_for)(caller)) if _waits(method, params) else None
    except A2AError as exc:
        return _rpc_error(request_id, exc)
    except APIException as exc:  # TooManyWaits: 429 with Retry-After
        return error_response(exc)
    if method not in STREAMING:
        try:
            result = await _result(method, params, context)
        except A2AError as exc:
            return _rpc_error(request_id, exc)
        except Paced as exc:  # as the wait caps: 429 with Retry-After
            return error_response(exc)
        finally:
            if slot is not None:
                slot.release()
        return JsonResponse(JSONRPC20Response(result=result, _id=request_id).data)
    if method == "SendStreamingMessage":
        stream = HANDLER.on_message_send_stream(params, context)
    else:
        stream = HANDLER.on_subscribe_to_task(params, context)
    try:  # the first event eagerly: a refusal is a plain JSON-RPC error, as the SDK answers it
        first: Event | None = await anext(stream)
    except StopAsyncIteration:
        first = None
    except (A2AError, Paced) as exc:
        assert slot is not None
        slot.release()
        return error_response(exc) if isinstance(exc, Paced) else _rpc_error(request_id, exc)

    async def events() -> AsyncIterator[str]:
        try:
            if first is not None:
                yield _sse(request_id, first)
            async for text in _stream(request_id, stream):
                yield text
        finally:
            assert slot is not None
            slot.release()

    response = StreamingHttpResponse(events(), content_type=SSE)
    response["Cache-Control"] = "no-cache"
    response["X-Accel-Buffering"] = "no"
    return response
