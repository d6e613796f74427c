"""Attention endpoints: the mind, decisions, activity logs, loop control, and the chat
sessions (their rules are ``markus.agents.chat``'s; the chat itself is the async view in
``attention.chat``)."""

from __future__ import annotations

from collections.abc import Callable
from typing import Any

from django.db.models import F
from django.http import Http404
from drf_spectacular.utils import OpenApiParameter, extend_schema
from rest_framework import serializers, status
from rest_framework.request import Request
from rest_framework.response import Response
from rest_framework.views import APIView

from mailbox import api as mailbox_api
from mailbox import lifecycle
from mailbox.models import MailboxItem
from mailbox.registry import Status
from mailbox.representation import PLACEHOLDER, private_of
from mailbox.selectors import QUEUE_PAGE, QUEUE_PAGE_MAX, depth_fields, queue_depth, queued_page
from markus.agents import chat, permissions
from markus.agents.models import Agent, ChatMessage, WorkingMemory
from markus.core.api import StringField, int_param, validated_body
from markus.core.counting import capped_count
from markus.core.schema import errors
from markus.llm.base import get_provider

from . import services
from .loop import attention_snapshot
from .models import AgentActivity, AgentActivityLog, AgentDecision
from .records import serialize_decision
from .selectors import waiting_calls
from .serializers import ActivityLogsOut, ControlOut, DecisionsOut, MindOut

# A chat session is the agent's main session or another one ("chat"); named in the
# OpenAPI description as ChatSessionKindEnum (settings ENUM_NAME_OVERRIDES).
CHAT_SESSION_KINDS = [("main", "main"), ("chat", "chat")]


class MindView(APIView):
    @extend_schema(
        operation_id="agents_mind",
        parameters=mailbox_api.QUEUE_PARAMS,
        responses={200: MindOut, **errors(400, 401, 404)},
    )
    def get(self, request: Request, agent_id: str) -> Response:
        agent = permissions.require(request, "agents_mind", agent_id)
        reader = permissions.reader(request)
        snap = attention_snapshot(agent.id)
        queue, queue_next = queued_page(
            agent.id,
            limit=int_param(request, "queuedLimit", QUEUE_PAGE, lo=1, hi=QUEUE_PAGE_MAX),
            after=request.query_params.get("queuedAfter") or None,
        )
        waiting = MailboxItem.objects.filter(lifecycle.parked(), agent_id=agent.id, status=Status.DEFERRED).exists()
        return Response(
            {
                "agentId": agent.id,
                "status": agent.status,
                "state": snap["state"],
                "currentFocus": reader.focus(snap["currentFocus"]),
                **depth_fields(queue_depth(agent.id)),
                "queue": reader.items(queue),
                "queuedNextCursor": queue_next,
                "workingMemory": [
                    {"key": m.key, "content": m.content, "updatedAt": m.updated_at}
                    for m in WorkingMemory.objects.filter(agent=agent).order_by("key")
                ],
                "waitingForApproval": waiting,
                "waitingCalls": [
                    c if reader.sees(c["privateTo"]) else {**c, "arguments": PLACEHOLDER}
                    for c in waiting_calls(agent.id)
                ],
                "waitingForReply": [
                    {
                        "mailboxItemId": item_id,
                        "streamId": (marks or {}).get("replyStream"),
                        "to": (marks or {}).get("replyFrom") or {},
                        "until": until,
                    }
                    for item_id, marks, until in MailboxItem.objects.filter(
                        lifecycle.waiting_for_reply(), agent_id=agent.id, status=Status.DEFERRED
                    )
                    .order_by("deferred_until", "id")
                    .values_list("id", "marks", "deferred_until")[:50]
                ],
                "brain": get_provider().name,
            }
        )


def reader_decision(reader: permissions.Reader, d: AgentDecision) -> dict[str, Any]:
    """A decision as the reader may see it: one about a private conversation keeps its
    type and outcome, not its reasoning nor its context."""
    out = serialize_decision(d)
    if reader.sees(private_of(getattr(d, "item_marks", None))):  # annotated by DecisionsView
        return out
    return {**out, "reasoning": PLACEHOLDER, "context": {}}


class DecisionsView(APIView):
    @extend_schema(
        operation_id="agents_decisions",
        parameters=[OpenApiParameter("limit", int), OpenApiParameter("offset", int)],
        responses={200: DecisionsOut, **errors(400, 401, 404)},
    )
    def get(self, request: Request, agent_id: str) -> Response:
        agent = permissions.require(request, "agents_decisions", agent_id)
        limit = int_param(request, "limit", 50, lo=1, hi=500)
        offset = int_param(request, "offset", 0, lo=0, hi=10**9)
        rows = AgentDecision.objects.filter(agent=agent).order_by("-created_at", "-id")
        page = list(rows.annotate(item_marks=F("mailbox_item__marks"))[offset : offset + limit])
        reader = permissions.reader(request)
        return Response({"decisions": [reader_decision(reader, d) for d in page], **capped_count(rows).fields()})


class ActivityLogsView(APIView):
    @extend_schema(
        operation_id="agents_activity_logs",
        parameters=[OpenApiParameter("activityId", str, required=True)],
        responses={200: ActivityLogsOut, **errors(400, 401, 404)},
    )
    def get(self, request: Request, agent_id: str) -> Response:
        agent = permissions.require(request, "agents_activity_logs", agent_id)
        activity_id = request.query_params.get("activityId")
        if not activity_id:
            from rest_framework.exceptions import ParseError

            raise ParseError("activityId is required")
        activity = AgentActivity.objects.filter(agent=agent, id=activity_id).first()
        if activity is None:
            raise Http404("No such activity.")
        logs = AgentActivityLog.objects.filter(activity=activity).order_by("seq")
        shown = permissions.reader(request).sees(activity.private_to)
        return Response(
            {
                "activityId": activity.id,
                "logs": [
                    {
                        "seq": entry.seq,
                        "type": entry.type,
                        "content": entry.content if shown else PLACEHOLDER,
                        "metadata": entry.metadata if shown else {},
                        "createdAt": entry.created_at,
                    }
                    for entry in logs
                ],
            }
        )


class ControlView(APIView):
    action = ""
    actions: dict[str, Callable[[Agent], None]] = {
        "pause": services.agent_pause,
        "resume": services.agent_resume,
        "stop": services.agent_stop,
        "start": services.agent_start,
    }

    def post(self, request: Request, agent_id: str) -> Response:
        agent = permissions.require(request, f"agents_{self.action}", agent_id)
        self.actions[self.action](agent)
        agent.refresh_from_db()
        return Response({"agentId": agent.id, "status": agent.status})


def control_view(action: str) -> type[ControlView]:
    """One view class per action, so each has its own operation in the schema."""

    class View(ControlView):
        @extend_schema(
            operation_id=f"agents_{action}", request=None, responses={200: ControlOut, **errors(401, 403, 404)}
        )
        def post(self, request: Request, agent_id: str) -> Response:
            return super().post(request, agent_id)

    View.action = action
    View.__name__ = f"{action.title()}AgentView"
    return View


# ---------------------------------------------------------------------------- chat sessions


class ChatMessageOut(serializers.Serializer):
    id = serializers.IntegerField()
    role = serializers.ChoiceField(choices=ChatMessage.Role.choices)
    content = serializers.CharField()
    metadata = serializers.DictField(
        help_text="notifyUser messages: {notifyUser, priority, taskId, requirementId}; "
        "replies: {mailboxItemIds, provider}"
    )
    createdAt = serializers.DateTimeField()


class LastMessageOut(serializers.Serializer):
    id = serializers.IntegerField()
    role = serializers.CharField()
    content = serializers.CharField()
    createdAt = serializers.DateTimeField()


class ChatSessionOut(serializers.Serializer):
    id = serializers.CharField()
    kind = serializers.ChoiceField(choices=CHAT_SESSION_KINDS)
    title = serializers.CharField()
    userId = serializers.IntegerField(allow_null=True, help_text="the person whose session it is; null: shared")
    createdAt = serializers.DateTimeField()
    lastMessageAt = serializers.DateTimeField(allow_null=True)
    lastMessage = LastMessageOut(allow_null=True)
    messageCount = serializers.IntegerField()


class ChatSessionsOut(serializers.Serializer):
    sessions = ChatSessionOut(many=True, help_text="the main session first, then the newest first")


class ChatSessionIn(serializers.Serializer):
    title = StringField(
        default="", help_text="at most 200 characters", error_messages={"invalid": "title must be a string"}
    )

    def validate_title(self, value: str) -> str:
        if len(value) > 200:
            raise serializers.ValidationError("title must be at most 200 characters")
        return value.strip()


class ChatMessagesOut(serializers.Serializer):
    sessionId = serializers.CharField()
    messages = ChatMessageOut(many=True, help_text="newest first")
    nextCursor = serializers.CharField(
        allow_null=True, help_text="pass as before for the next (older) page; null on the last page"
    )


class ChatSessionsView(APIView):
    @extend_schema(operation_id="agents_sessions_list", responses={200: ChatSessionsOut, **errors(401, 404)})
    def get(self, request: Request, agent_id: str) -> Response:
        agent = permissions.require(request, "agents_sessions_list", agent_id)
        return Response({"sessions": chat.sessions_for(request, agent)})

    @extend_schema(
        operation_id="agents_sessions_create",
        request=ChatSessionIn,
        responses={201: ChatSessionOut, **errors(400, 401, 404)},
    )
    def post(self, request: Request, agent_id: str) -> Response:
        agent = permissions.require(request, "agents_sessions_create", agent_id)
        body = validated_body(request, ChatSessionIn)
        session = chat.session_create(request, agent, body["title"])
        row = next(s for s in chat.sessions_for(request, agent) if s["id"] == session.id)
        return Response(row, status=status.HTTP_201_CREATED)


class ChatMessagesView(APIView):
    @extend_schema(
        operation_id="agents_session_messages",
        parameters=[
            OpenApiParameter("limit", int, description="1..500, default 50"),
            OpenApiParameter(
                "before", str, description="a nextCursor (a message id of this session): the older messages"
            ),
        ],
        responses={200: ChatMessagesOut, **errors(400, 401, 404)},
    )
    def get(self, request: Request, agent_id: str, session_id: str) -> Response:
        agent = permissions.require(request, "agents_session_messages", agent_id)
        session = chat.visible_session(request, agent, session_id)
        limit = int_param(request, "limit", 50, lo=1, hi=500)
        before = request.query_params.get("before") or None
        return Response(chat.session_messages(session, limit=limit, before=before))
