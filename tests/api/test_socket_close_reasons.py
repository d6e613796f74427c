"""A refused WebSocket closes with its code *and a reason*, as a client of the real
server sees it: daphne (what ``manage.py up`` serves with) in a subprocess, a raw
WebSocket handshake, and the close frame read off the wire. Channels' test
communicator sees the ASGI message, reason included, but daphne used to drop the
reason when it wrote the close frame, so browsers got an empty ``CloseEvent.reason``.

Every route of ``markus.asgi``, every refusal: not signed in, a token that matches
nothing, not allowed (a foreign origin, an agent token on another agent or on the
notifications), no such agent, and the per-caller cap."""

from __future__ import annotations

import base64
import os
import socket

import pytest
from django.db import connection

from markus.agents.services import agent_create, user_token_create
from tests.agentbus.hub_server import HubServer

pytestmark = pytest.mark.django_db(transaction=True)


@pytest.fixture(scope="module")
def hub(django_db_setup):
    server = HubServer(connection.settings_dict["NAME"], markus={"SOCKETS_PER_CALLER": 1}).start()
    yield server
    server.stop()


def _read_exactly(sock: socket.socket, n: int) -> bytes:
    data = b""
    while len(data) < n:
        chunk = sock.recv(n - len(data))
        if not chunk:
            raise AssertionError(f"connection closed after {len(data)} of {n} bytes")
        data += chunk
    return data


def handshake(port: int, path: str, headers: dict[str, str] | None = None) -> socket.socket:
    sock = socket.create_connection(("127.0.0.1", port), timeout=15)
    key = base64.b64encode(os.urandom(16)).decode()
    lines = [
        f"GET {path} HTTP/1.1",
        f"Host: 127.0.0.1:{port}",
        "Upgrade: websocket",
        "Connection: Upgrade",
        f"Sec-WebSocket-Key: {key}",
        "Sec-WebSocket-Version: 13",
        *[f"{name}: {value}" for name, value in (headers or {}).items()],
    ]
    sock.sendall(("\r\n".join(lines) + "\r\n\r\n").encode())
    head = b""
    while b"\r\n\r\n" not in head:
        chunk = sock.recv(1)
        if not chunk:
            raise AssertionError(f"no handshake answer: {head!r}")
        head += chunk
    status = head.split(b"\r\n", 1)[0]
    assert b" 101 " in status, head
    return sock


def close_frame(sock: socket.socket) -> tuple[int, str]:
    """Frames until the close frame; its code and reason."""
    try:
        while True:
            first, second = _read_exactly(sock, 2)
            opcode, length = first & 0x0F, second & 0x7F
            if length == 126:
                length = int.from_bytes(_read_exactly(sock, 2), "big")
            elif length == 127:
                length = int.from_bytes(_read_exactly(sock, 8), "big")
            payload = _read_exactly(sock, length)
            if opcode == 0x8:
                return int.from_bytes(payload[:2], "big"), payload[2:].decode()
    finally:
        sock.close()


def refusal(hub: HubServer, path: str, headers: dict[str, str] | None = None) -> tuple[int, str]:
    return close_frame(handshake(hub.port, path, headers))


ROUTES = ["/ws/agents/ada/", "/ws/agents/ada/mind/", "/ws/notifications/", "/ws/board/"]


@pytest.fixture
def personas(alice, agent):
    ada_token = agent_create(name="Ada2", role="x", owner=alice, agent_id="other")[1]
    return {"alice": user_token_create(alice)[1], "other": ada_token}


@pytest.mark.parametrize("path", ROUTES)
def test_not_signed_in_closes_4401_with_a_reason(hub, personas, path):
    code, reason = refusal(hub, path)
    assert code == 4401 and reason == "not signed in"


@pytest.mark.parametrize("path", ROUTES)
def test_a_token_that_matches_nothing_closes_4401_with_a_reason(hub, personas, path):
    code, reason = refusal(hub, f"{path}?token=nope")
    assert code == 4401 and reason == "invalid token"


@pytest.mark.parametrize("path", ROUTES)
def test_a_foreign_origin_closes_4403_with_a_reason(hub, personas, path):
    code, reason = refusal(hub, f"{path}?token={personas['alice']}", {"Origin": "http://evil.example"})
    assert code == 4403 and reason == "origin not allowed"


@pytest.mark.parametrize("path", ["/ws/agents/ada/", "/ws/agents/ada/mind/", "/ws/notifications/"])
def test_not_allowed_closes_4403_with_a_reason(hub, personas, path):
    code, reason = refusal(hub, f"{path}?token={personas['other']}")
    assert code == 4403 and reason


@pytest.mark.parametrize("path", ["/ws/agents/nobody/", "/ws/agents/nobody/mind/"])
def test_no_such_agent_closes_4404_with_a_reason(hub, personas, path):
    code, reason = refusal(hub, f"{path}?token={personas['alice']}")
    assert code == 4404 and reason == "no such agent"


def test_past_the_cap_closes_4429_with_a_reason(hub, personas):
    first = handshake(hub.port, f"/ws/agents/ada/?token={personas['alice']}")
    try:
        code, reason = refusal(hub, f"/ws/agents/ada/?token={personas['alice']}")
        assert code == 4429 and "at most 1" in reason
    finally:
        first.close()
