"""A socket whose client went away under a send leaves its groups. daphne raises
``Disconnected`` ("Attempt to send on a closed protocol") on a send to a socket that has
closed, and the socket's disconnect then never reaches its consumer: a consumer that sends
from its own handler (the mind page's, the board's) leaves as a disconnect does, or its
channel stays in the group, fed every later event (a browser test left one in the
``agent.ada`` group, and every later test of the run found it)."""

from __future__ import annotations

import pytest
from asgiref.sync import async_to_sync
from autobahn.exception import Disconnected
from channels.db import database_sync_to_async
from channels.generic.websocket import AsyncWebsocketConsumer
from channels.layers import get_channel_layer

from markus.core.events import agent_group

from .conftest import enqueue_chat, session_cookie, ws_connect

pytestmark = pytest.mark.django_db(transaction=True)


def test_a_mind_socket_whose_client_went_away_under_a_send_leaves_its_group(alice, agent, monkeypatch):
    cookie = session_cookie(alice)

    async def gone(self, *args, **kwargs):
        raise Disconnected("Attempt to send on a closed protocol")

    async def go() -> None:
        communicator, connected = await ws_connect(f"/ws/agents/{agent.id}/mind/", cookie=cookie)
        assert connected
        await communicator.receive_from(timeout=5)  # the page
        assert get_channel_layer().groups.get(agent_group(agent.id))
        monkeypatch.setattr(AsyncWebsocketConsumer, "send", gone)  # the client is gone: every send fails
        await database_sync_to_async(enqueue_chat)(agent.id, "Ship it?")
        await communicator.wait(timeout=5)  # the consumer ends, and not by an exception

    async_to_sync(go)()
    assert not get_channel_layer().groups.get(agent_group(agent.id))
