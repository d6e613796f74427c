"""Everything addressed to an outside agent reaches its bus inbox (issue 36, point 1): a
mention, a person's comment on its task, a review request for a task it filed and a
reviewer's verdict with its comment arrive as bus messages, in the order they were
said, each on the stream of its conversation and saying who said it; its mailbox keeps
them as delivered (completed), nothing queued for a loop that never runs. Items queued
before the rule are delivered by the sweep. eve is the outside agent (a coding CLI),
ada an internal one, alice and bob people."""

from __future__ import annotations

import pytest

from attention import outside
from attention.services import sweep
from mailbox import lifecycle
from mailbox.models import MailboxItem
from mailbox.registry import MailboxType, Status
from mailbox.services import mailbox_enqueue
from markus.agents.models import Team
from markus.core.actors import Actor
from markus.core.limits import BUS_PAYLOAD_MAX_CHARS
from markus.work.liveness import work_liveness_repair
from markus.work.models import Task, TaskState
from markus.work.services import task_comment_create, task_create, task_transition
from notifications.models import Approval
from notifications.services import approval_respond

from .conftest import conversations

pytestmark = pytest.mark.django_db


@pytest.fixture
def ungated(team):
    """The team lets its agents' tasks start at once (no approval of what they file)."""
    Team.objects.filter(id=team.id).update(agent_task_approval=False)
    return team


def drain(persona) -> list[dict]:
    """What the agent reads with its own token over the REST bus API."""
    response = persona.client().post(f"/api/agents/{persona.id}/agentbus/drain", {}, format="json")
    assert response.status_code == 200, response.content
    return response.json()["messages"]


def from_the_hub(messages: list[dict]) -> list[dict]:
    """The messages of the hub's conversations (not the task lifecycle records)."""
    return [m for m in messages if m["streamId"].startswith(outside.HUB_STREAM_PREFIX)]


def queued(agent_id: str) -> list[MailboxItem]:
    return list(MailboxItem.objects.filter(agent_id=agent_id, status=Status.QUEUED))


def test_mention_comment_review_request_and_verdict_reach_the_inbox_in_order(alice, bob, ungated, ada, eve):
    as_alice, as_eve = Actor.for_user(alice), Actor.for_agent(eve.agent)
    own = task_create(actor=as_alice, title="Write the docs", assignee_id=eve.id)  # alice reviews it
    filed = task_create(actor=as_eve, title="Port the parser", assignee_id=ada.id)  # eve reviews it
    drain(eve)  # what came before: the assignment

    mention = task_comment_create(task_id=filed.id, actor=as_alice, content="@eve which grammar do we port?")
    comment = task_comment_create(task_id=own.id, actor=Actor.for_user(bob), content="Mind the examples.")
    task_transition(task_id=filed.id, to_status=TaskState.REVIEW, actor=Actor.for_agent(ada.agent))
    task_transition(task_id=own.id, to_status=TaskState.REVIEW, actor=as_eve)
    approval = Approval.objects.get(id=Task.objects.get(id=own.id).metadata["reviewApprovalId"])
    approval_respond(user=alice, approval_id=approval.id, selected_option="request_changes", comment="Add tests.")

    said = from_the_hub(drain(eve))
    assert [m["topic"] for m in said] == [
        MailboxType.MENTION,
        MailboxType.TASK_COMMENT,
        MailboxType.REVIEW_REQUEST,
        MailboxType.TASK_STATUS_UPDATE,  # the verdict: back to work, with the reviewer's comment
    ]
    first, second, review, verdict = (m["payload"] for m in said)
    assert first["text"].startswith("alice (user) mentioned you") and "which grammar" in first["text"]
    assert (first["taskId"], first["commentId"]) == (filed.id, mention.id)
    assert first["from"] == {"type": "user", "id": str(alice.pk), "name": "alice"}
    assert (second["taskId"], second["commentId"], second["from"]["name"]) == (own.id, comment.id, "bob")
    assert "Mind the examples." in second["text"]
    assert review["taskId"] == filed.id and review["text"].startswith('Please review task "Port the parser"')
    assert verdict["taskId"] == own.id and "Note from alice: Add tests." in verdict["text"]
    # One conversation per task: the mention and the review on one stream, the others on another.
    assert said[0]["streamId"] == said[2]["streamId"] != said[1]["streamId"] == said[3]["streamId"]
    assert all(m["sender"] == "markus:operator" for m in said)
    assert queued(eve.id) == []
    delivered = MailboxItem.objects.filter(agent_id=eve.id, source_type=MailboxType.MENTION).get()
    assert delivered.status == Status.COMPLETED and delivered.marks[lifecycle.DELIVERED_ON] == said[0]["streamId"]


def test_a_review_request_delivered_to_an_outside_reviewer_is_not_asked_again(alice, ungated, ada, eve):
    filed = task_create(actor=Actor.for_agent(eve.agent), title="Port the parser", assignee_id=ada.id)
    task_transition(task_id=filed.id, to_status=TaskState.REVIEW, actor=Actor.for_agent(ada.agent))
    drain(eve)
    assert not work_liveness_repair()  # the delivered request is the waker: eve reviews it
    assert from_the_hub(drain(eve)) == []


def test_items_queued_before_the_rule_are_delivered_by_the_sweep_in_order(eve):
    for text in ("first", "second"):  # stored as the mailbox did before: queued, no delivery
        lifecycle.insert_queued(
            agent_id=eve.id,
            source_type=MailboxType.SYSTEM_EVENT,
            priority=1,
            payload={"summary": text, "content": text},
            metadata={},
        )
    sweep()
    assert [m["payload"]["text"] for m in from_the_hub(drain(eve))] == ["first", "second"]
    assert queued(eve.id) == []


def test_an_internal_agents_items_stay_in_its_mailbox(alice, ada):
    task = task_create(actor=Actor.for_user(alice), title="T", assignee_id=ada.id, start=False)
    task_comment_create(task_id=task.id, actor=Actor.for_user(alice), content="hello")
    comment = MailboxItem.objects.get(agent_id=ada.id, source_type=MailboxType.TASK_COMMENT)
    assert comment.status == Status.QUEUED and lifecycle.DELIVERED_ON not in comment.marks
    assert not conversations().filter(id__startswith=outside.HUB_STREAM_PREFIX).exists()


def test_a_text_past_the_bus_limit_is_cut_and_says_so(eve):
    mailbox_enqueue(
        agent_id=eve.id,
        source_type=MailboxType.SYSTEM_EVENT,
        payload={"summary": "long", "content": "x" * (BUS_PAYLOAD_MAX_CHARS + 10)},
    )
    [message] = from_the_hub(drain(eve))
    assert message["payload"]["truncated"] is True and len(message["payload"]["text"]) < BUS_PAYLOAD_MAX_CHARS
    assert queued(eve.id) == []
