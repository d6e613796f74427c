"""Agent cards through the SDK's card resolver: each running agent's card names its
JSON-RPC endpoint, streaming, its skills and the bearer scheme; the directory at the
site root lists the running agents the caller reaches (outside ones too); no token gets
nothing, and an agent the caller may not reach answers exactly like a missing one."""

from __future__ import annotations

import httpx
import pytest
from a2a.client import A2ACardResolver
from a2a.client.errors import A2AClientError, AgentCardResolutionError
from a2a.types import GetTaskRequest
from asgiref.sync import async_to_sync

from markus.agents.models import Agent

pytestmark = pytest.mark.django_db(transaction=True)


def resolve(base: str, path: str, token: str | None):
    async def go():
        headers = {"Authorization": f"Bearer {token}"} if token else {}
        async with httpx.AsyncClient(headers=headers, timeout=10) as http:
            return await A2ACardResolver(http, base).get_agent_card(relative_card_path=path)

    return async_to_sync(go)()


def test_an_agents_card_names_its_endpoint_skills_and_bearer_scheme(base, ada, tokens):
    card = resolve(base, "/a2a/ada/.well-known/agent-card.json", tokens["alice"])
    assert card.name == "Ada" and "engineer" in card.description and "team Core" in card.description
    (interface,) = card.supported_interfaces
    assert interface.url == f"{base}/a2a/ada/"
    assert (interface.protocol_binding, interface.protocol_version) == ("JSONRPC", "1.0")
    assert card.capabilities.streaming and not card.capabilities.push_notifications
    assert {"chat", "a2a", "task_execution", "review"} <= {s.id for s in card.skills}
    scheme = card.security_schemes["bearer"].http_auth_security_scheme
    assert scheme.scheme.lower() == "bearer"
    assert [list(r.schemes) for r in card.security_requirements] == [["bearer"]]
    # The agent's own token reads its card too.
    assert resolve(base, "/a2a/ada/.well-known/agent-card.json", ada.token).name == "Ada"


def test_the_directory_lists_the_running_agents_the_caller_reaches(base, ada, eve, zed, tokens):
    Agent.objects.create(id="sleepy", name="Sleepy", owner=ada.agent.owner, status=Agent.RunStatus.PAUSED)
    listed = resolve(base, "/.well-known/agent-card.json", tokens["bob"])  # a teammate
    assert [s.id for s in listed.skills] == ["ada", eve.agent.id]  # the harness too; not the paused one, not zed
    assert f"{base}/a2a/ada/.well-known/agent-card.json" in listed.skills[0].description
    assert [s.id for s in resolve(base, "/.well-known/agent-card.json", tokens["charlie"]).skills] == ["zed"]
    assert [s.id for s in resolve(base, "/.well-known/agent-card.json", eve.token).skills] == ["ada", eve.agent.id]


def test_no_token_gets_nothing_and_a_foreign_agent_answers_like_a_missing_one(base, ada, zed, tokens):
    for path in ("/.well-known/agent-card.json", "/a2a/ada/.well-known/agent-card.json"):
        with pytest.raises(AgentCardResolutionError) as refused:
            resolve(base, path, None)
        assert refused.value.status_code == 401
    no_token = httpx.post(f"{base}/a2a/ada/", json={"jsonrpc": "2.0", "id": 1, "method": "GetTask", "params": {}})
    assert no_token.status_code == 401 and no_token.headers["WWW-Authenticate"] == "Bearer"
    assert httpx.post(f"{base}/a2a/ada/", headers={"Authorization": "Bearer nope"}, json={}).status_code == 401
    for agent_id in ("zed", "nobody"):  # charlie's agent, and one that does not exist: the same answer
        with pytest.raises(AgentCardResolutionError) as hidden:
            resolve(base, f"/a2a/{agent_id}/.well-known/agent-card.json", tokens["alice"])
        assert hidden.value.status_code == 404
        answer = httpx.post(
            f"{base}/a2a/{agent_id}/",
            headers={"Authorization": f"Bearer {tokens['alice']}", "A2A-Version": "1.0"},
            json={"jsonrpc": "2.0", "id": 1, "method": "GetTask", "params": {"id": "x"}},
        )
        assert (answer.status_code, answer.json()) == (404, {"detail": "No such agent.", "code": "not_found"})
    # Through the SDK's client, built from ada's card, but sent to zed's endpoint.
    card = resolve(base, "/a2a/ada/.well-known/agent-card.json", tokens["alice"])
    card.supported_interfaces[0].url = f"{base}/a2a/zed/"

    async def go():
        from a2a.client import ClientConfig, ClientFactory

        headers = {"Authorization": f"Bearer {tokens['alice']}"}
        async with httpx.AsyncClient(headers=headers, timeout=10) as http:
            client = ClientFactory(ClientConfig(httpx_client=http)).create(card)
            await client.get_task(GetTaskRequest(id="x"))

    with pytest.raises(A2AClientError, match="404"):
        async_to_sync(go)()
