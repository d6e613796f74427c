"""AgentBus REST endpoints (thin: access check, service, serialise).

The blocking endpoints (inbox wait, request) are async views in ``async_views``.
"""

from __future__ import annotations

from typing import Any

from drf_spectacular.types import OpenApiTypes
from drf_spectacular.utils import OpenApiParameter, extend_schema
from rest_framework import status
from rest_framework.exceptions import ParseError
from rest_framework.request import Request
from rest_framework.response import Response
from rest_framework.views import APIView

from markus.agents.auth import access_agent, acting_agent
from markus.agents.models import Agent
from markus.core.api import int_param

from . import access, selectors, services
from .errors import BusError, ForbiddenError


def _body(request: Request) -> dict[str, Any]:
    if not isinstance(request.data, dict):
        raise ParseError("body must be a JSON object")
    return request.data


class StreamOpenView(APIView):
    @extend_schema(
        request=OpenApiTypes.OBJECT,
        responses={201: OpenApiTypes.OBJECT},
        description="Open a stream: `{streamId?, sender, recipient?, members?, topic?, replyTo?}`.",
    )
    def post(self, request: Request) -> Response:
        body = _body(request)
        sender = access.access_acting_agent(request, body.get("sender"))
        members = body.get("members") or []
        if not isinstance(members, list):
            raise BusError("members must be a list of agent ids")
        recipient = None
        if body.get("recipient") is not None:
            recipient = access.access_recipients(request, [body["recipient"]])[0]
        stream = services.stream_open(
            sender=sender,
            recipient=recipient,
            members=access.access_recipients(request, members),
            topic=body.get("topic"),
            stream_id=body.get("streamId"),
            reply_to=body.get("replyTo"),
            actor=access.caller_ref(request),
        )
        return Response(selectors.stream_data(stream), status=status.HTTP_201_CREATED)


class StreamAppendView(APIView):
    @extend_schema(
        request=OpenApiTypes.OBJECT,
        responses={201: OpenApiTypes.OBJECT},
        description="Append `{sender, payload, topic?}`; a closed stream answers 409.",
    )
    def post(self, request: Request, stream_id: str) -> Response:
        body = _body(request)
        stream = access.access_stream(request, stream_id)
        sender = access.access_acting_agent(request, body.get("sender"))
        chunk = services.stream_append(
            stream_id=stream.id,
            sender=sender,
            payload=body.get("payload"),
            topic=body.get("topic"),
            actor=access.caller_ref(request),
        )
        return Response(selectors.chunk_data(chunk), status=status.HTTP_201_CREATED)


class StreamCloseView(APIView):
    @extend_schema(
        request=OpenApiTypes.OBJECT,
        responses={200: OpenApiTypes.OBJECT},
        description="Close `{sender}`: only the stream's sender may.",
    )
    def post(self, request: Request, stream_id: str) -> Response:
        body = _body(request)
        stream = access.access_stream(request, stream_id)
        sender = access.access_acting_agent(request, body.get("sender"))
        stream = services.stream_close(stream_id=stream.id, sender=sender, actor=access.caller_ref(request))
        return Response(selectors.stream_data(stream))


class StreamEventsView(APIView):
    @extend_schema(
        parameters=[OpenApiParameter("after", int), OpenApiParameter("limit", int)],
        responses={200: OpenApiTypes.OBJECT},
    )
    def get(self, request: Request, stream_id: str) -> Response:
        stream = access.access_stream(request, stream_id)
        after = int_param(request, "after", 0, lo=0, hi=2**31)
        limit = int_param(request, "limit", selectors.MAX_LIMIT, lo=1, hi=selectors.MAX_LIMIT)
        return Response(
            {
                "streamId": stream.id,
                "events": selectors.stream_events(stream, after=after, limit=limit),
                "closed": stream.closed_at is not None,
                "closedAt": selectors.iso(stream.closed_at),
            }
        )


class InboxPendingView(APIView):
    @extend_schema(responses={200: OpenApiTypes.OBJECT}, description="`{agentId, pending}`, at once.")
    def get(self, request: Request, agent_id: str) -> Response:
        agent = _access_inbox(request, agent_id)
        return Response({"agentId": agent.id, "pending": selectors.pending_count(agent.id)})


class InboxDrainView(APIView):
    @extend_schema(
        request=OpenApiTypes.OBJECT,
        responses={200: OpenApiTypes.OBJECT},
        description="Drain `{peek?, limit?}` → `{messages, next_cursor}`; never closes a stream.",
    )
    def post(self, request: Request, agent_id: str) -> Response:
        agent = _access_inbox(request, agent_id)
        body = _body(request)  # null, a string, an array: 400, nothing drained (an empty body is {})
        peek = body.get("peek", False)
        limit = body.get("limit", selectors.DEFAULT_LIMIT)
        if not isinstance(peek, bool):
            raise BusError("peek must be a boolean")
        if isinstance(limit, bool) or not isinstance(limit, int) or not 1 <= limit <= selectors.MAX_LIMIT:
            raise BusError(f"limit must be an integer from 1 to {selectors.MAX_LIMIT}")
        if not peek and acting_agent(request) is None:
            raise ForbiddenError("draining consumes the agent's inbox: only the agent's own token may (use peek)")
        return Response(
            services.inbox_drain(agent_id=agent.id, peek=peek, limit=limit, actor=access.caller_ref(request))
        )


def _access_inbox(request: Request, agent_id: str) -> Agent:
    """Self-only for agent tokens; a user who may see the agent may read it."""
    return access_agent(request, agent_id)
