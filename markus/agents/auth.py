"""Agent bearer tokens, user API tokens, and who may see what.

A token becomes a caller in one place (``caller_for_token``), with one precedence for
every door (the API, A2A, MCP, the sockets): an agent's token before a user's. An agent
token acts only as that agent. Both kinds of token are stored only as their
SHA-256 (``hash_token``); a presented token is hashed and looked up. A user sees the
agents they own, the agents of teams they own or belong to, and everything if staff.
Anything else answers 404.
"""

from __future__ import annotations

from typing import TYPE_CHECKING, TypeAlias

from django.contrib.auth.models import AnonymousUser, User
from django.db.models import Q, QuerySet
from django.http import Http404, HttpRequest
from rest_framework import authentication, exceptions, permissions

from markus.core.actors import Actor
from markus.core.waits import Waiter

from .models import Agent, Team, UserToken, hash_token

if TYPE_CHECKING:
    # Not at run time: rest_framework.views imports the authentication classes, this
    # module's among them.
    from rest_framework.request import Request
    from rest_framework.views import APIView


class Caller:
    """Who is calling, with the two attributes the access helpers read of a DRF request
    (``user`` and ``auth``); for plain views that authenticated themselves."""

    def __init__(self, user: User | AnonymousUser, agent: Agent | None) -> None:
        self.user = user
        self.auth = agent


# What the access helpers accept: a DRF or plain Django request, or a Caller.
AnyRequest: TypeAlias = HttpRequest | Caller


class BearerAuthentication(authentication.BaseAuthentication):
    """``Authorization: Bearer <token>``: an agent's token (it acts as that agent), else a
    user's API token, as ``caller_for_token`` reads it at every door."""

    keyword = "Bearer"

    def authenticate(self, request: Request) -> tuple[User | AnonymousUser, Agent | None] | None:
        header = authentication.get_authorization_header(request).split()
        if not header or header[0].lower() != self.keyword.lower().encode():
            return None
        if len(header) != 2:
            raise exceptions.AuthenticationFailed("Invalid bearer header.")
        try:
            raw = header[1].decode()
        except UnicodeError as exc:
            raise exceptions.AuthenticationFailed("Invalid bearer token.") from exc
        return self.identify(raw)

    def identify(self, raw: str) -> tuple[User | AnonymousUser, Agent | None]:
        """Who a raw bearer token names."""
        caller = caller_for_token(raw)
        if caller is None:
            raise exceptions.AuthenticationFailed("Invalid token: neither an agent's nor a user's.")
        return (caller.user, caller.auth)

    def authenticate_header(self, request: Request) -> str:
        return self.keyword


class UserTokenAuthentication(authentication.TokenAuthentication):
    """``Authorization: Token <key>``, the header of DRF's TokenAuthentication, checked
    against the hashed ``UserToken`` rows instead of plaintext keys."""

    def authenticate_credentials(self, key: str) -> tuple[User | AnonymousUser, None]:
        caller = caller_for_token(key, agents=False)
        if caller is None:
            raise exceptions.AuthenticationFailed("Invalid token.")
        return (caller.user, None)


def agent_for_token(raw: str) -> Agent | None:
    """The agent a raw agent token belongs to, if any."""
    return Agent.objects.filter(token_hash=hash_token(raw)).first()


def user_for_token(raw: str) -> UserToken | None:
    """The token row (with its user) for a raw user token, if it is valid and its user
    active; else None."""
    token = UserToken.objects.select_related("user").filter(key_hash=hash_token(raw)).first()
    if token is None or not token.user.is_active:
        return None
    return token


def caller_for_token(raw: str, *, agents: bool = True) -> Caller | None:
    """Who a raw token names, the one way every door asks (once per request): an agent's
    token first, then a user's API token; None for neither (unknown, revoked, an inactive
    user). ``agents=False`` is the ``Token`` scheme, which names a user's token only."""
    if agents:
        agent = agent_for_token(raw)
        if agent is not None:
            return Caller(AnonymousUser(), agent)
    token = user_for_token(raw)
    return Caller(token.user, None) if token is not None else None


def acting_agent(request: AnyRequest) -> Agent | None:
    auth = getattr(request, "auth", None)
    return auth if isinstance(auth, Agent) else None


def caller_ref(request: AnyRequest | Request) -> str:
    """Who calls, as the bus, A2A, the waits and the sockets count them: ``agent:<id>``
    for an agent's token, ``user:<pk>`` for a user."""
    agent = acting_agent(request)
    return f"agent:{agent.id}" if agent is not None else f"user:{request.user.pk}"


def waiter_for(request: AnyRequest | Request) -> Waiter:
    """The caller and the person whose share of the waits it draws on (``markus.core.waits``):
    a user is their own person; an agent's token counts against its owner, else its
    team's owner, else only itself. Synchronous: an ownerless agent's team is read."""
    agent, caller = acting_agent(request), caller_ref(request)
    if agent is None:
        return Waiter(caller, f"person:{request.user.pk}")
    owner_id = agent.owner_id
    if owner_id is None and agent.team_id is not None:
        owner_id = Team.objects.filter(id=agent.team_id).values_list("owner_id", flat=True).first()
    return Waiter(caller, f"person:{owner_id}" if owner_id is not None else caller)


class IsUserOrAgent(permissions.BasePermission):
    def has_permission(self, request: Request, view: APIView) -> bool:
        return bool(request.user and request.user.is_authenticated) or acting_agent(request) is not None


class IsUser(permissions.BasePermission):
    message = "This action needs a user, not an agent token."

    def has_permission(self, request: Request, view: APIView) -> bool:
        return bool(request.user and request.user.is_authenticated)


def signed_in_user(request: AnyRequest | Request) -> User:
    """The request's user, for views behind IsUser (which refused anyone else)."""
    user = request.user
    if not isinstance(user, User):
        raise exceptions.NotAuthenticated()
    return user


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


def teams_seen_by(user: User | AnonymousUser, *, agent: Agent | None = None) -> QuerySet[Team]:
    """The one rule of teams: an agent sees its own team; staff see every team; a user
    the teams they own or belong to (anybody else gets 404, like a missing team)."""
    if agent is not None:
        return Team.objects.filter(id=agent.team_id)
    if not user.is_authenticated:
        return Team.objects.none()
    if user.is_staff:
        return Team.objects.all()
    return Team.objects.filter(id__in=Team.objects.filter(Q(owner_id=user.pk) | Q(members=user.pk)).values("id"))


def controls_team(user: User | AnonymousUser, team: Team) -> bool:
    """Who may change a team (its settings, its budget): its owner and staff."""
    return bool(user.is_authenticated and (user.is_staff or team.owner_id == user.pk))


def visible_agents(request: AnyRequest) -> QuerySet[Agent]:
    agent = acting_agent(request)
    if agent is not None:
        return Agent.objects.filter(id=agent.id)
    user = request.user
    if not user.is_authenticated:
        return Agent.objects.none()
    return agents_seen_by(user.pk, is_staff=user.is_staff)


def access_agent(request: AnyRequest, agent_id: str) -> Agent:
    """Fetch an agent the caller may see; a foreign one answers exactly like a missing one."""
    agent = visible_agents(request).filter(id=agent_id).first()
    if agent is None:
        raise Http404("No such agent.")
    return agent


def user_may_see_agent(user: User | AnonymousUser | None, agent: Agent) -> bool:
    if not user or not user.is_authenticated:
        return False
    return agents_seen_by(user.pk, is_staff=user.is_staff).filter(id=agent.id).exists()


def actor_for_request(request: AnyRequest) -> Actor:
    """Who acts in this request: the authenticated agent, else the user."""
    agent = acting_agent(request)
    return Actor.for_agent(agent) if agent is not None else Actor.for_user(request.user)
