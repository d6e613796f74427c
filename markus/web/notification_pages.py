"""``/notifications/``: every notification of the caller, a page at a time, newest first,
searched by words of the title or the body and filtered by read state and type, kept in
the URL (``markus.web.listing``). The home page shows the newest few and links here."""

from __future__ import annotations

from typing import Any

from django.contrib.auth.decorators import login_required
from django.contrib.auth.models import User
from django.db.models import Q
from django.http import HttpRequest, HttpResponse
from django.shortcuts import render
from django.urls import reverse
from django.views.decorators.http import require_GET

from notifications.registry import USER_NOTIFICATION_TYPE_REGISTRY
from notifications.selectors import notifications_for, unread_count

from .listing import Query, one_of, search_text
from .pages import notification_link

NOTIFICATIONS_PER_PAGE = 30
READ_STATES = {"unread": False, "read": True}  # the ``read`` filter's values


@require_GET
@login_required
def notifications_page(request: HttpRequest) -> HttpResponse:
    user = request.user
    assert isinstance(user, User)  # behind login_required
    query = Query(request.GET)
    wanted = query.read(
        {
            "read": one_of(READ_STATES),
            "type": one_of(t.value for t in USER_NOTIFICATION_TYPE_REGISTRY),
            "q": search_text,
        }
    )
    rows = notifications_for(user, type=wanted.get("type"))
    if "read" in wanted:
        rows = rows.filter(read=READ_STATES[wanted["read"]])
    if wanted.get("q"):
        rows = rows.filter(Q(title__icontains=wanted["q"]) | Q(body__icontains=wanted["q"]))
    listed = query.page(rows, per_page=NOTIFICATIONS_PER_PAGE)
    context: dict[str, Any] = {
        "listed": listed,
        "notifications": [{"n": n, "link": notification_link(n)} for n in listed.rows],
        "unread": unread_count(user),
        "filters": query.kept,
        "notes": query.notes,
        "types": [(t.value, d.label) for t, d in USER_NOTIFICATION_TYPE_REGISTRY.items()],
        "list_url": (reverse("notifications") + query.url()).rstrip("?"),
    }
    return render(request, "notifications.html", context)
