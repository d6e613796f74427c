"""Request bodies bounded at the edge (ARCHITECTURE decision 12).

The limit is ``settings.DATA_UPLOAD_MAX_MEMORY_SIZE`` (env ``MARKUS_MAX_BODY_BYTES``).
Every refusal answers 413 in the API's error shape: ``{"detail", "code", "limit"}``.

Two layers enforce it before a body is read:

- ``BoundedBody``, an ASGI middleware around the HTTP application: a Content-Length
  over the limit is refused without reading the body; a body without one (chunked) is
  counted as it streams and refused when it crosses the limit; a chunked body under the
  limit is handed on with its Content-Length set (Django's request and DRF read a body
  by its Content-Length: without one, DRF sees no body at all).
- ``install_daphne_guard``: daphne (Twisted) receives a whole request body before it
  calls the application, then queues all of it for the application at once, so under
  daphne the middleware alone would come too late. Its request class is replaced by one
  that refuses from the headers (or, chunked, from the running count) and drops the rest
  of the body as it arrives; the connection closes when the body ends, or after
  ``LINGER_SECONDS``. A client that sends its whole body before reading still reads the
  413, and nothing of the body is kept. It also leaves a form body to Django: Twisted's
  own parse of it answered one it could not parse with a bare 400, no body.

The request's head is bounded by Twisted (``HEAD_MAX_BYTES``), which drops the
connection on a line over it without a word and answers a bare 400 past it (a proxy
reports either as 502). ``install_daphne_guard`` also replaces daphne's channel class by
one that answers a request line over the limit 414 and headers over it 431, in the
API's shape, ``{"detail", "code", "limit"}``, and drops what follows, lingering as above.
"""

from __future__ import annotations

import json
from collections.abc import Awaitable, Callable, MutableMapping
from typing import Any

from django.conf import settings

from markus.core.errors import MarkusError

Scope = MutableMapping[str, Any]
Message = MutableMapping[str, Any]
Receive = Callable[[], Awaitable[Message]]
Send = Callable[[Message], Awaitable[None]]
ASGIApp = Callable[[Any, Any, Any], Awaitable[None]]  # Django's ASGIHandler, any ASGI 3 app

# How long a refused connection keeps reading (and dropping) the rest of its body, so
# that a client still sending reads the answer rather than a reset connection.
LINGER_SECONDS = 10.0

# A request's head: its request line (414 over it), and the request line with all its
# headers (431 over it). Twisted's own limits, answered instead of dropped (daphne).
HEAD_MAX_BYTES = 16 * 1024

# Concurrent waits (a bus inbox wait, a bus request waiting for its answer, an MCP or
# A2A wait, a chat waiting for its reply): at most so many per caller (an agent token,
# or a user), per person (a user's bus waits with those of their agents' tokens), and
# per server process, of which the chat reserve is kept for people's chats; past them a
# wait answers 429 with Retry-After (markus.core.waits). ``settings.MARKUS`` overrides
# them (``WAITS_PER_CALLER``, ``WAITS_PER_PERSON``, ``WAITS_PER_SERVER``, ``WAITS_CHAT_RESERVE``).
WAITS_PER_CALLER = 16
WAITS_PER_PERSON = 64
WAITS_PER_SERVER = 512
WAITS_CHAT_RESERVE = 64
WAIT_RETRY_AFTER_SECONDS = 5

# A chat's text (``POST /api/agents/{id}/chat``, and a human_chat enqueued through the
# mailbox API): it is stored and sent to the model on every turn of the session.
CHAT_TEXT_MAX_CHARS = 32_000
# A message on the AgentBus (a chunk's payload, as compact JSON): an internal recipient's
# model reads all of it, as it reads a chat; the same limit.
BUS_PAYLOAD_MAX_CHARS = CHAT_TEXT_MAX_CHARS
# An ``Idempotency-Key`` (a chat, a posted item): visible ASCII, a UUID fits five times.
IDEMPOTENCY_KEY_MAX_CHARS = 200


def body_limit() -> int | None:
    """The largest request body accepted, in bytes (None: no limit)."""
    limit: int | None = settings.DATA_UPLOAD_MAX_MEMORY_SIZE
    return limit


def waits_per_caller() -> int:
    """How many waits one caller may hold at once (``WAITS_PER_CALLER``)."""
    return int(settings.MARKUS.get("WAITS_PER_CALLER", WAITS_PER_CALLER))


def waits_per_server() -> int:
    """How many waits this server process holds at once (``WAITS_PER_SERVER``)."""
    return int(settings.MARKUS.get("WAITS_PER_SERVER", WAITS_PER_SERVER))


def waits_per_person() -> int:
    """How many bus waits one person and their agents' tokens hold at once (``WAITS_PER_PERSON``)."""
    return int(settings.MARKUS.get("WAITS_PER_PERSON", WAITS_PER_PERSON))


def waits_chat_reserve() -> int:
    """How many of the server's waits bus waits leave to people's chats (``WAITS_CHAT_RESERVE``)."""
    return int(settings.MARKUS.get("WAITS_CHAT_RESERVE", WAITS_CHAT_RESERVE))


def size_text(limit: int) -> str:
    """``1 MB (1048576 bytes)``, ``64 KB (65536 bytes)``, ``2000 bytes``."""
    for unit, size in (("MB", 1024 * 1024), ("KB", 1024)):
        if limit >= size and limit % size == 0:
            return f"{limit // size} {unit} ({limit} bytes)"
    return f"{limit} bytes"


def too_large(limit: int | None = None) -> dict[str, Any]:
    """The 413 answer's JSON body: ``{"detail", "code": "payload_too_large", "limit"}``."""
    limit = body_limit() if limit is None else limit
    detail = f"request body too large: over {size_text(limit)}" if limit is not None else "request body too large"
    return {"detail": detail, "code": "payload_too_large", "limit": limit}


class BodyTooLarge(MarkusError):
    """A body over the limit: 413."""

    status_code = 413

    def __init__(self, limit: int | None = None) -> None:
        self.body = too_large(limit)
        super().__init__(self.body["detail"])


def _json_bytes(data: dict[str, Any]) -> bytes:
    return json.dumps(data).encode()


# ------------------------------------------------------------------ ASGI middleware


class BoundedBody:
    """ASGI middleware: bodies over the limit answer 413 before they are read."""

    def __init__(self, app: ASGIApp) -> None:
        self.app = app

    async def __call__(self, scope: Scope, receive: Receive, send: Send) -> None:
        limit = body_limit()
        if scope["type"] != "http" or limit is None:
            await self.app(scope, receive, send)
            return
        headers: list[tuple[bytes, bytes]] = list(scope.get("headers", []))
        lengths = [value for name, value in headers if name.lower() == b"content-length"]
        if lengths:
            try:
                length = int(lengths[0])
            except ValueError:
                await _answer(
                    send,
                    400,
                    {
                        "detail": "Content-Length is not a number.",
                        "code": "parse_error",
                        "fields": {"Content-Length": ["Content-Length is not a number."]},
                    },
                )
                return
            if length > limit:
                await _answer(send, 413, too_large(limit))
                return
            await self.app(scope, receive, send)
            return
        # No Content-Length (chunked): count the body as it streams, in memory (it is at
        # most ``limit`` bytes), then hand it on as one message with its length.
        chunks: list[bytes] = []
        size = 0
        while True:
            message = await receive()
            if message["type"] == "http.disconnect":
                return
            chunk = message.get("body", b"")
            size += len(chunk)
            if size > limit:
                await _answer(send, 413, too_large(limit))
                return
            chunks.append(chunk)
            if not message.get("more_body", False):
                break
        chunked = any(name.lower() == b"transfer-encoding" for name, _ in headers)
        if not chunked and not size:
            replay_scope = scope
        else:
            kept = [(name, value) for name, value in headers if name.lower() != b"transfer-encoding"]
            replay_scope = {**scope, "headers": [*kept, (b"content-length", str(size).encode())]}
        body = b"".join(chunks)
        replayed = False

        async def replay() -> Message:
            nonlocal replayed
            if replayed:
                return await receive()
            replayed = True
            return {"type": "http.request", "body": body, "more_body": False}

        await self.app(replay_scope, replay, send)


async def _answer(send: Send, status: int, data: dict[str, Any]) -> None:
    body = _json_bytes(data)
    await send(
        {
            "type": "http.response.start",
            "status": status,
            "headers": [
                (b"content-type", b"application/json"),
                (b"content-length", str(len(body)).encode()),
                (b"connection", b"close"),
            ],
        }
    )
    await send({"type": "http.response.body", "body": body})


# ------------------------------------------------------------------ daphne


def install_daphne_guard() -> None:
    """Make daphne enforce the limits while it receives a body, and answer an oversized
    head (see the module's docstring). Idempotent; daphne builds each connection's
    request from ``daphne.http_protocol.WebRequest``, looked up when the connection
    opens, and its channel from ``HTTPFactory.protocol``."""
    from daphne import http_protocol

    if not getattr(http_protocol.WebRequest, "markus_bounded", False):
        http_protocol.WebRequest = _bounded_web_request(http_protocol.WebRequest)
    if not getattr(http_protocol.HTTPFactory, "markus_bounded", False):
        http_protocol.HTTPFactory.protocol = _bounded_channel_factory()
        http_protocol.HTTPFactory.markus_bounded = True
    from twisted.web import http

    # Reason phrases Twisted lacks (its status line would read "Unknown Status").
    http.RESPONSES.setdefault(429, b"Too Many Requests")
    http.RESPONSES.setdefault(431, b"Request Header Fields Too Large")


def _bounded_web_request(base: type) -> type:
    from twisted.internet import reactor

    clock: Any = reactor

    class BoundedWebRequest(base):
        """daphne's request, refusing a body over the limit as it arrives, and leaving a
        form body to the application."""

        content: Any  # Twisted's: where the body is written (None once refused)
        markus_bounded = True
        _refused = False
        _received = 0
        _linger: Any = None

        def __init__(self, *args: Any, **kwargs: Any) -> None:
            super().__init__(*args, **kwargs)
            # Twisted parses a POST's form body into ``args``, which daphne never reads, and
            # answers one it cannot parse (an empty multipart body) with a bare 400 before
            # the application sees it: the body is Django's to read, and to refuse.
            self._parsePOSTFormSubmission = False

        def gotLength(self, length: int | None) -> None:  # Twisted spells its hooks in camelCase
            limit = body_limit()
            if limit is not None and length is not None and length > limit:
                self._refuse(limit)
                return
            super().gotLength(length)

        def handleContentChunk(self, data: bytes) -> None:
            if self._refused:
                return  # dropped
            self._received += len(data)
            limit = body_limit()
            if limit is not None and self._received > limit:
                self._refuse(limit)
                return
            super().handleContentChunk(data)

        def requestReceived(self, command: bytes, path: bytes, version: bytes) -> None:
            if self._refused:
                self._close()  # the answer is out and the body is over
                return
            super().requestReceived(command, path, version)

        def connectionLost(self, reason: Any) -> None:
            if self._linger is not None and self._linger.active():
                self._linger.cancel()
            super().connectionLost(reason)

        def _refuse(self, limit: int) -> None:
            self._refused = True
            if self.content is not None:
                self.content.close()
                self.content = None
            # Twisted answers "Expect: 100-continue" after gotLength: not after a refusal.
            self.requestHeaders.removeHeader(b"expect")
            body = _json_bytes(too_large(limit))
            head = (
                b"HTTP/1.1 413 Request Entity Too Large\r\n"
                b"Content-Type: application/json\r\n"
                b"Content-Length: %d\r\n"
                b"Connection: close\r\n\r\n" % len(body)
            )
            self.channel.transport.write(head + body)
            self._linger = clock.callLater(LINGER_SECONDS, self._close)

        def _close(self) -> None:
            if self.channel is not None and self.channel.transport is not None:
                self.channel.transport.loseConnection()

    return BoundedWebRequest


def head_too_large(*, request_line: bool) -> tuple[bytes, dict[str, Any]]:
    """The status line and the JSON body of the answer to an oversized head: 414 for the
    request line, 431 for the headers."""
    size = size_text(HEAD_MAX_BYTES)
    if request_line:
        data = {"detail": f"request line too long: over {size}", "code": "uri_too_long"}
        return b"414 URI Too Long", data | {"limit": HEAD_MAX_BYTES}
    data = {"detail": f"request headers too large: over {size}", "code": "headers_too_large"}
    return b"431 Request Header Fields Too Large", data | {"limit": HEAD_MAX_BYTES}


def _bounded_channel_factory() -> Callable[[Any], Any]:
    from twisted.internet import reactor
    from twisted.web import http

    clock: Any = reactor

    class BoundedHTTPChannel(http.HTTPChannel):
        """Twisted's HTTP channel, answering a head over ``HEAD_MAX_BYTES``."""

        MAX_LENGTH = HEAD_MAX_BYTES  # one line of the head (LineReceiver)
        totalHeadersSize = HEAD_MAX_BYTES  # the request line and the headers together
        _head_refused = False
        _linger: Any = None

        def dataReceived(self, data: bytes) -> None:
            if not self._head_refused:  # after a refusal, what follows is dropped
                super().dataReceived(data)

        def lineReceived(self, line: bytes) -> None:
            if self._head_refused:
                return
            if self._receivedHeaderSize + len(line) > self.totalHeadersSize:
                self._refuse_head(request_line=self._receivedHeaderSize == 0)
                return
            super().lineReceived(line)

        def lineLengthExceeded(self, line: bytes) -> None:
            if not self._head_refused:
                self._refuse_head(request_line=self._receivedHeaderSize == 0)

        def connectionLost(self, reason: Any = None) -> None:
            if self._linger is not None and self._linger.active():
                self._linger.cancel()
            super().connectionLost(reason)

        def _refuse_head(self, *, request_line: bool) -> None:
            self._head_refused = True
            status, data = head_too_large(request_line=request_line)
            body = _json_bytes(data)
            transport: Any = self.transport
            transport.write(
                b"HTTP/1.1 %s\r\nContent-Type: application/json\r\nContent-Length: %d\r\n"
                b"Connection: close\r\n\r\n%s" % (status, len(body), body)
            )
            # The answer is out: end the writing side, read (and drop) what the client
            # still sends until it closes, or for LINGER_SECONDS.
            half_close = getattr(transport, "loseWriteConnection", None)
            if half_close is not None:
                half_close()
            self._linger = clock.callLater(LINGER_SECONDS, transport.loseConnection)

    def build(factory: Any) -> Any:  # as Twisted's own HTTPFactory.protocol, over this channel
        return http._GenericHTTPChannelProtocol(BoundedHTTPChannel())

    return build
