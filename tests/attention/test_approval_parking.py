"""request_user_approval parks the item (no worker waits); the answer re-queues it with
the answer as the tool result, and the session continues from there."""

from __future__ import annotations

import json

import pytest

from attention import services
from mailbox.models import MailboxItem
from mailbox.registry import MailboxType as T
from mailbox.services import mailbox_enqueue
from markus.llm.scripted import Turn
from notifications.models import Approval, UserNotification

from .conftest import wait_for


@pytest.mark.pg
def test_an_item_waits_for_a_human_answer_without_holding_a_worker(celery_worker, scripted, agent, alice, alice_client):
    ask = Turn(tool_calls=[("request_user_approval", {"title": "Deploy?", "description": "Ship v2 to prod"})])
    provider = scripted(ask, Turn(text="deployed"))
    item = mailbox_enqueue(
        agent_id=agent.id,
        source_type=T.A2A_MESSAGE,
        payload={"summary": "deploy request", "content": "please deploy v2"},
    )
    approval = wait_for(lambda: Approval.objects.filter(agent=agent, status="pending").first(), message="approval")
    wait_for(lambda: MailboxItem.objects.get(id=item.id).status == "deferred", message="item parked")
    parked = MailboxItem.objects.get(id=item.id)
    assert parked.marks["waitingForApproval"] is True and parked.marks["approvalId"] == approval.id
    assert approval.user == alice and approval.mailbox_item_id == item.id
    assert UserNotification.objects.filter(user=alice, type="approval_request").exists()
    # No worker is held: the loop lets go of the agent while the item waits.
    mind = wait_for(
        lambda: (m := alice_client.get(f"/api/agents/{agent.id}/mind").json())["state"] == "idle" and m,
        message="the loop idle while the item waits",
    )
    assert mind["waitingForApproval"] is True
    services.sweep()
    assert MailboxItem.objects.get(id=item.id).status == "deferred"  # not due until answered
    r = alice_client.post(
        f"/api/approvals/{approval.id}/respond", {"selectedOption": "approve", "comment": "go"}, format="json"
    )
    assert r.status_code == 200, r.content
    wait_for(lambda: MailboxItem.objects.get(id=item.id).status == "completed", message="resumed and completed")
    tool_result = provider.calls[1]["messages"][-1]
    assert tool_result["role"] == "tool"
    assert json.loads(tool_result["content"]) == {
        "status": "ok",
        "approved": True,
        "selected_option": "approve",
        "comment": "go",
    }


def test_notify_user_reaches_the_owner_chat_and_bell(celery_worker, scripted, agent, alice):
    from markus.agents.models import ChatMessage

    scripted(
        Turn(tool_calls=[("notify_user", {"title": "Build green", "body": "All tests pass"})]),
        Turn(text="told them"),
    )
    item = mailbox_enqueue(agent_id=agent.id, source_type=T.SYSTEM_EVENT, payload={"summary": "ci", "content": "ci"})
    wait_for(lambda: MailboxItem.objects.get(id=item.id).status == "completed", message="completed")
    n = UserNotification.objects.get(user=alice, title="Build green")
    assert n.body == "All tests pass" and n.action_type == "open_chat"
    assert ChatMessage.objects.filter(
        session__agent=agent, metadata__notifyUser=True, content__contains="All tests pass"
    ).exists()
