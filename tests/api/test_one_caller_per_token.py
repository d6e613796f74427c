"""A token becomes a caller the same way at every door (issue 38, point 3): the REST API,
A2A, MCP and the sockets ask ``caller_for_token``, whose one precedence puts an agent's
token before a user's, refuse a revoked or unknown token alike, and MCP asks once per
request. ``tok`` is alice's agent; charlie, an outsider who may not see it, holds a user
token that is, by construction, the same string as tok's."""

from __future__ import annotations

import asyncio
import json
from typing import Any
from unittest import mock

import httpx
import pytest
from django.contrib.auth.models import AnonymousUser
from django.test import Client, RequestFactory
from rest_framework.test import APIClient

from agentbus import mcp_door
from markus.a2a.auth import authenticate
from markus.agents.auth import caller_for_token
from markus.agents.models import Agent, UserToken, hash_token
from notifications.consumers import TokenAuthMiddleware

# Threads (the sockets' and MCP's database calls) must see the rows: committed.
pytestmark = pytest.mark.django_db(transaction=True)

UNKNOWN = "mk_not-a-token"


@pytest.fixture
def both(agent_with_token, charlie) -> tuple[Agent, str]:
    """tok's token, also charlie's user token."""
    agent, raw = agent_with_token
    UserToken.objects.create(user=charlie, key_hash=hash_token(raw))
    return agent, raw


@pytest.fixture
def revoked(agent_with_token) -> str:
    agent, raw = agent_with_token
    Agent.objects.filter(id=agent.id).update(token_hash=None)
    return raw


def bearer(raw: str) -> APIClient:
    client = APIClient()
    client.credentials(HTTP_AUTHORIZATION=f"Bearer {raw}")
    return client


def socket_scope(raw: str) -> dict[str, Any]:
    """The scope the sockets' token middleware hands on for ``?token=<raw>``."""
    seen: dict[str, Any] = {}

    async def inner(scope: dict[str, Any], receive: Any, send: Any) -> None:
        seen.update(scope)

    scope = {"type": "websocket", "path": "/ws/notifications/", "query_string": f"token={raw}".encode()}
    asyncio.run(TokenAuthMiddleware(inner)(scope, None, None))
    return seen


def mcp_post(raw: str, body: dict[str, Any]) -> httpx.Response:
    """One POST to the MCP door, in process."""

    async def post() -> httpx.Response:
        transport = httpx.ASGITransport(app=mcp_door.McpHttpApp())
        async with httpx.AsyncClient(transport=transport, base_url="http://testserver") as http:
            return await http.post(
                "/mcp/",
                json=body,
                headers={"Authorization": f"Bearer {raw}", "Accept": "application/json, text/event-stream"},
            )

    return asyncio.run(post())


def test_a_token_that_is_both_an_agents_and_a_users_names_the_agent_at_every_door(both):
    agent, raw = both
    assert caller_for_token(raw).auth == agent
    assert bearer(raw).get(f"/api/agents/{agent.id}/").status_code == 200  # charlie would get 404
    a2a = RequestFactory().post(f"/a2a/{agent.id}/", HTTP_AUTHORIZATION=f"Bearer {raw}")
    assert authenticate(a2a).auth == agent
    assert mcp_door.caller_for_authorization(f"Bearer {raw}").auth == agent
    scope = socket_scope(raw)
    assert scope["agent"] == agent and not scope["user"].is_authenticated


@pytest.mark.parametrize("which", ["revoked", "unknown"])
def test_a_revoked_or_unknown_token_is_refused_at_every_door(request, which):
    raw = request.getfixturevalue("revoked") if which == "revoked" else UNKNOWN
    assert caller_for_token(raw) is None
    assert bearer(raw).get("/api/agents/tok/").status_code == 401
    assert Client().post("/a2a/tok/", HTTP_AUTHORIZATION=f"Bearer {raw}").status_code == 401
    refused = mcp_post(raw, {"jsonrpc": "2.0", "id": 1, "method": "tools/list"})
    assert refused.status_code == 401 and refused.json()["code"] == "not_authenticated"
    scope = socket_scope(raw)
    assert isinstance(scope["user"], AnonymousUser) and scope["agent"] is None


def test_the_mcp_door_resolves_the_caller_once_per_request(agent_with_token):
    _, raw = agent_with_token
    call = {"jsonrpc": "2.0", "id": 1, "method": "tools/call", "params": {"name": "task_list", "arguments": {}}}
    with mock.patch.object(mcp_door, "caller_for_token", wraps=caller_for_token) as spy:
        answer = mcp_post(raw, call)
    assert answer.status_code == 200, answer.text
    [data] = [line.removeprefix("data:") for line in answer.text.splitlines() if line.startswith("data:")]
    assert json.loads(data)["result"]["isError"] is False, data
    assert spy.call_count == 1


def test_a_users_token_as_bearer_names_the_user_at_the_api_as_at_a2a_and_mcp(alice):
    raw = "mk_users-own-token"
    UserToken.objects.create(user=alice, key_hash=hash_token(raw))
    assert bearer(raw).get("/api/agents/").status_code == 200
    a2a = RequestFactory().post("/a2a/tok/", HTTP_AUTHORIZATION=f"Bearer {raw}")
    assert authenticate(a2a).user == alice
    assert mcp_door.caller_for_authorization(f"Bearer {raw}").user == alice


def test_the_api_a2a_and_the_sockets_resolve_the_caller_once_per_request(agent_with_token):
    agent, raw = agent_with_token
    with mock.patch("markus.agents.auth.caller_for_token", wraps=caller_for_token) as spy:
        assert bearer(raw).get(f"/api/agents/{agent.id}/").status_code == 200
    assert spy.call_count == 1
    with mock.patch("markus.agents.auth.caller_for_token", wraps=caller_for_token) as spy:
        card = Client().get(f"/a2a/{agent.id}/.well-known/agent-card.json", HTTP_AUTHORIZATION=f"Bearer {raw}")
        rpc = Client().post(
            f"/a2a/{agent.id}/",
            data=json.dumps({"jsonrpc": "2.0", "id": 1, "method": "tasks/get", "params": {"id": "none"}}),
            content_type="application/json",
            HTTP_AUTHORIZATION=f"Bearer {raw}",
        )
    assert spy.call_count == 2, (card.status_code, rpc.status_code)  # one per request
    with mock.patch("notifications.consumers.caller_for_token", wraps=caller_for_token) as spy:
        assert socket_scope(raw)["agent"] == agent
    assert spy.call_count == 1
