"""Watchers per caller are capped: past ``SOCKETS_PER_CALLER`` open agent sockets in a
server process a new one is refused with 4429 and a reason stating the cap (300
watchers of one agent slowed its chats about 10x); closing one frees its place."""

from __future__ import annotations

import pytest
from asgiref.sync import async_to_sync

from .conftest import session_cookie, ws_connect

pytestmark = pytest.mark.django_db(transaction=True)

CAP = 4


def test_past_the_cap_a_socket_is_refused_with_4429_and_closing_one_frees_a_place(alice, agent, settings):
    settings.MARKUS = {**settings.MARKUS, "SOCKETS_PER_CALLER": CAP}
    cookie = session_cookie(alice)
    path = f"/ws/agents/{agent.id}/"

    async def go():
        open_ = [await ws_connect(path, cookie=cookie) for _ in range(CAP)]
        assert all(connected for _, connected in open_)
        extra, connected = await ws_connect(path, cookie=cookie)
        assert connected  # accepted, then closed at once with the reason
        refused = await extra.receive_output(timeout=2)
        await open_[0][0].disconnect()
        again, connected_again = await ws_connect(path, cookie=cookie)
        quiet = await again.receive_nothing(timeout=0.3)
        for c, _ in [*open_[1:], (again, connected_again)]:
            await c.disconnect()
        return refused, connected_again and quiet

    refused, reopened = async_to_sync(go)()
    assert refused["type"] == "websocket.close" and refused["code"] == 4429
    assert f"at most {CAP}" in refused["reason"]
    assert reopened
