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

from markus.core.channel_layer import frame_for
from notifications.consumers import AgentEventsConsumer

from .live import DELTA, MindStream
from .mind import MindFilters, may_control


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
        await self.send(text_data=await database_sync_to_async(stream.refresh)())

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
            await self.send(text_data=html)
