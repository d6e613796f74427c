"""An outside agent that asked an agent the loop runs is told when the answer waits on a
person: the answering run parked its item for an approval, and the asker hears it on the
reply stream the answer will close ("Waiting for alice's answer to …"), marked
``status: waiting_on_person`` with the approval's id, the answer itself after it. An
agent the loop runs that asked is not told (its own wait has a deadline, and a message
would cost its model a run)."""

from __future__ import annotations

import pytest

from agentbus.models import Chunk, Stream
from agentbus.selectors import reply_expected
from attention.toolbox import ToolContext, execute_tool
from mailbox.models import MailboxItem
from markus.agents.services import agent_create
from markus.llm.scripted import Turn
from notifications.models import Approval
from notifications.services import approval_respond
from tests.attention.conftest import celery_worker, scripted, wait_for, wake_on_enqueue  # noqa: F401 (fixtures)

from .conftest import append, open_stream

pytestmark = pytest.mark.django_db(transaction=True)

ASK = Turn(tool_calls=[("request_user_approval", {"title": "Deploy v2?", "description": "eve asks to ship"})])


def inbox(persona) -> list[dict]:
    answer = persona.client().get(f"/api/agents/{persona.id}/agentbus/inbox?timeout_seconds=0")
    assert answer.status_code == 200, answer.content
    return answer.json()["messages"]


@pytest.mark.usefixtures("celery_worker")
def test_an_outside_agent_hears_that_its_answer_waits_on_a_person_then_gets_the_answer(scripted, alice, ada, eve):
    scripted(ASK, Turn(text="Deployed v2 as you asked."))
    stream_id = open_stream(eve.client(), "eve", "ada")
    assert append(eve.client(), stream_id, "eve", "Please deploy v2").status_code == 201
    approval = wait_for(lambda: Approval.objects.filter(agent=ada.agent, status="pending").first(), message="approval")
    wait_for(lambda: MailboxItem.objects.filter(agent=ada.agent, status="deferred").exists(), message="item parked")

    (told,) = inbox(eve)
    assert told["sender"] == "ada" and told["payload"]["status"] == "waiting_on_person"
    assert told["payload"]["approvalId"] == approval.id
    assert told["payload"]["text"] == f"Waiting for alice's answer to 'Deploy v2?' (approval {approval.id})."
    reply_stream = Stream.objects.get(id=told["streamId"])
    assert reply_stream.reply_to == stream_id and reply_stream.closed_at is None
    assert reply_expected(stream_id, "ada"), "being told of the wait is not the answer"

    approval_respond(user=alice, approval_id=approval.id, selected_option="approve")
    wait_for(lambda: Stream.objects.get(id=reply_stream.id).closed_at, message="the answer closes the reply stream")
    # The answer on the same reply stream, after the wait it followed; one reply stream in all.
    texts = list(Chunk.objects.filter(stream=reply_stream).order_by("sequence").values_list("payload", flat=True))
    assert [p.get("status") for p in texts] == ["waiting_on_person", None]
    assert texts[1]["text"] == "Deployed v2 as you asked."
    assert Stream.objects.filter(reply_to=stream_id).count() == 1


@pytest.mark.usefixtures("celery_worker")
def test_an_agent_the_loop_runs_that_asked_is_not_told(scripted, alice, team, ada):
    bea, _ = agent_create(name="Bea", agent_id="bea", owner=alice, team=team)
    scripted(ASK, Turn(text="Deployed."))
    ok, _ = execute_tool(
        ToolContext(agent_id="bea", agent_name="Bea", scenario="a2a"),
        "agent_send_message",
        {"to": "ada", "text": "Please deploy v2"},
    )
    assert ok
    wait_for(lambda: MailboxItem.objects.filter(agent=ada.agent, status="deferred").exists(), message="item parked")
    assert not Chunk.objects.filter(stream__reply_to__isnull=False).exists()
    assert not MailboxItem.objects.filter(agent=bea).exists()
