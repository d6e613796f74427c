"""``/ws/agents/<id>/mind/``: the mind page's socket. The same access rules as the
JSON stream of ``/ws/agents/<id>/``, but it sends rendered HTML for htmx to swap.

A refused socket is closed with a code and a reason, as ``AgentEventsConsumer`` does
(4401 not signed in, 4403 not allowed, 4404 no such agent: a foreign agent exactly
like a missing one)."""

from __future__ import annotations

import json
from typing import Any
from urllib.parse import parse_qs

from channels.db import database_sync_to_async

from markus.core.actors import Actor
from markus.core.channel_layer import event_of, frame_for
from markus.core.events import WORK_GROUP
from notifications.consumers import (
    REFUSED_UNAUTHENTICATED,
    AgentEventsConsumer,
    EventStreamConsumer,
    _token_of,
)

from .live import DELTA, MindStream
from .mind import MindFilters, may_control
from .work_live import work_event_for


class MindConsumer(AgentEventsConsumer):
    stream: MindStream | None = None

    async def on_accepted(self) -> None:
        assert self.agent is not None  # connect accepts only once it found the agent
        query = parse_qs(self.scope.get("query_string", b"").decode("latin1"))
        agent, user = self.agent, self.scope.get("user")
        can_control = self.scope.get("agent") is None and await database_sync_to_async(may_control)(user, agent)
        self.stream = stream = MindStream(
            self.agent.id, MindFilters.from_query(query), can_control=can_control, reader=self.reader
        )
        await self.send_own(await database_sync_to_async(stream.refresh)())

    async def markus_event(self, message: dict[str, Any]) -> None:
        # Events are dispatched only after connect, so on_accepted has set the stream.
        assert self.stream is not None
        text = frame_for(message, self.reader.sees)
        if text is None:  # a private event this reader gets nothing of
            return
        event = json.loads(text)
        if event.get("type") == DELTA:  # many per turn: no query, no thread hop
            html = self.stream.delta(event)
        else:
            html = await database_sync_to_async(self.stream.apply)(event)
        if html:
            await self.send_own(html)


class WorkConsumer(EventStreamConsumer):
    """``/ws/board/``: the work pages' socket. The ``WORK_GROUP`` events (a task's or a
    requirement's status or comment; an agent created or removed) as JSON frames, each
    only to a caller who may see what it names (one query per event and socket); the
    pages then read what changed through their own views. A person (session or user
    token) or an agent's own token; anybody else is refused with 4401 and a reason, and
    past ``SOCKETS_PER_CALLER`` open board sockets a caller's next one with 4429."""

    subscribed = False

    async def connect(self) -> None:
        acting, user = self.scope.get("agent"), self.scope.get("user")
        if acting is None and (user is None or not user.is_authenticated):
            await self.refuse(REFUSED_UNAUTHENTICATED, "invalid token" if _token_of(self.scope) else "not signed in")
            return
        if not await self.take_place("board"):
            return
        self.actor = Actor.for_agent(acting) if acting is not None else Actor.for_user(user)
        await self.channel_layer.group_add(WORK_GROUP, self.channel_name)
        self.subscribed = True
        await self.accept()

    async def disconnect(self, code: int) -> None:
        self.closed = True
        self.leave_place()
        if self.subscribed:
            await self.channel_layer.group_discard(WORK_GROUP, self.channel_name)

    async def markus_event(self, message: dict[str, Any]) -> None:
        event = event_of(message)
        shown = await database_sync_to_async(work_event_for)(self.actor, self.scope.get("user"), event)
        if shown is not None:
            await self.send_own(json.dumps(shown))

    async def receive(self, text_data: str | None = None, bytes_data: bytes | None = None, **kwargs: Any) -> None:
        """One way; whatever a client sends is ignored."""
