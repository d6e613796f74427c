"""The console dashboard: queue depth per agent and items handled per hour, drawn as
inline SVG on the server. Staff only (``admin_view`` in ``urls``)."""

from __future__ import annotations

from django.contrib import admin
from django.http import HttpRequest
from django.template.response import TemplateResponse
from django.utils import timezone

from . import selectors
from .charts import bar_chart


def dashboard(request: HttpRequest) -> TemplateResponse:
    now = timezone.now()
    depths = selectors.queue_depths()
    hourly = selectors.handled_per_hour(now)
    context = {
        **admin.site.each_context(request),
        "title": "Console dashboard",
        "now": now,
        "queue_depths": depths,
        "handled_per_hour": hourly,
        "depth_chart": bar_chart("Queue depth per agent", depths, label_every=1),
        "hourly_chart": bar_chart("Items handled per hour (last 24 h)", hourly, label_every=3),
    }
    return TemplateResponse(request, "admin/console/dashboard.html", context)
