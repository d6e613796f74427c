"""The mind view and its partials. Thin: access check, filters, one template each."""

from __future__ import annotations

from typing import Any

from django.contrib.auth.decorators import login_required
from django.http import HttpRequest, HttpResponse, HttpResponseBadRequest
from django.shortcuts import render
from django.urls import reverse
from django.views.decorators.http import require_GET
from django_htmx.http import push_url

from attention.selectors import timeline_items
from markus.agents.auth import access_agent
from markus.core.errors import MarkusError

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


def _earlier(agent_id: str, filters: mind.MindFilters, *, before: str | None, offset: int) -> dict[str, Any]:
    """The page of "Load earlier": after the item ``before`` (the id of the last item
    shown), or at ``offset`` (kept for pages rendered before the cursor)."""
    rows = filters.rows(agent_id)
    items, next_cursor = timeline_items(rows, agent_id, limit=mind.PAGE_SIZE, before=before, offset=offset)
    # ``next_offset`` is what the templates test for "more" (the button pages on from
    # the last entry's id).
    return {"entries": [mind.present(i) for i in items], "next_offset": offset + len(items) if next_cursor else None}


@require_GET
@login_required
def mind_timeline(request: HttpRequest, agent_id: str) -> HttpResponse:
    """Without ``before`` or ``offset``: the timeline for new filters (and a new socket
    for them). With ``before`` (an item id): the next page of older items for "Load
    earlier"; an unknown item answers 400."""
    agent = access_agent(request, agent_id)
    filters = mind.MindFilters.from_query(request.GET)
    before = request.GET.get("before") or None
    offset = _offset(request)
    context: dict[str, Any] = {"agent_id": agent.id, "filters": filters}
    if before is not None or offset:
        try:
            context.update(_earlier(agent.id, filters, before=before, offset=offset))
        except MarkusError as exc:
            return HttpResponseBadRequest(str(exc), content_type="text/plain; charset=utf-8")
        return render(request, "mind/_page.html", context)
    response = render(request, "mind/_timeline.html", {**context, **mind.timeline_page(agent.id, filters)})
    query = filters.query_string()
    return push_url(response, reverse("mind", args=[agent.id]) + (f"?{query}" if query else ""))


@require_GET
@login_required
def mind_activity_logs(request: HttpRequest, agent_id: str, activity_id: str) -> HttpResponse:
    agent = access_agent(request, agent_id)
    activity, logs = mind.activity_logs(agent, activity_id)
    return render(request, "mind/_logs.html", {"activity": activity, "logs": logs})
