"""The one helper that sends events. Events go out after commit, to a Channels group.

Groups: ``agent.<id>`` for an agent's live view, ``user.<id>`` for a user's
notifications. Payloads are JSON-serialisable by construction: they pass through
``json`` here, so a bad payload fails where it is made, not in a consumer.
"""

from __future__ import annotations

import json
import logging
from collections.abc import Callable
from typing import Any

from asgiref.sync import async_to_sync
from channels.layers import get_channel_layer
from django.core.serializers.json import DjangoJSONEncoder
from django.db import transaction

log = logging.getLogger(__name__)

# Test hook: every event sent is also handed to these listeners (after commit).
_listeners: list[Callable[[str, dict[str, Any]], None]] = []


def agent_group(agent_id: str) -> str:
    return f"agent.{agent_id}"


def user_group(user_id: int | str) -> str:
    return f"user.{user_id}"


def _send(group: str, event: dict[str, Any]) -> None:
    for listener in list(_listeners):
        listener(group, event)
    layer = get_channel_layer()
    if layer is None:
        return
    message = {"type": "markus.event", "event": event}
    try:
        # Ask the class, not the instance: the Redis pub/sub layer proxies attribute
        # access to a per-event-loop connection and raises outside an event loop.
        if getattr(type(layer), "group_send_sync", None) is not None:  # the embedded layer
            layer.group_send_sync(group, message)
        else:
            async_to_sync(layer.group_send)(group, message)
    except Exception:  # a UI event must never break the write that caused it
        log.exception("event send failed for %s", group)


def send_event_on_commit(group: str, event_type: str, payload: dict[str, Any]) -> None:
    event = json.loads(json.dumps({"type": event_type, **payload}, cls=DjangoJSONEncoder))
    transaction.on_commit(lambda: _send(group, event))


def add_listener(fn: Callable[[str, dict[str, Any]], None]) -> None:
    _listeners.append(fn)


def remove_listener(fn: Callable[[str, dict[str, Any]], None]) -> None:
    if fn in _listeners:
        _listeners.remove(fn)
