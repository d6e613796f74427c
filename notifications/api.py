"""Notification and approval endpoints (seed 12.4, CONTRACT). Users only: an agent
token has no notifications of its own."""

from __future__ import annotations

from drf_spectacular.utils import OpenApiParameter, extend_schema
from rest_framework import serializers, status
from rest_framework.request import Request
from rest_framework.response import Response
from rest_framework.views import APIView

from markus.agents.auth import IsUser, signed_in_user
from markus.core.api import int_param, validated_body
from markus.core.counting import capped_count
from markus.core.schema import errors

from . import selectors, services
from .models import Approval
from .serializers import (
    NOTIFICATION_TYPES,
    ApprovalListOut,
    ApprovalOut,
    MarkAllReadOut,
    NotificationListOut,
    NotificationOut,
)

PAGING_PARAMETERS = [
    OpenApiParameter("limit", int, description="1..500, default 50"),
    OpenApiParameter("offset", int, description="default 0"),
]


class UserAPIView(APIView):
    permission_classes = [IsUser]


class NotificationListView(UserAPIView):
    @extend_schema(
        operation_id="notifications_list",
        parameters=[
            OpenApiParameter("type", str, enum=NOTIFICATION_TYPES, description="only notifications of this type"),
            *PAGING_PARAMETERS,
        ],
        responses={200: NotificationListOut, **errors(400, 401, 403)},
    )
    def get(self, request: Request) -> Response:
        user = signed_in_user(request)
        rows = selectors.notifications_for(user, type=request.query_params.get("type") or None)
        limit = int_param(request, "limit", 50, lo=1, hi=500)
        offset = int_param(request, "offset", 0, lo=0, hi=10**9)
        return Response(
            {
                "notifications": [services.serialize_notification(n) for n in rows[offset : offset + limit]],
                **capped_count(rows).fields(),  # "10,000+": never a full count
                "unreadCount": selectors.unread_count(user),
            }
        )


class NotificationReadView(UserAPIView):
    @extend_schema(request=None, responses={200: NotificationOut, **errors(401, 403, 404)})
    def post(self, request: Request, notification_id: str) -> Response:
        notification = services.notification_mark_read(user=signed_in_user(request), notification_id=notification_id)
        return Response(services.serialize_notification(notification))


class NotificationMarkAllReadView(UserAPIView):
    @extend_schema(request=None, responses={200: MarkAllReadOut, **errors(401, 403)})
    def post(self, request: Request) -> Response:
        return Response({"updated": services.notifications_mark_all_read(user=signed_in_user(request))})


class ApprovalListView(UserAPIView):
    @extend_schema(
        operation_id="approvals_list",
        parameters=[
            OpenApiParameter("status", str, enum=Approval.State.values, description="only approvals in this state"),
            *PAGING_PARAMETERS,
        ],
        responses={200: ApprovalListOut, **errors(400, 401, 403)},
    )
    def get(self, request: Request) -> Response:
        rows = selectors.approvals_for(signed_in_user(request), status=request.query_params.get("status") or None)
        limit = int_param(request, "limit", 50, lo=1, hi=500)
        offset = int_param(request, "offset", 0, lo=0, hi=10**9)
        return Response(
            {
                "approvals": [services.serialize_approval(a) for a in rows[offset : offset + limit]],
                **capped_count(rows).fields(),  # "10,000+": never a full count
            }
        )


class ApprovalRespondInput(serializers.Serializer):
    selectedOption = serializers.CharField(max_length=200)
    comment = serializers.CharField(required=False, allow_blank=True, default="")


class ApprovalRespondView(UserAPIView):
    @extend_schema(request=ApprovalRespondInput, responses={200: ApprovalOut, **errors(400, 401, 403, 404, 409, 413)})
    def post(self, request: Request, approval_id: str) -> Response:
        body = validated_body(request, ApprovalRespondInput)
        approval = services.approval_respond(
            user=signed_in_user(request),
            approval_id=approval_id,
            selected_option=body["selectedOption"],
            comment=body["comment"],
        )
        return Response(services.serialize_approval(approval), status=status.HTTP_200_OK)
