"""Conversations between agents (seed section 11, upstream's callback_result).

``agent_send_message`` continues an existing stream (``stream_id``), so a follow-up
stays one thread and coalesces in the colleague's mailbox; the deprecated
``wait_for_reply`` is ignored, not an error; and ``await_reply=true`` parks the asking
item (no worker waits) until the reply stream closes, when the item resumes its own
session with the answer (the reply recorded as a ``callback_result`` item merged into
it), or until its timeout, checked by the sweep (beat) and by recovery, when it resumes
with a timeout note."""

from __future__ import annotations

import json
from datetime import timedelta

import pytest
from django.utils import timezone

from agentbus.models import Stream
from attention import conversations
from attention import services as attention_services
from attention.loop import run_attention
from attention.scenarios import SYSTEM_NOTICE
from attention.toolbox import ToolContext, builtin_for, execute_tool
from mailbox import lifecycle
from mailbox.models import MailboxItem
from mailbox.registry import MAILBOX_TYPE_REGISTRY, Category, Priority, Status
from mailbox.registry import MailboxType as T
from mailbox.services import mailbox_enqueue
from markus.agents.services import agent_create
from markus.llm.scripted import Turn

pytestmark = pytest.mark.django_db


@pytest.fixture
def grace(alice, team):
    a, _ = agent_create(name="Grace", role="reviewer", owner=alice, team=team, agent_id="grace")
    return a


@pytest.fixture(autouse=True)
def no_wakeups(monkeypatch):
    monkeypatch.setattr(attention_services, "wake", lambda agent_id, **kw: None)


def _ask(agent, text="Ask Grace what 6x7 is") -> MailboxItem:
    return mailbox_enqueue(agent_id=agent.id, source_type=T.SYSTEM_EVENT, payload={"summary": text, "content": text})


def _tool_results(messages: list[dict]) -> list[dict]:
    return [json.loads(m["content"]) for m in messages if m.get("role") == "tool"]


def _ctx(agent, item=None) -> ToolContext:
    return ToolContext(
        agent_id=agent.id, agent_name=agent.name, scenario=SYSTEM_NOTICE, mailbox_item_id=item.id if item else None
    )


# ---------------------------------------------------------------------------- the registry row


def test_callback_result_is_a_system_type_of_high_priority():
    d = MAILBOX_TYPE_REGISTRY[T.CALLBACK_RESULT]
    assert (d.default_priority, d.category) == (Priority.HIGH, Category.SYSTEM)
    assert int(d.default_priority) == 1


def test_the_tool_offers_the_conversation_arguments_in_the_scenarios_that_run():
    params = builtin_for(SYSTEM_NOTICE)["agent_send_message"].parameters["properties"]
    assert {"stream_id", "await_reply", "timeout_minutes", "wait_for_reply"} <= set(params)
    assert params["timeout_minutes"]["type"] == "integer"


# ---------------------------------------------------------------------------- one thread


def test_a_follow_up_on_the_same_stream_stays_one_thread_and_coalesces(agent, grace):
    ok, first = execute_tool(_ctx(agent), "agent_send_message", {"to": "grace", "text": "Can you review PR 7?"})
    assert ok, first
    stream_id = json.loads(first)["streamId"]
    ok, second = execute_tool(
        _ctx(agent), "agent_send_message", {"to": "grace", "text": "It is small.", "stream_id": stream_id}
    )
    assert ok, second
    assert json.loads(second)["streamId"] == stream_id
    assert Stream.objects.filter(sender=agent, recipient=grace).count() == 1
    (queued,) = MailboxItem.objects.filter(agent=grace, status=Status.QUEUED)
    assert "Can you review PR 7?" in queued.content and "It is small." in queued.content
    assert MailboxItem.objects.filter(agent=grace, status=Status.MERGED, merged_into=queued).count() == 1


def test_a_stream_the_agent_may_not_write_to_is_refused(agent, grace, alice):
    other, _ = agent_create(name="Linus", role="dev", owner=alice, agent_id="linus")
    foreign = Stream.objects.create(sender=other, recipient=grace)
    ok, result = execute_tool(_ctx(agent), "agent_send_message", {"to": "grace", "text": "hi", "stream_id": foreign.id})
    assert not ok and "stream" in json.loads(result)["error"]


def test_the_deprecated_wait_for_reply_is_ignored_not_an_error(agent, grace):
    ok, result = execute_tool(
        _ctx(agent), "agent_send_message", {"to": "grace", "text": "ping", "wait_for_reply": True}
    )
    assert ok, result
    data = json.loads(result)
    assert "wait_for_reply" in data["note"] and "ignored" in data["note"]
    assert MailboxItem.objects.filter(agent=grace, source_type=T.A2A_MESSAGE).count() == 1


def test_await_reply_is_refused_where_a_person_waits_for_the_answer(agent, grace):
    chat = mailbox_enqueue(agent_id=agent.id, source_type=T.HUMAN_CHAT, payload={"summary": "hi", "content": "hi"})
    ctx = ToolContext(agent_id=agent.id, agent_name=agent.name, scenario="chat", mailbox_item_id=chat.id)
    ok, result = execute_tool(ctx, "agent_send_message", {"to": "grace", "text": "?", "await_reply": True})
    assert not ok and "await_reply" in json.loads(result)["error"]
    assert not MailboxItem.objects.filter(agent=grace).exists()  # nothing sent


# ---------------------------------------------------------------------------- ask and keep your place


def _ask_and_park(agent, grace, scripted, *more, timeout_minutes=None):
    args = {"to": "grace", "text": "What is 6x7?", "await_reply": True}
    if timeout_minutes is not None:
        args["timeout_minutes"] = timeout_minutes
    provider = scripted(Turn(tool_calls=[("agent_send_message", args)]), *more)
    asking = _ask(agent)
    run_attention(agent.id)
    asking.refresh_from_db()
    return provider, asking


@pytest.mark.pg
def test_an_agent_asks_keeps_its_place_and_resumes_with_the_answer(agent, grace, scripted, alice_client):
    provider, asking = _ask_and_park(
        agent,
        grace,
        scripted,
        # Grace's turns: she answers on the bus, then ends her item.
        Turn(tool_calls=[("agent_reply", {"text": "42"})]),
        Turn(text="answered Ada"),
        # Ada's resumed session: the answer is the tool's result.
        Turn(text="Grace says 42"),
    )
    # 1. Parked: deferred, not due, no worker holds it, the question on the bus.
    assert asking.status == Status.DEFERRED
    assert asking.marks["waitingForReply"] is True
    stream_id = asking.marks["replyStream"]
    assert Stream.objects.get(id=stream_id).recipient_id == grace.id
    assert lifecycle.resurface_due(agent.id) == 0
    assert not MailboxItem.objects.filter(agent=agent, status=Status.QUEUED).exists()
    (waiting,) = alice_client.get(f"/api/agents/{agent.id}/mind").json()["waitingForReply"]
    assert (waiting["mailboxItemId"], waiting["streamId"], waiting["to"]["id"]) == (asking.id, stream_id, grace.id)
    # 2. Grace answers: the reply stream closes and Ada's item is queued again.
    run_attention(grace.id)
    asking.refresh_from_db()
    assert asking.status == Status.QUEUED and "waitingForReply" not in asking.marks
    (callback,) = MailboxItem.objects.filter(agent=agent, source_type=T.CALLBACK_RESULT)
    assert callback.status == Status.MERGED and callback.merged_into_id == asking.id
    assert "42" in callback.content and callback.priority == 1
    # The reply's own agent message went into the asking item too: nothing else to do.
    assert not MailboxItem.objects.filter(agent=agent, status=Status.QUEUED).exclude(id=asking.id).exists()
    assert alice_client.get(f"/api/agents/{agent.id}/mind").json()["waitingForReply"] == []
    # 3. Ada resumes her own session with the answer as the tool's result, and finishes.
    run_attention(agent.id)
    asking.refresh_from_db()
    assert asking.status == Status.COMPLETED
    resumed = provider.calls[-1]["messages"]
    answer = _tool_results(resumed)[-1]
    assert answer["status"] == "replied" and answer["reply"] == "42" and answer["from"]["id"] == grace.id
    assert resumed[0] == provider.calls[0]["messages"][0]  # the same session, not a new one
    assert len(provider.calls) == 4


@pytest.mark.pg
def test_without_a_reply_the_sweep_resumes_the_item_with_a_timeout_note(agent, grace, scripted):
    provider, asking = _ask_and_park(agent, grace, scripted, Turn(text="no answer; moving on"), timeout_minutes=5)
    assert asking.status == Status.DEFERRED
    assert asking.deferred_until - timezone.now() <= timedelta(minutes=5)
    attention_services.sweep()  # not yet due
    assert MailboxItem.objects.get(id=asking.id).status == Status.DEFERRED
    MailboxItem.objects.filter(id=asking.id).update(deferred_until=timezone.now() - timedelta(seconds=1))
    attention_services.sweep()
    asking.refresh_from_db()
    assert asking.status == Status.QUEUED and "waitingForReply" not in asking.marks
    run_attention(agent.id)
    assert MailboxItem.objects.get(id=asking.id).status == Status.COMPLETED
    note = _tool_results(provider.calls[-1]["messages"])[-1]
    assert note["status"] == "timed_out" and "Grace" in note["note"] and "5 minutes" in note["note"]


def test_recovery_resumes_a_wait_whose_time_is_up(agent, grace, scripted):
    provider, asking = _ask_and_park(agent, grace, scripted, Turn(text="moving on"))
    MailboxItem.objects.filter(id=asking.id).update(deferred_until=timezone.now() - timedelta(seconds=1))
    # A worker died mid-item: the next run recovers first, and the wait's time is up.
    crashed = mailbox_enqueue(agent_id=agent.id, source_type=T.MENTION, payload={"summary": "m", "content": "m"})
    lifecycle.claim(crashed.id)
    run_attention(agent.id)
    assert MailboxItem.objects.get(id=asking.id).status == Status.COMPLETED
    assert _tool_results(provider.calls[-1]["messages"])[-1]["status"] == "timed_out"


def test_a_reply_after_the_timeout_arrives_as_an_ordinary_agent_message(agent, grace, scripted):
    _, asking = _ask_and_park(agent, grace, scripted)
    MailboxItem.objects.filter(id=asking.id).update(deferred_until=timezone.now() - timedelta(seconds=1))
    assert conversations.reply_waits_timed_out() == [asking.id]
    stream_id = MailboxItem.objects.get(id=asking.id).marks["replyStream"]
    from agentbus import services as bus

    bus.stream_reply(responder=grace, stream_id=stream_id, payload={"text": "late: 42"})
    late = MailboxItem.objects.get(agent=agent, source_type=T.A2A_MESSAGE)
    assert late.status == Status.QUEUED and "late: 42" in late.content
    assert not MailboxItem.objects.filter(agent=agent, source_type=T.CALLBACK_RESULT).exists()


def test_continuing_a_stream_received_from_the_colleague_answers_on_the_reply_stream(agent, grace):
    from agentbus import services as bus

    question = bus.send_agent_message(sender=grace, recipient=agent, text="Which branch?")
    ok, result = execute_tool(
        _ctx(agent), "agent_send_message", {"to": "grace", "text": "main", "stream_id": question.stream_id}
    )
    assert ok, result
    reply = Stream.objects.get(id=json.loads(result)["streamId"])
    assert (reply.reply_to, reply.sender_id, reply.recipient_id) == (question.stream_id, agent.id, grace.id)
    assert "main" in MailboxItem.objects.get(agent=grace, source_type=T.A2A_MESSAGE).content


def test_asking_again_on_an_answered_stream_waits_for_the_new_answer(agent, grace, scripted):
    from agentbus import services as bus

    provider, asking = _ask_and_park(agent, grace, scripted)
    stream_id = asking.marks["replyStream"]
    bus.stream_reply(responder=grace, stream_id=stream_id, payload={"text": "first answer"})
    assert MailboxItem.objects.get(id=asking.id).status == Status.QUEUED
    # Resumed, the agent asks a follow-up on the same stream and waits again.
    follow_up = {"to": "grace", "text": "And 7x8?", "stream_id": stream_id, "await_reply": True}
    provider.turns.extend([Turn(tool_calls=[("agent_send_message", follow_up)]), Turn(text="56 it is")])
    run_attention(agent.id)
    asking.refresh_from_db()
    assert asking.status == Status.DEFERRED and asking.marks["waitingForReply"] is True  # not the old answer
    bus.stream_reply(responder=grace, stream_id=stream_id, payload={"text": "second answer"})
    run_attention(agent.id)
    assert MailboxItem.objects.get(id=asking.id).status == Status.COMPLETED
    answers = [r for r in _tool_results(provider.calls[-1]["messages"]) if r.get("status") == "replied"]
    assert [a["reply"] for a in answers] == ["first answer", "second answer"]
