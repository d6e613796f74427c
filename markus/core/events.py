"""The one helper that sends events. Events go out after commit, to a Channels group.

Groups: ``agent.<id>`` for an agent's live view, ``user.<id>`` for a user's
notifications. Payloads are JSON-serialisable by construction: ``send_event_on_commit``
passes them through ``json`` here, so a bad payload fails where it is made, not in a
consumer. ``send_json_on_commit`` is for callers whose event is JSON-native already
(made from a row the database just stored or returned, datetimes as strings through
``json_datetime``): it skips that round trip.

Sending: the embedded layer takes the event synchronously (``group_send_sync``). On
the Redis pub/sub layer a per-process publisher writes a PUBLISH on the channel and in
the encoding the layer's receivers read, on the sending thread's own connection,
without waiting for the reply: no event loop per event. Any other layer gets
``async_to_sync(group_send)``. Listeners (the test hook) are called synchronously. An
event for a group nobody is in on the embedded layer is not encoded at all (the loop's
streamed pieces of text, most of its events, while no view of the agent is open).
"""

from __future__ import annotations

import json
import logging
import os
import threading
import weakref
from collections.abc import Callable
from datetime import datetime
from functools import partial
from typing import Any

from asgiref.sync import async_to_sync
from channels.layers import get_channel_layer
from django.core.serializers.json import DjangoJSONEncoder
from django.db import transaction

from markus.core.channel_layer import ThreadSafeInMemoryChannelLayer, private_form, wire_form

log = logging.getLogger(__name__)

# Test hook: every event sent is also handed to these listeners (after commit).
_listeners: list[Callable[[str, dict[str, Any]], None]] = []


def agent_group(agent_id: str) -> str:
    return f"agent.{agent_id}"


def user_group(user_id: int | str) -> str:
    return f"user.{user_id}"


# A message an agent writes into a chat session outside a reply (``notify_user``, a
# budget's notice): to the person's sockets and the agent's mind view.
CHAT_MESSAGE_EVENT = "chat:message"


# The work pages' group: task and requirement changes, agents created and removed. Its
# events carry ids only; ``/ws/board/`` forwards each to the sockets whose caller may
# see what it names, and the pages read the rows again through their own views.
WORK_GROUP = "work"


def json_datetime(value: datetime | None) -> str | None:
    """A datetime as ``DjangoJSONEncoder`` writes it (milliseconds, ``Z`` for UTC)."""
    if value is None:
        return None
    text = value.isoformat()
    if value.microsecond:
        text = text[:23] + text[26:]
    if text.endswith("+00:00"):
        text = text[:-6] + "Z"
    return text


class _RedisPublisher:
    """PUBLISH for ``channels_redis``'s pub/sub layer from synchronous code. The group's
    channel name and the message encoding are the layer's own.

    Each sending thread writes its PUBLISH on its own connection and returns without
    waiting for the reply (the writer is already past its commit): the replies are read
    UNREAD at a time, or by ``flush``. So an event costs the writer one socket write
    (a RESP command packed here); no event loop, no thread hand-over. Order is kept
    per thread (one connection). A failed write is logged and the connection dropped
    (the next send reconnects); an error reply is logged when read."""

    UNREAD = 64  # replies (a few bytes each) left in the socket before they are read

    def __init__(self, layer: Any, hosts: list[dict[str, Any]], prefix: str) -> None:
        import redis
        from redis.backoff import NoBackoff
        from redis.retry import Retry

        self._serialize = layer.serialize
        self._prefix = prefix
        self._clients = []
        for host in hosts:
            options = {k: v for k, v in host.items() if k != "address"}
            options.setdefault("socket_connect_timeout", 2)
            options.setdefault("socket_timeout", 2)
            options.setdefault("retry", Retry(NoBackoff(), 1))
            self._clients.append(redis.Redis.from_url(host["address"], **options))
        self._local = threading.local()

    def _connection(self, index: int) -> Any:
        """This thread's connection to shard ``index`` (made on first use; a forked
        child makes its own: redis-py checks the pid)."""
        conns = getattr(self._local, "conns", None)
        if conns is None or self._local.pid != os.getpid():
            conns = self._local.conns = {}
            self._local.pid = os.getpid()
            self._local.unread = {}
        if index not in conns:
            pool = self._clients[index].connection_pool
            conns[index] = pool.connection_class(**pool.connection_kwargs)
            self._local.unread[index] = 0
        return conns[index]

    def _drop(self, index: int) -> None:
        conn = self._local.conns.pop(index, None)
        self._local.unread.pop(index, None)
        if conn is not None:
            conn.disconnect()

    def _read_replies(self, index: int, conn: Any, *, wait: bool) -> None:
        unread = self._local.unread
        while unread[index] and (wait or conn.can_read(timeout=0)):
            reply = conn.read_response(disable_decoding=True)
            unread[index] -= 1
            if isinstance(reply, Exception):
                log.error("event publish failed: %s", reply)

    def group_send(self, group: str, message: dict[str, Any]) -> None:
        from channels_redis.utils import _consistent_hash

        channel = f"{self._prefix}__group__{group}"
        index = _consistent_hash(channel, len(self._clients))
        conn = self._connection(index)
        try:
            if self._local.unread[index] >= self.UNREAD:
                self._read_replies(index, conn, wait=True)
            name, data = channel.encode(), self._serialize(message)
            conn.send_packed_command(
                [b"*3\r\n$7\r\nPUBLISH\r\n$%d\r\n%s\r\n$%d\r\n%s\r\n" % (len(name), name, len(data), data)]
            )
            self._local.unread[index] += 1
        except Exception:
            self._drop(index)
            raise

    def flush(self, timeout: float = 5.0) -> bool:
        """Read this thread's outstanding replies: its events have reached Redis."""
        for index, conn in list(getattr(self._local, "conns", {}).items()):
            try:
                self._read_replies(index, conn, wait=True)
            except Exception:
                log.exception("event publish failed")
                self._drop(index)
        return True


_publishers: weakref.WeakKeyDictionary[Any, _RedisPublisher | None] = weakref.WeakKeyDictionary()
_publishers_lock = threading.Lock()


def _redis_publisher(layer: Any) -> _RedisPublisher | None:
    """The publisher of a Redis pub/sub layer (one per layer per process), or None when
    the layer is another kind or configured in a way the publisher does not cover."""
    try:
        return _publishers[layer]
    except KeyError:
        pass
    with _publishers_lock:
        if layer not in _publishers:
            _publishers[layer] = _make_publisher(layer)
        return _publishers[layer]


def _make_publisher(layer: Any) -> _RedisPublisher | None:
    try:
        from channels_redis.pubsub import RedisPubSubChannelLayer
        from channels_redis.utils import decode_hosts
    except ImportError:  # pragma: no cover - channels_redis is a dependency
        return None
    if type(layer) is not RedisPubSubChannelLayer:
        return None
    kwargs = dict(getattr(layer, "_kwargs", {}) or {})
    hosts = decode_hosts(kwargs.get("hosts"))
    if not all("address" in host for host in hosts):  # sentinels, host/port pairs: the layer's own path
        return None
    return _RedisPublisher(layer, hosts, str(kwargs.get("prefix", "asgi")))


def _send(group: str, event: dict[str, Any], private: tuple[int, dict[str, Any] | None] | None = None) -> None:
    for listener in list(_listeners):
        listener(group, event)
    layer = get_channel_layer()
    if layer is None:
        return
    if type(layer) is ThreadSafeInMemoryChannelLayer and not layer.groups.get(group):
        return  # nobody is in the group: the embedded layer would drop it, encoded for nothing
    message = {"type": "markus.event", "event": event}
    # Encoded once for the whole fan-out (and, for a private event, its public form once).
    message = wire_form(message) if private is None else private_form(message, *private)
    try:
        # Ask the class, not the instance: the Redis pub/sub layer proxies attribute
        # access to a per-event-loop connection and raises outside an event loop.
        if getattr(type(layer), "group_send_sync", None) is not None:  # the embedded layer
            layer.group_send_sync(group, message)
        elif (publisher := _redis_publisher(layer)) is not None:
            publisher.group_send(group, message)
        else:
            async_to_sync(layer.group_send)(group, message)
    except Exception:  # a UI event must never break the write that caused it
        log.exception("event send failed for %s", group)


def send_event_on_commit(
    group: str,
    event_type: str,
    payload: dict[str, Any],
    *,
    private_to: int | None = None,
    public: dict[str, Any] | None = None,
) -> None:
    """``private_to``: the event is about a private chat session of that person; a
    socket whose reader may not read it gets ``public`` (the payload with the content
    replaced; None: nothing) instead."""
    event = json.loads(json.dumps({"type": event_type, **payload}, cls=DjangoJSONEncoder))
    shown = None
    if private_to is not None and public is not None:
        shown = json.loads(json.dumps({"type": event_type, **public}, cls=DjangoJSONEncoder))
    send_json_on_commit(group, event, private_to=private_to, public=shown)


def send_json_on_commit(
    group: str, event: dict[str, Any], *, private_to: int | None = None, public: dict[str, Any] | None = None
) -> None:
    """Send ``event`` (with its ``type``) after commit, as it is: the caller made it of
    JSON values only (no datetimes, no model instances), so it is not re-encoded here.
    ``private_to`` and ``public`` as for ``send_event_on_commit``."""
    private = None if private_to is None else (private_to, public)
    transaction.on_commit(partial(_send, group, event, private))


def flush(timeout: float = 5.0) -> bool:
    """Wait until the events this thread sent to Redis have reached it (a benchmark's
    or a test's barrier); True at once on any other layer."""
    layer = get_channel_layer()
    publisher = _publishers.get(layer) if layer is not None else None
    return True if publisher is None else publisher.flush(timeout)


def add_listener(fn: Callable[[str, dict[str, Any]], None]) -> None:
    _listeners.append(fn)


def remove_listener(fn: Callable[[str, dict[str, Any]], None]) -> None:
    if fn in _listeners:
        _listeners.remove(fn)
