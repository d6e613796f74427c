"""The README's demo steps hold:

1. Merge: the one reply answers both messages (the brain sees both), its mailbox count
   is the true one, and the reply is shown once: under the message that leads the
   merge, the follow-up's stream saying it was merged into it.
2. Preempt: the item keeps its first start, and its second pick is a ``resume``.
3. Pause: a ``pause`` decision on the item in flight.
4. Cancel: a cancelled execution is shown as cancelled, not as completed in green.
"""

from __future__ import annotations

import asyncio
import json
import time

import pytest
from asgiref.sync import async_to_sync, sync_to_async
from django.conf import settings
from django.template.loader import render_to_string
from django.test import AsyncClient

from attention import services
from attention.models import AgentActivity, AgentDecision
from mailbox.models import MailboxItem
from mailbox.registry import MailboxType as T
from mailbox.selectors import queue_depth
from mailbox.services import mailbox_enqueue
from markus.agents.models import ChatMessage
from markus.agents.services import user_token_create
from markus.core.actors import Actor
from markus.llm.scripted import Turn
from markus.web import mind
from markus.work.models import TaskState
from markus.work.services import task_create, task_transition

from .conftest import wait_for
from .test_chat_stream import SSE, parse_sse

FIRST, FOLLOW_UP = "What's in your queue?", "and anything waiting for review?"


def decisions(item_id):
    return list(
        AgentDecision.objects.filter(mailbox_item_id=item_id)
        .order_by("created_at", "id")
        .values_list("decision_type", flat=True)
    )


def status(item_id):
    return MailboxItem.objects.get(id=item_id).status


# ---------------------------------------------------------------------------- 1. merge


def _two_chats(user, agent_id: str) -> tuple[str, str]:
    """The demo's merge step through the chat API's event stream: the first message,
    then, while its first turn thinks, the follow-up. Both streams read to the end."""
    _, raw = user_token_create(user)

    async def post(text: str) -> str:
        r = await AsyncClient().post(
            f"/api/agents/{agent_id}/chat",
            json.dumps({"text": text}),
            content_type="application/json",
            headers={"authorization": f"Token {raw}", "accept": SSE},
        )
        return b"".join([chunk async for chunk in r.streaming_content]).decode()

    def first_in_flight() -> bool:
        return MailboxItem.objects.filter(agent_id=agent_id, status="processing").exists()

    async def go() -> tuple[str, str]:
        first = asyncio.ensure_future(post(FIRST))
        deadline = time.monotonic() + 20
        while not await sync_to_async(first_in_flight)():
            assert time.monotonic() < deadline, "the first chat never started"
            await asyncio.sleep(0.05)
        await asyncio.sleep(0.3)  # its first turn is thinking
        second = await post(FOLLOW_UP)
        return await first, second

    return async_to_sync(go)()


@pytest.mark.pg
def test_the_merge_demo_answers_both_messages_once_with_a_true_count(celery_worker, agent, alice, monkeypatch):
    monkeypatch.setitem(settings.MARKUS, "OFFLINE_THINK_MS", 800)
    first_text, second_text = _two_chats(alice, agent.id)
    first, second = parse_sse(first_text), parse_sse(second_text)
    a, b = first[0][1]["mailboxItemId"], second[0][1]["mailboxItemId"]
    wait_for(lambda: status(a) == "completed", message="the chat answered")
    assert status(b) == "merged" and MailboxItem.objects.get(id=b).merged_into_id == a
    assert decisions(b) == ["merge"]

    reply = first[-1][1]["reply"]
    # The reply answers both messages, and says how many items wait as the header does.
    assert FIRST in reply and FOLLOW_UP in reply, reply
    assert queue_depth(agent.id) == 0
    assert "0 item(s) waiting" in reply, reply
    assert ChatMessage.objects.filter(role="assistant", content=reply).count() == 1

    # The reply streams under the first message only; the follow-up's stream says it
    # was merged into the first (the done event still carries the reply for API callers).
    assert "".join(d["text"] for e, d in first if e == "delta") == reply
    second_deltas = "".join(d["text"] for e, d in second if e == "delta")
    assert reply not in second_deltas and FOLLOW_UP not in second_deltas
    assert "merged" in second_deltas
    done = second[-1][1]
    assert second[-1][0] == "done" and done["mergedInto"] == a and done["mailboxItemId"] == b
    assert done["reply"] == reply
    assert "mergedInto" not in first[-1][1]


# ---------------------------------------------------------------------------- 2. preempt


@pytest.fixture
def no_judge(monkeypatch):
    monkeypatch.setitem(settings.MARKUS, "INTERRUPT_JUDGE", False)


@pytest.mark.pg
def test_a_preempted_item_keeps_its_first_start_and_is_resumed_by_a_resume_decision(
    celery_worker, scripted, agent, no_judge
):
    first = Turn(tool_calls=[("update_working_memory", {"key": "k", "content": "step one done"})], delay=1.0)
    scripted(first, Turn(text="Hi there"), Turn(text="finished"))
    work = mailbox_enqueue(
        agent_id=agent.id, source_type=T.SYSTEM_EVENT, payload={"summary": "long job", "content": "do it"}
    )
    assert first.started.wait(15)
    started = MailboxItem.objects.get(id=work.id).started_at
    assert started is not None
    mailbox_enqueue(
        agent_id=agent.id,
        source_type=T.HUMAN_CHAT,
        payload={"summary": "hey", "content": "hey"},
        metadata={"senderId": "1", "senderRole": "user"},
    )
    wait_for(lambda: status(work.id) == "completed", message="resumed work completed")
    assert decisions(work.id) == ["pick", "preempt", "resume"]
    item = MailboxItem.objects.get(id=work.id)
    assert item.started_at == started  # the first start, not the resume
    resume = AgentDecision.objects.get(mailbox_item_id=work.id, decision_type="resume")
    preempt = AgentDecision.objects.get(mailbox_item_id=work.id, decision_type="preempt")
    assert resume.created_at > preempt.created_at > started
    first_activity, second_activity = AgentActivity.objects.filter(mailbox_item_id=work.id).order_by("started_at")
    assert second_activity.started_at >= resume.created_at > first_activity.started_at

    # The mind view shows the first start, and when it resumed.
    entry = mind.present(mind.load_item(agent.id, work.id))
    html = render_to_string("mind/_item_detail.html", {"e": entry, "agent_id": agent.id})
    assert f"started {entry['startedAt']:%H:%M:%S}" in html
    assert f"resumed {resume.created_at:%H:%M:%S}" in html
    assert 'decision-resume">resume' in html


# ---------------------------------------------------------------------------- 3. pause


@pytest.mark.pg
def test_a_pause_records_a_pause_decision_and_the_resume_a_resume(celery_worker, scripted, agent):
    slow = Turn(text="never returned", delay=30.0)
    scripted(slow, Turn(text="done after resume"))
    work = mailbox_enqueue(agent_id=agent.id, source_type=T.SYSTEM_EVENT, payload={"summary": "job", "content": "x"})
    assert slow.started.wait(15)
    started = MailboxItem.objects.get(id=work.id).started_at
    services.agent_pause(agent)
    wait_for(lambda: status(work.id) == "queued", message="in-flight item re-queued")
    assert decisions(work.id) == ["pick", "pause"]
    pause = AgentDecision.objects.get(mailbox_item_id=work.id, decision_type="pause")
    assert "paused" in pause.reasoning and pause.outcome
    agent.refresh_from_db()
    services.agent_resume(agent)
    wait_for(lambda: status(work.id) == "completed", message="resumed item completed")
    assert decisions(work.id) == ["pick", "pause", "resume"]
    assert MailboxItem.objects.get(id=work.id).started_at == started


# ---------------------------------------------------------------------------- 4. cancel


@pytest.mark.pg
def test_a_cancelled_execution_is_shown_as_cancelled_in_the_mind_view(celery_worker, scripted, agent, alice):
    first = Turn(tool_calls=[("check_mailbox", {})], delay=1.0)
    scripted(first, default=Turn(text="should never be asked"))
    task = task_create(actor=Actor.for_user(alice), title="Long job", assignee_id=agent.id)
    assert first.started.wait(15)
    task_transition(task_id=task.id, to_status=TaskState.CANCELLED, actor=Actor.for_user(alice))
    item = MailboxItem.objects.get(
        source_type=T.TASK_STATUS_UPDATE, payload__taskId=task.id, payload__extra__triggerExecution=True
    )
    wait_for(lambda: status(item.id) == "completed", message="execution stopped")
    activity = AgentActivity.objects.get(mailbox_item_id=item.id)
    assert activity.success is False and activity.outcome == "cancelled"

    entry = mind.present(mind.load_item(agent.id, item.id))
    head = render_to_string("mind/_item_head.html", {"e": entry, "agent_id": agent.id})
    detail = render_to_string("mind/_item_detail.html", {"e": entry, "agent_id": agent.id})
    assert 'data-status="cancelled"' in head
    assert ">cancelled</span>" in head and ">completed</span>" not in head
    assert "st-green" not in head
    assert "cancelled" in detail and "succeeded" not in detail and "✗ failed" not in detail
