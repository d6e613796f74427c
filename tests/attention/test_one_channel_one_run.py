"""Messages of one conversation (an agent channel's ``channelKey``) that wait in the
queue as separate items are folded into one item when the loop reads the queue (seed
section 14, "Channel Coalescing": at enqueue *and* at pre-triage consolidation): one
model run, one reply that answers them all, in the order they were said.

Two such items are queued apart when the first was not queued as the second arrived
(deferred by a triage or a preempt, put back after a failed attempt) and came back."""

from __future__ import annotations

import json

import pytest
from django.conf import settings

from attention import loop
from attention.models import AgentActivity, AgentDecision
from mailbox import lifecycle
from mailbox.models import MailboxItem
from mailbox.registry import MailboxType as T
from mailbox.registry import Status
from mailbox.services import mailbox_consolidate_by_entity, mailbox_enqueue
from markus.llm.scripted import Turn

pytestmark = pytest.mark.django_db(transaction=True)


@pytest.fixture(autouse=True)
def _no_window(monkeypatch):
    monkeypatch.setitem(settings.MARKUS, "COALESCE_WINDOW_MS", 0)


def message(agent, text, channel="group:team-1", sender="Bob"):
    return mailbox_enqueue(
        agent_id=agent.id,
        source_type=T.A2A_MESSAGE,
        payload={"summary": f"{sender}: {text}", "content": text, "extra": {"channelKey": channel}},
        metadata={"senderId": sender.lower(), "senderName": sender, "senderRole": "agent"},
    )


def queued_apart(agent, first_text, second_text, channel="group:team-1"):
    """Two messages of one channel, both queued, not merged: the first was deferred when
    the second came, then it came due."""
    first = message(agent, first_text, channel)
    lifecycle.defer(first.id, from_statuses=[Status.QUEUED])
    second = message(agent, second_text, channel, sender="Carol")
    assert second.status == Status.QUEUED  # nothing queued to absorb it
    assert lifecycle.resurface_due(agent.id) == 1
    return first, second


def test_two_queued_messages_of_one_channel_run_as_one_item_with_one_reply(scripted, agent):
    provider = scripted(Turn(text="Both answered: Friday works, and the build is green."))
    first, second = queued_apart(agent, "Can we ship on Friday?", "Is the build green?")
    assert set(lifecycle.queued(agent.id).values_list("id", flat=True)) == {first.id, second.id}

    loop.run_attention(agent.id)

    assert len(provider.calls) == 1  # one model run
    asked = json.dumps(provider.calls[0]["messages"])
    assert "Can we ship on Friday?" in asked and "Is the build green?" in asked
    assert asked.index("Can we ship on Friday?") < asked.index("Is the build green?")  # as said
    survivor, absorbed = MailboxItem.objects.get(id=first.id), MailboxItem.objects.get(id=second.id)
    assert survivor.status == Status.COMPLETED
    assert absorbed.status == Status.MERGED and absorbed.merged_into_id == first.id
    assert [m["senderName"] for m in survivor.payload["messages"]] == ["Bob", "Carol"]
    assert AgentActivity.objects.filter(agent=agent, mailbox_item__isnull=False).count() == 1  # one reply
    merge = AgentDecision.objects.get(mailbox_item_id=second.id, decision_type="merge")
    assert first.id in merge.reasoning


def test_messages_of_two_channels_stay_two_runs(scripted, agent):
    provider = scripted(default=Turn(text="ok"))
    one = message(agent, "in the team group", channel="group:team-1")
    other = message(agent, "in a custom group", channel="group:custom:7")

    loop.run_attention(agent.id)

    assert MailboxItem.objects.get(id=one.id).status == Status.COMPLETED
    assert MailboxItem.objects.get(id=other.id).status == Status.COMPLETED
    assert len(provider.calls) == 2


def test_consolidation_folds_one_channels_messages_oldest_first(agent):
    first, second = queued_apart(agent, "first words", "second words")
    lifecycle.set_priority(second.id, 1)  # the later one is more urgent: it heads the queue
    assert mailbox_consolidate_by_entity(agent.id) == 1
    survivor = MailboxItem.objects.get(id=first.id)
    assert survivor.status == Status.QUEUED and survivor.priority == 1  # keeps the highest
    assert survivor.content.index("first words") < survivor.content.index("second words")
    assert MailboxItem.objects.get(id=second.id).merged_into_id == first.id
