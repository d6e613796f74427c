"""Every change the loop makes is announced after commit through the one event helper."""

from __future__ import annotations

import pytest

from mailbox.models import MailboxItem
from mailbox.registry import MailboxType as T
from mailbox.services import mailbox_enqueue

from .conftest import wait_for


@pytest.mark.pg
def test_processing_an_item_emits_mailbox_decision_attention_and_focus_events(celery_worker, agent, sent_events):
    item = mailbox_enqueue(agent_id=agent.id, source_type=T.SYSTEM_EVENT, payload={"summary": "ping", "content": "p"})
    wait_for(lambda: MailboxItem.objects.get(id=item.id).status == "completed", message="completed")
    wait_for(
        lambda: any(e["type"] == "agent:attention" and e["state"] == "idle" for _, e in sent_events),
        message="back to idle",
    )
    mine = [(g, e) for g, e in sent_events if g == f"agent.{agent.id}"]
    assert len(mine) == len(sent_events)
    kinds = [e["type"] for _, e in mine]
    statuses = [e["item"]["status"] for _, e in mine if e["type"] == "agent:mailbox" and e["item"]["id"] == item.id]
    assert statuses[0] == "queued" and "processing" in statuses and statuses[-1] == "completed"
    pick = next(e for _, e in mine if e["type"] == "agent:decision")
    assert pick["decision"]["decisionType"] == "pick" and pick["decision"]["mailboxItemId"] == item.id
    states = [e["state"] for _, e in mine if e["type"] == "agent:attention"]
    assert states[0] == "focused" and states[-1] == "idle"
    focus = next(e for _, e in mine if e["type"] == "agent:focus")
    assert focus["focus"]["mailboxItemId"] == item.id and "mailboxDepth" in focus
    assert kinds.index("agent:decision") < kinds.index("agent:focus")


@pytest.mark.django_db(transaction=True)
def test_a_run_that_finds_nothing_announces_no_state(agent, sent_events):
    """Idle before and after: a wake-up with nothing to do (a sweep's kick, a second
    wake for work a run already took) says nothing to the mind view."""
    from attention.loop import run_attention

    run_attention(agent.id)
    assert [e for _, e in sent_events if e["type"] in ("agent:attention", "agent:focus")] == []


@pytest.mark.django_db(transaction=True)
def test_a_run_after_work_ends_announcing_idle_once(agent, sent_events):
    from attention.loop import run_attention

    mailbox_enqueue(agent_id=agent.id, source_type=T.SYSTEM_EVENT, payload={"summary": "ping", "content": "p"})
    run_attention(agent.id)
    states = [e["state"] for _, e in sent_events if e["type"] == "agent:attention"]
    assert states[0] == "focused" and states[-1] == "idle" and states.count("idle") == 1
