"""An agent's chat page, ``/agents/<id>/chat/``: its sessions (the main one first), a
session's conversation with "Load earlier" by cursor, a new session. Sending goes to
the chat endpoint (``POST /api/agents/<id>/chat``, the reply streamed); what arrives
otherwise (a ``notify_user`` message, a reply to another tab) is read with ``after``
when the agent's socket says the session has something new. The reads are the chat
API's (``sessions_for``, ``visible_session``, ``session_messages``): a private session
is its person's, a foreign agent answers 404."""

from __future__ import annotations

from typing import Any

from django.contrib.auth import get_user_model
from django.contrib.auth.decorators import login_required
from django.db.models import Q
from django.http import HttpRequest, HttpResponse, HttpResponseBadRequest
from django.shortcuts import redirect, render
from django.urls import reverse
from django.views.decorators.http import require_GET, require_POST

from mailbox import lifecycle
from mailbox.models import MailboxItem
from mailbox.registry import MailboxType, Status
from markus.agents import permissions
from markus.agents.chat import (
    conversation,
    messages_after,
    serialize_message,
    session_create,
    session_messages,
    sessions_for,
    visible_session,
)
from markus.agents.models import Agent, ChatMessage, ChatSession
from markus.core.errors import MarkusError
from markus.core.input import whole_number
from notifications.models import Approval

PAGE = 30  # messages a page shows at first, and per "Load earlier"
CATCH_UP = 100  # the most new messages one catch-up read brings
TITLE_MAX = 200


def _session(request: HttpRequest, agent: Agent) -> ChatSession:
    """``?session=`` if the caller may read it (else 404), or the main session."""
    wanted = request.GET.get("session")
    if wanted:
        return visible_session(request, agent, wanted)
    return visible_session(request, agent, sessions_for(request, agent)[0]["id"])


def _shown(request: HttpRequest, messages: list[dict[str, Any]]) -> list[dict[str, Any]]:
    """The messages with who said each (``who``): "You", another person's name (one
    query for all of them), the agent's name, or "System"."""
    ids = {str(m["metadata"].get("senderId")) for m in messages if m["role"] == ChatMessage.Role.USER}
    pks = {pk for i in ids if (pk := whole_number(i)) is not None}
    names: dict[int | None, str] = dict(get_user_model().objects.filter(pk__in=pks).values_list("pk", "username"))
    mine = str(request.user.pk)
    for m in messages:
        sender = str(m["metadata"].get("senderId"))
        if m["role"] == ChatMessage.Role.USER:
            m["who"] = "You" if sender == mine else names.get(whole_number(sender), "A person")
        else:
            m["who"] = None  # the template names the agent, or the system
    return messages


def _waiting(request: HttpRequest, agent: Agent, session: ChatSession) -> list[dict[str, Any]]:
    """The approvals a message of this session waits for: its item parked by a tool
    call a person must approve first (``attention.settle.park``). The caller's own are
    shown with their title and a link to answer; another person's by whose they are."""
    items = MailboxItem.objects.filter(
        lifecycle.parked(), agent_id=agent.id, source_type=MailboxType.HUMAN_CHAT, status=Status.DEFERRED
    )
    # A message of the main session names no session (``attention.chat._enqueue``).
    said_here = Q(metadata__sessionId__isnull=True) if session.is_main else Q(metadata__sessionId=session.id)
    items = items.filter(said_here)
    rows = Approval.objects.filter(mailbox_item__in=items, status=Approval.State.PENDING).select_related("user")
    return [
        {"id": a.id, "title": a.title, "mine": a.user_id == request.user.pk, "who": a.user.get_username()}
        for a in rows.order_by("created_at", "id")
    ]


@require_GET
@login_required
def chat_page(request: HttpRequest, agent_id: str) -> HttpResponse:
    agent = permissions.require(request, "page:chat", agent_id)
    sessions = sessions_for(request, agent)
    session = _session(request, agent)
    page = session_messages(session, limit=PAGE, before=None, rows=conversation(session))
    context: dict[str, Any] = {
        "agent": agent,
        "sessions": sessions,
        "session": session,
        "messages": _shown(request, list(reversed(page["messages"]))),
        "next_cursor": page["nextCursor"],
        "chat_type": MailboxType.HUMAN_CHAT.value,  # the items whose end brings a reply
        "waiting": _waiting(request, agent, session),
        "nav": "agents",
    }
    return render(request, "chat/chat.html", context)


@require_GET
@login_required
def chat_messages(request: HttpRequest, agent_id: str) -> HttpResponse:
    """``?session=&before=<id>``: the page of older messages (with the next "Load
    earlier"); ``?session=&after=<id>``: the newer ones, oldest first. A bad cursor
    answers 400 with why. ``?session=&waiting=1``: what the session waits for (the
    approvals its messages are parked for), read again when the agent's socket says a
    chat item changed."""
    agent = permissions.require(request, "page:chat-messages", agent_id)
    session = _session(request, agent)
    if request.GET.get("waiting"):
        context = {"agent": agent, "waiting": _waiting(request, agent, session)}
        return render(request, "chat/_waiting.html", context)
    rows = conversation(session)
    after = request.GET.get("after")
    try:
        if after:
            messages = _shown(
                request, [serialize_message(m) for m in messages_after(rows, session, after, limit=CATCH_UP)]
            )
            return render(request, "chat/_messages.html", {"messages": messages, "agent": agent})
        page = session_messages(session, limit=PAGE, before=request.GET.get("before"), rows=rows)
    except MarkusError as exc:
        return HttpResponseBadRequest(str(exc))
    context = {
        "agent": agent,
        "session": session,
        "messages": _shown(request, list(reversed(page["messages"]))),
        "next_cursor": page["nextCursor"],
    }
    return render(request, "chat/_earlier.html", context)


@require_POST
@login_required
def chat_session_new(request: HttpRequest, agent_id: str) -> HttpResponse:
    """A new session, the caller's own; on to it."""
    agent = permissions.require(request, "page:chat-session-new", agent_id)
    title = (request.POST.get("title") or "").strip()[:TITLE_MAX] or "New chat"
    session = session_create(request, agent, title)
    return redirect(reverse("chat", args=[agent.id]) + f"?session={session.id}")
