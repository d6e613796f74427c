"""AgentBus REST endpoints (thin: access check, service, serialise).

The blocking endpoints (inbox wait, request) are async views in ``async_views``.
"""

from __future__ import annotations

from typing import Any

from drf_spectacular.utils import OpenApiParameter, extend_schema
from rest_framework import serializers, status
from rest_framework.request import Request
from rest_framework.response import Response
from rest_framework.views import APIView

from mailbox import idempotency
from markus.agents import permissions
from markus.agents.auth import acting_agent
from markus.agents.models import Agent
from markus.core.api import int_param, validated_body
from markus.core.schema import IDEMPOTENCY_KEY, errors

from . import access, selectors, services
from .errors import BusError, ForbiddenError


class TeamRefOut(serializers.Serializer):
    id = serializers.CharField()
    name = serializers.CharField()


class ChunkOut(serializers.Serializer):
    """``selectors.chunk_data``: one message of a stream."""

    streamId = serializers.CharField()
    sequence = serializers.IntegerField(help_text="1, 2, ... within the stream")
    sender = serializers.CharField(help_text="an agent id, or the operator's reference")
    senderName = serializers.CharField(help_text="the sending agent's name (the operator's: Markus operator)")
    senderTeam = TeamRefOut(allow_null=True, help_text="the sending agent's team; null for none")
    topic = serializers.CharField()
    payload = serializers.JSONField(help_text="any JSON value, as sent")
    createdAt = serializers.DateTimeField()


class StreamOut(serializers.Serializer):
    """``selectors.stream_data``."""

    streamId = serializers.CharField()
    sender = serializers.CharField()
    recipient = serializers.CharField(allow_null=True, help_text="null for a group stream")
    members = serializers.ListField(child=serializers.CharField(), help_text="agent ids, sorted")
    isGroup = serializers.BooleanField()
    topic = serializers.CharField()
    replyTo = serializers.CharField(allow_null=True, help_text="the stream this one answers")
    lastSequence = serializers.IntegerField()
    closed = serializers.BooleanField()
    closedAt = serializers.DateTimeField(allow_null=True)
    createdAt = serializers.DateTimeField()


class StreamEventsOut(serializers.Serializer):
    streamId = serializers.CharField()
    events = ChunkOut(many=True)
    closed = serializers.BooleanField()
    closedAt = serializers.DateTimeField(allow_null=True)


class PendingOut(serializers.Serializer):
    agentId = serializers.CharField()
    pending = serializers.IntegerField(help_text="messages after the consumer cursor")


class DrainOut(serializers.Serializer):
    messages = ChunkOut(many=True)
    next_cursor = serializers.CharField(help_text="pass as after_cursor to the inbox wait")


def _any(help_text: str) -> serializers.JSONField:
    """A field taken as sent: the bus services check its value (their messages are the
    same for the API, the CLI and the MCP door); the serializer only names the fields."""
    return serializers.JSONField(required=False, allow_null=True, help_text=help_text)


class StreamOpenInput(serializers.Serializer):
    streamId = _any("letters, digits, '_', '.', ':' and '-', at most 128; default: generated")
    sender = _any("the agent it is from (an agent token: itself)")
    recipient = _any("a direct stream's agent")
    members = _any("a group stream's agent ids")
    topic = _any("at most 200 characters")
    replyTo = _any("the stream this one answers")


class StreamAppendInput(serializers.Serializer):
    sender = _any("the agent it is from")
    payload = _any("a JSON object")
    topic = _any("at most 200 characters; default: the stream's")


class StreamCloseInput(serializers.Serializer):
    sender = _any("the stream's sender")


class DrainInput(serializers.Serializer):
    peek = _any("true: look without consuming (default false)")
    limit = _any(f"1..{selectors.MAX_LIMIT}, default {selectors.DEFAULT_LIMIT}")


def _body(request: Request, serializer_class: type[serializers.Serializer]) -> dict[str, Any]:
    """The body as sent, its fields known (else 400 naming them: ``validated_body``)."""
    return validated_body(request, serializer_class)


class StreamOpenView(APIView):
    @extend_schema(
        request=StreamOpenInput,
        responses={201: StreamOut, **errors(400, 401, 403, 404, 409, 413)},
        description="Open a stream: `{streamId?, sender, recipient?, members?, topic?, replyTo?}`.",
    )
    def post(self, request: Request) -> Response:
        body = _body(request, StreamOpenInput)
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
        request=StreamAppendInput,
        parameters=[IDEMPOTENCY_KEY],
        responses={201: ChunkOut, 200: ChunkOut, **errors(400, 401, 403, 404, 409, 413, 422, 429)},
        description=(
            "Append `{sender, payload, topic?}`; a closed stream answers 409. An outside agent's "
            "message to agents the loop runs past `MARKUS_AGENT_MESSAGES_PER_HOUR` to one of them "
            "(or one group) in the last hour answers 429 with `Retry-After`. Sent again with its "
            "`Idempotency-Key` (the sender's own, per stream), the message is stored once: 200 with "
            "the first send's chunk and `Idempotent-Replayed: true`."
        ),
    )
    def post(self, request: Request, stream_id: str) -> Response:
        body = _body(request, StreamAppendInput)
        stream = access.access_stream(request, stream_id)
        sender = access.access_acting_agent(request, body.get("sender"))
        chunk, replayed = services.stream_append_once(
            stream_id=stream.id,
            sender=sender,
            payload=body.get("payload"),
            topic=body.get("topic"),
            actor=access.caller_ref(request),
            request_key=idempotency.header_key(request.headers),
        )
        if replayed:
            return Response(selectors.chunk_data(chunk), headers={idempotency.REPLAYED: "true"})
        return Response(selectors.chunk_data(chunk), status=status.HTTP_201_CREATED)


class StreamCloseView(APIView):
    @extend_schema(
        request=StreamCloseInput,
        responses={200: StreamOut, **errors(400, 401, 403, 404, 409, 413)},
        description="Close `{sender}`: only the stream's sender may.",
    )
    def post(self, request: Request, stream_id: str) -> Response:
        body = _body(request, StreamCloseInput)
        stream = access.access_stream(request, stream_id)
        sender = access.access_acting_agent(request, body.get("sender"))
        stream = services.stream_close(stream_id=stream.id, sender=sender, actor=access.caller_ref(request))
        return Response(selectors.stream_data(stream))


class StreamEventsView(APIView):
    @extend_schema(
        parameters=[
            OpenApiParameter("after", int, description="the events after this sequence; default 0"),
            OpenApiParameter("limit", int, description=f"1..{selectors.MAX_LIMIT}, default {selectors.MAX_LIMIT}"),
        ],
        responses={200: StreamEventsOut, **errors(400, 401, 404)},
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
    @extend_schema(responses={200: PendingOut, **errors(401, 404)}, description="`{agentId, pending}`, at once.")
    def get(self, request: Request, agent_id: str) -> Response:
        agent = _access_inbox(request, "agents_agentbus_pending_retrieve", agent_id)
        return Response({"agentId": agent.id, "pending": selectors.pending_count(agent.id)})


class InboxDrainView(APIView):
    @extend_schema(
        request=DrainInput,
        responses={200: DrainOut, **errors(400, 401, 403, 404, 413)},
        description="Drain `{peek?, limit?}` → `{messages, next_cursor}`; never closes a stream.",
    )
    def post(self, request: Request, agent_id: str) -> Response:
        agent = _access_inbox(request, "agents_agentbus_drain_create", agent_id)
        body = _body(request, DrainInput)  # null, a string, an array: 400, nothing drained (an empty body is {})
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


def _access_inbox(request: Request, operation: str, agent_id: str) -> Agent:
    """Self-only for agent tokens; a user who may see the agent may read it (its row
    of ``markus.agents.permissions``)."""
    return permissions.require(request, operation, agent_id)
