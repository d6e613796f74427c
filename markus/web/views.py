"""The mind view and its partials. Thin: access check, filters, one template each."""

from __future__ import annotations

from typing import Any

from django.contrib.auth.decorators import login_required
from django.http import Http404, HttpRequest, HttpResponse, HttpResponseBadRequest, HttpResponseRedirect
from django.shortcuts import get_object_or_404, redirect, render
from django.template.loader import render_to_string
from django.templatetags.static import static
from django.urls import reverse
from django.views.decorators.http import require_GET, require_POST
from django_htmx.http import push_url

from attention.selectors import timeline_items
from mailbox.models import MailboxItem
from markus.agents import permissions
from markus.agents.chat import recent_conversation
from markus.agents.models import Agent
from markus.core.actors import Actor
from markus.core.errors import MarkusError
from markus.toolservers.services import failing_notices
from markus.usage import selectors as usage

from . import mind
from .activity_log import activity_log_lines


@require_GET
def favicon(request: HttpRequest) -> HttpResponse:
    """``/favicon.ico``, which browsers ask for on any page (and the admin's and the API
    docs' pages link nowhere else): the SVG icon ``base.html`` links."""
    response = HttpResponseRedirect(static("web/favicon.svg"))
    response["Cache-Control"] = "public, max-age=86400"
    return response


def _offset(request: HttpRequest) -> int:
    try:
        return max(0, min(int(request.GET.get("offset", 0)), 10**9))
    except ValueError:
        return 0


@require_GET
@login_required
def mind_view(request: HttpRequest, agent_id: str) -> HttpResponse:
    agent = permissions.require(request, "page:mind", agent_id)
    filters = mind.MindFilters.from_query(request.GET)
    reader = permissions.reader(request)
    can_control = mind.may_control(request.user, agent)
    return render(
        request,
        "mind/mind.html",
        {
            **mind.header_context(agent.id, can_control=can_control, reader=reader),
            **mind.filters_context(filters),
            **mind.timeline_page(agent.id, filters, reader=reader),
            **mind.reports_context(agent.id),
            "agent_id": agent.id,
            "chat_recent": recent_conversation(agent.id),
            "activity_log": activity_log_lines(agent.id),
            "usage": usage.agent_panel(agent.id),
            "tool_server_notices": failing_notices(agent.id, why=can_control),
            **mind.open_tasks(agent.id, Actor.for_user(request.user)),
        },
    )


def _earlier(
    agent_id: str, filters: mind.MindFilters, *, before: str | None, offset: int, reader: permissions.Reader
) -> dict[str, Any]:
    """The page of "Load earlier": after the item ``before`` (the id of the last item
    shown), or at ``offset`` (kept for pages rendered before the cursor)."""
    rows = filters.rows(agent_id)
    items, next_cursor = timeline_items(rows, agent_id, limit=mind.PAGE_SIZE, before=before, offset=offset)
    # ``next_offset`` is what the templates test for "more" (the button pages on from
    # the last entry's id).
    return {
        "entries": [mind.present(i, reader) for i in items],
        "next_offset": offset + len(items) if next_cursor else None,
    }


@require_GET
@login_required
def mind_timeline(request: HttpRequest, agent_id: str) -> HttpResponse:
    """Without ``before`` or ``offset``: the timeline for new filters (and a new socket
    for them). With ``before`` (an item id): the next page of older items for "Load
    earlier"; an unknown item answers 400."""
    agent = permissions.require(request, "page:mind-timeline", agent_id)
    filters = mind.MindFilters.from_query(request.GET)
    before = request.GET.get("before") or None
    offset = _offset(request)
    reader = permissions.reader(request)
    context: dict[str, Any] = {
        "agent_id": agent.id,
        "filters": filters,
        "can_control": mind.may_control(request.user, agent),
    }
    if before is not None or offset:
        try:
            context.update(_earlier(agent.id, filters, before=before, offset=offset, reader=reader))
        except MarkusError as exc:
            return HttpResponseBadRequest(str(exc), content_type="text/plain; charset=utf-8")
        return render(request, "mind/_page.html", context)
    response = render(
        request, "mind/_timeline.html", {**context, **mind.timeline_page(agent.id, filters, reader=reader)}
    )
    query = filters.query_string()
    return push_url(response, reverse("mind", args=[agent.id]) + (f"?{query}" if query else ""))


@require_GET
@login_required
def mind_activity_logs(request: HttpRequest, agent_id: str, activity_id: str) -> HttpResponse:
    agent = permissions.require(request, "page:mind-activity-logs", agent_id)
    activity, logs = mind.activity_logs(agent, activity_id, permissions.reader(request))
    return render(request, "mind/_logs.html", {"activity": activity, "logs": logs})


# ------------------------------------------------------------------- the control room


def _without_htmx(agent: Agent, message: str, status: int) -> HttpResponse:
    """A control posted by a plain form: back to the mind view, or a refusal as its
    status with the message."""
    if status != 200:
        return HttpResponse(message, status=status, content_type="text/plain; charset=utf-8")
    return redirect("mind", agent.id)


def _answer(
    request: HttpRequest, agent: Agent, message: str, *, status: int = 200, header: bool = True
) -> HttpResponse:
    """htmx: the message (``#mind-flash``) and the fresh header (it carries the
    controls, out of band); otherwise back to the mind view (a refusal answers its
    status with the message)."""
    if request.headers.get("HX-Request") != "true":
        return _without_htmx(agent, message, status)
    context = {
        **mind.header_context(agent.id, live=True, can_control=True, reader=permissions.reader(request)),
        "message": message,
        "message_error": status != 200,
    }
    # The target is the message (``#mind-flash``), which the socket never redraws; the
    # header comes out of band, unless the control sat in an item the socket may have
    # redrawn meanwhile (htmx looks out-of-band targets up from the triggering element):
    # the socket brings the item and the header anyway.
    html = render_to_string("mind/_flash.html", context)
    if header:
        html += render_to_string("mind/_header.html", {**context, "agent_id": agent.id, "oob": True}, request=request)
    return HttpResponse(html, status=status)


@require_POST
@login_required
def mind_control(request: HttpRequest, agent_id: str, action: str) -> HttpResponse:
    """POST pause / resume / wake / heartbeat."""
    agent = permissions.require(request, "page:mind-control", agent_id)
    try:
        message = mind.control_agent(agent, action, request.user)
    except mind.ControlRefused as exc:
        return _answer(request, agent, str(exc), status=409)
    agent.refresh_from_db()
    return _answer(request, agent, message)


@require_POST
@login_required
def mind_item_control(request: HttpRequest, agent_id: str, item_id: str, action: str) -> HttpResponse:
    """POST retry / drop (``reason``) of one of the agent's mailbox items."""
    agent = permissions.require(request, "page:mind-item-control", agent_id)
    item = get_object_or_404(MailboxItem, agent=agent, id=item_id)
    try:
        if action == "retry":
            message = mind.retry_item(item, request.user)
        else:
            message = mind.drop_item(item, request.user, request.POST.get("reason", ""))
    except mind.ControlRefused as exc:
        return _answer(request, agent, str(exc), status=409, header=False)
    return _answer(request, agent, message, header=False)


@require_POST
@login_required
def mind_reminder_cancel(request: HttpRequest, agent_id: str, item_id: str) -> HttpResponse:
    """POST: cancel one of the agent's pending reminders (404 for anything else, 409
    once it fired). htmx gets the redrawn reminders and reports section."""
    agent = permissions.require(request, "page:mind-reminder-cancel", agent_id)
    status = 200
    try:
        message = mind.cancel_reminder(agent, item_id, request.user)
    except mind.ControlRefused as exc:
        message, status = str(exc), 409
    except MarkusError as exc:
        raise Http404(str(exc)) from exc
    if request.headers.get("HX-Request") != "true":
        return _without_htmx(agent, message, status)
    context = {
        "agent": agent,
        "agent_id": agent.id,
        "can_control": True,
        **mind.reports_context(agent.id, message=message, message_error=status != 200),
    }
    return render(request, "mind/_reports.html", context, status=status)


@require_GET
@login_required
def agent_report(request: HttpRequest, agent_id: str, day: str) -> HttpResponse:
    """One daily report of an agent, in full (where its ``agent_report`` notification
    leads); 404 for a date without one, like for an agent the reader may not see."""
    agent = permissions.require(request, "page:agent-report", agent_id)
    return render(request, "mind/report.html", {"agent": agent, **mind.report_page(agent, day)})
