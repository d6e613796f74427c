"""Streams of a task's updates over server-sent events, through the SDK's client: a
stream cut in the middle resumes (``Last-Event-ID``: the ``metadata.sequence`` of the
last update received) with every later update exactly once, also after the task
finished meanwhile; an agent's message parked for a person's approval is
input-required, where its stream ends, and the resumed stream follows it to the reply."""

from __future__ import annotations

import pytest
from a2a.types import SubscribeToTaskRequest
from asgiref.sync import async_to_sync, sync_to_async

from mailbox.models import MailboxItem
from markus.a2a import views
from markus.a2a.models import A2ATaskUpdate
from markus.core.waits import WAITS
from markus.llm.scripted import Turn
from notifications.models import Approval
from notifications.services import approval_respond

from .conftest import a2a_client, resume_from, send_request, sequence, state_name, wait_for

pytestmark = pytest.mark.django_db(transaction=True)


def logged(task_id: str) -> list[tuple[int, str]]:
    return list(A2ATaskUpdate.objects.filter(task_id=task_id).order_by("sequence").values_list("sequence", "state"))


@pytest.mark.pg  # also through the Redis channel layer, and PostgreSQL's row locks
def test_a_stream_cut_in_the_middle_resumes_without_losing_or_repeating_an_update(
    celery_worker, base, ada, tokens, settings, monkeypatch
):
    monkeypatch.setitem(settings.MARKUS, "OFFLINE_THINK_MS", 1500)  # the turn takes a while: cut it short
    monkeypatch.setattr(views, "PING_SECONDS", 0.2)  # keep-alive comments while it waits (the client skips them)
    pings = []
    with_pings = views._with_pings

    async def counted(stream):
        async for event in with_pings(stream):
            pings.extend([1] if event is None else [])
            yield event

    monkeypatch.setattr(views, "_with_pings", counted)

    def finished(task_id: str) -> bool:
        return MailboxItem.objects.get(id=task_id).status == "completed"

    async def go():
        async with a2a_client(base, "ada", tokens["alice"]) as client:
            before = []
            async for event in client.send_message(send_request("Tell me about your week", "s-1")):
                before.append(event)
                if state_name(event) == "TASK_STATE_WORKING":
                    break  # the connection drops while the agent works
            request = SubscribeToTaskRequest(id=before[0].task.id)
            live = [e async for e in client.subscribe(request)]  # from now on: the task, then what follows
            await sync_to_async(wait_for)(lambda: finished(request.id), message="the reply")
            after = [e async for e in client.subscribe(request, context=resume_from(sequence(before[-1])))]
            tail = [e async for e in client.subscribe(request, context=resume_from(3))]
            nothing = [e async for e in client.subscribe(request, context=resume_from(4))]
            return request.id, before, live, after, tail, nothing

    task_id, before, live, after, tail, nothing = async_to_sync(go)()
    assert [(sequence(e), state_name(e)) for e in before] == [(1, "TASK_STATE_SUBMITTED"), (2, "TASK_STATE_WORKING")]
    # A subscription without a resume point: the task as it is (its last update: 2), then the rest.
    assert live[0].task.id == task_id and [(sequence(e), state_name(e)) for e in live] == [
        (2, "TASK_STATE_WORKING"),
        (3, "artifact"),
        (4, "TASK_STATE_COMPLETED"),
    ]
    assert pings, "the live stream sent keep-alive comments while the agent worked"
    # Resumed after 2 once the task is done: what happened since, the reply's artifact, then completed.
    assert [(sequence(e), state_name(e)) for e in after] == [(3, "artifact"), (4, "TASK_STATE_COMPLETED")]
    reply = after[0].artifact_update.artifact.parts[0].text
    assert "offline brain" in reply and after[1].status_update.status.message.parts[0].text == reply
    assert after == live[1:]  # the same updates, byte for byte, whoever reads them
    # Together they are the task's log, each update once; a later resume point gets the rest.
    assert [sequence(e) for e in before + after] == [s for s, _ in logged(task_id)] == [1, 2, 3, 4]
    assert [sequence(e) for e in tail] == [4] and nothing == []
    # The cut stream's wait was given back when its connection dropped.
    wait_for(lambda: WAITS.in_flight() == 0, timeout=5, message="every wait slot given back")


@pytest.mark.pg
def test_an_agents_message_waiting_for_approval_is_input_required_and_resumes_to_the_reply(
    celery_worker, scripted, base, ada, eve, alice
):
    ask = Turn(tool_calls=[("request_user_approval", {"title": "Deploy v2?", "description": "eve asks to ship"})])
    scripted(ask, Turn(text="Deployed v2 as you asked."))

    async def go():
        async with a2a_client(base, "ada", eve.token) as client:
            first = [e async for e in client.send_message(send_request("Please deploy v2", "eve-1"))]
            task_id = first[0].task.id
            approval = await sync_to_async(wait_for)(
                lambda: Approval.objects.filter(mailbox_item_id=task_id, status="pending").first(), message="approval"
            )
            await sync_to_async(approval_respond)(user=alice, approval_id=approval.id, selected_option="approve")
            rest = [
                e
                async for e in client.subscribe(
                    SubscribeToTaskRequest(id=task_id), context=resume_from(sequence(first[-1]))
                )
            ]
            return first, rest, approval

    first, rest, approval = async_to_sync(go)()
    # The stream ends at input-required, which names the approval it waits for.
    assert state_name(first[0]) == "TASK_STATE_SUBMITTED" and state_name(first[-1]) == "TASK_STATE_INPUT_REQUIRED"
    assert approval.id in first[-1].status_update.status.message.parts[0].text
    # "working" is in the log only if a reader saw the item while it ran (the log records what is observed).
    assert [state_name(e) for e in rest if state_name(e) != "TASK_STATE_WORKING"] == [
        "artifact",
        "TASK_STATE_COMPLETED",
    ]
    assert [state_name(e) for e in rest].count("TASK_STATE_WORKING") <= 1
    assert rest[-1].status_update.status.message.parts[0].text.startswith("Deployed v2")
    assert [sequence(e) for e in first + rest] == list(range(1, len(first) + len(rest) + 1))
    item = MailboxItem.objects.get(id=first[0].task.id)
    assert item.source_type == "a2a_message" and item.metadata["senderId"] == eve.agent.id
