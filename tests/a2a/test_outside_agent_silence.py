"""A person's message to an outside agent that never answers (its harness died, froze,
or just never calls ``bus_reply``): no loop and no worker hold that wait, so the sweep
is its waker. Past ``MARKUS_OUTSIDE_ANSWER_SECONDS`` the sweep ends it: the A2A task
fails saying the agent did not answer in time, the person is told in their chat, and
the agent's inbox hears that nobody waits any more. An answer in time is untouched, and
an answer that comes late still reaches the chat (the task stays failed). eve is the
outside agent, alice a person; the server is the real ASGI stack, the client the
``a2a-sdk``'s."""

from __future__ import annotations

import threading
import time
from datetime import timedelta
from typing import Any

import httpx
import pytest
from a2a.types import GetTaskRequest, TaskState
from asgiref.sync import async_to_sync
from django.db import connection
from django.test.utils import CaptureQueriesContext
from django.utils import timezone

from agentbus.models import Chunk
from attention.outside import answers_overdue
from attention.services import sweep
from mailbox import lifecycle
from mailbox.lifecycle import DELIVERED_ON
from mailbox.models import MailboxItem
from mailbox.registry import MailboxType, Status
from markus.agents.chat import chat_reply_for
from markus.agents.models import Agent, ChatMessage
from markus.agents.services import agent_create
from tests.agentbus.test_mcp_door import call, over_http

from .conftest import a2a_client, send_request

pytestmark = [pytest.mark.django_db(transaction=True), pytest.mark.pg]
S = TaskState
DEADLINE_S = 1.0


@pytest.fixture
def short_deadline(settings: Any, monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setitem(settings.MARKUS, "OUTSIDE_ANSWER_SECONDS", DEADLINE_S)
    monkeypatch.setitem(settings.MARKUS, "CHAT_TIMEOUT_S", 2)


def _send(base: str, agent_id: str, token: str, text: str, message_id: str) -> Any:
    async def go() -> Any:
        async with a2a_client(base, agent_id, token, streaming=False) as client:
            sent = await anext(client.send_message(send_request(text, message_id, return_immediately=True)))
            return sent.task

    return async_to_sync(go)()


def _get(base: str, agent_id: str, token: str, task_id: str) -> Any:
    async def go() -> Any:
        async with a2a_client(base, agent_id, token, streaming=False) as client:
            return await client.get_task(GetTaskRequest(id=task_id))

    return async_to_sync(go)()


def _past_the_deadline() -> None:
    time.sleep(DEADLINE_S + 0.3)


def test_an_outside_agent_that_never_answers_fails_the_task_at_the_deadline_and_the_person_is_told(
    base, eve, alice, tokens, short_deadline
):
    task = _send(base, eve.agent.id, tokens["alice"], "Which branch are you on?", "s-1")
    sweep()  # before the deadline the sweep leaves the wait alone
    assert _get(base, eve.agent.id, tokens["alice"], task.id).status.state == S.TASK_STATE_WORKING

    _past_the_deadline()  # eve's harness is gone: nobody reads, nobody answers
    sweep()
    done = _get(base, eve.agent.id, tokens["alice"], task.id)

    assert done.status.state == S.TASK_STATE_FAILED, S.Name(done.status.state)
    said = done.status.message.parts[0].text
    assert "Eve" in said and "did not answer" in said and "1 second" in said, said
    # alice is told in her chat (a failed reply, as the chat page shows it), once.
    notes = list(ChatMessage.objects.filter(session_id=done.context_id, role=ChatMessage.Role.ASSISTANT))
    assert [(n.content, n.metadata.get("failed")) for n in notes] == [(said, True)]
    assert chat_reply_for(task.id)["reply"] == said
    item = MailboxItem.objects.get(id=task.id)
    assert item.status == Status.DROPPED and "did not answer" in item.drop_reason and item.answer_due_at is None
    # eve's inbox hears that nobody waits any more (on the chat's stream, after the chat).
    told = Chunk.objects.filter(stream_id=item.marks["deliveredOn"]).order_by("position")
    assert [c.payload.get("mailboxItemId") for c in told] == [task.id, task.id]
    assert told[1].topic == "answer_timed_out" and "no longer waits" in told[1].payload["text"]

    sweep()  # a second sweep finds nothing more to do
    assert ChatMessage.objects.filter(session_id=done.context_id, role=ChatMessage.Role.ASSISTANT).count() == 1


def test_an_answer_that_comes_after_the_deadline_still_reaches_the_chat_and_the_task_stays_failed(
    base, eve, alice, tokens, short_deadline
):
    task = _send(base, eve.agent.id, tokens["alice"], "When is the release?", "s-2")
    _past_the_deadline()
    sweep()

    async def late() -> Any:
        async with over_http(base, eve.token) as mcp:
            waited = await call(mcp, "inbox_wait", timeout_seconds=5)
            chat = next(m for m in waited["messages"] if m["topic"] == "human_chat")
            return await call(mcp, "bus_reply", stream_id=chat["streamId"], text="Friday, sorry for the wait.")

    replied = async_to_sync(late)()
    assert "error" not in replied, replied
    done = _get(base, eve.agent.id, tokens["alice"], task.id)
    assert done.status.state == S.TASK_STATE_FAILED
    said = ChatMessage.objects.filter(session_id=done.context_id).order_by("id").values_list("role", "content")
    assert [r for r, _ in said] == ["user", "assistant", "assistant"]
    assert said[2][1] == "Friday, sorry for the wait."


def test_an_answer_in_time_completes_the_task_and_the_sweep_past_the_deadline_leaves_it(
    base, eve, alice, tokens, short_deadline
):
    task = _send(base, eve.agent.id, tokens["alice"], "Are the tests green?", "s-3")

    async def answer() -> Any:
        async with over_http(base, eve.token) as mcp:
            waited = await call(mcp, "inbox_wait", timeout_seconds=5)
            [chat] = waited["messages"]
            return await call(mcp, "bus_reply", stream_id=chat["streamId"], text="All green.")

    assert "error" not in async_to_sync(answer)()
    _past_the_deadline()
    sweep()
    done = _get(base, eve.agent.id, tokens["alice"], task.id)
    assert done.status.state == S.TASK_STATE_COMPLETED and done.status.message.parts[0].text == "All green."
    item = MailboxItem.objects.get(id=task.id)
    assert item.status == Status.COMPLETED and item.answer_due_at is None
    assert not Chunk.objects.filter(topic="answer_timed_out").exists()


def test_a_persons_chat_request_waiting_on_a_silent_outside_agent_gets_the_answer_that_it_did_not_answer(
    base, eve, alice, tokens, short_deadline, settings, monkeypatch
):
    """The chat API, not A2A: the request still waits when the deadline passes; the
    sweep's answer is its answer (200, not a 202 with nothing to come)."""
    monkeypatch.setitem(settings.MARKUS, "CHAT_TIMEOUT_S", 10)

    def sweep_after_the_deadline() -> None:
        _past_the_deadline()
        sweep()

    sweeper = threading.Thread(target=sweep_after_the_deadline)
    with httpx.Client(headers={"Authorization": f"Bearer {tokens['alice']}"}, timeout=30) as http:
        sweeper.start()
        answered = http.post(f"{base}/api/agents/{eve.agent.id}/chat", json={"text": "Is the build broken?"})
    sweeper.join()
    assert answered.status_code == 200, answered.text
    reply = answered.json()["reply"]
    assert reply.startswith("Eve (an outside agent) did not answer within 1 second"), reply


def test_a_sweep_that_dies_midway_leaves_the_wait_for_the_next_sweep_which_answers_once(
    base, eve, alice, tokens, short_deadline, monkeypatch
):
    task = _send(base, eve.agent.id, tokens["alice"], "Did the deploy go out?", "s-4")
    _past_the_deadline()

    def dies(*args: Any, **kwargs: Any) -> bool:
        raise RuntimeError("the sweep's process dies here")

    with monkeypatch.context() as m:
        m.setattr(lifecycle, "answer_overdue", dies)
        sweep()  # the person's note and the drop are one transaction: nothing of it stays
    assert _get(base, eve.agent.id, tokens["alice"], task.id).status.state == S.TASK_STATE_WORKING
    assert not ChatMessage.objects.filter(role=ChatMessage.Role.ASSISTANT).exists()

    sweep()
    sweep()
    done = _get(base, eve.agent.id, tokens["alice"], task.id)
    assert done.status.state == S.TASK_STATE_FAILED
    assert ChatMessage.objects.filter(session_id=done.context_id, role=ChatMessage.Role.ASSISTANT).count() == 1


def test_the_sweep_reads_the_agents_of_the_chats_it_ends_once_not_once_per_chat(alice, team):
    """Three chats of two silent outside agents past their deadline: the sweep ends all
    three and reads the agents' rows in one statement."""
    now = timezone.now()
    silent = [
        agent_create(name=name, owner=alice, team=team, kind=Agent.Kind.EXTERNAL)[0] for name in ("Eve", "Mallory")
    ]
    MailboxItem.objects.bulk_create(
        MailboxItem(
            id=f"mbx_silent_{i}",
            agent=silent[i % 2],
            source_type=MailboxType.HUMAN_CHAT,
            status=Status.COMPLETED,
            completed_at=now - timedelta(hours=1),
            answer_due_at=now - timedelta(minutes=1),
            marks={DELIVERED_ON: f"hub.chat.silent_{i}"},
        )
        for i in range(3)
    )
    with CaptureQueriesContext(connection) as ctx:
        ended = answers_overdue(now=now)
    assert sorted(ended) == [f"mbx_silent_{i}" for i in range(3)]
    agent_reads = [q["sql"] for q in ctx.captured_queries if 'FROM "agents" WHERE' in q["sql"]]
    assert len(agent_reads) == 1, agent_reads
