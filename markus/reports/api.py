"""Reports and reminders of an agent:

- ``GET /api/agents/{id}/reports`` (``limit``, ``offset``): the daily reports, newest first;
- ``GET /api/agents/{id}/reports/{date}``: one day's report (YYYY-MM-DD, the agent's day);
- ``GET /api/agents/{id}/reminders`` (``limit``, ``offset``): the reminders the agent set,
  the waiting ones first;
- ``DELETE /api/agents/{id}/reminders/{item_id}``: cancel a pending reminder (the
  agent's owner, its team's owner or staff, as for the mind view's controls).
"""

from __future__ import annotations

from django.http import Http404
from drf_spectacular.utils import OpenApiParameter, extend_schema
from rest_framework.request import Request
from rest_framework.response import Response
from rest_framework.views import APIView

from markus.agents import permissions
from markus.core.api import int_param
from markus.core.schema import errors

from . import reminders, services
from .models import DailyReport
from .serializers import ReminderCancelledOut, RemindersOut, ReportOut, ReportsOut


class ReportsView(APIView):
    @extend_schema(
        operation_id="agents_reports",
        parameters=[OpenApiParameter("limit", int), OpenApiParameter("offset", int)],
        responses={200: ReportsOut, **errors(400, 401, 404)},
    )
    def get(self, request: Request, agent_id: str) -> Response:
        agent = permissions.require(request, "agents_reports", agent_id)
        limit = int_param(request, "limit", 30, lo=1, hi=366)
        offset = int_param(request, "offset", 0, lo=0, hi=10**9)
        rows, total = services.reports_of(agent.id, limit=limit, offset=offset)
        return Response({"reports": [services.serialize_report(r) for r in rows], "totalCount": total})


class ReportView(APIView):
    @extend_schema(operation_id="agents_report", responses={200: ReportOut, **errors(400, 401, 404)})
    def get(self, request: Request, agent_id: str, date: str) -> Response:
        agent = permissions.require(request, "agents_report", agent_id)
        day = services.parse_day(date)
        report = DailyReport.objects.filter(agent=agent, date=day).first()
        if report is None:
            raise Http404(f"No report of {agent.id} for {day.isoformat()}.")
        return Response(services.serialize_report(report))


class RemindersView(APIView):
    @extend_schema(
        operation_id="agents_reminders",
        parameters=[OpenApiParameter("limit", int), OpenApiParameter("offset", int)],
        responses={200: RemindersOut, **errors(400, 401, 404)},
    )
    def get(self, request: Request, agent_id: str) -> Response:
        agent = permissions.require(request, "agents_reminders", agent_id)
        limit = int_param(request, "limit", 100, lo=1, hi=500)
        offset = int_param(request, "offset", 0, lo=0, hi=10**9)
        views = reminders.reminder_list(agent.id, limit=limit, offset=offset)
        return Response({"reminders": [v.as_dict() for v in views], "totalCount": reminders.reminder_count(agent.id)})


class ReminderView(APIView):
    @extend_schema(
        operation_id="agents_reminder_cancel",
        request=None,
        responses={200: ReminderCancelledOut, **errors(401, 403, 404, 409)},
    )
    def delete(self, request: Request, agent_id: str, item_id: str) -> Response:
        agent = permissions.require(request, "agents_reminder_cancel", agent_id)
        item = reminders.reminder_cancel(agent_id=agent.id, item_id=item_id, by=request.user.get_username())
        return Response({"id": item.id, "state": reminders.reminder_state(item), "mailboxStatus": item.status})
