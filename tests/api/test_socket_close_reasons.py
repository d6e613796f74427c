"""A refused WebSocket closes with its code *and a reason*, as a client of the real
server sees it: daphne (what ``manage.py up`` serves with) in a subprocess, a raw
WebSocket handshake, and the close frame read off the wire. Channels' test
communicator sees the ASGI message, reason included, but daphne used to drop the
reason when it wrote the close frame, so browsers got an empty ``CloseEvent.reason``.

Every route of ``markus.asgi``, every refusal: not signed in, a token that matches
nothing, not allowed (a foreign origin, an agent token on another agent or on the
notifications), no such agent, and the per-caller cap."""

from __future__ import annotations

import pytest
from django.db import connection

from markus.agents.services import agent_create, user_token_create
from tests.agentbus.hub_server import HubServer
from tests.websocket_wire import close_frame, handshake

pytestmark = pytest.mark.django_db(transaction=True)


@pytest.fixture(scope="module")
def hub(django_db_setup):
    server = HubServer(connection.settings_dict["NAME"], markus={"SOCKETS_PER_CALLER": 1}).start()
    yield server
    server.stop()


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
