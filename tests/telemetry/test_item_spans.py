"""The span tree of one processed item with the offline brain, after the GenAI semantic
conventions: invoke_agent {agent} for the item, chat {model} for each LLM call and
execute_tool {tool} for each tool call beneath it; message content only when opted in."""

from __future__ import annotations

import json

import pytest
from opentelemetry.trace import SpanKind, StatusCode

from attention.loop import run_attention
from attention.models import AgentActivity
from mailbox.models import MailboxItem
from mailbox.registry import MailboxType
from markus.core.actors import Actor
from markus.llm.base import CONTEXT_MARK
from markus.work.services import task_create

CONTENT_KEYS = ("gen_ai.input.messages", "gen_ai.output.messages", "gen_ai.system_instructions")
TOOL_CONTENT_KEYS = ("gen_ai.tool.call.arguments", "gen_ai.tool.call.result")


def _executed_task(agent, alice):
    task = task_create(actor=Actor.for_user(alice), title="Write the parser", assignee_id=agent.id)
    item = MailboxItem.objects.get(agent=agent, source_type=MailboxType.TASK_STATUS_UPDATE, payload__taskId=task.id)
    result = run_attention(agent.id)
    assert item.id in result.items
    assert MailboxItem.objects.get(id=item.id).status == "completed"
    return task, item


def _tree(exporter, item_id):
    finished = exporter.get_finished_spans()
    [root] = [s for s in finished if s.attributes.get("markus.mailbox.item_id") == item_id]
    children = [s for s in finished if s.parent is not None and s.parent.span_id == root.context.span_id]
    return root, children


@pytest.mark.django_db
def test_a_processed_item_is_an_invoke_agent_span_with_its_llm_calls_and_tool_calls_beneath(spans, agent, alice):
    _, item = _executed_task(agent, alice)
    root, children = _tree(spans, item.id)

    assert root.name == "invoke_agent Ada"
    assert root.kind == SpanKind.INTERNAL
    assert root.attributes["gen_ai.operation.name"] == "invoke_agent"
    assert root.attributes["gen_ai.agent.id"] == agent.id
    assert root.attributes["gen_ai.agent.name"] == "Ada"
    assert root.attributes["gen_ai.provider.name"] == "markus.offline"
    assert root.attributes["markus.mailbox.item_type"] == MailboxType.TASK_STATUS_UPDATE
    assert root.attributes["markus.outcome"] == "completed"
    assert root.status.status_code != StatusCode.ERROR

    chats = sorted((s for s in children if s.name.startswith("chat ")), key=lambda s: s.start_time)
    tools = sorted((s for s in children if s.name.startswith("execute_tool ")), key=lambda s: s.start_time)
    # The offline brain's task plan (get, comment, submit for review, note it), one tool per
    # turn, then the answer: as many tool spans as the activity counted tool calls.
    names = [s.attributes["gen_ai.tool.name"] for s in tools]
    assert names[:3] == ["task_get", "task_comment", "task_submit_review"]
    assert len(tools) == AgentActivity.objects.get(mailbox_item=item).total_tools
    assert len(chats) == len(tools) + 1
    for chat in chats:
        assert chat.name == "chat offline"
        assert chat.kind == SpanKind.INTERNAL  # a brain in this process
        assert chat.attributes["gen_ai.operation.name"] == "chat"
        assert chat.attributes["gen_ai.provider.name"] == "markus.offline"
        assert chat.attributes["gen_ai.request.model"] == "offline"
        assert chat.attributes["markus.scenario"] == "task_execution"
        assert chat.attributes["gen_ai.usage.input_tokens"] > 0
        assert chat.attributes["gen_ai.usage.output_tokens"] > 0
    for n, tool in enumerate(tools):
        assert tool.name == f"execute_tool {tool.attributes['gen_ai.tool.name']}"
        assert tool.attributes["gen_ai.operation.name"] == "execute_tool"
        assert tool.attributes["gen_ai.tool.call.id"] == f"off_{n}"
        assert tool.status.status_code != StatusCode.ERROR
        # each tool call runs after the LLM turn that asked for it, before the next turn
        assert chats[n].end_time <= tool.start_time <= chats[n + 1].start_time
    # nothing of the conversation is on any span by default
    for span in spans.get_finished_spans():
        assert not set(span.attributes) & {*CONTENT_KEYS, *TOOL_CONTENT_KEYS}, span.name


@pytest.mark.django_db
def test_message_content_is_on_the_spans_only_when_opted_in(spans, content_on, agent, alice):
    task, item = _executed_task(agent, alice)
    _, children = _tree(spans, item.id)
    chats = sorted((s for s in children if s.name.startswith("chat ")), key=lambda s: s.start_time)
    first = json.loads(chats[0].attributes["gen_ai.input.messages"])
    assert CONTEXT_MARK in first[0]["parts"][0]["content"]  # the loop's context note, then the item
    assert first[1]["role"] == "user" and "Write the parser" in first[1]["parts"][0]["content"]
    assert json.loads(chats[0].attributes["gen_ai.system_instructions"])[0]["type"] == "text"
    said = json.loads(chats[0].attributes["gen_ai.output.messages"])
    assert said[0]["parts"][0] == {
        "type": "tool_call",
        "id": "off_0",
        "name": "task_get",
        "arguments": {"task_id": task.id},
    }
    # the second turn's input carries the first tool call's result
    second = json.loads(chats[1].attributes["gen_ai.input.messages"])
    assert second[-1]["role"] == "tool" and second[-1]["parts"][0]["id"] == "off_0"
    [get] = [s for s in children if s.name == "execute_tool task_get"]
    assert json.loads(get.attributes["gen_ai.tool.call.arguments"]) == {"task_id": task.id}
    assert task.id in get.attributes["gen_ai.tool.call.result"]


@pytest.mark.django_db
def test_a_refused_tool_call_is_an_error_span(spans, agent):
    from attention.toolbox import ToolContext, execute_tool

    ctx = ToolContext(agent_id=agent.id, agent_name=agent.name, scenario="task_execution", call_id="call_7")
    ok, _ = execute_tool(ctx, "task_get", {"task_id": "tsk_missing"})
    assert not ok
    [span] = [s for s in spans.get_finished_spans() if s.name == "execute_tool task_get"]
    assert span.status.status_code == StatusCode.ERROR
    assert span.attributes["error.type"] == "tool_error"
    assert span.attributes["gen_ai.tool.call.id"] == "call_7"
