"""Every mailbox change emits an ``agent:mailbox`` event, only after commit, and the
payload survives a JSON round trip."""

from __future__ import annotations

import pytest
from django.db import transaction

from mailbox import lifecycle
from mailbox.registry import MailboxType, Status
from mailbox.services import mailbox_enqueue
from markus.core.events import agent_group

T = MailboxType


def mailbox_events(sent_events):
    return [(group, event) for group, event in sent_events if event["type"] == "agent:mailbox"]


@pytest.mark.django_db
def test_enqueue_emits_an_event_only_when_the_transaction_commits(
    agent, enqueue, sent_events, django_capture_on_commit_callbacks
):
    with django_capture_on_commit_callbacks(execute=True) as callbacks:
        item = enqueue(T.MENTION, summary="Look")
        assert sent_events == []
    assert len(callbacks) >= 1
    [(group, event)] = mailbox_events(sent_events)
    assert group == agent_group(agent.id)
    assert event["agentId"] == agent.id
    assert event["item"]["id"] == item.id
    assert event["item"]["sourceType"] == T.MENTION
    assert event["item"]["status"] == Status.QUEUED
    assert event["item"]["summary"] == "Look"
    assert isinstance(event["item"]["queuedAt"], str)


@pytest.mark.django_db
def test_a_rolled_back_enqueue_emits_nothing(agent, sent_events, django_capture_on_commit_callbacks):
    with django_capture_on_commit_callbacks(execute=True):
        with pytest.raises(RuntimeError), transaction.atomic():
            mailbox_enqueue(agent_id=agent.id, source_type=T.MENTION, payload={"summary": "x"})
            raise RuntimeError("boom")
    assert sent_events == []


@pytest.mark.django_db
def test_a_merge_emits_the_absorbed_row_and_the_survivor(
    agent, enqueue, sent_events, django_capture_on_commit_callbacks
):
    first = enqueue(T.TASK_COMMENT, taskId="t")
    with django_capture_on_commit_callbacks(execute=True):
        second = enqueue(T.TASK_COMMENT, taskId="t")
    items = {e["item"]["id"]: e["item"] for _, e in mailbox_events(sent_events)}
    assert items[second.id]["status"] == Status.MERGED
    assert items[second.id]["mergedInto"] == first.id
    assert items[first.id]["summary"].endswith("(+1)")


@pytest.mark.django_db
def test_claim_and_complete_each_emit_the_new_status(agent, enqueue, sent_events, django_capture_on_commit_callbacks):
    item = enqueue(T.MENTION)
    with django_capture_on_commit_callbacks(execute=True):
        lifecycle.claim_next(agent_id=agent.id)
        lifecycle.complete(item.id)
    assert [e["item"]["status"] for _, e in mailbox_events(sent_events)] == [Status.PROCESSING, Status.COMPLETED]


@pytest.mark.pg
@pytest.mark.django_db(transaction=True)
def test_a_committed_enqueue_is_delivered_as_json(agent, sent_events):
    item = mailbox_enqueue(
        agent_id=agent.id,
        source_type=T.A2A_MESSAGE,
        payload={"summary": "hi", "extra": {"channelKey": "c", "n": [1, 2]}},
        metadata={"senderId": "agt_x"},
    )
    [(group, event)] = mailbox_events(sent_events)
    assert group == agent_group(agent.id)
    assert event["item"]["id"] == item.id
    assert event["item"]["payload"]["extra"] == {"channelKey": "c", "n": [1, 2]}
    assert event["item"]["metadata"] == {"senderId": "agt_x"}
