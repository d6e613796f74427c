"""Just enough of the Redis protocol (RESP2) for the wake-ups: a publisher that does
not wait for its replies, and a pub/sub subscriber for an event loop.

Plain sockets rather than redis-py: the wake-up path is the latency the bus is judged
by, and it needs neither a pool nor retries, only ``PUBLISH``, ``SUBSCRIBE``,
``UNSUBSCRIBE``, ``PING`` and ``AUTH``. URLs: ``redis://[user:password@]host:port``,
``rediss://`` (TLS, the system's trust store) and ``unix:///path``; the database number
does not matter to pub/sub.
"""

from __future__ import annotations

import asyncio
import logging
import os
import socket
import ssl
import threading
import time
from collections.abc import Callable
from typing import Any
from urllib.parse import unquote, urlsplit

log = logging.getLogger(__name__)

TIMEOUT = 2.0  # connecting, authenticating, writing


def command(*parts: bytes) -> bytes:
    out = [b"*%d\r\n" % len(parts)]
    for part in parts:
        out.append(b"$%d\r\n%s\r\n" % (len(part), part))
    return b"".join(out)


class Incomplete(Exception):
    pass


class RedisReplyError(Exception):
    pass


def parse_reply(buf: bytes | bytearray, pos: int) -> tuple[Any, int]:
    """One RESP2 reply from ``buf`` at ``pos``: (value, next position); raises
    ``Incomplete`` when the buffer ends first."""
    end = buf.find(b"\r\n", pos)
    if end < 0:
        raise Incomplete
    kind, line = buf[pos : pos + 1], bytes(buf[pos + 1 : end])
    if kind == b"*":
        count, pos = int(line), end + 2
        if count < 0:
            return None, pos
        items = []
        for _ in range(count):
            item, pos = parse_reply(buf, pos)
            items.append(item)
        return items, pos
    if kind == b"$":
        size = int(line)
        if size < 0:
            return None, end + 2
        if len(buf) < end + 4 + size:
            raise Incomplete
        return bytes(buf[end + 2 : end + 2 + size]), end + 4 + size
    if kind == b":":
        return int(line), end + 2
    if kind == b"+":
        return line, end + 2
    if kind == b"-":
        raise RedisReplyError(line.decode(errors="replace"))
    raise RedisReplyError(f"unexpected reply type {kind!r}")


class Subscriber(asyncio.Protocol):
    def __init__(self, on_reply: Callable[[Any], None], on_lost: Callable[[], None]) -> None:
        self.buffer = bytearray()
        self.on_reply = on_reply
        self.on_lost = on_lost
        self.received_at = time.monotonic()

    def data_received(self, data: bytes) -> None:
        self.received_at = time.monotonic()
        self.buffer += data
        pos = 0
        try:
            while pos < len(self.buffer):
                reply, pos = parse_reply(self.buffer, pos)
                self.on_reply(reply)
        except Incomplete:
            pass
        del self.buffer[:pos]

    def connection_lost(self, exc: Exception | None) -> None:
        self.on_lost()


class Connection:
    """A plain socket to Redis for publishing, with the replies read lazily."""

    def __init__(self, url: str) -> None:
        parts = urlsplit(url)
        if parts.scheme == "unix":
            sock = socket.socket(socket.AF_UNIX, socket.SOCK_STREAM)
            sock.settimeout(TIMEOUT)
            sock.connect(parts.path)
        else:
            host = parts.hostname or "localhost"
            sock = socket.create_connection((host, parts.port or 6379), timeout=TIMEOUT)
            sock.setsockopt(socket.IPPROTO_TCP, socket.TCP_NODELAY, 1)
            if parts.scheme == "rediss":
                sock = ssl.create_default_context().wrap_socket(sock, server_hostname=host)
        self.sock = sock
        self.buffer = bytearray()
        if parts.password:
            user = [unquote(parts.username).encode()] if parts.username else []
            sock.sendall(command(b"AUTH", *user, unquote(parts.password).encode()))
            reply = b""
            while not reply.endswith(b"\r\n"):
                chunk = sock.recv(4096)
                if not chunk:
                    raise ConnectionError("Redis closed the connection during AUTH")
                reply += chunk
            if not reply.startswith(b"+OK"):
                raise RedisReplyError(reply.decode(errors="replace").strip())

    def drain(self) -> None:
        """Read the replies that have arrived; raises when Redis has closed the socket."""
        self.sock.setblocking(False)
        try:
            while True:
                try:
                    chunk = self.sock.recv(65536)
                except (BlockingIOError, ssl.SSLWantReadError):
                    break
                if not chunk:
                    raise ConnectionError("Redis closed the connection")
                self.buffer += chunk
        finally:
            self.sock.settimeout(TIMEOUT)
        pos = 0
        try:
            while pos < len(self.buffer):
                _, pos = parse_reply(self.buffer, pos)
        except Incomplete:
            pass
        except RedisReplyError as exc:
            log.warning("agentbus: Redis refused a wake-up (%s)", exc)
            pos = len(self.buffer)
        del self.buffer[:pos]


class Publisher:
    """Sends wake-ups from any thread: the PUBLISH commands are written and the thread
    moves on; their replies are read before its next wake-up, where a connection Redis
    closed is noticed and replaced. Not waiting spares the appender a round trip (and
    the woken loop a contended GIL); a PUBLISH lost to a dying connection is repaired
    by the subscribers, which lose theirs too and wake everyone once they are back."""

    def __init__(self, url: str, prefix: str) -> None:
        self.url = url
        self.prefix = prefix
        self._local = threading.local()

    def publish(self, agent_ids: list[str], data: bytes) -> None:
        commands = b"".join(command(b"PUBLISH", (self.prefix + a).encode(), data) for a in agent_ids)
        for attempt in range(2):
            held = getattr(self._local, "held", None)
            connection = held[1] if held is not None and held[0] == os.getpid() else None
            fresh = connection is None
            try:
                if connection is None:
                    connection = Connection(self.url)
                    self._local.held = (os.getpid(), connection)
                connection.drain()
                connection.sock.sendall(commands)
                return
            except (OSError, RedisReplyError):
                self._local.held = None
                if connection is not None:
                    connection.sock.close()
                if fresh or attempt:  # only a connection that went stale is worth a second try
                    raise


async def open_subscriber(
    url: str, on_reply: Callable[[Any], None], on_lost: Callable[[], None]
) -> tuple[asyncio.Transport, Subscriber]:
    """A connection in the running loop, authenticated; replies go to ``on_reply``."""
    parts = urlsplit(url)
    loop = asyncio.get_running_loop()
    replies: asyncio.Queue[Any] = asyncio.Queue()
    protocol = Subscriber(replies.put_nowait, on_lost)
    if parts.scheme == "unix":
        transport, _ = await loop.create_unix_connection(lambda: protocol, parts.path)
    else:
        context = ssl.create_default_context() if parts.scheme == "rediss" else None
        transport, _ = await loop.create_connection(
            lambda: protocol, parts.hostname or "localhost", parts.port or 6379, ssl=context
        )
    if parts.password:
        user = [unquote(parts.username).encode()] if parts.username else []
        transport.write(command(b"AUTH", *user, unquote(parts.password).encode()))
        reply = await asyncio.wait_for(replies.get(), TIMEOUT)
        if reply != b"OK":
            transport.close()
            raise RedisReplyError(f"AUTH answered {reply!r}")
    protocol.on_reply = on_reply
    return transport, protocol
