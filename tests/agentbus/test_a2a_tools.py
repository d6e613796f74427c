"""The agent-to-agent tools, called as the loop calls them (``execute_tool`` with a
ToolContext): every message is a bus record that also reaches an internal recipient's
mailbox; no tool waits for an answer; bad input is an error the LLM can read."""

from __future__ import annotations

import asyncio
import json

import pytest
from asgiref.sync import async_to_sync, sync_to_async

from agentbus import selectors
from agentbus.models import Stream
from agentbus.waiting import stream_request
from attention.toolbox import TOOLS, ToolContext, execute_tool, schemas_for
from mailbox.models import MailboxItem
from mailbox.registry import MailboxType, Status
from mailbox.services import mailbox_enqueue
from markus.agents.models import Agent, Team
from markus.work.models import Task, TaskState

from .conftest import conversations, make_persona

pytestmark = [pytest.mark.django_db, pytest.mark.pg]
MODULE = "markus.tools.a2a_tools"
TOOL_NAMES = {
    "agent_list_colleagues",
    "agent_send_message",
    "agent_reply",
    "agent_delegate_task",
    "agent_broadcast_status",
    "agent_create_group_chat",
    "agent_list_group_chats",
    "agent_send_group_message",
}


@pytest.fixture(autouse=True)
def a2a_tools(settings):
    """The tools' module in the loop's tool list (markus/settings adds it for real)."""
    modules = list(settings.MARKUS["TOOL_MODULES"])
    settings.MARKUS = {**settings.MARKUS, "TOOL_MODULES": [*modules, MODULE] if MODULE not in modules else modules}


@pytest.fixture
def bea(alice, team):
    return make_persona("bea", kind=Agent.Kind.INTERNAL, owner=alice, team=team)


@pytest.fixture
def cy(alice, team):
    return make_persona("cy", kind=Agent.Kind.INTERNAL, owner=alice, team=team)


def ctx(agent, *, item=None, scenario="a2a"):
    return ToolContext(
        agent_id=agent.id, agent_name=agent.agent.name, mailbox_item_id=item.id if item else None, scenario=scenario
    )


def call(context, tool_name, **args):
    ok, text = execute_tool(context, tool_name, args)
    return ok, json.loads(text)


def ok(context, tool_name, **args):
    good, result = call(context, tool_name, **args)
    assert good, result
    return result


def error(context, tool_name, **args):
    good, result = call(context, tool_name, **args)
    assert not good, result
    return result["error"]


def next_item(agent):
    return MailboxItem.objects.filter(agent_id=agent.id, status=Status.QUEUED).order_by("queued_at", "id").last()


def test_the_tools_are_offered_where_the_agent_works_with_colleagues():
    def offered(scenario):
        return {s["function"]["name"] for s in schemas_for(scenario)} & TOOL_NAMES

    assert offered("task_execution") == TOOL_NAMES - {"agent_reply"}
    assert offered("a2a") == TOOL_NAMES - {"agent_delegate_task", "agent_broadcast_status"}
    # A person asks the agent to ask someone, or to hand work to someone.
    assert offered("chat") == {"agent_send_message", "agent_list_colleagues", "agent_delegate_task"}
    assert offered("requirement_action") == {"agent_delegate_task", "agent_list_colleagues"}
    assert offered("system_notice") == {"agent_send_message", "agent_list_colleagues"}  # a colleague's status
    for scenario in ("session_response", "check_in", "dream_cycle", "daily_report_writing"):
        assert offered(scenario) == set(), scenario
    assert all(TOOLS[name].scenarios for name in TOOL_NAMES)


def test_a_question_and_its_answer_travel_on_the_bus_and_through_both_mailboxes(ada, bea):
    sent = ok(ctx(ada), "agent_send_message", to="Bea", text="Is the build green?", topic="build")
    stream = Stream.objects.get(id=sent["streamId"])
    assert (stream.sender_id, stream.recipient_id, stream.topic) == ("ada", "bea", "build")
    assert sent["to"] == {"id": "bea", "name": "Bea"} and "Do not wait" in sent["note"]
    question = next_item(bea)
    assert question.source_type == MailboxType.A2A_MESSAGE and question.content == "Is the build green?"
    assert question.metadata["senderName"] == "Ada" and question.marks["streamId"] == stream.id
    assert selectors.reply_expected(stream.id, "bea")

    answer = ok(ctx(bea, item=question), "agent_reply", text="Green since 10:02.")
    reply = Stream.objects.get(id=answer["replyStreamId"])
    assert (reply.sender_id, reply.recipient_id, reply.reply_to) == ("bea", "ada", stream.id)
    assert reply.closed_at is not None and answer["replyTo"] == stream.id
    assert not selectors.reply_expected(stream.id, "bea")
    carried = next_item(ada)
    assert carried.source_type == MailboxType.A2A_MESSAGE and carried.content == "Green since 10:02."
    assert carried.metadata["senderName"] == "Bea" and carried.marks["streamId"] == reply.id
    # An answer expects no answer: two agents do not answer each other's answers for ever.
    assert not selectors.reply_expected(reply.id, "ada")
    # The same records are the bus: Ada's inbox holds the reply.
    assert [m["payload"]["text"] for m in selectors.inbox_read_from("ada", 0)["messages"]] == ["Green since 10:02."]


def test_a_request_from_a_harness_returns_the_agents_reply(eve, ada, settings):
    """``agentbus request`` (``stream_request``) waits for a reply stream to be closed;
    agent_reply, called while the request waits, closes it."""
    settings.MARKUS = {**settings.MARKUS, "AGENTBUS_POLL_SECONDS": 0.02}  # no commit here, so no wake-up

    def answer() -> bool:
        item = next_item(ada)
        if item is None:
            return False
        ok(ctx(ada, item=item), "agent_reply", text=f"Re: {item.content}: yes")
        return True

    async def scenario():
        request = asyncio.create_task(
            stream_request(sender=eve.agent, recipient=ada.agent, payload={"text": "ship it?"}, timeout=60)
        )
        while not await sync_to_async(answer)():
            await asyncio.sleep(0.01)
        return await request

    result = async_to_sync(scenario)()
    assert not result["timed_out"]
    assert [m["payload"]["text"] for m in result["reply"]] == ["Re: ship it?: yes"]
    assert Stream.objects.get(id=result["replyStreamId"]).reply_to == result["streamId"]


def test_a_group_of_three_exchanges_messages_and_each_sees_the_others_names(ada, bea, cy):
    group = ok(ctx(ada), "agent_create_group_chat", name="release", members=["Bea", "cy"])
    assert {m["name"] for m in group["members"]} == {"Ada", "Bea", "Cy"} and group["name"] == "release"
    for agent in (ada, bea, cy):
        listed = ok(ctx(agent), "agent_list_group_chats")["groups"]
        # Newest first: the new group, then the team's own channel (agentbus.team_channel).
        assert [g["groupId"] for g in listed] == [group["groupId"], f"group:{agent.agent.team_id}"]
    ok(ctx(ada), "agent_send_group_message", group_id=group["groupId"], text="freeze at noon")
    for agent in (bea, cy):
        item = next_item(agent)
        assert item.metadata["senderName"] == "Ada" and item.summary.startswith("Ada in group 'release': freeze")
        assert item.extra["groupId"] == group["groupId"]
    # Bea answers the group from her item; Cy writes to it: everyone else hears each, by name.
    ok(ctx(bea, item=next_item(bea)), "agent_reply", text="fine by me")
    ok(ctx(cy), "agent_send_group_message", group_id=group["groupId"], text="I need one more hour")
    heard = {
        agent.id: [
            (m["sender"], m["payload"]["senderName"], m["payload"]["text"])
            for m in selectors.inbox_read_from(agent.id, 0)["messages"]
        ]
        for agent in (ada, bea, cy)
    }
    assert heard["ada"] == [("bea", "Bea", "fine by me"), ("cy", "Cy", "I need one more hour")]
    assert heard["bea"] == [("ada", "Ada", "freeze at noon"), ("cy", "Cy", "I need one more hour")]
    assert heard["cy"] == [("ada", "Ada", "freeze at noon"), ("bea", "Bea", "fine by me")]
    # In the mailbox, messages on one group coalesce and name each sender.
    assert "Ada: freeze at noon" in next_item(cy).content and "Bea: fine by me" in next_item(cy).content
    assert "Cy: I need one more hour" in next_item(ada).content and "Bea: fine by me" in next_item(ada).content
    assert Stream.objects.get(id=group["groupId"]).closed_at is None


def test_bad_input_is_an_error_the_llm_can_act_on(ada, bea, zed, charlie):
    assert "no colleague 'nobody'" in error(ctx(ada), "agent_send_message", to="nobody", text="hi")
    # zed belongs to another owner and no team of ada's: out of reach, named like a missing one.
    assert "no colleague 'zed'" in error(ctx(ada), "agent_send_message", to="zed", text="hi")
    assert "text must not be empty" in error(ctx(ada), "agent_send_message", to="bea", text="  ")
    assert "that is you" in error(ctx(ada), "agent_send_message", to="ada", text="hi")
    assert "missing required argument 'to'" in error(ctx(ada), "agent_send_message", text="hi")
    assert "no colleague" in error(ctx(ada, scenario="task_execution"), "agent_delegate_task", to="zed", title="x")
    assert "no colleague" in error(ctx(ada), "agent_create_group_chat", name="g", members=["bea", "zed"])
    assert "at least one colleague" in error(ctx(ada), "agent_create_group_chat", name="g", members=[])
    assert "needs a name" in error(ctx(ada), "agent_create_group_chat", name=" ", members=["bea"])
    assert "no group chat 'stm_x'" in error(ctx(ada), "agent_send_group_message", group_id="stm_x", text="hi")
    assert not conversations().exists() and not MailboxItem.objects.exists()


def test_agent_reply_without_a_bus_item_says_what_to_do_instead(ada, bea, alice):
    assert "did not come from the bus" in error(ctx(ada), "agent_reply", text="hi")
    chat = mailbox_enqueue(
        agent_id="ada",
        source_type=MailboxType.HUMAN_CHAT,
        payload={"summary": "hi", "content": "hi"},
        metadata={"senderId": str(alice.pk), "senderName": "alice", "senderRole": "user"},
    )
    message = error(ctx(ada, item=chat), "agent_reply", text="hi")
    assert "did not come from the bus" in message and "agent_send_message" in message
    assert not conversations().exists()


def test_agent_reply_asks_which_conversation_when_several_were_merged(ada, bea, cy):
    ok(ctx(bea), "agent_send_message", to="ada", text="from bea")
    ok(ctx(cy), "agent_send_message", to="ada", text="from cy")
    first, second = MailboxItem.objects.filter(agent_id="ada").order_by("queued_at", "id")
    MailboxItem.objects.filter(id=second.id).update(status=Status.MERGED, merged_into=first)
    message = error(ctx(ada, item=first), "agent_reply", text="hi")
    assert "give stream_id" in message and second.marks["streamId"] in message and "(from Cy)" in message
    assert "one of the conversations" in error(ctx(ada, item=first), "agent_reply", text="hi", stream_id="stm_other")
    answer = ok(ctx(ada, item=first), "agent_reply", text="hi cy", stream_id=second.marks["streamId"])
    assert Stream.objects.get(id=answer["replyStreamId"]).recipient_id == "cy"


def test_delegating_files_a_task_the_delegator_reviews(ada, bea):
    result = ok(
        ctx(ada, scenario="task_execution"),
        "agent_delegate_task",
        to="Bea",
        title="Write the docs",
        description="All of them",
    )
    task = Task.objects.get(id=result["taskId"])
    assert (task.assignee_id, task.reviewer_agent_id, task.created_by_agent_id) == ("bea", "ada", "ada")
    assert result["assignee"] == {"id": "bea", "name": "Bea"} and result["reviewer"] == {"id": "ada", "name": "Ada"}
    # The team approves what its agents file (agentTaskApproval, on by default): bea hears
    # of the task only once it is approved; a team that does not ask starts it at once.
    assert task.status == TaskState.PENDING
    assert not MailboxItem.objects.filter(agent_id="bea", payload__taskId=task.id).exists()
    Team.objects.filter(id=ada.agent.team_id).update(agent_task_approval=False)
    started = ok(ctx(ada, scenario="task_execution"), "agent_delegate_task", to="Bea", title="Write the tests")
    assert MailboxItem.objects.filter(agent_id="bea", payload__taskId=started["taskId"]).exists()
    assert "that is you" in error(ctx(ada, scenario="task_execution"), "agent_delegate_task", to="ada", title="x")
    assert "title must not be empty" in error(
        ctx(ada, scenario="task_execution"), "agent_delegate_task", to="bea", title=""
    )
    assert "no task 'tsk_nope'" in error(
        ctx(ada, scenario="task_execution"), "agent_delegate_task", to="bea", title="x", depends_on=["tsk_nope"]
    )
    assert "no requirement 'req_nope'" in error(
        ctx(ada, scenario="task_execution"), "agent_delegate_task", to="bea", title="x", requirement_id="req_nope"
    )


def test_a_status_broadcast_reaches_every_running_colleague_of_the_team(ada, bea, cy, eve, zed):
    Agent.objects.filter(id="cy").update(status=Agent.RunStatus.PAUSED)
    result = ok(ctx(ada, scenario="task_execution"), "agent_broadcast_status", text="Refactoring the parser today")
    assert {c["id"] for c in result["to"]} == {"bea", "eve"} and result["delivered"] == 2
    event = MailboxItem.objects.get(agent_id="bea")
    assert (
        event.source_type == MailboxType.SYSTEM_EVENT
        and event.summary == "Status from Ada: Refactoring the parser today"
    )
    assert event.metadata["senderName"] == "Ada"
    assert not MailboxItem.objects.filter(agent_id__in=["cy", "ada", "zed"]).exists()
    # eve is a harness: she reads the bus.
    assert [m["payload"]["text"] for m in selectors.inbox_read("eve")["messages"]] == ["Refactoring the parser today"]
    assert "text must not be empty" in error(ctx(ada, scenario="task_execution"), "agent_broadcast_status", text="")


def test_a_broadcast_without_a_team_is_refused(zed):
    assert "no team" in error(ctx(zed, scenario="task_execution"), "agent_broadcast_status", text="hello")


def test_colleagues_are_the_agents_in_reach(ada, bea, zed):
    names = {c["id"] for c in ok(ctx(ada), "agent_list_colleagues")["colleagues"]}
    assert names == {"bea"}


def test_the_loops_backstop_answers_once_and_only_what_waits_for_an_answer(ada, bea, eve):
    """``reply_if_expected``: what the attention loop calls when an agent message that
    waits for an answer ends without agent_reply (the final text is the answer)."""
    from agentbus import services

    question = ok(ctx(ada), "agent_send_message", to="bea", text="ETA?")["streamId"]
    first = services.reply_if_expected(responder=bea.agent, stream_id=question, text="Tomorrow")
    assert first is not None and Stream.objects.get(id=first.stream_id).closed_at is not None
    assert services.reply_if_expected(responder=bea.agent, stream_id=question, text="again") is None
    # An answer, a group message, a stream to someone else: nothing waits.
    assert services.reply_if_expected(responder=ada.agent, stream_id=first.stream_id, text="thanks") is None
    group = ok(ctx(ada), "agent_create_group_chat", name="g", members=["bea"])["groupId"]
    ok(ctx(ada), "agent_send_group_message", group_id=group, text="hi all")
    assert services.reply_if_expected(responder=bea.agent, stream_id=group, text="hi") is None
    to_eve = ok(ctx(ada), "agent_send_message", to="eve", text="hi eve")["streamId"]
    assert services.reply_if_expected(responder=bea.agent, stream_id=to_eve, text="not mine") is None
    assert services.reply_if_expected(responder=bea.agent, stream_id="stm_missing", text="x") is None
    assert [m["payload"]["text"] for m in selectors.inbox_read_from("ada", 0)["messages"]] == ["Tomorrow"]


def test_messages_to_one_group_past_the_hourly_bound_are_not_sent_by_either_tool(ada, bea, cy, settings):
    """The pace of ``MARKUS_AGENT_MESSAGES_PER_HOUR`` holds for a group as for a colleague
    (``tests/attention/test_agents_chatting_forever_are_stopped.py``): a group message and
    a reply on the group count together, and past the bound neither is sent."""
    settings.MARKUS = {**settings.MARKUS, "AGENT_MESSAGES_PER_HOUR": 2}
    group = ok(ctx(ada), "agent_create_group_chat", name="release", members=["Bea", "cy"])
    ok(ctx(bea), "agent_send_group_message", group_id=group["groupId"], text="one")
    ok(ctx(bea), "agent_send_group_message", group_id=group["groupId"], text="two")
    refused = error(ctx(bea), "agent_send_group_message", group_id=group["groupId"], text="three")
    assert refused.startswith("not sent: you sent 2 messages to release in the last hour")
    assert "try again in" not in refused  # a model cannot wait: it is told to finish instead
    assert refused.endswith("if the conversation is done, give your final answer")
    ok(ctx(ada), "agent_send_group_message", group_id=group["groupId"], text="from Ada")  # her own count
    assert "not sent: you sent 2 messages to release" in error(
        ctx(bea, item=next_item(bea)), "agent_reply", text="a reply on the group"
    )
    texts = [m["payload"]["text"] for m in selectors.inbox_read_from(cy.id, 0)["messages"]]
    assert texts == ["one", "two", "from Ada"]
