from __future__ import annotations

import pytest

from attention.models import AgentActivity, AgentDecision
from mailbox.models import MailboxItem
from markus.agents.models import ChatMessage

from .conftest import wait_for


@pytest.mark.pg
def test_chat_is_answered_end_to_end_by_the_offline_brain_through_a_real_worker(celery_worker, agent, alice_client):
    r = alice_client.post(f"/api/agents/{agent.id}/chat", {"text": "Hello, how busy is your queue?"}, format="json")
    assert r.status_code == 200, r.content
    body = r.json()
    assert "offline brain" in body["reply"] and "Hello, how busy is your queue?" in body["reply"]
    item = MailboxItem.objects.get(id=body["mailboxItemId"])
    assert item.status == "completed"
    assert list(AgentDecision.objects.filter(mailbox_item=item).values_list("decision_type", flat=True)) == ["pick"]
    activity = AgentActivity.objects.get(mailbox_item=item)
    assert activity.type == "chat" and activity.success and activity.total_tokens > 0 and activity.total_tools == 1
    types = list(activity.logs.order_by("seq").values_list("type", flat=True))
    assert types[0] == "status" and "llm_request" in types and "tool_start" in types and "tool_end" in types
    assert ChatMessage.objects.filter(session_id=body["sessionId"], role="assistant", content=body["reply"]).exists()


def test_heartbeat_runs_its_scenario_and_lands_in_the_main_session(celery_worker, agent):
    from mailbox.registry import MailboxType
    from mailbox.services import mailbox_enqueue

    item = mailbox_enqueue(
        agent_id=agent.id,
        source_type=MailboxType.HEARTBEAT,
        payload={"summary": "Heartbeat check-in", "content": "tick"},
    )
    wait_for(lambda: MailboxItem.objects.get(id=item.id).status == "completed", message="heartbeat completed")
    activity = AgentActivity.objects.get(mailbox_item_id=item.id)
    assert activity.type == "heartbeat" and activity.success
    line = ChatMessage.objects.filter(session__agent=agent, session__is_main=True, metadata__activityLog=True).last()
    assert line.content.startswith("[ACTIVITY: heartbeat] Heartbeat check-in → heartbeat processed")
    assert "<<HANDLE_COMPLETE>>" not in "".join(activity.logs.values_list("content", flat=True))
