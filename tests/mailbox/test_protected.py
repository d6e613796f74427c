"""Agent tools may not defer, drop or re-prioritise a protected item (seed section 21): one
rule (``mailbox.merge.is_protected``) for the mailbox tools and deliberation alike."""

from __future__ import annotations

import pytest

from mailbox import lifecycle
from mailbox.registry import MailboxType, Status
from mailbox.services import MailboxError, ProtectedItemError, tool_defer_item, tool_drop_item, tool_prioritize_item

T = MailboxType
pytestmark = pytest.mark.django_db

TOOLS = {
    "defer": lambda agent_id, item_id: tool_defer_item(agent_id=agent_id, item_id=item_id),
    "drop": lambda agent_id, item_id: tool_drop_item(agent_id=agent_id, item_id=item_id),
    "prioritize": lambda agent_id, item_id: tool_prioritize_item(agent_id=agent_id, item_id=item_id, priority=4),
}


@pytest.mark.parametrize("tool", TOOLS)
def test_a_tool_refuses_to_touch_a_human_chat(agent, enqueue, tool):
    chat = enqueue(T.HUMAN_CHAT)
    with pytest.raises(ProtectedItemError, match="protected"):
        TOOLS[tool](agent.id, chat.id)
    chat.refresh_from_db()
    assert chat.status == Status.QUEUED and chat.priority == 0


def test_a_protected_item_error_is_a_mailbox_error_the_api_shows_as_400():
    assert issubclass(ProtectedItemError, MailboxError)
    assert ProtectedItemError("x").status_code == 400


@pytest.mark.parametrize(
    "kind,metadata,payload",
    [
        (T.MENTION, None, None),
        (T.TASK_COMMENT, {"senderRole": "user"}, None),
        (T.REVIEW_REQUEST, None, None),
        (T.TASK_STATUS_UPDATE, None, {"extra": {"triggerExecution": True}}),
    ],
    ids=["mention", "a_persons_comment", "review_request", "execution_trigger"],
)
def test_a_tool_refuses_every_item_deliberation_protects(agent, enqueue, kind, metadata, payload):
    from mailbox.merge import is_protected

    item = enqueue(kind, metadata=metadata, **(payload or {}))
    assert is_protected(item)
    with pytest.raises(ProtectedItemError, match="protected"):
        tool_drop_item(agent_id=agent.id, item_id=item.id)
    item.refresh_from_db()
    assert item.status == Status.QUEUED


def test_a_tool_defers_another_item(agent, enqueue):
    item = tool_defer_item(agent_id=agent.id, item_id=enqueue(T.SYSTEM_EVENT).id)
    assert item.status == Status.DEFERRED and item.deferred_until is None


def test_a_tool_drops_another_item_with_its_reason(agent, enqueue):
    item = tool_drop_item(agent_id=agent.id, item_id=enqueue(T.A2A_MESSAGE).id, reason="stale")
    assert item.status == Status.DROPPED and item.drop_reason == "stale"


def test_a_tool_reprioritises_another_item(agent, enqueue):
    item = tool_prioritize_item(agent_id=agent.id, item_id=enqueue(T.HEARTBEAT).id, priority=0)
    assert item.priority == 0 and item.status == Status.QUEUED


@pytest.mark.parametrize("bad", [-1, 5, True, "0"])
def test_a_tool_refuses_a_priority_out_of_range(agent, enqueue, bad):
    item = enqueue(T.HEARTBEAT)
    with pytest.raises(MailboxError, match="priority"):
        tool_prioritize_item(agent_id=agent.id, item_id=item.id, priority=bad)
    item.refresh_from_db()
    assert item.priority == 3


@pytest.mark.parametrize("tool", TOOLS)
def test_a_tool_cannot_reach_another_agents_item(agent, other_agent, enqueue, tool):
    theirs = enqueue(T.MENTION, agent_id=other_agent.id)
    with pytest.raises(MailboxError, match="no mailbox item"):
        TOOLS[tool](agent.id, theirs.id)
    theirs.refresh_from_db()
    assert theirs.status == Status.QUEUED and theirs.priority == 1


@pytest.mark.parametrize("tool", TOOLS)
def test_a_tool_only_changes_queued_items(agent, enqueue, tool):
    item = enqueue(T.SYSTEM_EVENT)
    lifecycle.claim_next(agent_id=agent.id)
    with pytest.raises(MailboxError, match="only queued items"):
        TOOLS[tool](agent.id, item.id)
    item.refresh_from_db()
    assert item.status == Status.PROCESSING
