"""WebSocket consumers: an agent's live events and a user's notifications.

``/ws/agents/<id>/`` forwards the ``agent.<id>`` group's events as JSON,
``/ws/notifications/`` the ``user.<id>`` group's. Who connects is the session user
(cookie) or, with ``?token=``, the owner of a user API token or an agent with its own
bearer token (which sees only its own agent). Anyone who may not see the agent is
refused at the handshake, a foreign agent exactly like a missing one.
"""

from __future__ import annotations

import asyncio
import logging
import weakref
from collections import deque
from collections.abc import Awaitable, Callable
from typing import Any, TypeAlias
from urllib.parse import ParseResult, parse_qs

from channels.db import database_sync_to_async
from channels.generic.websocket import AsyncJsonWebsocketConsumer
from channels.middleware import BaseMiddleware
from channels.security.websocket import OriginValidator
from django.conf import settings
from django.contrib.auth.models import AnonymousUser, User

from markus.agents.auth import user_for_token, user_may_see_agent
from markus.agents.models import Agent, hash_token
from markus.core.channel_layer import EVENT, event_text
from markus.core.events import agent_group, user_group

log = logging.getLogger(__name__)

# ASGI as Channels passes it: the scope is a plain dict (with ``user``, ``agent`` and
# ``url_route`` added by the middleware and the router).
Scope: TypeAlias = dict[str, Any]
Receive: TypeAlias = Callable[[], Awaitable[dict[str, Any]]]
Send: TypeAlias = Callable[[dict[str, Any]], Awaitable[None]]
ASGIApp: TypeAlias = Callable[[Scope, Receive, Send], Awaitable[None]]


class BrowserOriginValidator(OriginValidator):
    """ALLOWED_HOSTS decide which browser origins may connect. A client that sends no
    Origin is not a browser (a CLI, a script), so cross-site hijacking does not apply
    to it; it still has to authenticate like any other caller."""

    def valid_origin(self, parsed_origin: ParseResult | None) -> bool:
        return parsed_origin is None or self.validate_origin(parsed_origin)


def origin_validated(app: ASGIApp) -> BrowserOriginValidator:
    return BrowserOriginValidator(app, settings.ALLOWED_HOSTS)


@database_sync_to_async
def _from_token(raw: str) -> tuple[User | AnonymousUser, Agent | None] | None:
    token = user_for_token(raw)
    if token is not None:
        return token.user, None
    agent = Agent.objects.filter(token_hash=hash_token(raw)).first()
    if agent is not None:
        return AnonymousUser(), agent
    return None


class TokenAuthMiddleware(BaseMiddleware):
    """``?token=<key>`` (or ``Authorization: Token|Bearer <key>``) replaces the session
    user. A token that matches nothing leaves an anonymous caller."""

    async def __call__(self, scope: Scope, receive: Receive, send: Send) -> None:
        raw = _token_of(scope)
        if raw:
            found = await _from_token(raw)
            user, agent = found if found is not None else (AnonymousUser(), None)
            scope = {**scope, "user": user, "agent": agent}
        return await super().__call__(scope, receive, send)


def _token_of(scope: Scope) -> str:
    query = parse_qs(scope.get("query_string", b"").decode("latin1"))
    if query.get("token"):
        return query["token"][0]
    for name, value in scope.get("headers", []):
        if name == b"authorization":
            parts = value.decode("latin1").split()
            if len(parts) == 2 and parts[0].lower() in ("token", "bearer"):
                return parts[1]
    return ""


def visible_agent_for_scope(scope: Scope, agent_id: str) -> Agent | None:
    """The agent if the connecting caller may see it, else None (missing or foreign)."""
    acting = scope.get("agent")
    if acting is not None:
        return acting if acting.id == agent_id else None
    agent = Agent.objects.select_related("team").filter(id=agent_id).first()
    if agent is None or not user_may_see_agent(scope.get("user"), agent):
        return None
    return agent


class EventStreamConsumer(AsyncJsonWebsocketConsumer):
    """A socket fed by a group's ``markus.event`` messages, each forwarded as the JSON
    text the channel layer encoded once for the whole fan-out (``event_text``), through
    the loop's frame pump."""

    async def dispatch(self, message: dict[str, Any]) -> None:
        # Channels runs ``close_old_connections`` in the sync thread before every
        # message: one thread hop per subscriber per event, all of a fan-out queued on
        # that one thread. An event handler that reads the database does it through
        # ``database_sync_to_async``, which closes stale connections itself.
        if message.get("type") == EVENT:
            await self.markus_event(message)
        else:
            await super().dispatch(message)

    async def markus_event(self, message: dict[str, Any]) -> None:
        _pump().push(self, event_text(message))


# Frames sent per pass of the event loop (see _FramePump).
FRAMES_PER_PASS = 16


class _FramePump:
    """One event loop's outgoing event frames, sent in the order the consumers handed
    them over, ``FRAMES_PER_PASS`` per pass of the loop.

    The server writes a frame to its socket when the loop next polls. A fan-out wakes
    every subscriber's consumer in the same pass, so without the pump no frame would
    leave before the last subscriber's frame was made; with it the first subscribers'
    frames are on the wire while the rest are still being sent. One queue per loop keeps
    each socket's frames in order."""

    def __init__(self) -> None:
        self.pending: deque[tuple[EventStreamConsumer, str]] = deque()
        self.task: asyncio.Task[None] | None = None

    def push(self, consumer: EventStreamConsumer, text: str) -> None:
        self.pending.append((consumer, text))
        if self.task is None:
            self.task = asyncio.get_running_loop().create_task(self.run())

    async def run(self) -> None:
        try:
            while self.pending:
                for _ in range(min(FRAMES_PER_PASS, len(self.pending))):
                    consumer, text = self.pending.popleft()
                    try:
                        await consumer.send(text_data=text)
                    except Exception:  # one closed socket must not stop the others' frames
                        log.exception("event frame not sent to %s", consumer.channel_name)
                await asyncio.sleep(0)  # a pass of the loop: it writes these frames out
        finally:
            self.task = None


_pumps: weakref.WeakKeyDictionary[asyncio.AbstractEventLoop, _FramePump] = weakref.WeakKeyDictionary()


def _pump() -> _FramePump:
    loop = asyncio.get_running_loop()
    pump = _pumps.get(loop)
    if pump is None:
        pump = _pumps[loop] = _FramePump()
    return pump


class AgentEventsConsumer(EventStreamConsumer):
    """``/ws/agents/<id>/``: ``agent:mailbox``, ``agent:decision``, ``agent:attention``,
    ``agent:focus`` (and any other event of the agent's group) as JSON frames."""

    group: str | None = None
    agent: Agent | None = None

    async def connect(self) -> None:
        agent_id = self.scope["url_route"]["kwargs"]["agent_id"]
        self.agent = await database_sync_to_async(visible_agent_for_scope)(self.scope, agent_id)
        if self.agent is None:
            await self.close(code=4404)
            return
        self.group = agent_group(self.agent.id)
        await self.channel_layer.group_add(self.group, self.channel_name)
        await self.accept()
        await self.on_accepted()

    async def on_accepted(self) -> None:
        """Hook for subclasses: the socket is open and subscribed."""

    async def disconnect(self, code: int) -> None:
        if self.group is not None:
            await self.channel_layer.group_discard(self.group, self.channel_name)

    async def receive(self, text_data: str | None = None, bytes_data: bytes | None = None, **kwargs: Any) -> None:
        """The stream is one way; whatever a client sends is ignored."""


class NotificationsConsumer(EventStreamConsumer):
    """``/ws/notifications/``: ``{type: "notification", notification}`` for the user."""

    group: str | None = None

    async def connect(self) -> None:
        user = self.scope.get("user")
        if self.scope.get("agent") is not None or user is None or not user.is_authenticated:
            await self.close(code=4401)
            return
        self.group = user_group(user.pk)
        await self.channel_layer.group_add(self.group, self.channel_name)
        await self.accept()

    async def disconnect(self, code: int) -> None:
        if self.group is not None:
            await self.channel_layer.group_discard(self.group, self.channel_name)

    async def receive(self, text_data: str | None = None, bytes_data: bytes | None = None, **kwargs: Any) -> None:
        """The stream is one way; whatever a client sends is ignored."""
