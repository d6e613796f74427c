"""The console dashboard: queue depth per agent, items handled per hour (inline SVG
drawn on the server) and each agent's last 24 h (failures, median wait and
processing time). It refreshes itself: htmx polls the same URL every
``REFRESH_SECONDS`` and swaps in the body. Staff only (``admin_view`` in ``urls``)."""

from __future__ import annotations

from django.contrib import admin
from django.http import HttpRequest
from django.template.response import TemplateResponse
from django.utils import timezone

from markus.retention import selectors as retention
from markus.usage import selectors as usage

from . import selectors
from .charts import bar_chart

REFRESH_SECONDS = 10


def dashboard(request: HttpRequest) -> TemplateResponse:
    now = timezone.now()
    depths = selectors.queue_depths()
    hourly = selectors.handled_per_hour(now)
    health = selectors.agent_health(now)
    context = {
        **admin.site.each_context(request),
        "title": "Console dashboard",
        "now": now,
        "queue_depths": depths,
        "handled_per_hour": hourly,
        "agent_health": health,
        "refresh_seconds": REFRESH_SECONDS,
        "depth_chart": bar_chart("Queue depth per agent", depths, label_every=1),
        "hourly_chart": bar_chart("Items handled per hour (last 24 h)", hourly, label_every=3),
        "last_prune": retention.last_run(),
        "usage_today": usage.today_by_agent(now),
        "budget_rows": usage.budget_rows(now),
    }
    # htmx's poll asks for the body alone (the page's own ``#console-dashboard``).
    partial = request.headers.get("HX-Request") == "true"
    template = "admin/console/dashboard_body.html" if partial else "admin/console/dashboard.html"
    return TemplateResponse(request, template, context)
