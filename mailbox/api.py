"""Mailbox endpoints: enqueue and the enriched timeline."""

from __future__ import annotations

from typing import Any

from drf_spectacular.utils import OpenApiParameter, extend_schema
from rest_framework import status
from rest_framework.exceptions import ValidationError
from rest_framework.request import Request
from rest_framework.response import Response
from rest_framework.views import APIView

from attention.selectors import timeline
from markus.agents import permissions
from markus.agents.auth import AnyRequest, actor_for_request
from markus.agents.chat import session_marks, visible_sessions
from markus.agents.models import Agent
from markus.core.api import int_param, list_param, validated_body
from markus.core.schema import IDEMPOTENCY_KEY, errors

from . import idempotency, services
from .models import MailboxItem
from .registry import MailboxType
from .selectors import QUEUE_PAGE, QUEUE_PAGE_MAX
from .serializers import EnqueueInput, ItemOut, TimelineOut

QUEUE_PARAMS = [
    OpenApiParameter("queuedLimit", int, description=f"the queue's page: 1..{QUEUE_PAGE_MAX}, default {QUEUE_PAGE}"),
    OpenApiParameter("queuedAfter", str, description="a queuedNextCursor: the queue's next page"),
]

TIMELINE_PARAMS = [
    OpenApiParameter("limit", int, description="1..500, default 50"),
    OpenApiParameter("offset", int, description="default 0 (kept for compatibility; prefer before)"),
    OpenApiParameter(
        "before",
        str,
        description=(
            "a nextCursor (the id of an item of this timeline): the page of the items after it; not with offset"
        ),
    ),
    OpenApiParameter("type", str, description="comma-separated source types"),
    OpenApiParameter("category", str, description="interaction, task, notification or system"),
    OpenApiParameter("status", str, description="comma-separated statuses"),
    *QUEUE_PARAMS,
]


def sender_metadata(request: AnyRequest, metadata: dict[str, Any]) -> dict[str, Any]:
    """Stamp who is speaking, always from the authenticated caller: whatever the body
    says about ``senderId``, ``senderName`` or ``senderRole`` is overwritten, so an agent
    cannot pose as a human, nor a user as an agent, another user or the system. What
    the system keeps on an item for itself is in its ``marks``, which no request writes."""
    return {**metadata, **actor_for_request(request).sender_metadata()}


def chat_marks(request: Request, agent: Agent, source_type: str, metadata: dict[str, Any]) -> dict[str, Any]:
    """A chat said in a session (``metadata.sessionId``): the session must be one the
    caller may see (400 otherwise: nobody writes into another person's private
    session), and a private one makes the item private (``markus.agents.chat.session_marks``)."""
    session_id = metadata.get("sessionId")
    if source_type != MailboxType.HUMAN_CHAT or session_id is None:
        return {}
    session = visible_sessions(request, agent).filter(id=session_id).first() if isinstance(session_id, str) else None
    if session is None:
        raise ValidationError(
            {"metadata": f"metadata.sessionId: no chat session {str(session_id)[:80]!r} of this agent"}
        )
    return session_marks(session)


class MailboxView(APIView):
    @extend_schema(
        operation_id="agents_mailbox_list",
        parameters=TIMELINE_PARAMS,
        responses={200: TimelineOut, **errors(400, 401, 404)},
    )
    def get(self, request: Request, agent_id: str) -> Response:
        agent = permissions.require(request, "agents_mailbox_list", agent_id)
        data = timeline(
            agent.id,
            limit=int_param(request, "limit", 50, lo=1, hi=500),
            offset=int_param(request, "offset", 0, lo=0, hi=10**9),
            before=request.query_params.get("before") or None,
            types=list_param(request, "type"),
            category=request.query_params.get("category") or None,
            statuses=list_param(request, "status"),
            queued_limit=int_param(request, "queuedLimit", QUEUE_PAGE, lo=1, hi=QUEUE_PAGE_MAX),
            queued_after=request.query_params.get("queuedAfter") or None,
        )
        reader = permissions.reader(request)
        return Response({**data, "queued": reader.items(data["queued"]), "history": reader.items(data["history"])})

    @extend_schema(
        operation_id="agents_mailbox_enqueue",
        request=EnqueueInput,
        parameters=[IDEMPOTENCY_KEY],
        responses={201: ItemOut, 200: ItemOut, **errors(400, 401, 403, 404, 413, 422)},
        description=(
            "Post an item. People who may talk to the agent post human_chat, task_comment, requirement_comment "
            "and mention; those who control it also system_event. The loop's own types (heartbeats, dreams, "
            "reports, reminders, review requests, status updates, session replies, agent messages) only the "
            "system makes: 403 naming the types the caller may post. Sent again with its Idempotency-Key: "
            "200 with the item the first send stored, as it stands now (Idempotent-Replayed: true)."
        ),
    )
    def post(self, request: Request, agent_id: str) -> Response:
        agent = permissions.require(request, "agents_mailbox_enqueue", agent_id)
        body = validated_body(request, EnqueueInput)
        permissions.check_post(request, agent, body["sourceType"])
        metadata = body.get("metadata") or {}
        sender = sender_metadata(request, metadata)
        keyed = idempotency.keyed(request.headers, sender, {"door": "mailbox", **body})

        def store() -> MailboxItem:
            return services.mailbox_enqueue(
                agent_id=agent.id,
                source_type=body["sourceType"],
                payload=body["payload"],
                priority=body.get("priority"),
                metadata=sender,
                marks=chat_marks(request, agent, body["sourceType"], metadata),
            )

        item, replayed = idempotency.store_once(agent.id, keyed, store)
        if replayed:  # sent again with its key: the first send's item, as it stands now
            return Response(services.serialize_item(item), headers={idempotency.REPLAYED: "true"})
        return Response(services.serialize_item(item), status=status.HTTP_201_CREATED)
