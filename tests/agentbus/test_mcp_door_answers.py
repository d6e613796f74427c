"""The MCP door completes every conversation it can start (issue 36, point 2), through
the ``mcp`` SDK's client against a daphne hub: an outside agent answers a request on its
stream (``bus_reply``, which closes its answer) and the asker, internal or outside, over
REST or MCP, gets the answer; the same tool answers a person's chat, the answer showing
in the chat; a reviewer agent approves or requests changes (``task_review``), and only
the reviewer may. eve is the outside agent answering, ada an internal agent, alice a
person."""

from __future__ import annotations

import asyncio
from typing import Any

import httpx2
import pytest

from markus.agents.models import ChatMessage
from markus.agents.services import main_session, user_token_create
from markus.core.actors import Actor
from markus.work import services as work_services
from markus.work.models import Task, TaskComment, TaskState

from .test_mcp_door import call, over_http

pytestmark = [pytest.mark.django_db(transaction=True), pytest.mark.pg]


async def answer_next(mcp: Any, text: str) -> dict[str, Any]:
    """Wait for the next message in the inbox and answer it with ``bus_reply``."""
    got = await call(mcp, "inbox_wait", timeout_seconds=20)
    [message] = got["messages"]
    replied = await call(mcp, "bus_reply", stream_id=message["streamId"], text=text)
    assert "error" not in replied, replied
    return replied


def test_an_internal_agents_request_over_rest_gets_the_outside_agents_mcp_reply(hub, alice, ada, eve):
    _, alice_token = user_token_create(alice)

    async def scenario() -> tuple[httpx2.Response, dict[str, Any]]:
        async with httpx2.AsyncClient(timeout=60) as http, over_http(hub.url, eve.token) as eve_mcp:
            asked = asyncio.ensure_future(
                http.post(
                    f"{hub.url}/api/agentbus/request",
                    json={"sender": "ada", "recipient": "eve", "payload": {"text": "Which?"}, "timeoutSeconds": 20},
                    headers={"Authorization": f"Token {alice_token}"},
                )
            )
            replied = await answer_next(eve_mcp, "main")
            return await asked, replied

    asked, replied = asyncio.run(scenario())
    assert asked.status_code == 200, asked.text
    answer = asked.json()
    assert answer["timed_out"] is False, "answered, not timed out"
    assert [c["payload"] for c in answer["reply"]] == [{"text": "main"}]
    assert replied["payload"] == {"text": "main"} and replied["streamId"] == answer["replyStreamId"]


def test_an_outside_agents_mcp_request_gets_another_outside_agents_mcp_reply(hub, eve, max_):
    async def scenario() -> tuple[dict[str, Any], dict[str, Any]]:
        async with over_http(hub.url, max_.token) as max_mcp, over_http(hub.url, eve.token) as eve_mcp:
            asked = asyncio.ensure_future(
                call(max_mcp, "bus_request", to="eve", payload={"question": "ready?"}, timeout_seconds=20)
            )
            got = await call(eve_mcp, "inbox_wait", timeout_seconds=20)
            [message] = got["messages"]
            replied = await call(eve_mcp, "bus_reply", stream_id=message["streamId"], payload={"ready": True})
            return await asked, replied

    asked, replied = asyncio.run(scenario())
    assert asked["timed_out"] is False and [c["payload"] for c in asked["reply"]] == [{"ready": True}]
    assert replied["streamId"] == asked["replyStreamId"]


def test_bus_reply_refuses_a_stream_not_addressed_to_the_agent(hub, eve, max_, zed):
    async def scenario() -> list[dict[str, Any]]:
        async with over_http(hub.url, max_.token) as max_mcp, over_http(hub.url, zed.token) as zed_mcp:
            sent = await call(max_mcp, "bus_send", to="eve", text="for eve only")
            return [
                await call(zed_mcp, "bus_reply", stream_id=sent["streamId"], text="not mine"),
                await call(max_mcp, "bus_reply", stream_id=sent["streamId"], text="my own"),
                await call(max_mcp, "bus_reply", stream_id="no-such-stream", text="?"),
                await call(max_mcp, "bus_reply", stream_id=sent["streamId"]),
            ]

    foreign, own, missing, empty = asyncio.run(scenario())
    assert foreign == own == missing == {"error": "No such stream to reply to."}
    assert "text or payload" in empty["error"]


def test_bus_reply_answers_a_persons_chat_and_the_answer_shows_in_the_chat(hub, alice, eve):
    _, alice_token = user_token_create(alice)

    async def scenario() -> tuple[httpx2.Response, dict[str, Any]]:
        async with httpx2.AsyncClient(timeout=60) as http, over_http(hub.url, eve.token) as eve_mcp:
            chat = asyncio.ensure_future(
                http.post(
                    f"{hub.url}/api/agents/eve/chat",
                    json={"text": "Which branch are you on?"},
                    headers={"Authorization": f"Token {alice_token}"},
                )
            )
            replied = await answer_next(eve_mcp, "On main.")
            return await chat, replied

    chat, replied = asyncio.run(scenario())
    assert chat.status_code == 200, chat.text
    assert chat.json()["reply"] == "On main."
    said = ChatMessage.objects.filter(session=main_session("eve")).order_by("id").values_list("role", "content")
    assert list(said) == [("user", "Which branch are you on?"), ("assistant", "On main.")]
    assert replied["payload"] == {"text": "On main."}


def _in_review(alice, *, reviewer: str) -> Task:
    task = work_services.task_create(
        actor=Actor.for_user(alice), title="Port the parser", assignee_id="max", reviewer_agent_id=reviewer
    )
    return work_services.task_transition(
        task_id=task.id, to_status=TaskState.REVIEW, actor=Actor.for_user(alice), note="ported"
    )


def test_a_reviewer_agent_approves_a_task_over_mcp(hub, alice, eve, max_):
    task = _in_review(alice, reviewer="eve")

    async def scenario() -> dict[str, Any]:
        async with over_http(hub.url, eve.token) as eve_mcp:
            return await call(eve_mcp, "task_review", task_id=task.id, verdict="approve", comment="Clean, thanks.")

    reviewed = asyncio.run(scenario())
    assert reviewed["status"] == TaskState.COMPLETED, reviewed
    comment = TaskComment.objects.get(task_id=task.id)
    assert comment.content == "Clean, thanks." and comment.author_agent_id == "eve"


def test_a_reviewer_agent_requests_changes_with_a_comment_over_mcp(hub, alice, eve, max_):
    task = _in_review(alice, reviewer="eve")

    async def scenario() -> list[dict[str, Any]]:
        async with over_http(hub.url, eve.token) as eve_mcp:
            return [
                await call(eve_mcp, "task_review", task_id=task.id, verdict="request_changes"),
                await call(eve_mcp, "task_review", task_id=task.id, verdict="maybe", comment="?"),
                await call(eve_mcp, "task_review", task_id=task.id, verdict="request_changes", comment="Add tests."),
                await call(eve_mcp, "task_review", task_id=task.id, verdict="approve"),
            ]

    no_comment, unknown, sent_back, not_in_review = asyncio.run(scenario())
    assert "comment" in no_comment["error"], no_comment
    assert "approve" in unknown["error"] and "request_changes" in unknown["error"], unknown
    assert sent_back["status"] == TaskState.IN_PROGRESS, sent_back
    assert "not in review" in not_in_review["error"], not_in_review
    assert list(TaskComment.objects.filter(task_id=task.id).values_list("content", flat=True)) == ["Add tests."]


def test_only_the_tasks_reviewer_reviews_it_over_mcp(hub, alice, ada, eve, max_):
    task = _in_review(alice, reviewer="ada")

    async def scenario() -> list[dict[str, Any]]:
        async with over_http(hub.url, max_.token) as max_mcp, over_http(hub.url, eve.token) as eve_mcp:
            return [
                await call(max_mcp, "task_review", task_id=task.id, verdict="approve"),
                await call(eve_mcp, "task_review", task_id=task.id, verdict="approve"),
            ]

    assignee, stranger = asyncio.run(scenario())
    assert "only the task's reviewer" in assignee["error"], assignee
    assert stranger == {"error": "No such task."}  # eve cannot see it: as a missing one
    assert Task.objects.get(id=task.id).status == TaskState.REVIEW
