"""Nothing merged into an item is lost, an approval answered early does not park an item
forever, a malformed triage answer cannot crash the loop, and a stale worker cannot merge
into an item it lost."""

from __future__ import annotations

import json
import time
from datetime import timedelta

import pytest
from django.conf import settings
from django.db import transaction
from django.utils import timezone

from attention import journal, loop, queue_read
from attention.lease import StaleLease, lease_take
from attention.models import LLMSession
from mailbox import lifecycle
from mailbox.models import MailboxItem
from mailbox.registry import MailboxType as T
from mailbox.services import mailbox_enqueue
from markus.llm.scripted import Turn


def status(item_id):
    return MailboxItem.objects.get(id=item_id).status


@pytest.fixture
def long_resume(monkeypatch):
    monkeypatch.setitem(settings.MARKUS, "PREEMPT_RESUME_DELAY_S", 60)


@pytest.mark.django_db(transaction=True)
def test_a_message_merged_into_a_preempted_item_reaches_its_resumed_session(scripted, agent, monkeypatch, long_resume):
    sent = {}

    def tool(ctx, name, args):  # while the first turn's tools run, a human writes
        if not sent:
            sent["chat"] = mailbox_enqueue(
                agent_id=agent.id,
                source_type=T.HUMAN_CHAT,
                payload={"summary": "hi", "content": "hi"},
                metadata={"senderId": "1", "senderRole": "user"},
            )
        return True, '{"ok": true}'

    monkeypatch.setattr(journal, "execute_tool", tool)
    provider = scripted(Turn(tool_calls=[("noop", {})]), Turn(text="hello human"), Turn(text="done"))
    x = mailbox_enqueue(
        agent_id=agent.id,
        source_type=T.A2A_MESSAGE,
        payload={"summary": "m1", "content": "FIRST", "extra": {"channelKey": "c1"}},
    )
    loop.run_attention(agent.id)
    assert status(x.id) == "deferred" and status(sent["chat"].id) == "completed"
    MailboxItem.objects.filter(id=x.id).update(deferred_until=timezone.now())
    assert lifecycle.resurface_due(agent.id) == 1
    y = mailbox_enqueue(
        agent_id=agent.id,
        source_type=T.A2A_MESSAGE,
        payload={"summary": "m2", "content": "SECOND", "extra": {"channelKey": "c1"}},
    )
    assert y.status == "merged" and y.merged_into_id == x.id
    loop.run_attention(agent.id)
    assert status(x.id) == "completed"
    resumed = json.dumps(provider.calls[-1]["messages"])
    assert "SECOND" in resumed and resumed.count("FIRST") == 1


@pytest.mark.django_db(transaction=True)
def test_an_approval_answered_before_the_item_is_parked_resumes_it(scripted, agent, alice, monkeypatch):
    from notifications.models import Approval
    from notifications.services import approval_respond

    real = journal.execute_tool

    def answer_at_once(ctx, name, args):
        ok, result = real(ctx, name, args)
        if name == "request_user_approval":
            with transaction.atomic():
                approval_respond(user=alice, approval_id=json.loads(result)["approvalId"], selected_option="approve")
        return ok, result

    monkeypatch.setattr(journal, "execute_tool", answer_at_once)
    provider = scripted(
        Turn(tool_calls=[("request_user_approval", {"title": "Deploy?", "description": "x"})]),
        Turn(text="deployed"),
    )
    item = mailbox_enqueue(agent_id=agent.id, source_type=T.A2A_MESSAGE, payload={"summary": "d", "content": "go"})
    loop.run_attention(agent.id)
    assert Approval.objects.get(mailbox_item_id=item.id).status == "answered"
    assert status(item.id) == "completed"
    assert json.loads(provider.calls[1]["messages"][-1]["content"])["selected_option"] == "approve"


@pytest.mark.django_db(transaction=True)
def test_a_malformed_triage_answer_falls_back_to_the_head(scripted, agent):
    scripted(default=Turn(text="ok"), triage_answer={"processItemId": ["x"], "dropItemIds": "nope"})
    a = mailbox_enqueue(agent_id=agent.id, source_type=T.SYSTEM_EVENT, payload={"summary": "a", "content": "a"})
    b = mailbox_enqueue(agent_id=agent.id, source_type=T.SYSTEM_EVENT, payload={"summary": "b", "content": "b"})
    assert loop.run_attention(agent.id).status == "done"
    assert status(a.id) == "completed" and status(b.id) == "completed"


@pytest.mark.django_db(transaction=True)
def test_a_stale_worker_cannot_consolidate_the_queue(agent):
    first = mailbox_enqueue(
        agent_id=agent.id,
        source_type=T.MENTION,
        payload={"summary": "mention", "content": "m", "taskId": "t1"},
        metadata={"senderRole": "agent"},
    )
    other = mailbox_enqueue(
        agent_id=agent.id,
        source_type=T.TASK_STATUS_UPDATE,
        payload={"summary": "status", "content": "s", "taskId": "t1"},
    )
    stale = lease_take(agent.id, seconds=0.1)
    time.sleep(0.2)  # the worker stalls past its lease; a successor takes it
    assert lease_take(agent.id) is not None
    with pytest.raises(StaleLease):
        queue_read.tidy(stale)
    assert status(first.id) == "queued" and status(other.id) == "queued"


@pytest.mark.django_db(transaction=True)
def test_a_comment_injected_into_an_open_execution_survives_a_rebuilt_session(scripted, agent, alice):
    from markus.work.models import Task

    Task.objects.create(id="t1", title="run", status="in_progress", assignee=agent, reviewer_user=alice)
    x = mailbox_enqueue(
        agent_id=agent.id,
        source_type=T.TASK_STATUS_UPDATE,
        payload={"summary": "run", "content": "do it", "taskId": "t1", "extra": {"triggerExecution": True}},
    )
    MailboxItem.objects.filter(id=x.id).update(status="deferred", deferred_until=timezone.now() + timedelta(hours=1))
    LLMSession.objects.create(
        id=f"ls_{x.id}",
        agent_id=agent.id,
        mailbox_item_id=x.id,
        scenario="task_execution",
        messages=[{"role": "user", "content": "do it"}],
    )
    c = mailbox_enqueue(
        agent_id=agent.id,
        source_type=T.TASK_COMMENT,
        payload={"summary": "note", "content": "USE-BRANCH-B", "taskId": "t1"},
        metadata={"senderRole": "agent", "senderName": "bot"},
    )
    provider = scripted(
        Turn(text=""),  # an empty answer: the attempt failed, its session dropped
        Turn(tool_calls=[("task_submit_review", {"task_id": "t1", "summary": "on branch B"})]),
        Turn(text="done"),
    )
    loop.run_attention(agent.id)  # the comment is injected: merged into the open execution
    c = MailboxItem.objects.get(id=c.id)
    assert c.status == "merged" and c.merged_into_id == x.id
    assert "USE-BRANCH-B" in MailboxItem.objects.get(id=x.id).payload["content"]
    MailboxItem.objects.filter(id=x.id).update(deferred_until=timezone.now())
    loop.run_attention(agent.id)  # resumes: the comment is appended to the saved session
    assert "USE-BRANCH-B" in json.dumps(provider.calls[0]["messages"])
    loop.run_attention(agent.id)  # the retry rebuilds the session from the payload
    assert "USE-BRANCH-B" in json.dumps(provider.calls[1]["messages"])
    assert status(x.id) == "completed"
