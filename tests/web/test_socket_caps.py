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


@pytest.mark.parametrize("path,kind", [("/ws/board/", "board"), ("/ws/notifications/", "notification")])
def test_the_33rd_board_or_notification_socket_of_a_caller_is_refused_and_another_user_is_still_accepted(
    alice, bob, settings, path, kind
):
    cap = settings.MARKUS["SOCKETS_PER_CALLER"]
    assert cap == 32  # the default (MARKUS_SOCKETS_PER_CALLER)
    alices, bobs = session_cookie(alice), session_cookie(bob)

    async def go():
        open_ = [await ws_connect(path, cookie=alices) for _ in range(cap)]
        assert all(connected for _, connected in open_)
        extra, _ = await ws_connect(path, cookie=alices)
        refused = await extra.receive_output(timeout=2)
        other, other_connected = await ws_connect(path, cookie=bobs)
        other_quiet = await other.receive_nothing(timeout=0.3)
        for c, _ in [*open_, (other, other_connected)]:
            await c.disconnect()
        return refused, other_connected and other_quiet

    refused, other_accepted = async_to_sync(go)()
    assert refused["type"] == "websocket.close" and refused["code"] == 4429
    assert refused["reason"] == f"at most {cap} open {kind} sockets per caller"
    assert other_accepted
