"""Writes about agents, teams and user API tokens."""

from __future__ import annotations

import re
import secrets
from typing import Any

from django.contrib.auth.models import User
from django.db import IntegrityError, transaction

from markus.core.errors import ConflictError, MarkusError
from markus.core.events import CHAT_MESSAGE_EVENT, agent_group, send_event_on_commit, user_group
from markus.core.ids import new_id

from .models import Agent, ChatMessage, ChatSession, Team, UserToken, hash_token

AGENT_ID_RE = re.compile(r"^[A-Za-z0-9_.-]{1,64}$")
AGENT_TOKEN_PREFIX = "mk_"  # tells an agent's token from a user's (agentbus.hub.authorization)
# Ids are one namespace across all teams. A taken id answers this, whoever holds it (the
# caller, or someone whose agents the caller may not see), naming neither the id nor
# what holds it: nobody learns more about a foreign agent than that its id is unusable.
ID_NOT_AVAILABLE = "id not available: choose another id (or leave it out for a generated one)"


class AgentError(MarkusError):
    pass


@transaction.atomic
def agent_create(
    *,
    name: str,
    role: str = "",
    kind: str = Agent.Kind.INTERNAL,
    agent_id: str | None = None,
    team: Team | None = None,
    owner: User | None = None,
) -> tuple[Agent, str]:
    """Create an agent with its main chat session. Returns the agent and its raw API
    token, which is stored only as a hash and cannot be shown again."""
    if not isinstance(name, str) or not name.strip():
        raise AgentError("name is required")
    if kind not in Agent.Kind.values:
        raise AgentError(f"kind must be one of {', '.join(Agent.Kind.values)}")
    if agent_id is not None and not AGENT_ID_RE.match(agent_id):
        raise AgentError("id may hold letters, digits, '_', '-' and '.', at most 64 characters")
    raw = new_agent_token()
    agent = Agent(
        id=agent_id or new_id("agt"),
        name=name.strip()[:200],
        role=(role or "")[:200],
        kind=kind,
        team=team,
        owner=owner,
        token_hash=hash_token(raw),
    )
    try:
        with transaction.atomic():
            agent.save(force_insert=True)
    except IntegrityError as exc:
        raise ConflictError(ID_NOT_AVAILABLE) from exc
    ChatSession.objects.create(agent=agent, is_main=True, title="Main session")
    return agent, raw


def new_agent_token() -> str:
    return AGENT_TOKEN_PREFIX + secrets.token_urlsafe(32)


def agent_token_rotate(*, agent: Agent) -> str:
    """Give ``agent`` a new token and return it (stored only as a hash, shown once). The
    old one is refused from the next request on: every door hashes and looks it up anew."""
    raw = new_agent_token()
    Agent.objects.filter(id=agent.id).update(token_hash=hash_token(raw))
    return raw


def agent_token_revoke(*, agent: Agent) -> None:
    """Leave ``agent`` without a token: nothing acts as it until one is rotated in."""
    Agent.objects.filter(id=agent.id).update(token_hash=None)


def main_session(agent_id: str) -> ChatSession:
    session, _ = ChatSession.objects.get_or_create(agent_id=agent_id, is_main=True, defaults={"title": "Main session"})
    return session


def agent_message_post(
    *, agent_id: str, session_id: str, content: str, metadata: dict[str, Any], user_id: int
) -> ChatMessage:
    """A message the agent writes into its session ``session_id`` outside a reply (``notify_user``, a
    budget's notice), announced as ``chat:message`` to the person's sockets and to the
    agent's mind view, on commit."""
    message = ChatMessage.objects.create(
        session_id=session_id, role=ChatMessage.Role.ASSISTANT, content=content, metadata=metadata
    )
    ChatSession.objects.filter(id=session_id).update(last_message_at=message.created_at)
    pushed = {
        "agentId": agent_id,
        "sessionId": session_id,
        "message": {
            "id": message.pk,
            "role": message.role,
            "content": message.content,
            "metadata": message.metadata,
            "createdAt": message.created_at,
        },
    }
    send_event_on_commit(user_group(user_id), CHAT_MESSAGE_EVENT, pushed)
    send_event_on_commit(agent_group(agent_id), CHAT_MESSAGE_EVENT, pushed)
    return message


def user_token_create(user: User, *, name: str = "", replace: bool = False) -> tuple[UserToken, str]:
    """Issue an API token for ``user`` (``Authorization: Token <key>``). Returns the row
    and the raw key, which is stored only as a hash and cannot be shown again. With
    ``replace`` the user's other tokens are revoked in the same transaction."""
    raw = secrets.token_hex(20)  # 40 hex characters, the shape of DRF's keys
    with transaction.atomic():
        if replace:
            UserToken.objects.filter(user=user).delete()
        token = UserToken.objects.create(user=user, key_hash=hash_token(raw), name=(name or "")[:100])
    return token, raw
