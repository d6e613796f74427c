"""The teams' group channels on a page: ``/teams/`` lists the teams a person may see,
``/teams/<id>/channel/`` reads a team's channel (``agentbus.team_channel``), the newest
messages last, with "Load earlier" by sequence (``…/channel/messages/?before=<n>``).

A person may see a team when they own it, are one of its members, or are staff (the
teams API's rule); any other team answers 404, like a missing one. The page reads;
agents write (``agent_send_group_message``)."""

from __future__ import annotations

import json
from typing import Any

from django.contrib.auth.decorators import login_required
from django.db.models import Count, Max
from django.http import Http404, HttpRequest, HttpResponse, HttpResponseBadRequest
from django.shortcuts import render
from django.views.decorators.http import require_GET

from agentbus.models import Chunk, Stream, StreamMember
from agentbus.team_channel import team_channel_ensure, team_channel_id
from markus.agents.auth import teams_seen_by, visible_agents
from markus.agents.models import Agent, Team
from markus.core.input import whole_number

PAGE = 30  # messages the page shows at first, and per "Load earlier"
CATCH_UP = 100  # the most new messages one poll brings
POLL_SECONDS = 10  # how often an open page asks for new messages


def access_team(request: HttpRequest, team_id: str) -> Team:
    team = teams_seen_by(request.user).filter(id=team_id).first()
    if team is None:
        raise Http404("No such team.")
    return team


def chunk_text(payload: object) -> str:
    if isinstance(payload, dict):
        for key in ("text", "content", "message"):
            if isinstance(payload.get(key), str):
                return payload[key]
    return json.dumps(payload, ensure_ascii=False, sort_keys=True)


def _shown(chunks: list[Chunk]) -> list[dict[str, Any]]:
    return [
        {
            "sequence": c.sequence,
            "sender": c.sender.name if c.sender else "Markus",
            "senderId": c.sender_id,
            "text": chunk_text(c.payload),
            "createdAt": c.created_at,
        }
        for c in chunks
    ]


def channel_page_of(stream_id: str, *, before: int | None) -> tuple[list[dict[str, Any]], int | None]:
    """At most ``PAGE`` messages before sequence ``before`` (the newest without it),
    oldest first, and the cursor for the page before them (None: this is the start)."""
    rows = Chunk.objects.filter(stream_id=stream_id).select_related("sender").order_by("-sequence")
    if before is not None:
        rows = rows.filter(sequence__lt=before)
    chunks = list(rows[: PAGE + 1])
    more = len(chunks) > PAGE
    chunks = list(reversed(chunks[:PAGE]))
    return _shown(chunks), (chunks[0].sequence if more and chunks else None)


def channel_after(stream_id: str, after: int) -> list[dict[str, Any]]:
    """The messages after sequence ``after``, oldest first (at most ``CATCH_UP``)."""
    rows = Chunk.objects.filter(stream_id=stream_id, sequence__gt=after).select_related("sender")
    return _shown(list(rows.order_by("sequence")[:CATCH_UP]))


def _sequence(request: HttpRequest, name: str) -> int | None:
    raw = request.GET.get(name)
    if raw in (None, ""):
        return None
    number = whole_number(raw)
    if number is None:
        raise ValueError(f"{name} must be a message's sequence number (a whole number)")
    return number


@require_GET
@login_required
def teams_page(request: HttpRequest) -> HttpResponse:
    teams = teams_seen_by(request.user).annotate(agent_count=Count("agents", distinct=True)).order_by("name", "id")
    rows = list(teams)
    channels = {team_channel_id(t.id): t for t in rows}
    last = dict(
        Chunk.objects.filter(stream_id__in=list(channels))
        .values("stream_id")
        .annotate(at=Max("created_at"))
        .values_list("stream_id", "at")
    )
    for t in rows:
        t.last_message_at = last.get(team_channel_id(t.id))  # type: ignore[attr-defined]
    return render(request, "teams/teams.html", {"teams": rows, "nav": "teams"})


@require_GET
@login_required
def team_channel_page(request: HttpRequest, team_id: str) -> HttpResponse:
    team = access_team(request, team_id)
    stream = Stream.objects.filter(id=team_channel_id(team.id)).first() or team_channel_ensure(team)
    messages, next_cursor = channel_page_of(stream.id, before=None)
    last = messages[-1]["sequence"] if messages else 0
    member_ids = StreamMember.objects.filter(stream_id=stream.id).values("agent_id")
    members = list(Agent.objects.filter(id__in=member_ids).order_by("name", "id"))
    seen = set(visible_agents(request).filter(id__in=[m.id for m in members]).values_list("id", flat=True))
    context = {
        "team": team,
        "stream": stream,
        "messages": messages,
        "next_cursor": next_cursor,
        "after": last,
        "poll_seconds": POLL_SECONDS,
        "members": [{"agent": m, "visible": m.id in seen} for m in members],
        "nav": "teams",
    }
    return render(request, "teams/channel.html", context)


@require_GET
@login_required
def team_channel_messages(request: HttpRequest, team_id: str) -> HttpResponse:
    """``?before=<sequence>``: the page of older messages with the next "Load earlier";
    ``?after=<sequence>``: the newer ones (the open page asks every ``POLL_SECONDS``),
    with the next poll."""
    team = access_team(request, team_id)
    try:
        before, after = _sequence(request, "before"), _sequence(request, "after")
    except ValueError as exc:
        return HttpResponseBadRequest(str(exc))
    if after is not None:
        newer = channel_after(team_channel_id(team.id), after)
        context = {
            "team": team,
            "messages": newer,
            "after": newer[-1]["sequence"] if newer else after,
            "poll_seconds": POLL_SECONDS,
        }
        return render(request, "teams/_newer.html", context)
    messages, next_cursor = channel_page_of(team_channel_id(team.id), before=before)
    return render(request, "teams/_earlier.html", {"team": team, "messages": messages, "next_cursor": next_cursor})
