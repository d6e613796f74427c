"""A2A personas and the SDK's client against a live server.

alice owns the team's agents: ada (internal, the loop runs it) and eve (an external
harness, which messages ada with its own token); bob is a teammate; charlie an outsider
with his own agent, zed. The server is the session's daphne (tests/browser.py: the real
ASGI stack, the same process as the Celery worker, so events reach its streams), and the
client is ``a2a-sdk``'s: the card resolved from the server, then JSON-RPC over httpx."""

from __future__ import annotations

from collections.abc import AsyncIterator
from contextlib import asynccontextmanager
from dataclasses import dataclass
from typing import Any

import httpx
import pytest
from a2a.client import Client, ClientCallContext, ClientConfig, ClientFactory
from a2a.types import Message, Part, Role, SendMessageConfiguration, SendMessageRequest, StreamResponse

from markus.agents.models import Agent
from markus.agents.services import agent_create, user_token_create
from tests.attention.conftest import celery_worker, scripted, wait_for, wake_on_enqueue  # noqa: F401 (fixtures)


@dataclass
class Persona:
    agent: Agent
    token: str


@pytest.fixture
def ada(alice, team) -> Persona:
    return Persona(*agent_create(name="Ada", role="engineer", owner=alice, team=team, agent_id="ada"))


@pytest.fixture
def eve(alice, team) -> Persona:
    agent, token = agent_create(name="Eve", role="harness", kind=Agent.Kind.EXTERNAL, owner=alice, team=team)
    return Persona(agent, token)


@pytest.fixture
def zed(charlie) -> Persona:
    return Persona(*agent_create(name="Zed", role="engineer", owner=charlie, agent_id="zed"))


@pytest.fixture
def tokens(alice, bob, charlie) -> dict[str, str]:
    return {user.username: user_token_create(user, name="a2a")[1] for user in (alice, bob, charlie)}


@pytest.fixture
def base(daphne_server) -> str:
    return daphne_server.url


@asynccontextmanager
async def a2a_client(base: str, agent_id: str, token: str, *, streaming: bool = True) -> AsyncIterator[Client]:
    """The SDK's client for an agent: its card fetched from the server, the token on every request."""
    async with httpx.AsyncClient(headers={"Authorization": f"Bearer {token}"}, timeout=30) as http:
        factory = ClientFactory(ClientConfig(streaming=streaming, httpx_client=http))
        client = await factory.create_from_url(f"{base}/a2a/{agent_id}/")
        yield client


def message(text: str, message_id: str, **kwargs: Any) -> Message:
    return Message(role=Role.ROLE_USER, message_id=message_id, parts=[Part(text=text)], **kwargs)


def send_request(text: str, message_id: str, *, return_immediately: bool = False) -> SendMessageRequest:
    return SendMessageRequest(
        message=message(text, message_id),
        configuration=SendMessageConfiguration(return_immediately=return_immediately),
    )


def resume_from(sequence: int) -> ClientCallContext:
    """A call that resumes a stream after the update numbered ``sequence``."""
    return ClientCallContext(service_parameters={"Last-Event-ID": str(sequence)})


def sequence(event: StreamResponse) -> int:
    payload = getattr(event, event.WhichOneof("payload"))
    return int(payload.metadata["sequence"])


def state_name(event: StreamResponse) -> str:
    from a2a.types import TaskState

    kind = event.WhichOneof("payload")
    if kind == "task":
        return TaskState.Name(event.task.status.state)
    if kind == "status_update":
        return TaskState.Name(event.status_update.status.state)
    return "artifact"
