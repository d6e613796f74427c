"""Task endpoints (CONTRACT "Tasks and requirements"). Thin views: an input
serializer, a visibility check through the selectors, one service call.

Visibility: a user sees the tasks of agents they may see, and tasks they created or
review; an agent token sees tasks it is assignee, reviewer or creator of. Anything
else answers 404, exactly like a missing task.
"""

from __future__ import annotations

from typing import Any

from django.contrib.auth import get_user_model
from drf_spectacular.utils import OpenApiParameter, extend_schema
from rest_framework import serializers, status
from rest_framework.request import Request
from rest_framework.response import Response
from rest_framework.views import APIView

from agentbus.selectors import pending_count
from attention.models import AgentActivity
from markus.agents.auth import actor_for_request, user_may_see_agent
from markus.agents.models import Agent
from markus.core.actors import Actor
from markus.core.api import int_param, validated_body
from markus.core.counting import capped_count
from markus.core.schema import errors

from . import selectors, services
from .errors import WorkError
from .models import Task, TaskState
from .serializers import TaskCommentOut, TaskCommentsOut, TaskDetailOut, TaskListOut, TaskTransitionOut

PAGING_PARAMETERS = [
    OpenApiParameter("limit", int, description="1..500, default 50"),
    OpenApiParameter("offset", int, description="default 0"),
]


def pending_inbox_for(agent_id: str | None) -> int | None:
    """The owner's pending AgentBus inbox (CONTRACT: the task API carries it)."""
    return pending_count(agent_id) if agent_id else None


def task_detail(task: Task) -> dict[str, Any]:
    return {**selectors.task_data(task), "pendingInbox": pending_inbox_for(task.assignee_id)}


class TaskCreateInput(serializers.Serializer):
    title = serializers.CharField(max_length=300)
    description = serializers.CharField(required=False, allow_blank=True, default="", max_length=100_000)
    assigneeId = serializers.CharField(required=False, allow_null=True, default=None)
    reviewerId = serializers.CharField(required=False, allow_null=True, default=None)
    reviewerUserId = serializers.IntegerField(required=False, allow_null=True, default=None)
    dependsOn = serializers.ListField(child=serializers.CharField(), required=False, default=list, max_length=200)
    requirementId = serializers.CharField(required=False, allow_null=True, default=None)
    metadata = serializers.DictField(required=False, default=dict)
    start = serializers.BooleanField(required=False, default=True)


class NoteInput(serializers.Serializer):
    note = serializers.CharField(required=False, allow_blank=True, default="", max_length=10_000)


class TransitionInput(NoteInput):
    status = serializers.ChoiceField(choices=TaskState.values)
    cascade = serializers.BooleanField(
        required=False,
        allow_null=True,
        default=None,
        help_text="with cancelled: true cancels the tasks waiting on it too, false only this one; "
        "left out while tasks wait on it: 409 dependents_waiting",
    )


class CommentInput(serializers.Serializer):
    content = serializers.CharField(max_length=20_000)
    replyToCommentId = serializers.CharField(required=False, allow_null=True, default=None)
    activityId = serializers.CharField(required=False, allow_null=True, default=None, max_length=64)


def own_activity_id(actor: Actor, activity_id: str | None) -> str | None:
    """A comment's client-given ``activityId``: one of the commenting agent's own
    activities, else 400 naming the field (another agent's, or a missing one, would be
    stored as a dangling link; both answer alike). A person's comment carries none, so
    theirs is not looked at (the service drops it)."""
    if not activity_id or not actor.is_agent:
        return activity_id
    if not AgentActivity.objects.filter(id=activity_id, agent_id=actor.agent_id).exists():
        raise WorkError(f"activityId {activity_id!r} is not an activity of yours")
    return activity_id


def valid(serializer_class: type[serializers.Serializer], request: Request) -> dict[str, Any]:
    """The validated body, or a 400 naming the fields at fault (an unknown one too):
    ``markus.core.api.validated_body``, as every API write."""
    return validated_body(request, serializer_class)


def check_agent_refs(actor: Actor, **refs: Any) -> None:
    """Agents named in a body must be ones the actor may assign; anything else reads
    as unknown (no existence leak)."""
    allowed = selectors.agents_assignable_by(actor)
    for name, value in refs.items():
        values = value if isinstance(value, list) else [value]
        for agent_id in values:
            if agent_id not in (None, "") and not allowed.filter(id=agent_id).exists():
                raise WorkError(f"{name}: no such agent {agent_id!r}")


def check_reviewer_user(actor: Actor, user_id: int | None, assignee_id: str | None) -> None:
    if user_id is None or (actor.is_user and actor.id == str(user_id)):
        return
    user = get_user_model().objects.filter(pk=user_id).first()
    assignee = Agent.objects.filter(id=assignee_id).first() if assignee_id else None
    if user is None or assignee is None or not user_may_see_agent(user, assignee):
        raise WorkError(f"reviewerUserId: no such user {user_id!r} (a human reviewer must see the assignee)")


def file_task(actor: Actor, body: dict[str, Any]) -> Task:
    """File a task from a validated ``TaskCreateInput`` body, as every door does (the
    API, the work page): what the actor may reference, then the service."""
    watchers = body["metadata"].get("watchers")
    check_agent_refs(
        actor,
        assigneeId=body["assigneeId"],
        reviewerId=body["reviewerId"],
        **{"metadata.watchers": watchers if isinstance(watchers, list) else None},
    )
    check_reviewer_user(actor, body["reviewerUserId"], body["assigneeId"])
    visible = selectors.tasks_visible_to(actor)
    for dependency in body["dependsOn"]:
        if not visible.filter(id=dependency).exists():
            raise WorkError(f"dependsOn: no such task {dependency!r}")
    if body["requirementId"] and not selectors.requirements_visible_to(actor).filter(id=body["requirementId"]).exists():
        raise WorkError(f"requirementId: no such requirement {body['requirementId']!r}")
    task = services.task_create(
        actor=actor,
        title=body["title"],
        description=body["description"],
        assignee_id=body["assigneeId"],
        reviewer_agent_id=body["reviewerId"],
        reviewer_user_id=body["reviewerUserId"],
        depends_on=body["dependsOn"],
        requirement_id=body["requirementId"],
        metadata=body["metadata"],
        start=body["start"],
    )
    return task


class TaskListView(APIView):
    @extend_schema(
        operation_id="tasks_list",
        parameters=[
            OpenApiParameter("status", str, enum=TaskState.values, description="only tasks in this state"),
            OpenApiParameter("assigneeId", str, description="only tasks assigned to this agent"),
            OpenApiParameter("requirementId", str, description="only tasks of this requirement"),
            *PAGING_PARAMETERS,
        ],
        responses={200: TaskListOut, **errors(400, 401)},
    )
    def get(self, request: Request) -> Response:
        actor = actor_for_request(request)
        rows = selectors.tasks_visible_to(actor)
        wanted = request.query_params.get("status")
        if wanted:
            if wanted not in TaskState.values:
                raise WorkError(f"unknown status {wanted!r}; expected one of: {', '.join(TaskState.values)}")
            rows = rows.filter(status=wanted)
        for param, field in (("assigneeId", "assignee_id"), ("requirementId", "requirement_id")):
            if request.query_params.get(param):
                rows = rows.filter(**{field: request.query_params[param]})
        rows = rows.order_by("-created_at", "-id")
        limit = int_param(request, "limit", 50, lo=1, hi=500)
        offset = int_param(request, "offset", 0, lo=0, hi=10**9)
        return Response(
            {
                "tasks": [selectors.task_data(t) for t in selectors.with_dependencies(rows)[offset : offset + limit]],
                **capped_count(rows).fields(),  # "10,000+": never a full count
            }
        )

    @extend_schema(
        operation_id="tasks_create", request=TaskCreateInput, responses={201: TaskDetailOut, **errors(400, 401, 413)}
    )
    def post(self, request: Request) -> Response:
        task = file_task(actor_for_request(request), valid(TaskCreateInput, request))
        task.refresh_from_db()
        return Response(task_detail(task), status=status.HTTP_201_CREATED)


class TaskDetailView(APIView):
    @extend_schema(operation_id="tasks_retrieve", responses={200: TaskDetailOut, **errors(401, 404)})
    def get(self, request: Request, task_id: str) -> Response:
        return Response(task_detail(selectors.access_task(actor_for_request(request), task_id)))


class TaskTransitionView(APIView):
    @extend_schema(request=TransitionInput, responses={200: TaskTransitionOut, **errors(400, 401, 404, 409, 413)})
    def post(self, request: Request, task_id: str) -> Response:
        actor = actor_for_request(request)
        task = selectors.access_task(actor, task_id)
        body = valid(TransitionInput, request)
        moved, cascaded = services.task_move(
            actor, task, to_status=body["status"], note=body["note"], cascade=body["cascade"]
        )
        return Response({**task_detail(moved), "cascaded": cascaded})


class TaskRetryView(APIView):
    @extend_schema(request=NoteInput, responses={200: TaskDetailOut, **errors(400, 401, 404, 409, 413)})
    def post(self, request: Request, task_id: str) -> Response:
        actor = actor_for_request(request)
        task = selectors.access_task(actor, task_id)
        body = valid(NoteInput, request)
        return Response(task_detail(services.task_retry(task_id=task.id, actor=actor, note=body["note"])))


class TaskCommentsView(APIView):
    @extend_schema(responses={200: TaskCommentsOut, **errors(401, 404)})
    def get(self, request: Request, task_id: str) -> Response:
        task = selectors.access_task(actor_for_request(request), task_id)
        return Response({"comments": selectors.task_comments(task)})

    @extend_schema(request=CommentInput, responses={201: TaskCommentOut, **errors(400, 401, 404, 413)})
    def post(self, request: Request, task_id: str) -> Response:
        actor = actor_for_request(request)
        task = selectors.access_task(actor, task_id)
        body = valid(CommentInput, request)
        comment = services.task_comment_create(
            task_id=task.id,
            actor=actor,
            content=body["content"],
            reply_to_comment_id=body["replyToCommentId"],
            activity_id=own_activity_id(actor, body["activityId"]),
        )
        return Response(selectors.comment_data(comment), status=status.HTTP_201_CREATED)
