"""Requirement endpoints (CONTRACT "Tasks and requirements"). An agent token
proposes (pending); a user creates (in progress) and decides (approve / reject)."""

from __future__ import annotations

from typing import Any

from drf_spectacular.utils import OpenApiParameter, extend_schema
from rest_framework import serializers, status
from rest_framework.request import Request
from rest_framework.response import Response
from rest_framework.views import APIView

from markus.agents.auth import actor_for_request
from markus.core.actors import Actor
from markus.core.api import int_param
from markus.core.counting import capped_count
from markus.core.schema import errors

from . import selectors, services
from .api import PAGING_PARAMETERS, CommentInput, check_agent_refs, own_activity_id, valid
from .errors import WorkError
from .models import Requirement, RequirementState
from .requirement_services import RequirementStep
from .serializers import RequirementCommentOut, RequirementCommentsOut, RequirementListOut, RequirementOut


class RequirementCreateInput(serializers.Serializer):
    title = serializers.CharField(max_length=300)
    description = serializers.CharField(required=False, allow_blank=True, default="", max_length=100_000)
    agentId = serializers.CharField(required=False, allow_null=True, default=None)
    metadata = serializers.DictField(required=False, default=dict)


class ReasonInput(serializers.Serializer):
    reason = serializers.CharField(required=False, allow_blank=True, default="", max_length=10_000)


class ResubmitInput(serializers.Serializer):
    title = serializers.CharField(required=False, allow_null=True, max_length=300, default=None)
    description = serializers.CharField(
        required=False, allow_null=True, allow_blank=True, max_length=100_000, default=None
    )


def file_requirement(actor: Actor, body: dict[str, Any]) -> Requirement:
    """File a requirement from a validated ``RequirementCreateInput`` body, as every
    door does (the API, the work page)."""
    if actor.is_agent and body["agentId"] not in (None, actor.id):
        raise WorkError("an agent proposes requirements for itself: leave agentId out")
    check_agent_refs(actor, agentId=body["agentId"])
    return services.requirement_create(
        actor=actor,
        title=body["title"],
        description=body["description"],
        agent_id=body["agentId"],
        metadata=body["metadata"],
    )


class RequirementListView(APIView):
    @extend_schema(
        operation_id="requirements_list",
        parameters=[
            OpenApiParameter(
                "status", str, enum=RequirementState.values, description="only requirements in this state"
            ),
            *PAGING_PARAMETERS,
        ],
        responses={200: RequirementListOut, **errors(400, 401)},
    )
    def get(self, request: Request) -> Response:
        rows = selectors.requirements_visible_to(actor_for_request(request))
        wanted = request.query_params.get("status")
        if wanted:
            if wanted not in RequirementState.values:
                raise WorkError(f"unknown status {wanted!r}; expected one of: {', '.join(RequirementState.values)}")
            rows = rows.filter(status=wanted)
        rows = rows.order_by("-created_at", "-id")
        limit = int_param(request, "limit", 50, lo=1, hi=500)
        offset = int_param(request, "offset", 0, lo=0, hi=10**9)
        return Response(
            {
                "requirements": [selectors.requirement_data(r) for r in rows[offset : offset + limit]],
                **capped_count(rows).fields(),  # "10,000+": never a full count
            }
        )

    @extend_schema(
        operation_id="requirements_create",
        request=RequirementCreateInput,
        responses={201: RequirementOut, **errors(400, 401, 413)},
    )
    def post(self, request: Request) -> Response:
        requirement = file_requirement(actor_for_request(request), valid(RequirementCreateInput, request))
        return Response(selectors.requirement_data(requirement), status=status.HTTP_201_CREATED)


class RequirementDetailView(APIView):
    @extend_schema(operation_id="requirements_retrieve", responses={200: RequirementOut, **errors(401, 404)})
    def get(self, request: Request, requirement_id: str) -> Response:
        requirement = selectors.access_requirement(actor_for_request(request), requirement_id)
        return Response(selectors.requirement_data(requirement))


class RequirementStepView(APIView):
    """POST .../approve | reject | complete | cancel (with an optional reason)."""

    steps: dict[str, RequirementStep] = {
        "approve": services.requirement_approve,
        "reject": services.requirement_reject,
        "complete": services.requirement_complete,
        "cancel": services.requirement_cancel,
    }

    @extend_schema(
        operation_id="requirements_step",
        request=ReasonInput,
        responses={200: RequirementOut, **errors(400, 401, 403, 404, 409, 413)},
    )
    def post(self, request: Request, requirement_id: str, step: str) -> Response:
        actor = actor_for_request(request)
        requirement = selectors.access_requirement(actor, requirement_id)
        body = valid(ReasonInput, request)
        requirement = self.steps[step](requirement_id=requirement.id, actor=actor, reason=body["reason"])
        return Response(selectors.requirement_data(requirement))


class RequirementResubmitView(APIView):
    @extend_schema(request=ResubmitInput, responses={200: RequirementOut, **errors(400, 401, 403, 404, 409, 413)})
    def post(self, request: Request, requirement_id: str) -> Response:
        actor = actor_for_request(request)
        requirement = selectors.access_requirement(actor, requirement_id)
        body = valid(ResubmitInput, request)
        requirement = services.requirement_resubmit(
            requirement_id=requirement.id,
            actor=actor,
            title=body["title"],
            description=body["description"],
        )
        return Response(selectors.requirement_data(requirement))


class RequirementCommentsView(APIView):
    @extend_schema(responses={200: RequirementCommentsOut, **errors(401, 404)})
    def get(self, request: Request, requirement_id: str) -> Response:
        requirement = selectors.access_requirement(actor_for_request(request), requirement_id)
        return Response({"comments": selectors.requirement_comments(requirement)})

    @extend_schema(request=CommentInput, responses={201: RequirementCommentOut, **errors(400, 401, 404, 413)})
    def post(self, request: Request, requirement_id: str) -> Response:
        actor = actor_for_request(request)
        requirement = selectors.access_requirement(actor, requirement_id)
        body = valid(CommentInput, request)
        comment = services.requirement_comment_create(
            requirement_id=requirement.id,
            actor=actor,
            content=body["content"],
            reply_to_comment_id=body["replyToCommentId"],
            activity_id=own_activity_id(actor, body["activityId"]),
        )
        return Response(selectors.comment_data(comment), status=status.HTTP_201_CREATED)
