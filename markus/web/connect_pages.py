"""Connecting an outside agent from the pages: ``/agents/new/`` adds one (name, role, a
team where the caller may create agents; or, with ``kind`` internal, one Markus runs)
through the API's ``create_agent``;
``/agents/<id>/connect/`` shows ready-made configuration for its harness
(``markus.agents.connect``) and rotates or revokes its token.

The token is stored only as a hash, so it is shown once: a create or a rotation keeps it
in the session and redirects (post/redirect/get, so a reload never posts again); the
connect page takes it out and writes it into the snippets. Any later view, a reload
included, shows the placeholder. The page is never cached (``no-store``)."""

from __future__ import annotations

from pathlib import Path
from typing import Any

from django.contrib.auth.decorators import login_required
from django.core.exceptions import PermissionDenied
from django.http import FileResponse, Http404, HttpRequest, HttpResponse
from django.shortcuts import redirect, render
from django.views.decorators.cache import never_cache
from django.views.decorators.http import require_GET, require_http_methods, require_POST

from markus.agents import connect, permissions
from markus.agents.api import create_agent
from markus.agents.auth import teams_seen_by
from markus.agents.models import Agent, Team
from markus.agents.serializers import AgentCreateInput
from markus.agents.services import agent_token_revoke, agent_token_rotate
from markus.core.errors import MarkusError

# The session key of the tokens just issued, by agent id: taken out by the connect page.
JUST_ISSUED = "markus.connect.issued"
HOOK_SCRIPT = Path(__file__).resolve().parents[2] / "agentbus" / "hooks" / "claude_code.py"


def may_create(request: HttpRequest, team: Team | None) -> bool:
    try:
        permissions.require_creator(request, team.owner_id if team is not None else None)
    except PermissionDenied:
        return False
    return True


def creatable_teams(request: HttpRequest) -> tuple[list[Team], bool]:
    """The teams the caller may add an agent to, and whether they may add one with no
    team; 403 saying who may when neither (``permissions.require_creator``)."""
    teams = [t for t in teams_seen_by(request.user).order_by("name", "id") if may_create(request, t)]
    no_team = may_create(request, None)
    if not teams and not no_team:
        raise PermissionDenied(f"Only {permissions.CREATORS} may create an agent.")
    return teams, no_team


def _issued(request: HttpRequest, agent_id: str, token: str) -> HttpResponse:
    request.session[JUST_ISSUED] = {**request.session.get(JUST_ISSUED, {}), agent_id: token}
    return redirect("agent-connect", agent_id)


def _outside_agent(request: HttpRequest, operation: str, agent_id: str) -> Agent:
    """The outside agent ``agent_id`` for ``operation``; an internal one has nothing to
    connect (the attention loop runs it) and answers 404."""
    agent = permissions.require(request, operation, agent_id)
    if agent.kind != Agent.Kind.EXTERNAL:
        raise Http404("Nothing to connect: this agent is internal (Markus runs it).")
    return agent


@never_cache
@require_http_methods(["GET", "POST"])
@login_required
def agent_new(request: HttpRequest) -> HttpResponse:
    """The form; its post creates the agent as ``POST /api/agents/`` does: an outside one
    (the default ``kind``) goes on to its connect page, its token shown there once; an
    internal one (Markus runs it) to its mind view. A refusal (a bad field, a taken id, a
    team the caller may not create in) shows the form again with it."""
    teams, no_team = creatable_teams(request)
    context: dict[str, Any] = {"teams": teams, "no_team": no_team, "form": request.POST, "nav": "agents"}
    if request.method == "GET":
        return render(request, "connect/new.html", context)
    data = {key: request.POST.get(key, "").strip() for key in ("name", "role", "teamId", "id", "kind")}
    data["kind"] = data["kind"] or Agent.Kind.EXTERNAL
    body = AgentCreateInput(data={**data, "id": data["id"] or None}, context={"request": request})
    try:
        if not body.is_valid():
            first = next(iter(body.errors.values()))
            raise MarkusError(" ".join(str(m) for m in first))
        agent, token = create_agent(request, body.validated_data)
    except (MarkusError, PermissionDenied) as exc:
        status = exc.status_code if isinstance(exc, MarkusError) else 403
        return render(request, "connect/new.html", {**context, "error": str(exc)}, status=status)
    if agent.kind == Agent.Kind.INTERNAL:
        return redirect("mind", agent.id)
    return _issued(request, agent.id, token)


@never_cache
@require_GET
@login_required
def agent_connect(request: HttpRequest, agent_id: str) -> HttpResponse:
    agent = _outside_agent(request, "page:agent-connect", agent_id)
    issued = request.session.get(JUST_ISSUED, {})
    token = issued.pop(agent.id, None)
    if token is not None:
        request.session[JUST_ISSUED] = issued
    base = request.build_absolute_uri("/")
    context = {
        "agent": agent,
        "token": token,
        "has_token": agent.token_hash is not None,
        "snippets": connect.snippets(base_url=base, agent_id=agent.id, token=token),
        "placeholder": connect.TOKEN_PLACEHOLDER,
        "nav": "agents",
    }
    return render(request, "connect/connect.html", context)


@require_POST
@login_required
def agent_token_rotate_page(request: HttpRequest, agent_id: str) -> HttpResponse:
    agent = _outside_agent(request, "page:agent-token-rotate", agent_id)
    return _issued(request, agent.id, agent_token_rotate(agent=agent))


@require_POST
@login_required
def agent_token_revoke_page(request: HttpRequest, agent_id: str) -> HttpResponse:
    agent = _outside_agent(request, "page:agent-token-revoke", agent_id)
    agent_token_revoke(agent=agent)
    return redirect("agent-connect", agent.id)


@require_GET
def hook_script(request: HttpRequest) -> FileResponse:
    """``agentbus/hooks/claude_code.py`` for ``curl``: the Claude Code hook, one file of
    the project's own (no secret in it), so open to anybody like the favicon."""
    return FileResponse(HOOK_SCRIPT.open("rb"), content_type="text/x-python; charset=utf-8")
