"""Issue 13, deliverable 2: an internal agent answers bus requests. An agent message
that waits for an answer is processed by a scenario that ends by replying on the bus:
with agent_reply, or, when the agent did not call it, with its final answer; the
offline brain replies too. An answer expects no answer, so agents never ping-pong."""

from __future__ import annotations

import pytest
from asgiref.sync import async_to_sync

from agentbus.models import Stream
from agentbus.waiting import stream_request
from attention.toolbox import ToolContext, execute_tool
from mailbox.models import MailboxItem
from mailbox.registry import MailboxType, Status
from markus.agents.models import Agent
from markus.agents.services import agent_create
from markus.llm.scripted import Turn
from tests.attention.conftest import celery_worker, scripted, wait_for, wake_on_enqueue  # noqa: F401 (fixtures)

from .conftest import make_persona

pytestmark = pytest.mark.pg
MODULE = "markus.tools.a2a_tools"


@pytest.fixture(autouse=True)
def a2a_tools(settings):
    modules = list(settings.MARKUS["TOOL_MODULES"])
    settings.MARKUS = {**settings.MARKUS, "TOOL_MODULES": [*modules, MODULE] if MODULE not in modules else modules}


@pytest.mark.usefixtures("celery_worker")
def test_the_offline_brain_answers_a_harness_request(alice, team):
    eve = make_persona("eve", kind=Agent.Kind.EXTERNAL, owner=alice, team=team)
    ada, _ = agent_create(name="Ada", agent_id="ada", owner=alice, team=team)
    result = async_to_sync(stream_request)(sender=eve.agent, recipient=ada, payload={"text": "May I ship?"}, timeout=60)
    assert not result["timed_out"], result
    (reply,) = result["reply"]
    assert reply["sender"] == "ada" and "offline brain" in reply["payload"]["text"]
    assert "May I ship?" in reply["payload"]["text"]


@pytest.mark.usefixtures("celery_worker")
def test_a_final_answer_without_agent_reply_is_the_reply(alice, team, scripted):
    eve = make_persona("eve", kind=Agent.Kind.EXTERNAL, owner=alice, team=team)
    ada, _ = agent_create(name="Ada", agent_id="ada", owner=alice, team=team)
    scripted(Turn(text="Yes, after the tests pass."))
    result = async_to_sync(stream_request)(sender=eve.agent, recipient=ada, payload={"text": "May I ship?"}, timeout=60)
    assert not result["timed_out"], result
    assert [m["payload"]["text"] for m in result["reply"]] == ["Yes, after the tests pass."]


@pytest.mark.usefixtures("celery_worker")
def test_two_offline_agents_answer_a_question_once(alice, team):
    ada, _ = agent_create(name="Ada", agent_id="ada", owner=alice, team=team)
    bea, _ = agent_create(name="Bea", agent_id="bea", owner=alice, team=team)
    ok, _ = execute_tool(
        ToolContext(agent_id="bea", agent_name="Bea", scenario="a2a"),
        "agent_send_message",
        {"to": "ada", "text": "Is the build green?"},
    )
    assert ok
    answer = wait_for(
        lambda: MailboxItem.objects.filter(
            agent=bea, source_type=MailboxType.A2A_MESSAGE, status=Status.COMPLETED
        ).first(),
        timeout=60,
        message="Bea handled Ada's answer",
    )
    assert "Is the build green?" in answer.content and "offline brain" in answer.content
    # Bea's handling of the answer wrote nothing back: one reply stream in all.
    assert Stream.objects.filter(reply_to__isnull=False).count() == 1
    assert (
        not MailboxItem.objects.filter(agent=ada, source_type=MailboxType.A2A_MESSAGE)
        .exclude(status=Status.COMPLETED)
        .exists()
    )
