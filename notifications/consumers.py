"""WebSocket consumers: an agent's live events and a user's notifications.

``/ws/agents/<id>/`` forwards the ``agent.<id>`` group's events as JSON,
``/ws/notifications/`` the ``user.<id>`` group's. Who connects is the session user
(cookie) or, with ``?token=``, the owner of a user API token or an agent with its own
bearer token (which sees only its own agent), read as at every door (``caller_for_token``:
an agent's token before a user's). Anyone who may not see the agent is
refused with a close code and reason (4401 not signed in or a bad token, 4403 not
allowed or a foreign origin, 4404 no such agent, 4429 past the caller's open sockets of
the kind), a foreign agent exactly like a missing one.
"""

from __future__ import annotations

import logging
from collections.abc import Awaitable, Callable
from typing import Any, TypeAlias
from urllib.parse import ParseResult, parse_qs, urlparse

from asgiref.sync import sync_to_async
from autobahn.exception import Disconnected  # what daphne raises on a send to a closed socket
from channels.db import database_sync_to_async
from channels.generic.websocket import AsyncJsonWebsocketConsumer
from channels.middleware import BaseMiddleware
from channels.security.websocket import OriginValidator
from django.conf import settings
from django.contrib.auth.models import AnonymousUser
from django.db import connections

from markus.agents.auth import Caller, caller_for_token, caller_ref, user_may_see_agent
from markus.agents.models import Agent
from markus.agents.permissions import PUBLIC, Reader, reader_for
from markus.core.channel_layer import EVENT, frame_for
from markus.core.db import retry_later
from markus.core.events import agent_group, user_group
from notifications import fanout

log = logging.getLogger(__name__)

# ASGI as Channels passes it: the scope is a plain dict (with ``user``, ``agent`` and
# ``url_route`` added by the middleware and the router).
Scope: TypeAlias = dict[str, Any]
Receive: TypeAlias = Callable[[], Awaitable[dict[str, Any]]]
Send: TypeAlias = Callable[[dict[str, Any]], Awaitable[None]]
ASGIApp: TypeAlias = Callable[[Scope, Receive, Send], Awaitable[None]]

# Close codes of a refused socket (CONTRACT.md): who you are is unknown, or not allowed.
REFUSED_UNAUTHENTICATED = 4401
REFUSED_FORBIDDEN = 4403
REFUSED_NOT_FOUND = 4404
REFUSED_TOO_MANY = 4429

# Open sockets per caller and kind (agent, board, notification) in this server process
# (a person's tabs, a script's watchers), at most settings.MARKUS["SOCKETS_PER_CALLER"]
# of each kind: past it a new one is refused with 4429 and a reason that states the cap.
_open_sockets: dict[str, int] = {}


class BrowserOriginValidator(OriginValidator):
    """ALLOWED_HOSTS decide which browser origins may connect. A client that sends no
    Origin is not a browser (a CLI, a script), so cross-site hijacking does not apply
    to it; it still has to authenticate like any other caller."""

    def valid_origin(self, parsed_origin: ParseResult | None) -> bool:
        return parsed_origin is None or self.validate_origin(parsed_origin)

    async def __call__(self, scope: Scope, receive: Receive, send: Send) -> None:
        """A foreign origin is refused with 4403 and a reason (channels' own denial
        closes during the handshake, which a browser sees as 1006 with none)."""
        if scope["type"] == "websocket" and not self.valid_origin(_origin_of(scope)):
            await refuse_socket(receive, send, REFUSED_FORBIDDEN, "origin not allowed")
            return
        await super().__call__(scope, receive, send)


def _origin_of(scope: Scope) -> ParseResult | None:
    for name, value in scope.get("headers", []):
        if name == b"origin":
            try:
                return urlparse(value.decode("latin1"))
            except (UnicodeDecodeError, ValueError):
                return urlparse("invalid://")
    return None


async def refuse_socket(receive: Receive, send: Send, code: int, reason: str) -> None:
    """Accept the handshake and close at once with ``code`` and ``reason``: the only
    way a browser's ``CloseEvent`` gets to see them."""
    message = await receive()
    if message["type"] != "websocket.connect":
        return
    await send({"type": "websocket.accept"})
    await send({"type": "websocket.close", "code": code, "reason": reason})


def origin_validated(app: ASGIApp) -> BrowserOriginValidator:
    """The socket routes behind the origin check; the server is made to send close
    reasons (``install_close_reasons``) and to write frames without formatting a debug
    line for each (``install_quiet_writes``)."""
    install_close_reasons()
    install_quiet_writes()
    return BrowserOriginValidator(app, settings.ALLOWED_HOSTS)


# Try again later, as an HTTP 503 (RFC 6455's own 1013 is refused by daphne's autobahn:
# an application may close with 1000 or 3000-4999 only).
CLOSED_TRY_AGAIN_LATER = 4503


def retrying_later(app: ASGIApp) -> ASGIApp:
    """The socket routes, where a database error that is not the socket's fault (the
    database down, a lock not granted: ``markus.core.db.retry_later``, the 503's rule)
    closes the socket with 4503 and the 503's message, accepted first if it was not yet
    (before that daphne can only answer an HTTP 403 or 500). The pages reconnect after it
    with a growing delay."""

    async def guarded(scope: Scope, receive: Receive, send: Send) -> None:
        accepted = False

        async def sending(message: dict[str, Any]) -> None:
            nonlocal accepted
            accepted = accepted or message.get("type") == "websocket.accept"
            await send(message)

        try:
            await app(scope, receive, sending)
        except Exception as exc:
            later = retry_later(exc)
            if later is None:
                raise
            # The sync thread's connection died with the database: the next socket opens a new one.
            await sync_to_async(connections.close_all)()
            if not accepted:
                await send({"type": "websocket.accept"})
            reason = close_reason(later.message)
            await send({"type": "websocket.close", "code": CLOSED_TRY_AGAIN_LATER, "reason": reason})

    return guarded


# A close frame's reason is at most 123 bytes of UTF-8 (RFC 6455 5.5: 125 with the code).
MAX_CLOSE_REASON_BYTES = 123


def close_reason(reason: str) -> str:
    """``reason`` cut to what a close frame can carry, on a character boundary."""
    return reason.encode()[:MAX_CLOSE_REASON_BYTES].decode(errors="ignore")


def install_close_reasons() -> None:
    """Make daphne send the ``reason`` of a ``websocket.close``: daphne (4.2) writes the
    close frame with the code only, so every refusal reached the client with an empty
    reason, although the consumers (and Channels' ``close(code, reason)``) give one.
    Idempotent; patches ``daphne.ws_protocol.WebSocketProtocol`` (the class daphne's
    server builds every socket from) when daphne is installed."""
    try:
        from daphne import ws_protocol
    except ImportError:  # another ASGI server: it reads the reason itself
        return
    protocol: Any = ws_protocol.WebSocketProtocol
    if getattr(protocol, "markus_close_reasons", False):
        return
    handle_reply = protocol.handle_reply

    def handle_reply_with_reason(self: Any, message: dict[str, Any]) -> None:
        reason = message.get("reason") if message.get("type") == "websocket.close" else None
        if not reason or self.state == self.STATE_CONNECTING:  # a close before accept is an HTTP 403
            handle_reply(self, message)
            return
        code = message.get("code")
        self.sendClose(code=1000 if code is None else int(code), reason=close_reason(str(reason)))

    protocol.handle_reply = handle_reply_with_reason
    protocol.markus_close_reasons = True


def install_quiet_writes() -> None:
    """Make daphne's sockets write a frame without formatting a debug line nobody reads.

    autobahn's ``sendData`` (every frame, pong and close) builds its debug message's
    arguments, coloured with ``click.style`` (``hltype``, ``hlval``), before the logger
    decides whether to write it: the largest single cost of a frame's send path in a
    profile of the fan-out. The patch writes the data itself, counts it in the traffic
    stats as autobahn does, and leaves to autobahn's own ``sendData`` every write it
    treats otherwise: chopped or synchronous writes, a non-empty send queue, octet
    logging, or a socket whose log level is debug or finer (which still gets its line).
    Idempotent; patches ``daphne.ws_protocol.WebSocketProtocol``."""
    try:
        from daphne import ws_protocol
        from txaio.interfaces import log_levels
    except ImportError:  # another ASGI server
        return
    protocol: Any = ws_protocol.WebSocketProtocol
    if getattr(protocol, "markus_quiet_writes", False):
        return
    send_data = protocol.sendData
    quiet = frozenset(log_levels[: log_levels.index("debug")])  # the levels that log no debug line

    def quiet_send_data(self: Any, data: bytes, sync: bool = False, chopsize: int | None = None) -> None:
        level = getattr(self.log, "_log_level", None)  # txaio's logger; unknown: autobahn's way
        if sync or chopsize or self.send_queue or self.logOctets or level not in quiet:
            send_data(self, data, sync, chopsize)
            return
        self.transport.write(data)
        if self.state == self.STATE_OPEN:
            self.trafficStats.outgoingOctetsWireLevel += len(data)
        elif self.state in (self.STATE_CONNECTING, self.STATE_PROXY_CONNECTING):
            self.trafficStats.preopenOutgoingOctetsWireLevel += len(data)

    protocol.sendData = quiet_send_data
    protocol.markus_quiet_writes = True


class TokenAuthMiddleware(BaseMiddleware):
    """``?token=<key>`` (or ``Authorization: Token|Bearer <key>``) replaces the session
    user. A token that matches nothing leaves an anonymous caller."""

    async def __call__(self, scope: Scope, receive: Receive, send: Send) -> None:
        raw = _token_of(scope)
        if raw:
            caller = await database_sync_to_async(caller_for_token)(raw)
            user, agent = (caller.user, caller.auth) if caller is not None else (AnonymousUser(), None)
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
    the loop's frame pump.

    A socket whose class forwards events as they are (does not override
    ``markus_event``) does not receive them on its own channel: the process's feed of
    its group hands each event to it (``notifications.fanout``; ``subscribe`` /
    ``unsubscribe``). One that renders them itself (the mind page's) keeps its own
    channel in the group."""

    async def dispatch(self, message: dict[str, Any]) -> None:
        # Channels runs ``close_old_connections`` in the sync thread before every
        # message: one thread hop per subscriber per event, all of a fan-out queued on
        # that one thread. An event handler that reads the database does it through
        # ``database_sync_to_async``, which closes stale connections itself.
        if message.get("type") == EVENT:
            await self.markus_event(message)
        else:
            await super().dispatch(message)

    # What of private conversations this socket's reader may read (set on connect).
    reader: Reader = PUBLIC
    closed = False  # the client went away (or a send failed): the pump skips it
    # Frames of events that came between the subscription and the accept, sent after it.
    early: list[str] | None = None

    async def markus_event(self, message: dict[str, Any]) -> None:
        self.deliver(message, fanout.pump())

    def deliver(self, message: dict[str, Any], pump: fanout.FramePump) -> None:
        """This socket's frame of an event (None: a private event its reader gets
        nothing of), to the loop's frame pump (looked up once per event by the caller)."""
        text = frame_for(message, self.reader.sees)
        if text is None:
            return
        if self.early is not None:
            self.early.append(text)
        else:
            pump.push(self, text)

    async def send_own(self, text: str) -> None:
        """A frame sent from this consumer's own handler (the pump sends the others).
        The client may have gone away under it: daphne raises ``Disconnected``, and the
        socket's disconnect never reaches this consumer, so it leaves as a disconnect
        does (``websocket_disconnect``: its groups, its place; then it ends). Else its
        channel stays in the group, fed every later event for the layer's group expiry."""
        try:
            await self.send(text_data=text)
        except Disconnected:
            self.closed = True
            await self.websocket_disconnect({"type": "websocket.disconnect", "code": 1006})

    def fed_by_the_process(self) -> bool:
        return type(self).markus_event is EventStreamConsumer.markus_event

    async def subscribe(self, group: str) -> None:
        """Subscribe to ``group`` and accept the socket: it gets every event sent to the
        group after the subscription, the first ones once it is open."""
        if not self.fed_by_the_process():
            await self.channel_layer.group_add(group, self.channel_name)
            await self.accept()
            return
        self.early = []
        await fanout.join(self.channel_layer, group, self)
        await self.accept()
        early, self.early = self.early, None
        pump = fanout.pump()
        for text in early:
            pump.push(self, text)

    async def unsubscribe(self, group: str) -> None:
        if self.fed_by_the_process():
            await fanout.leave(self.channel_layer, group, self)
        else:
            await self.channel_layer.group_discard(group, self.channel_name)

    async def refuse(self, code: int, reason: str) -> None:
        """Refuse the caller with a code and reason a browser can read: accepted, then
        closed at once (a close before the accept reaches it as 1006 with none)."""
        await self.accept()
        await self.close(code=code, reason=reason)

    place: str | None = None  # counted in _open_sockets while open

    async def take_place(self, kind: str) -> bool:
        """Count this socket against its caller's open sockets of ``kind``; past the cap
        refuse it (4429, the cap in the reason) and answer False."""
        caller = caller_ref(Caller(self.scope.get("user"), self.scope.get("agent")))
        place, cap = f"{kind}:{caller}", int(settings.MARKUS["SOCKETS_PER_CALLER"])
        if _open_sockets.get(place, 0) >= cap:
            await self.refuse(REFUSED_TOO_MANY, f"at most {cap} open {kind} sockets per caller")
            return False
        _open_sockets[place] = _open_sockets.get(place, 0) + 1
        self.place = place
        return True

    def leave_place(self) -> None:
        """The socket closed: its place is free (once)."""
        if self.place is not None:
            left = _open_sockets.get(self.place, 1) - 1
            if left > 0:
                _open_sockets[self.place] = left
            else:
                _open_sockets.pop(self.place, None)
            self.place = None


class AgentEventsConsumer(EventStreamConsumer):
    """``/ws/agents/<id>/``: ``agent:mailbox``, ``agent:decision``, ``agent:attention``,
    ``agent:focus`` (and any other event of the agent's group) as JSON frames."""

    group: str | None = None
    agent: Agent | None = None

    async def connect(self) -> None:
        agent_id = self.scope["url_route"]["kwargs"]["agent_id"]
        acting, user = self.scope.get("agent"), self.scope.get("user")
        if acting is None and (user is None or not user.is_authenticated):
            reason = "invalid token" if _token_of(self.scope) else "not signed in"
            await self.refuse(REFUSED_UNAUTHENTICATED, reason)
            return
        if acting is not None and acting.id != agent_id:
            await self.refuse(REFUSED_FORBIDDEN, "an agent token sees only its own agent")
            return
        self.agent = await database_sync_to_async(visible_agent_for_scope)(self.scope, agent_id)
        if self.agent is None:
            await self.refuse(REFUSED_NOT_FOUND, "no such agent")
            return
        self.reader = reader_for(user, acting)
        if not await self.take_place("agent"):
            return
        self.group = agent_group(self.agent.id)
        await self.subscribe(self.group)
        await self.on_accepted()

    async def on_accepted(self) -> None:
        """Hook for subclasses: the socket is open and subscribed."""

    async def disconnect(self, code: int) -> None:
        self.closed = True
        self.leave_place()
        if self.group is not None:
            await self.unsubscribe(self.group)

    async def receive(self, text_data: str | None = None, bytes_data: bytes | None = None, **kwargs: Any) -> None:
        """The stream is one way; whatever a client sends is ignored."""


class NotificationsConsumer(EventStreamConsumer):
    """``/ws/notifications/``: ``{type: "notification", notification}`` for the user.

    A refused caller gets the socket accepted and closed at once with a code and a
    reason a browser can read (a close before the accept reaches it as 1006 with none):
    4401 not signed in or a token that matches nothing, 4403 an agent's token (the
    notifications are a user's), 4429 past ``SOCKETS_PER_CALLER`` open ones."""

    group: str | None = None

    def refusal(self) -> tuple[int, str] | None:
        user = self.scope.get("user")
        if self.scope.get("agent") is not None:
            return REFUSED_FORBIDDEN, "notifications are for users; an agent token may not read them"
        if user is None or not user.is_authenticated:
            if _token_of(self.scope):
                return REFUSED_UNAUTHENTICATED, "invalid token"
            return REFUSED_UNAUTHENTICATED, "not signed in"
        return None

    async def connect(self) -> None:
        refusal = self.refusal()
        if refusal is not None:
            await self.refuse(*refusal)
            return
        if not await self.take_place("notification"):
            return
        self.group = user_group(self.scope["user"].pk)
        await self.subscribe(self.group)

    async def disconnect(self, code: int) -> None:
        self.closed = True
        self.leave_place()
        if self.group is not None:
            await self.unsubscribe(self.group)

    async def receive(self, text_data: str | None = None, bytes_data: bytes | None = None, **kwargs: Any) -> None:
        """The stream is one way; whatever a client sends is ignored."""
