"""Agent bearer tokens, and who may see what.

An agent token acts only as that agent. A user sees the agents they own, the agents of
teams they own or belong to, and everything if staff. Anything else answers 404.
"""
from __future__ import annotations

from django.contrib.auth.models import AnonymousUser
from django.db.models import Q, QuerySet
from django.http import Http404
from rest_framework import authentication, exceptions, permissions

from .models import Agent, hash_token


class AgentTokenAuthentication(authentication.BaseAuthentication):
    keyword = "Bearer"

    def authenticate(self, request):
        header = authentication.get_authorization_header(request).split()
        if not header or header[0].lower() != self.keyword.lower().encode():
            return None
        if len(header) != 2:
            raise exceptions.AuthenticationFailed("Invalid bearer header.")
        try:
            raw = header[1].decode()
        except UnicodeError as exc:
            raise exceptions.AuthenticationFailed("Invalid bearer token.") from exc
        agent = Agent.objects.filter(token_hash=hash_token(raw)).first()
        if agent is None:
            raise exceptions.AuthenticationFailed("Invalid agent token.")
        return (AnonymousUser(), agent)

    def authenticate_header(self, request):
        return self.keyword


def acting_agent(request) -> Agent | None:
    auth = getattr(request, "auth", None)
    return auth if isinstance(auth, Agent) else None


class IsUserOrAgent(permissions.BasePermission):
    def has_permission(self, request, view):
        return bool(request.user and request.user.is_authenticated) or acting_agent(request) is not None


class IsUser(permissions.BasePermission):
    message = "This action needs a user, not an agent token."

    def has_permission(self, request, view):
        return bool(request.user and request.user.is_authenticated)


def agents_seen_by(user_id: int | None, *, is_staff: bool = False) -> QuerySet[Agent]:
    """The one rule: staff see every agent; a user sees the agents they own and those of
    the teams they own or belong to."""
    if user_id is None:
        return Agent.objects.none()
    if is_staff:
        return Agent.objects.all()
    return Agent.objects.filter(
        Q(owner_id=user_id) | Q(team__owner_id=user_id) | Q(team__members__id=user_id)
    ).distinct()


def visible_agents(request) -> QuerySet[Agent]:
    agent = acting_agent(request)
    if agent is not None:
        return Agent.objects.filter(id=agent.id)
    user = request.user
    if not user.is_authenticated:
        return Agent.objects.none()
    return agents_seen_by(user.pk, is_staff=user.is_staff)


def access_agent(request, agent_id: str) -> Agent:
    """Fetch an agent the caller may see; a foreign one answers exactly like a missing one."""
    agent = visible_agents(request).filter(id=agent_id).first()
    if agent is None:
        raise Http404("No such agent.")
    return agent


def user_may_see_agent(user, agent: Agent) -> bool:
    if not user or not user.is_authenticated:
        return False
    return agents_seen_by(user.pk, is_staff=user.is_staff).filter(id=agent.id).exists()
