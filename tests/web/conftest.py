"""Fixtures for the mind view and the sockets: session cookies, a WebSocket helper,
and (for the browser tests) daphne serving the real ASGI app in a thread of this
process, so the in-memory channel layer and the in-process Celery worker reach it."""

from __future__ import annotations

from pathlib import Path

import pytest
from channels.testing import WebsocketCommunicator
from django.test import Client

from mailbox.registry import MailboxType
from mailbox.services import mailbox_enqueue
from markus.agents.services import agent_create

ORIGIN = (b"origin", b"http://127.0.0.1:8000")
ROOT = Path(__file__).resolve().parents[2]


def session_cookie(user) -> bytes:
    client = Client()
    client.force_login(user)
    return f"sessionid={client.cookies['sessionid'].value}".encode()


async def ws_connect(path: str, *, cookie: bytes | None = None, origin: tuple[bytes, bytes] | None = ORIGIN):
    """Open a socket on the real ASGI app; returns (communicator, connected). The
    caller must ``await communicator.disconnect()``."""
    from markus.asgi import application

    headers = [origin] if origin else []
    if cookie:
        headers.append((b"cookie", cookie))
    communicator = WebsocketCommunicator(application, path, headers=headers)
    connected, _ = await communicator.connect(timeout=5)
    return communicator, connected


def enqueue_chat(agent_id: str, summary: str, **kw):
    return mailbox_enqueue(
        agent_id=agent_id, source_type=MailboxType.HUMAN_CHAT, payload={"summary": summary, "content": summary}, **kw
    )


def signed_in(user) -> Client:
    """A test client with ``user``'s session."""
    client = Client()
    client.force_login(user)
    return client


@pytest.fixture
def solo(alice):
    """alice's agent outside the team: bob (a teammate on her other agents) does not see it."""
    return agent_create(name="Solo", owner=alice, agent_id="solo")[0]


@pytest.fixture
def mind_client(alice):
    client = Client()
    client.force_login(alice)
    return client
