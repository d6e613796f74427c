"""A person chats with an outside agent (issue 36, point 1): the chat's message reaches
the agent's ``inbox_wait`` on the chat's stream; what the agent answers on the bus (a
stream with ``replyTo`` that stream, with its own token over the REST API, or
``services.stream_reply``, which the MCP door's ``bus_reply`` calls) is the chat's reply: stored in the chat
session, announced live, and the answer of the waiting chat request. eve is the outside
agent, alice a person."""

from __future__ import annotations

import asyncio
import json

import pytest
from asgiref.sync import async_to_sync
from django.test import AsyncClient

from agentbus import services
from agentbus.errors import BusError, NotFoundError
from attention import outside
from attention.chat import _enqueue
from attention.replies import chat_group
from mailbox.models import MailboxItem
from mailbox.registry import MailboxType, Status
from markus.agents.auth import Caller
from markus.agents.models import ChatMessage, ChatSession
from markus.agents.services import main_session, user_token_create
from markus.core.events import CHAT_MESSAGE_EVENT, agent_group

pytestmark = [pytest.mark.pg, pytest.mark.django_db(transaction=True)]


def test_a_persons_chat_reaches_the_inbox_and_the_agents_bus_reply_is_the_chats_answer(
    alice, eve, sent_events, settings, monkeypatch
):
    monkeypatch.setitem(settings.MARKUS, "CHAT_TIMEOUT_S", 20)
    _, user_token = user_token_create(alice)
    bearer = {"authorization": f"Bearer {eve.token}"}

    async def scenario():
        client = AsyncClient()
        chat = asyncio.ensure_future(
            client.post(
                f"/api/agents/{eve.id}/chat",
                json.dumps({"text": "Which branch are you on?"}),
                content_type="application/json",
                headers={"authorization": f"Token {user_token}"},
            )
        )
        waited = await client.get(f"/api/agents/{eve.id}/agentbus/inbox", {"timeout_seconds": 10}, headers=bearer)
        [message] = waited.json()["messages"]
        opened = await client.post(
            "/api/agentbus/streams",
            json.dumps({"sender": eve.id, "replyTo": message["streamId"]}),
            content_type="application/json",
            headers=bearer,
        )
        appended = await client.post(
            f"/api/agentbus/streams/{opened.json()['streamId']}/append",
            json.dumps({"sender": eve.id, "payload": {"text": "On main, at the parser fix."}}),
            content_type="application/json",
            headers=bearer,
        )
        return message, opened, appended, await chat

    message, opened, appended, chat = async_to_sync(scenario)()
    session = main_session(eve.id)
    assert message["topic"] == MailboxType.HUMAN_CHAT and message["sender"] == "markus:operator"
    payload = message["payload"]
    assert payload["text"] == "Which branch are you on?" and payload["sessionId"] == session.id
    assert payload["from"] == {"type": "user", "id": str(alice.pk), "name": "alice"}
    assert opened.status_code == 201 and opened.json()["recipient"] is None, opened.content
    assert appended.status_code == 201, appended.content

    assert chat.status_code == 200, chat.content
    answer = chat.json()
    assert answer["reply"] == "On main, at the parser fix." and answer["sessionId"] == session.id
    item = MailboxItem.objects.get(id=answer["mailboxItemId"])
    assert item.status == Status.COMPLETED  # delivered: nothing waits in the mailbox
    said = list(ChatMessage.objects.filter(session=session).order_by("id").values_list("role", "content"))
    assert said == [("user", "Which branch are you on?"), ("assistant", "On main, at the parser fix.")]
    live = [(g, e) for g, e in sent_events if e.get("type") in ("chat:reply", CHAT_MESSAGE_EVENT)]
    assert (chat_group(eve.id), "chat:reply") in [(g, e["type"]) for g, e in live]
    [pushed] = [e for g, e in live if g == agent_group(eve.id) and e["type"] == CHAT_MESSAGE_EVENT]
    assert pushed["sessionId"] == session.id and pushed["message"]["content"] == "On main, at the parser fix."


def test_chat_reply_answers_a_session_and_follow_ups_share_its_stream(alice, eve):
    session = ChatSession.objects.create(agent=eve.agent, user=alice, title="Parser")
    caller = Caller(alice, None)
    first, _, _ = _enqueue(caller, eve.agent, "one", session.id)
    second, _, _ = _enqueue(caller, eve.agent, "two", session.id)
    stream_id = outside.chat_stream_id(session.id)
    chunk = services.stream_reply(responder=eve.agent, stream_id=stream_id, payload={"text": "both answered"})
    reply = ChatMessage.objects.get(session=session, role="assistant")
    assert reply.content == "both answered" and reply.metadata["mailboxItemIds"] == [first.id, second.id]
    assert chunk.stream.reply_to == stream_id
    assert [m.content for m in ChatMessage.objects.filter(session=session, role="user").order_by("id")] == [
        "one",
        "two",
    ]


def test_only_the_chats_agent_answers_it_and_a_task_conversation_takes_no_bus_reply(alice, eve, max_):
    _enqueue(Caller(alice, None), eve.agent, "hello", None)
    stream_id = outside.chat_stream_id(main_session(eve.id).id)
    task_stream = services.stream_open(
        sender=None, recipient=eve.agent, topic="task_comment", stream_id=f"{outside.HUB_STREAM_PREFIX}task.tsk_1.eve"
    )
    with pytest.raises(NotFoundError):  # as for a chat that does not exist
        services.stream_reply(responder=max_.agent, stream_id=stream_id, payload={"text": "not mine"})
    with pytest.raises(BusError):
        services.stream_reply(responder=eve.agent, stream_id=task_stream.id, payload={"text": "no"})
    assert not ChatMessage.objects.filter(role="assistant").exists()
