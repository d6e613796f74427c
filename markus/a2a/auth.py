"""Who calls the A2A door: ``Authorization: Bearer <token>``, where the token is an
agent's token (it acts as that agent) or a user's API token (the security scheme the
cards name); ``Authorization: Token <key>`` works too, as on the API. A token that
could be both names the agent, as at every door (``caller_for_token``). No session: an
A2A client is a program, not a browser."""

from __future__ import annotations

from typing import TYPE_CHECKING

from django.core.exceptions import RequestDataTooBig
from rest_framework import exceptions
from rest_framework.request import Request

from markus.agents.auth import BearerAuthentication, Caller, UserTokenAuthentication, acting_agent
from markus.core.limits import BodyTooLarge

if TYPE_CHECKING:
    from django.http import HttpRequest

SCHEME = "bearer"  # the name of the card's security scheme


# The API's token schemes (``markus.agents.auth``), without its session.
AUTHENTICATION = [BearerAuthentication, UserTokenAuthentication]


def authenticate(request: HttpRequest) -> Caller:
    """The caller of a plain view (raises NotAuthenticated, AuthenticationFailed or
    BodyTooLarge). Synchronous. A test client's ``force_authenticate`` is honoured, as
    in every DRF view."""
    try:
        request.body  # noqa: B018 - read and kept for the view (413 over the limit)
    except RequestDataTooBig:
        raise BodyTooLarge() from None
    drf = Request(request, authenticators=[cls() for cls in AUTHENTICATION])
    user, agent = drf.user, acting_agent(drf)
    if agent is None and not (user and user.is_authenticated):
        raise exceptions.NotAuthenticated()
    return Caller(user, agent)
