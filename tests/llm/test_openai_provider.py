"""The openai provider through the real SDK against a local stub server."""

from __future__ import annotations

import pytest

from attention import loop
from attention.models import AgentActivity
from mailbox.models import MailboxItem
from mailbox.registry import MailboxType as T
from mailbox.services import mailbox_enqueue
from markus.agents.models import WorkingMemory
from markus.llm.base import CONTEXT_MARK, CallContext, get_provider

from .stub_openai import StubOpenAI


@pytest.fixture
def openai_settings(model_server):
    return model_server


def test_the_sdk_sends_tools_and_parses_tool_calls_and_usage(openai_settings):
    with StubOpenAI([{"tool_calls": [("check_mailbox", {})]}]) as stub:
        openai_settings(stub.url)
        provider = get_provider()
        tools = [
            {
                "type": "function",
                "function": {
                    "name": "check_mailbox",
                    "description": "d",
                    "parameters": {"type": "object", "properties": {}},
                },
            }
        ]
        r = provider.complete(
            system="You are Ada.", messages=[{"role": "user", "content": "hi"}], tools=tools, context=CallContext()
        )
    assert provider.name == "openai"
    assert r.tool_calls[0].name == "check_mailbox" and r.tool_calls[0].arguments == {}
    assert r.usage.total == 28
    sent = stub.requests[0]
    assert sent["path"] == "/v1/chat/completions" and sent["auth"] == "Bearer sk-test"
    assert sent["body"]["model"] == "stub-model"
    assert sent["body"]["messages"][0] == {"role": "system", "content": "You are Ada."}
    assert sent["body"]["tools"][0]["function"]["name"] == "check_mailbox"


@pytest.mark.django_db(transaction=True)
def test_the_loop_runs_a_scenario_through_the_openai_provider(openai_settings, agent):
    replies = [
        {"tool_calls": [("update_working_memory", {"key": "plan", "content": "ship it"})]},
        {"content": "All handled."},
    ]
    with StubOpenAI(replies) as stub:
        openai_settings(stub.url)
        item = mailbox_enqueue(
            agent_id=agent.id, source_type=T.SYSTEM_EVENT, payload={"summary": "deploy", "content": "please deploy"}
        )
        result = loop.run_attention(agent.id)
    assert result.status == "done"
    assert MailboxItem.objects.get(id=item.id).status == "completed"
    assert WorkingMemory.objects.get(agent=agent, key="plan").content == "ship it"
    second = stub.requests[1]["body"]["messages"]
    assert second[-2]["tool_calls"][0]["function"]["name"] == "update_working_memory"
    assert second[-1]["role"] == "tool" and '"saved": true' in second[-1]["content"]
    # What changed comes last, as the loop's note after the result: the memory just written.
    assert "- plan (just now): ship it" in second[-1]["content"].split(CONTEXT_MARK)[1]
    activity = AgentActivity.objects.get(mailbox_item_id=item.id)
    assert activity.total_tokens == 56 and activity.total_tools == 1 and activity.success


def test_the_judge_answers_with_one_word_from_the_model(openai_settings):
    with StubOpenAI([{"content": "Cancel."}]) as stub:
        openai_settings(stub.url)
        word = get_provider().judge(
            current={"summary": "publish"}, new={"summary": "don't publish"}, context=CallContext()
        )
    assert word == "cancel"
    assert "one word" in stub.requests[0]["body"]["messages"][0]["content"]


def test_text_streams_as_deltas_and_tool_calls_are_assembled_from_pieces(openai_settings):
    text = "Here is a longer answer that comes in many small pieces."
    args = {"key": "k", "content": 'a value with "quotes" and ünïcode'}
    with StubOpenAI(
        [{"content": text, "tool_calls": [("update_working_memory", args), ("check_mailbox", {})]}]
    ) as stub:
        openai_settings(stub.url)
        deltas: list[str] = []
        r = get_provider().complete(
            system="s",
            messages=[{"role": "user", "content": "go"}],
            tools=[],
            context=CallContext(on_delta=deltas.append),
        )
    assert len(deltas) == len(text.split()) > 1
    assert "".join(deltas) == r.text == text
    assert [(c.id, c.name, c.arguments) for c in r.tool_calls] == [
        ("call_0", "update_working_memory", args),
        ("call_1", "check_mailbox", {}),
    ]
    assert r.usage.total == 28  # the usage chunk the request asked for
    sent = stub.requests[0]["body"]
    assert sent["stream"] is True and sent["stream_options"] == {"include_usage": True}
    assert stub.wire.finished.is_set()


def test_a_server_that_cannot_stream_is_read_as_one_completion(openai_settings):
    with StubOpenAI([{"content": "whole", "tool_calls": [("check_mailbox", {})], "whole": True}]) as stub:
        openai_settings(stub.url)
        deltas: list[str] = []
        r = get_provider().complete(
            system="s",
            messages=[{"role": "user", "content": "go"}],
            tools=[],
            context=CallContext(on_delta=deltas.append),
        )
    assert stub.requests[0]["body"]["stream"] is True
    assert r.text == "whole" and r.tool_calls[0].name == "check_mailbox" and r.usage.total == 28
    assert deltas == []  # nothing streamed: the answer came whole
