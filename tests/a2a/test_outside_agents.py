"""Outside agents through the A2A door (issue 36, point 2): an outside agent has a card
and the directory lists it; a person's message to it is a chat, delivered to its bus
inbox, and its task stays working until the agent answers that chat (``bus_reply`` over
MCP, or a stream with ``replyTo`` over REST), then completes with the answer; a stream
cut meanwhile resumes after the last update it saw. An agent's message to it is refused,
naming the bus's ``bus_request``. eve is the outside agent, alice a person, ada an
internal agent with a token of its own."""

from __future__ import annotations

import asyncio
from typing import Any

import httpx
import pytest
from a2a.types import CancelTaskRequest, GetTaskRequest, SubscribeToTaskRequest, TaskState
from a2a.utils.errors import TaskNotCancelableError, UnsupportedOperationError
from asgiref.sync import async_to_sync

from mailbox.lifecycle import DELIVERED_ON
from mailbox.models import MailboxItem
from mailbox.registry import MailboxType, Status
from markus.agents.models import ChatMessage
from tests.agentbus.test_mcp_door import call, over_http

from .conftest import a2a_client, resume_from, send_request, sequence, state_name
from .test_cards import resolve

pytestmark = pytest.mark.django_db(transaction=True)
S = TaskState


def test_an_outside_agent_has_a_card_saying_it_is_reached_as_a_chat_and_the_directory_lists_it(base, ada, eve, tokens):
    card = resolve(base, f"/a2a/{eve.agent.id}/.well-known/agent-card.json", tokens["bob"])
    assert card.name == "Eve" and "outside" in card.description and "bus_request" in card.description
    (interface,) = card.supported_interfaces
    assert interface.url == f"{base}/a2a/{eve.agent.id}/" and card.capabilities.streaming
    chat = next(s for s in card.skills if s.id == "chat")
    assert "inbox" in chat.description and "bus_reply" in chat.description
    assert "a2a" not in {s.id for s in card.skills}  # agents reach it on the bus, not through this door
    listed = resolve(base, "/.well-known/agent-card.json", tokens["bob"])
    assert [s.id for s in listed.skills] == ["ada", eve.agent.id]
    assert f"{base}/a2a/{eve.agent.id}/.well-known/agent-card.json" in listed.skills[1].description


def test_a_persons_message_reaches_the_outside_agents_inbox_and_its_mcp_reply_completes_the_task(
    base, eve, alice, tokens, settings, monkeypatch
):
    monkeypatch.setitem(settings.MARKUS, "CHAT_TIMEOUT_S", 20)

    async def go() -> tuple[Any, ...]:
        async with a2a_client(base, eve.agent.id, tokens["alice"]) as client, over_http(base, eve.token) as mcp:
            before = []
            async for event in client.send_message(send_request("Which branch are you on?", "o-1")):
                before.append(event)
                if state_name(event) == "TASK_STATE_WORKING":
                    break  # the connection drops while the message waits in the inbox
            task_id = before[0].task.id
            got = await client.get_task(GetTaskRequest(id=task_id))
            with pytest.raises(TaskNotCancelableError) as not_withdrawn:
                await client.cancel_task(CancelTaskRequest(id=task_id))
            waited = await call(mcp, "inbox_wait", timeout_seconds=10)
            [said] = waited["messages"]
            replied = await call(mcp, "bus_reply", stream_id=said["streamId"], text="On main, at the parser fix.")
            resumed = [e async for e in client.subscribe(SubscribeToTaskRequest(id=task_id), context=resume_from(2))]
            done = await client.get_task(GetTaskRequest(id=task_id))
            return before, got, str(not_withdrawn.value), said, replied, resumed, done

    before, got, not_withdrawn, said, replied, resumed, done = async_to_sync(go)()
    assert [(sequence(e), state_name(e)) for e in before] == [(1, "TASK_STATE_SUBMITTED"), (2, "TASK_STATE_WORKING")]
    assert got.status.state == S.TASK_STATE_WORKING  # delivered, not answered: not completed
    assert "inbox" in not_withdrawn
    # The agent read a person's chat, in the session that is the task's context.
    assert said["topic"] == MailboxType.HUMAN_CHAT
    assert said["payload"]["text"] == "Which branch are you on?" and said["payload"]["sessionId"] == got.context_id
    assert said["payload"]["from"]["name"] == "alice"
    assert "error" not in replied, replied
    # Resumed after the update it saw: the answer as the artifact, then completed, each once.
    assert [(sequence(e), state_name(e)) for e in resumed] == [(3, "artifact"), (4, "TASK_STATE_COMPLETED")]
    assert resumed[0].artifact_update.artifact.parts[0].text == "On main, at the parser fix."
    assert done.status.state == S.TASK_STATE_COMPLETED
    assert done.status.message.parts[0].text == "On main, at the parser fix."
    item = MailboxItem.objects.get(id=done.id)
    assert item.status == Status.COMPLETED and DELIVERED_ON in item.marks
    said_in_chat = ChatMessage.objects.filter(session_id=done.context_id).order_by("id")
    assert list(said_in_chat.values_list("role", "content")) == [
        ("user", "Which branch are you on?"),
        ("assistant", "On main, at the parser fix."),
    ]


def test_a_persons_blocking_send_returns_the_outside_agents_rest_reply(base, eve, alice, tokens, settings, monkeypatch):
    monkeypatch.setitem(settings.MARKUS, "CHAT_TIMEOUT_S", 20)
    bearer = {"Authorization": f"Bearer {eve.token}"}

    async def answer(http: httpx.AsyncClient) -> None:
        waited = await http.get(f"{base}/api/agents/{eve.agent.id}/agentbus/inbox", params={"timeout_seconds": 10})
        [said] = waited.json()["messages"]
        opened = await http.post(
            f"{base}/api/agentbus/streams", json={"sender": eve.agent.id, "replyTo": said["streamId"]}
        )
        stream_id = opened.json()["streamId"]
        appended = await http.post(
            f"{base}/api/agentbus/streams/{stream_id}/append",
            json={"sender": eve.agent.id, "payload": {"text": "Friday."}},
        )
        assert appended.status_code == 201, appended.text

    async def go() -> Any:
        async with (
            a2a_client(base, eve.agent.id, tokens["alice"], streaming=False) as client,
            httpx.AsyncClient(headers=bearer, timeout=30) as http,
        ):
            sent = asyncio.ensure_future(anext(client.send_message(send_request("When is the release?", "o-2"))))
            await answer(http)
            return (await sent).task

    task = async_to_sync(go)()
    assert task.status.state == S.TASK_STATE_COMPLETED and [a.parts[0].text for a in task.artifacts] == ["Friday."]


def test_an_agents_message_to_an_outside_agent_is_refused_naming_bus_request(base, ada, eve):
    async def go() -> str:
        async with a2a_client(base, eve.agent.id, ada.token, streaming=False) as client:
            with pytest.raises(UnsupportedOperationError) as refused:
                await anext(client.send_message(send_request("Are you there?", "a-1")))
            return str(refused.value)

    refused = async_to_sync(go)()
    assert "bus_request" in refused
    assert not MailboxItem.objects.filter(agent=eve.agent).exists()
