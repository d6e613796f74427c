"""An internal agent that asks an outside agent and keeps its place (``await_reply``)
is parked like any wait for a colleague: the question reaches the outside agent's bus
inbox, no worker waits, and when the outside agent never answers (its harness gone) the
sweep resumes the item at the deadline with a timeout note naming it; a worker lost
meanwhile changes nothing (recovery checks the same deadline). Ada is internal, Eve an
outside harness."""

from __future__ import annotations

import json
from datetime import timedelta

import pytest
from django.utils import timezone

from agentbus.selectors import inbox_read
from attention import services as attention_services
from attention.loop import run_attention
from mailbox import lifecycle
from mailbox.models import MailboxItem
from mailbox.registry import MailboxType, Status
from mailbox.services import mailbox_enqueue
from markus.agents.models import Agent
from markus.agents.services import agent_create
from markus.llm.scripted import Turn

pytestmark = [pytest.mark.django_db, pytest.mark.pg]


@pytest.fixture
def eve(alice, team) -> Agent:
    return agent_create(name="Eve", role="harness", kind=Agent.Kind.EXTERNAL, owner=alice, team=team)[0]


@pytest.fixture(autouse=True)
def no_wakeups(monkeypatch):
    monkeypatch.setattr(attention_services, "wake", lambda agent_id, **kw: None)


def _ask_eve_and_park(agent: Agent, eve: Agent, scripted) -> tuple[object, MailboxItem]:
    ask = {"to": eve.id, "text": "Which branch is the release on?", "await_reply": True, "timeout_minutes": 5}
    provider = scripted(Turn(tool_calls=[("agent_send_message", ask)]), Turn(text="no answer from Eve; moving on"))
    text = "Ask Eve which branch the release is on"
    asking = mailbox_enqueue(
        agent_id=agent.id, source_type=MailboxType.SYSTEM_EVENT, payload={"summary": text, "content": text}
    )
    run_attention(agent.id)
    asking.refresh_from_db()
    return provider, asking


def _last_tool_result(provider) -> dict:
    return [json.loads(m["content"]) for m in provider.calls[-1]["messages"] if m.get("role") == "tool"][-1]


def _time_is_up(item: MailboxItem) -> None:
    MailboxItem.objects.filter(id=item.id).update(deferred_until=timezone.now() - timedelta(seconds=1))


def test_asking_a_silent_outside_agent_resumes_at_the_deadline_from_the_sweep(agent, eve, scripted):
    provider, asking = _ask_eve_and_park(agent, eve, scripted)
    assert asking.status == Status.DEFERRED and asking.marks["waitingForReply"] is True
    assert asking.deferred_until - timezone.now() <= timedelta(minutes=5)
    [question] = inbox_read(eve.id)["messages"]
    assert question["payload"]["text"] == "Which branch is the release on?"

    attention_services.sweep()  # not yet due: it stays parked
    assert MailboxItem.objects.get(id=asking.id).status == Status.DEFERRED
    _time_is_up(asking)  # Eve's harness never answers
    attention_services.sweep()
    assert MailboxItem.objects.get(id=asking.id).status == Status.QUEUED
    run_attention(agent.id)
    assert MailboxItem.objects.get(id=asking.id).status == Status.COMPLETED
    note = _last_tool_result(provider)
    assert note["status"] == "timed_out" and "Eve" in note["note"] and "5 minutes" in note["note"]


def test_a_worker_lost_while_it_waits_on_an_outside_agent_still_resumes_it_at_the_deadline(agent, eve, scripted):
    provider, asking = _ask_eve_and_park(agent, eve, scripted)
    _time_is_up(asking)
    crashed = mailbox_enqueue(
        agent_id=agent.id, source_type=MailboxType.MENTION, payload={"summary": "m", "content": "m"}
    )
    lifecycle.claim(crashed.id)  # a worker died holding it: the next run recovers first
    run_attention(agent.id)
    assert MailboxItem.objects.get(id=asking.id).status == Status.COMPLETED
    assert _last_tool_result(provider)["status"] == "timed_out"
