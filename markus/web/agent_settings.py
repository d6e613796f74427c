"""An agent's settings on a page, ``/agents/<id>/settings/``, for whoever controls it: its
name and role, its team (those where the caller may create an agent, as the API moves
it), and the tool servers attached to it, a checkbox each of those the caller
may attach (``toolservers.services.attachable``: staff any; anybody else those offered to
all or to its team, and those attached already). A post goes the way ``PATCH
/api/agents/{id}/`` goes (``AgentPatchInput``, ``change_agent``); refused, the form comes
back as typed with the API's message."""

from __future__ import annotations

from typing import Any

from django.contrib.auth.decorators import login_required
from django.core.exceptions import PermissionDenied
from django.http import HttpRequest, HttpResponse
from django.shortcuts import redirect, render
from django.views.decorators.http import require_http_methods

from markus.agents import permissions
from markus.agents.api import change_agent
from markus.agents.models import Agent
from markus.agents.serializers import AgentPatchInput
from markus.core.errors import MarkusError
from markus.toolservers.models import ToolServer
from markus.toolservers.services import attachable, attached_names

from .connect_pages import creatable_teams
from .usage_pages import api_message


def _servers(agent: Agent, request: HttpRequest, chosen: list[str]) -> dict[str, Any]:
    """The servers the caller may attach (``chosen`` ticked), and those its team has."""
    may = list(attachable(agent, request.user if request.user.is_authenticated else None).order_by("name"))
    of_team = ToolServer.objects.filter(teams=agent.team_id).order_by("name") if agent.team_id else []
    return {"attachable": [{"server": s, "checked": s.name in chosen} for s in may], "of_team": list(of_team)}


def _teams(request: HttpRequest, agent: Agent) -> dict[str, Any]:
    """The teams it may move to (where the caller may create an agent: ``creatable_teams``),
    its own always listed, and whether "no team" is one."""
    try:
        teams, no_team = creatable_teams(request)
    except PermissionDenied:
        teams, no_team = [], False
    if agent.team is not None and agent.team not in teams:
        teams = [agent.team, *teams]
    return {"teams": teams, "no_team": no_team or agent.team_id is None}


def _page(request: HttpRequest, agent: Agent, form: dict[str, Any], chosen: list[str], **more: Any) -> HttpResponse:
    status = more.pop("status", 200)
    servers, teams = _servers(agent, request, chosen), _teams(request, agent)
    context = {"agent": agent, "form": form, **servers, **teams, "nav": "agents", **more}
    return render(request, "agents/settings.html", context, status=status)


@require_http_methods(["GET", "POST"])
@login_required
def agent_settings(request: HttpRequest, agent_id: str) -> HttpResponse:
    """GET: the form as the agent is. POST: change it, then the form again with "Saved"
    (post/redirect/get)."""
    agent = permissions.require(request, "page:agent-settings", agent_id)
    if request.method == "GET":
        attached = attached_names([agent.id])[agent.id]
        form = {"name": agent.name, "role": agent.role, "teamId": agent.team_id or ""}
        return _page(request, agent, form, attached, saved="saved" in request.GET)
    form = {key: request.POST.get(key, "") for key in ("name", "role", "teamId")}
    chosen = request.POST.getlist("toolServers")
    data: dict[str, Any] = {"name": form["name"], "role": form["role"], "toolServers": chosen}
    if form["teamId"] != (agent.team_id or ""):  # sent only when it changes (moving has its own rule)
        data["teamId"] = form["teamId"] or None
    body = AgentPatchInput(data=data, context={"request": request})
    try:
        if not body.is_valid():
            raise MarkusError(api_message(body.errors))
        change_agent(request, agent, body.validated_data)
    except (MarkusError, PermissionDenied) as exc:
        status = exc.status_code if isinstance(exc, MarkusError) else 403
        return _page(request, agent, form, chosen, error=str(exc), status=status)
    return redirect(f"/agents/{agent.id}/settings/?saved=1")
