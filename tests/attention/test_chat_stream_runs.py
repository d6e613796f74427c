"""A chat's stream says which run wrote each piece (issue 37, point 5): after Pause and
Resume the item is answered by a new run, whose reply starts over; each ``delta``
carries its run (the activity), so a client starts the reply again when the run
changes instead of showing the first partial reply followed by the new one."""

from __future__ import annotations

import pytest
from asgiref.sync import async_to_sync, sync_to_async

from attention.chat import DELTA_EVENT, _watch
from markus.core.events import agent_group, send_event_on_commit
from tests.listening import listening
from tests.web.conftest import enqueue_chat

pytestmark = pytest.mark.django_db(transaction=True)


def test_each_delta_carries_the_run_that_wrote_it(agent):
    item = enqueue_chat(agent.id, "when?")
    sent = [("act_first", "Shipping on Fri"), ("act_second", "Shipping "), ("act_second", "on Friday.")]

    def send() -> None:
        for run, text in sent:
            send_event_on_commit(
                agent_group(agent.id),
                DELTA_EVENT,
                {"agentId": agent.id, "mailboxItemIds": [item.id], "activityId": run, "turn": 1, "text": text},
            )

    async def go() -> list:
        async with listening(agent_group(agent.id)) as channel:
            await sync_to_async(send)()
            return [value async for kind, value in _watch(item.id, channel, 0.5) if kind == "delta"]

    assert async_to_sync(go)() == [{"text": text, "run": run} for run, text in sent]
