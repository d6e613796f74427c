"""The mind view and its partials. Thin: access check, filters, one template each."""

from __future__ import annotations

from django.contrib.auth.decorators import login_required
from django.http import HttpRequest, HttpResponse
from django.shortcuts import render
from django.urls import reverse
from django.views.decorators.http import require_GET
from django_htmx.http import push_url

from markus.agents.auth import access_agent

from . import mind


def _offset(request: HttpRequest) -> int:
    try:
        return max(0, min(int(request.GET.get("offset", 0)), 10**9))
    except ValueError:
        return 0


@require_GET
@login_required
def mind_view(request: HttpRequest, agent_id: str) -> HttpResponse:
    agent = access_agent(request, agent_id)
    filters = mind.MindFilters.from_query(request.GET)
    return render(
        request,
        "mind/mind.html",
        {
            **mind.header_context(agent.id),
            **mind.filters_context(filters),
            **mind.timeline_page(agent.id, filters),
            "agent_id": agent.id,
        },
    )


@require_GET
@login_required
def mind_timeline(request: HttpRequest, agent_id: str) -> HttpResponse:
    """Without ``offset``: the timeline for new filters (and a new socket for them).
    With it: the next page of older items for "Load earlier"."""
    agent = access_agent(request, agent_id)
    filters = mind.MindFilters.from_query(request.GET)
    offset = _offset(request)
    context = {"agent_id": agent.id, "filters": filters, **mind.timeline_page(agent.id, filters, offset=offset)}
    if offset:
        return render(request, "mind/_page.html", context)
    response = render(request, "mind/_timeline.html", context)
    query = filters.query_string()
    return push_url(response, reverse("mind", args=[agent.id]) + (f"?{query}" if query else ""))


@require_GET
@login_required
def mind_activity_logs(request: HttpRequest, agent_id: str, activity_id: str) -> HttpResponse:
    agent = access_agent(request, agent_id)
    activity, logs = mind.activity_logs(agent, activity_id)
    return render(request, "mind/_logs.html", {"activity": activity, "logs": logs})
