"""The sockets of CONTRACT.md: who gets in, and that events arrive as JSON.

alice owns agent ada, bob is her teammate, charlie an outsider with his own agent zed.
"""

from __future__ import annotations

import json

import pytest
from asgiref.sync import async_to_sync
from channels.db import database_sync_to_async
from django.core.serializers.json import DjangoJSONEncoder

from mailbox.services import serialize_item
from markus.agents.services import agent_create, user_token_create
from notifications.registry import NotificationType
from notifications.services import notify_user

from .conftest import ORIGIN, enqueue_chat, session_cookie, ws_connect

pytestmark = [
    pytest.mark.pg,  # also on PostgreSQL with the Redis channel layer
    pytest.mark.django_db(transaction=True),
]


def run(coro_fn):
    return async_to_sync(coro_fn)()


def connects(path: str, **kw) -> bool:
    """Whether the socket opens and stays open: a refusal is accepted and closed at once
    with a code and reason (4401/4403/4404), its close already queued behind the accept."""

    async def go():
        communicator, connected = await ws_connect(path, **kw)
        try:
            if not connected:
                return False
            return await communicator.receive_nothing(timeout=0.1)
        finally:
            await communicator.disconnect()

    return run(go)


@pytest.fixture
def zed(charlie):
    agent, _ = agent_create(name="Zed", owner=charlie, agent_id="zed")
    return agent


def test_owner_with_a_session_connects_and_an_enqueue_arrives_as_json(alice, agent):
    cookie = session_cookie(alice)

    async def go():
        communicator, connected = await ws_connect(f"/ws/agents/{agent.id}/", cookie=cookie)
        try:
            assert connected
            item = await database_sync_to_async(enqueue_chat)(agent.id, "Status of the release?")
            text = await communicator.receive_from(timeout=5)
            return item, text
        finally:
            await communicator.disconnect()

    item, text = run(go)
    frame = json.loads(text)
    assert frame["type"] == "agent:mailbox"
    assert frame["agentId"] == agent.id
    item.refresh_from_db()
    assert frame["item"] == json.loads(json.dumps(serialize_item(item), cls=DjangoJSONEncoder))
    assert frame["item"]["summary"] == "Status of the release?"
    assert json.loads(json.dumps(frame)) == frame


def test_a_teammate_connects(bob, agent):
    assert connects(f"/ws/agents/{agent.id}/", cookie=session_cookie(bob))


def test_anonymous_is_refused(agent):
    assert not connects(f"/ws/agents/{agent.id}/")


def test_a_foreign_origin_is_refused_even_with_a_session(alice, agent):
    assert not connects(
        f"/ws/agents/{agent.id}/", cookie=session_cookie(alice), origin=(b"origin", b"http://evil.example")
    )
    assert not connects(
        f"/ws/agents/{agent.id}/mind/", cookie=session_cookie(alice), origin=(b"origin", b"http://evil.example")
    )


def test_another_users_agent_is_refused_like_a_missing_one(charlie, agent, zed):
    cookie = session_cookie(charlie)
    assert connects(f"/ws/agents/{zed.id}/", cookie=cookie)
    assert not connects(f"/ws/agents/{agent.id}/", cookie=cookie)
    assert not connects("/ws/agents/no-such-agent/", cookie=cookie)
    assert not connects(f"/ws/agents/{agent.id}/mind/", cookie=cookie)


def test_a_user_token_in_the_query_connects(alice, agent):
    key = user_token_create(alice)[1]
    assert connects(f"/ws/agents/{agent.id}/?token={key}")
    assert not connects(f"/ws/agents/{agent.id}/?token=not-a-token")


def test_a_client_without_origin_is_not_a_browser_and_still_needs_a_token(alice, agent):
    key = user_token_create(alice)[1]
    assert connects(f"/ws/agents/{agent.id}/?token={key}", origin=None)
    assert not connects(f"/ws/agents/{agent.id}/", origin=None)


def test_an_agent_token_opens_only_its_own_agent(agent, agent_with_token):
    tok, raw = agent_with_token
    assert connects(f"/ws/agents/{tok.id}/?token={raw}")
    assert not connects(f"/ws/agents/{agent.id}/?token={raw}")
    assert not connects(f"/ws/notifications/?token={raw}")


def test_notifications_reach_only_their_user(alice, charlie):
    async def go():
        mine, ok_mine = await ws_connect(
            "/ws/notifications/", cookie=await database_sync_to_async(session_cookie)(alice)
        )
        theirs, ok_theirs = await ws_connect(
            "/ws/notifications/", cookie=await database_sync_to_async(session_cookie)(charlie)
        )
        try:
            assert ok_mine and ok_theirs
            await database_sync_to_async(notify_user)(user=alice, type=NotificationType.SYSTEM, title="Backup done")
            text = await mine.receive_from(timeout=5)
            assert await theirs.receive_nothing(timeout=0.3)
            return text
        finally:
            await mine.disconnect()
            await theirs.disconnect()

    frame = json.loads(run(go))
    assert frame["type"] == "notification"
    assert frame["notification"]["title"] == "Backup done"
    assert json.loads(json.dumps(frame)) == frame


def test_notifications_refuse_anonymous_and_foreign_origins(alice):
    assert not connects("/ws/notifications/")
    assert not connects("/ws/notifications/", cookie=session_cookie(alice), origin=(b"origin", b"https://evil.example"))
    assert connects("/ws/notifications/", cookie=session_cookie(alice), origin=ORIGIN)


def test_the_mind_socket_sends_the_page_then_new_items_as_html(alice, agent):
    cookie = session_cookie(alice)

    async def go():
        communicator, connected = await ws_connect(f"/ws/agents/{agent.id}/mind/", cookie=cookie)
        try:
            assert connected
            first = await communicator.receive_from(timeout=5)
            item = await database_sync_to_async(enqueue_chat)(agent.id, "Ship it?")
            second = await communicator.receive_from(timeout=5)
            return first, item, second
        finally:
            await communicator.disconnect()

    first, item, second = run(go)
    assert 'id="mind-header"' in first and 'id="timeline-body"' in first and ">live<" in first
    assert 'hx-swap-oob="afterbegin:#timeline-items"' in second
    assert f'id="item-{item.id}"' in second and "Ship it?" in second
    assert 'id="queue-depth">1<' in second
