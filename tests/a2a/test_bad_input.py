"""What is not an A2A request gets the JSON-RPC error the SDK's dispatcher gives, never a
5xx: not JSON, not JSON-RPC 2.0, an unknown method, bad parameters, a missing or other
protocol version, a message with nothing to read, an agent that is not running."""

from __future__ import annotations

import json

import pytest
from django.test import Client

from markus.agents.models import Agent
from markus.agents.services import user_token_create

pytestmark = pytest.mark.django_db

V1 = {"HTTP_A2A_VERSION": "1.0"}


def rpc(method: str, params: object = None, **kwargs: object) -> dict:
    body = {"jsonrpc": "2.0", "id": "r1", "method": method, "params": params if params is not None else {}}
    return body | kwargs


def send(parts: list[dict], message_id: str = "b-1") -> dict:
    return rpc("SendMessage", {"message": {"messageId": message_id, "role": "ROLE_USER", "parts": parts}})


@pytest.fixture
def post(alice, ada):
    token = user_token_create(alice)[1]

    def post(body: object, raw: bytes | None = None, **headers: str) -> tuple[int, dict]:
        response = Client().post(
            "/a2a/ada/",
            raw if raw is not None else json.dumps(body),
            content_type="application/json",
            HTTP_AUTHORIZATION=f"Bearer {token}",
            **headers,
        )
        return response.status_code, response.json()

    return post


@pytest.mark.parametrize(
    ("body", "raw", "headers", "code"),
    [
        (None, b"{not json", V1, -32700),
        (None, b'{"jsonrpc": "2.0", "method": "GetTask", "params": {"id": "a\\u0000"}}', V1, -32700),
        ([rpc("GetTask", {"id": "x"})], None, V1, -32600),
        (rpc("GetTask", {"id": "x"}, jsonrpc="1.0"), None, V1, -32600),
        (rpc("Shout"), None, V1, -32601),
        (rpc("GetTask", ["x"]), None, V1, -32602),
        (rpc("SendMessage", {}), None, V1, -32602),
        (rpc("GetTask", {"id": "x"}), None, {}, -32009),  # no A2A-Version: the 0.3 protocol
        (rpc("GetTask", {"id": "x"}), None, {"HTTP_A2A_VERSION": "2.0"}, -32009),
        (rpc("GetTask", {"id": "x"}), None, V1, -32001),
        (rpc("SubscribeToTask", {"id": "x"}), None, {**V1, "HTTP_LAST_EVENT_ID": "soon"}, -32602),
        (send([{"text": "   "}]), None, V1, -32602),
        (send([{"url": "https://example.com/a.png"}]), None, V1, -32005),
        (send([{"text": "x" * 40_000}]), None, V1, -32602),
        (rpc("CreateTaskPushNotificationConfig", {"taskId": "x", "url": "https://x"}), None, V1, -32003),
    ],
)
def test_a_bad_request_answers_the_sdks_json_rpc_error(post, body, raw, headers, code):
    status, answer = post(body, raw, **headers)
    assert status == 200, answer
    assert answer["jsonrpc"] == "2.0" and answer["error"]["code"] == code, answer


def test_a_paused_agent_takes_no_message_and_a_get_is_not_allowed(post, alice):
    Agent.objects.filter(id="ada").update(status=Agent.RunStatus.PAUSED)
    status, answer = post(send([{"text": "are you there?"}]), **V1)
    assert status == 200 and answer["error"]["code"] == -32004 and "paused" in answer["error"]["message"]
    token = user_token_create(alice)[1]
    response = Client().get("/a2a/ada/", HTTP_AUTHORIZATION=f"Bearer {token}")
    assert response.status_code == 405
