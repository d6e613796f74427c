"""``GET /api/tasks/{id}/history`` and ``GET /api/requirements/{id}/history``: the status
history of one task or requirement the caller may see (404 otherwise, like a missing
one), oldest first, paged with ``limit`` and ``offset`` like the other lists."""

from __future__ import annotations

from django.db.models import QuerySet
from drf_spectacular.utils import extend_schema
from rest_framework.request import Request
from rest_framework.response import Response
from rest_framework.views import APIView

from markus.agents.auth import actor_for_request
from markus.core.api import int_param
from markus.core.counting import capped_count
from markus.core.schema import errors

from . import selectors
from .api import PAGING_PARAMETERS
from .history import history_of, history_row
from .models import StatusChange
from .serializers import StatusHistoryOut


def history_page(request: Request, rows: QuerySet[StatusChange]) -> Response:
    limit = int_param(request, "limit", 50, lo=1, hi=500)
    offset = int_param(request, "offset", 0, lo=0, hi=10**9)
    return Response({"history": [history_row(c) for c in rows[offset : offset + limit]], **capped_count(rows).fields()})


class TaskHistoryView(APIView):
    @extend_schema(
        operation_id="tasks_history",
        parameters=PAGING_PARAMETERS,
        responses={200: StatusHistoryOut, **errors(400, 401, 404)},
    )
    def get(self, request: Request, task_id: str) -> Response:
        task = selectors.access_task(actor_for_request(request), task_id)
        return history_page(request, history_of(StatusChange.Entity.TASK, task.id))


class RequirementHistoryView(APIView):
    @extend_schema(
        operation_id="requirements_history",
        parameters=PAGING_PARAMETERS,
        responses={200: StatusHistoryOut, **errors(400, 401, 404)},
    )
    def get(self, request: Request, requirement_id: str) -> Response:
        requirement = selectors.access_requirement(actor_for_request(request), requirement_id)
        return history_page(request, history_of(StatusChange.Entity.REQUIREMENT, requirement.id))
