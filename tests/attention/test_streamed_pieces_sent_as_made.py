"""The pieces of a turn's text the loop streams (``agent:delta``, about one a word) are
JSON values as made: sent without the encode-and-decode check every other event goes
through (``send_event_on_commit``), with the same fields as before."""

from __future__ import annotations

import json

import pytest

from attention import loop
from attention.replies import DELTA_EVENT
from mailbox.registry import MailboxType as T
from mailbox.services import mailbox_enqueue
from markus.core import events

pytestmark = [pytest.mark.pg, pytest.mark.django_db(transaction=True), pytest.mark.usefixtures("offline_loop")]


def test_a_turns_pieces_go_out_as_made_with_their_fields(agent, sent_events, monkeypatch):
    checked: list[str] = []
    real = events.send_event_on_commit

    def spy(group, event_type, payload, **kwargs):
        checked.append(event_type)
        return real(group, event_type, payload, **kwargs)

    monkeypatch.setattr(events, "send_event_on_commit", spy)
    monkeypatch.setattr("attention.replies.send_event_on_commit", spy)
    item = mailbox_enqueue(
        agent_id=agent.id, source_type=T.SYSTEM_EVENT, payload={"summary": "stream me", "content": "some words"}
    )
    result = loop.run_attention(agent.id, budget=1)
    assert result.processed == 1
    pieces = [(group, e) for group, e in sent_events if e.get("type") == DELTA_EVENT]
    assert pieces, "the offline brain streams its answer"
    assert DELTA_EVENT not in checked  # not re-encoded to check
    for group, event in pieces:
        assert group == events.agent_group(agent.id)
        assert set(event) >= {"type", "agentId", "mailboxItemIds", "activityId", "turn", "text"}
        assert event["agentId"] == agent.id and event["mailboxItemIds"] == [item.id]
        assert isinstance(event["activityId"], str) and event["turn"] >= 1 and event["text"]
        assert json.loads(json.dumps(event)) == event  # JSON values only
