"""The pages a signed-in person starts from: home, agents, work, the bell, and the
styled 404/500. Thin views: every read goes through the selectors, in a fixed number of
queries whatever the number of agents, tasks or notifications."""

from __future__ import annotations

from collections import Counter
from typing import Any
from urllib.parse import quote

from django.contrib.auth.decorators import login_required
from django.contrib.auth.models import User
from django.db.models import Count, OuterRef
from django.http import HttpRequest, HttpResponse, HttpResponseServerError, JsonResponse
from django.shortcuts import redirect, render
from django.template import loader
from django.urls import NoReverseMatch, reverse
from django.utils import timezone
from django.views.decorators.http import require_GET, require_POST

from attention.models import AgentAttention
from attention.records import focus_of
from attention.stalls import stalls_of
from mailbox.registry import descriptor
from mailbox.selectors import depth_label, queue_depth_subquery
from markus.agents.auth import visible_agents
from markus.agents.models import Agent
from markus.core.actors import Actor
from markus.core.api import is_program_request
from markus.work.models import TaskState
from markus.work.selectors import (
    tasks_visible_to,
)
from notifications.links import is_local_path
from notifications.models import UserNotification
from notifications.selectors import notifications_for, unread_count
from notifications.services import notification_mark_read, notifications_mark_all_read

from . import connect_pages

NOTIFICATIONS_SHOWN = 10
TASKS_PER_STATE = 8
WORK_ROWS = 100
# The board's columns: the states a person acts on. Closed ones are counted, not listed.
BOARD_STATES = (TaskState.PENDING, TaskState.IN_PROGRESS, TaskState.BLOCKED, TaskState.REVIEW)
CLOSED_STATES = (
    TaskState.COMPLETED,
    TaskState.FAILED,
    TaskState.REJECTED,
    TaskState.CANCELLED,
    TaskState.ARCHIVED,
)
# Tells the bell and the notification list to read themselves again.
BELL_EVENT = "markus:bell"


def _user(request: HttpRequest) -> User:
    user = request.user
    assert isinstance(user, User)  # behind login_required
    return user


# ---------------------------------------------------------------------------- reads


def agent_rows(request: HttpRequest) -> list[dict[str, Any]]:
    """The agents the user may see with their live state, focus, queue depth and stall
    (``attention.stalls``): five queries for any number of agents (six when one is
    focused: its last tool calls)."""
    agents = list(visible_agents(request).select_related("team").order_by("created_at", "id"))
    ids = [a.id for a in agents]
    now = timezone.now()
    attention = {
        row.agent_id: row for row in AgentAttention.objects.select_related("current_item").filter(agent_id__in=ids)
    }
    # Each queue counted up to the loop's cap ("1000+"), never every queued item.
    depths = dict(
        Agent.objects.filter(id__in=ids).annotate(n=queue_depth_subquery(OuterRef("pk"))).values_list("id", "n")
    )
    stalled = stalls_of(ids, now)
    rows = []
    for agent in agents:
        row = attention.get(agent.id)
        # As attention_snapshot reads it: a state counts only under a live lease.
        live = bool(row and row.lease_owner and row.lease_expires_at and row.lease_expires_at > now)
        focus = focus_of(row.current_item, row.focus_started_at) if (row and live) else None
        if focus is not None:
            d = descriptor(focus["sourceType"])
            focus = {**focus, "icon": d.icon, "typeLabel": d.label}
        rows.append(
            {
                "agent": agent,
                "state": str(row.state) if (row and live) else "idle",
                "focus": focus,
                "queue_depth": depth_label(depths.get(agent.id) or 0),
                "stall": stalled[agent.id],
            }
        )
    return rows


def notification_link(n: UserNotification) -> str:
    """Where a notification leads: its target path, if it is one on this site; else the
    approvals page at its question (``metadata.approvalId``); else an agent's daily
    report (``agentId`` and ``reportDate``, as an ``agent_report`` names it), its chat
    page at the session (an ``open_chat``) or its mind view (``agentId``)."""
    target = n.action_target if isinstance(n.action_target, dict) else {}
    path = target.get("path")
    if is_local_path(path):
        return path
    approval_id = (n.metadata or {}).get("approvalId")
    if isinstance(approval_id, str) and approval_id:  # a question to answer: where it is answered
        return f"{reverse('approvals')}#approval-{approval_id}"
    agent_id, day = target.get("agentId"), target.get("reportDate")
    if not isinstance(agent_id, str) or not agent_id:
        return ""
    try:
        if isinstance(day, str) and day:
            return reverse("agent-report", args=[agent_id, day])
        if n.action_type == "open_chat":  # the conversation it belongs to
            session = target.get("sessionId")
            chat = reverse("chat", args=[agent_id])
            return f"{chat}?session={quote(session)}" if isinstance(session, str) and session else chat
        return reverse("mind", args=[agent_id])
    except NoReverseMatch:  # not an id or a date the pages route
        return ""


def notifications_context(user: User) -> dict[str, Any]:
    rows = list(notifications_for(user)[:NOTIFICATIONS_SHOWN])
    return {
        "notifications": [{"n": n, "link": notification_link(n)} for n in rows],
        "unread": unread_count(user),
    }


def board(actor: Actor) -> dict[str, Any]:
    """Tasks by state: the open ones listed per column (newest first), every state
    counted. Two queries."""
    visible = tasks_visible_to(actor)
    counts = Counter(dict(visible.values_list("status").annotate(n=Count("id")).values_list("status", "n")))
    # Enough rows for every column; one query, cut per column below.
    rows = list(
        visible.filter(status__in=BOARD_STATES)
        .select_related("assignee")
        .order_by("-updated_at", "-id")[: TASKS_PER_STATE * len(BOARD_STATES) * 4]
    )
    columns = []
    for state in BOARD_STATES:
        tasks = [t for t in rows if t.status == state][:TASKS_PER_STATE]
        columns.append({"state": state.value, "label": state.label, "count": counts[state.value], "tasks": tasks})
    closed = [{"state": s.value, "label": s.label, "count": counts[s.value]} for s in CLOSED_STATES]
    return {"columns": columns, "closed": closed}


# ---------------------------------------------------------------------------- pages


@require_GET
@login_required
def home(request: HttpRequest) -> HttpResponse:
    user = _user(request)
    return render(
        request,
        "home.html",
        {
            "agents": agent_rows(request),
            **notifications_context(user),
            "board": board(Actor.for_user(user)),
            "nav": "home",
        },
    )


@require_GET
@login_required
def home_agents(request: HttpRequest) -> HttpResponse:
    """The agents panel alone, for its periodic refresh."""
    return render(request, "home/_agents.html", {"agents": agent_rows(request)})


@require_GET
@login_required
def home_notifications(request: HttpRequest) -> HttpResponse:
    return render(request, "home/_notifications.html", notifications_context(_user(request)))


@require_GET
@login_required
def bell(request: HttpRequest) -> HttpResponse:
    return render(request, "home/_bell.html", {"unread": unread_count(_user(request))})


@require_POST
@login_required
def notification_read(request: HttpRequest, notification_id: str) -> HttpResponse:
    """Mark one notification read (another user's answers 404); answers the list again
    and tells the bell to recount."""
    user = _user(request)
    notification_mark_read(user=user, notification_id=notification_id)
    response = render(request, "home/_notifications.html", notifications_context(user))
    response["HX-Trigger"] = BELL_EVENT
    return response


@require_GET
@login_required
def notification_open(request: HttpRequest, notification_id: str) -> HttpResponse:
    """Where a notification's link in the list goes: marks it read, then on to what it
    names (``notification_link``; home when it names nothing). Another user's: 404."""
    notification = notification_mark_read(user=_user(request), notification_id=notification_id)
    return redirect(notification_link(notification) or reverse("home"))


@require_POST
@login_required
def notifications_read_all(request: HttpRequest) -> HttpResponse:
    user = _user(request)
    notifications_mark_all_read(user=user)
    response = render(request, "home/_notifications.html", notifications_context(user))
    response["HX-Trigger"] = BELL_EVENT
    return response


@require_GET
@login_required
def agents_page(request: HttpRequest) -> HttpResponse:
    may_add = connect_pages.may_create(request, None)  # owning any team is what lets a person add one
    return render(request, "agents.html", {"agents": agent_rows(request), "may_add": may_add, "nav": "agents"})


# ---------------------------------------------------------------------------- errors


def page_not_found(request: HttpRequest, exception: Exception | None = None) -> HttpResponse:
    """The styled page; at a program's door (the API, A2A) the API's error shape."""
    if is_program_request(request):
        return JsonResponse({"detail": f"No API endpoint at {request.path}.", "code": "not_found"}, status=404)
    return render(request, "404.html", {"path": request.path}, status=404)


def server_error(request: HttpRequest) -> HttpResponse:
    """No request context: the database (sessions, the user) may be what failed."""
    if is_program_request(request):
        return JsonResponse({"detail": "Server error.", "code": "server_error"}, status=500)
    return HttpResponseServerError(loader.get_template("500.html").render())
