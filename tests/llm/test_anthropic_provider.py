"""The anthropic provider through the real SDK against a local stub of the Messages API."""

from __future__ import annotations

import functools
from typing import Any

import pytest

from attention import loop
from attention.models import AgentActivity
from mailbox.models import MailboxItem
from mailbox.registry import MailboxType as T
from mailbox.services import mailbox_enqueue
from markus.agents.models import ChatMessage, WorkingMemory
from markus.llm.anthropic_provider import wire_messages
from markus.llm.base import CallContext, get_provider
from markus.usage.models import LLMCall

from .stub_anthropic import INPUT_TOKENS, OUTPUT_TOKENS, StubAnthropic

TOOLS = [
    {
        "type": "function",
        "function": {
            "name": "update_working_memory",
            "description": "Save a note.",
            "parameters": {
                "type": "object",
                "properties": {"key": {"type": "string"}, "content": {"type": "string"}},
                "required": ["key", "content"],
            },
        },
    }
]


@pytest.fixture
def anthropic_settings(model_server):
    return functools.partial(model_server, provider="anthropic", LLM_API_KEY="sk-ant-test", LLM_MODEL="stub-claude")


def test_a_tool_use_round_trip_in_the_messages_wire_format(anthropic_settings):
    args = {"key": "plan", "content": "ship it"}
    with StubAnthropic([{"content": "Let me note that.", "tool_calls": [("update_working_memory", args)]}]) as stub:
        anthropic_settings(stub.url)
        provider = get_provider()
        first = provider.complete(
            system="You are Ada.", messages=[{"role": "user", "content": "plan?"}], tools=TOOLS, context=CallContext()
        )
        assert provider.name == "anthropic"
        assert first.text == "Let me note that."
        assert [(c.id, c.name, c.arguments) for c in first.tool_calls] == [("toolu_1", "update_working_memory", args)]
        assert (first.usage.prompt_tokens, first.usage.completion_tokens) == (INPUT_TOKENS, OUTPUT_TOKENS)
        session = [
            {"role": "user", "content": "plan?"},
            first.as_message(),
            {"role": "tool", "tool_call_id": "toolu_1", "content": '{"saved": true}'},
        ]
        provider.complete(system="You are Ada.", messages=session, tools=TOOLS, context=CallContext())
    sent = stub.requests[0]
    assert sent["path"] == "/v1/messages" and sent["key"] == "sk-ant-test" and sent["version"]
    assert sent["body"]["model"] == "stub-claude"
    # Laid out for the prompt cache: a breakpoint after the system prompt (the tools come
    # before it) and after the last message, so the next turn reads both from the cache.
    assert sent["body"]["system"] == [{"type": "text", "text": "You are Ada.", "cache_control": {"type": "ephemeral"}}]
    assert sent["body"]["stream"] is True and sent["body"]["max_tokens"] > 0
    assert sent["body"]["tools"] == [
        {
            "name": "update_working_memory",
            "description": "Save a note.",
            "input_schema": TOOLS[0]["function"]["parameters"],
        }
    ]
    assert stub.requests[1]["body"]["messages"] == [
        {"role": "user", "content": [{"type": "text", "text": "plan?"}]},
        {
            "role": "assistant",
            "content": [
                {"type": "text", "text": "Let me note that."},
                {"type": "tool_use", "id": "toolu_1", "name": "update_working_memory", "input": args},
            ],
        },
        {
            "role": "user",
            "content": [
                {
                    "type": "tool_result",
                    "tool_use_id": "toolu_1",
                    "content": '{"saved": true}',
                    "cache_control": {"type": "ephemeral"},
                }
            ],
        },
    ]


def test_text_streams_as_deltas_and_tool_input_is_assembled_from_json_pieces(anthropic_settings):
    text = "Here is a longer answer that comes in many small pieces."
    args = {"key": "k", "content": 'a value with "quotes" and ünïcode'}
    with StubAnthropic([{"content": text, "tool_calls": [("update_working_memory", args)]}]) as stub:
        anthropic_settings(stub.url)
        deltas: list[str] = []
        r = get_provider().complete(
            system="s",
            messages=[{"role": "user", "content": "go"}],
            tools=TOOLS,
            context=CallContext(on_delta=deltas.append),
        )
    assert len(deltas) == len(text.split()) > 1
    assert "".join(deltas) == r.text == text
    assert r.tool_calls[0].arguments == args
    assert stub.wire.finished.is_set()


def test_a_server_that_answers_a_whole_message_is_read_as_one(anthropic_settings):
    with StubAnthropic([{"content": "whole", "tool_calls": [("check_mailbox", {})], "whole": True}]) as stub:
        anthropic_settings(stub.url)
        r = get_provider().complete(
            system="s", messages=[{"role": "user", "content": "go"}], tools=[], context=CallContext()
        )
    assert r.text == "whole" and r.tool_calls[0].name == "check_mailbox"
    assert r.usage.total == INPUT_TOKENS + OUTPUT_TOKENS


def test_consecutive_turns_of_one_role_are_merged_and_the_first_is_the_users():
    wire = wire_messages(
        [
            {"role": "assistant", "content": "earlier reply"},
            {
                "role": "assistant",
                "content": "",
                "tool_calls": [{"id": "a", "function": {"name": "t", "arguments": {}}}],
            },
            {"role": "tool", "tool_call_id": "a", "content": "r1"},
            {"role": "user", "content": "and then?"},
        ]
    )
    assert [m["role"] for m in wire] == ["user", "assistant", "user"]
    assert [b["type"] for b in wire[1]["content"]] == ["text", "tool_use"]
    assert [b["type"] for b in wire[2]["content"]] == ["tool_result", "text"]


@pytest.mark.django_db(transaction=True)
def test_the_loop_runs_a_scenario_through_the_anthropic_provider_and_records_usage(anthropic_settings, agent):
    replies = [
        {"tool_calls": [("update_working_memory", {"key": "plan", "content": "ship it"})]},
        {"content": "All handled."},
    ]
    with StubAnthropic(replies) as stub:
        anthropic_settings(stub.url)
        item = mailbox_enqueue(
            agent_id=agent.id, source_type=T.SYSTEM_EVENT, payload={"summary": "deploy", "content": "please deploy"}
        )
        result = loop.run_attention(agent.id)
    assert result.status == "done"
    assert MailboxItem.objects.get(id=item.id).status == "completed"
    assert WorkingMemory.objects.get(agent=agent, key="plan").content == "ship it"
    second = stub.requests[1]["body"]["messages"]
    assert second[-2]["content"][-1]["type"] == "tool_use"
    assert second[-1]["content"][0]["type"] == "tool_result" and '"saved": true' in second[-1]["content"][0]["content"]
    activity = AgentActivity.objects.get(mailbox_item_id=item.id)
    assert activity.total_tokens == 2 * (INPUT_TOKENS + OUTPUT_TOKENS) and activity.total_tools == 1
    assert activity.success


def person_asks(
    agent: Any, replies: list[dict[str, Any]], anthropic_settings: Any, **markus: Any
) -> tuple[StubAnthropic, MailboxItem, ChatMessage]:
    """A person's chat to the agent, one run of the loop with the stub's ``replies``: the
    stub, the item and the agent's one reply."""
    with StubAnthropic(replies) as stub:
        anthropic_settings(stub.url, TRIAGE=False, INTERRUPT_JUDGE=False, **markus)
        item = mailbox_enqueue(
            agent_id=agent.id,
            source_type=T.HUMAN_CHAT,
            payload={"summary": "when", "content": "when is the release?"},
            metadata={"senderId": "1", "senderRole": "user"},
        )
        loop.run_attention(agent.id)
    [told] = ChatMessage.objects.filter(role="assistant", session__agent_id=agent.id)
    return stub, item, told


def test_a_stop_reason_is_read_from_a_message_delta_that_carries_no_usage(anthropic_settings):
    """A server speaking the Messages API that leaves the usage out of its message_delta:
    its stop reason was not read, and the whole answer was taken for one cut short."""
    with StubAnthropic([{"content": "All done.", "delta_usage": False}]) as stub:
        anthropic_settings(stub.url)
        r = get_provider().complete(
            system="s", messages=[{"role": "user", "content": "go"}], tools=[], context=CallContext()
        )
    assert r.text == "All done." and r.finish_reason == "end_turn"


@pytest.mark.django_db(transaction=True)
def test_an_overloaded_error_in_the_stream_is_tried_again_within_the_attempt(anthropic_settings, agent):
    """Anthropic sends ``event: error`` (``overloaded_error``) after its 200: the SDK raises
    it with the response's status, 200, which read as a refused request ("HTTP 200
    APIStatusError"), not tried again: the attempt failed and the item waited its back-off."""
    replies = [{"content": "I will look", "error_after": 3}, {"content": "The release is on Friday."}]
    stub, _, told = person_asks(agent, replies, anthropic_settings, LLM_BACKOFF_S=0.01)
    assert len(stub.requests) == 2
    assert told.content == "The release is on Friday."
    assert AgentActivity.objects.filter(agent=agent).count() == 1  # one attempt: the call was tried again
    [failed] = LLMCall.objects.exclude(error="")
    assert failed.error == "an error event in the stream: overloaded_error: Overloaded"


REFUSAL = {
    "type": "refusal",
    "category": "cyber",
    "explanation": "This request was declined because it could enable cyber harm.",
}


@pytest.mark.django_db(transaction=True)
@pytest.mark.parametrize("as_sent", ["streamed", "whole"])
def test_a_refused_answer_ends_the_item_and_the_person_is_told_the_providers_reason(anthropic_settings, agent, as_sent):
    """``stop_reason: "refusal"``: the text so far ("Hello..") is no answer, the request is
    not made again (Anthropic: it would be refused again unless the turn is removed), and
    the person is told why, in the provider's words."""
    reply = {"content": "Hello..", "stop": "refusal", "stop_details": REFUSAL, "whole": as_sent == "whole"}
    stub, item, told = person_asks(agent, [reply, {"content": "asked again"}], anthropic_settings)
    assert len(stub.requests) == 1
    assert MailboxItem.objects.get(id=item.id).status == "completed"
    assert told.metadata["failed"] and "Hello.." not in told.content
    assert "the model's provider refused to answer (refusal, cyber:" in told.content
    assert "could enable cyber harm" in told.content


@pytest.mark.django_db(transaction=True)
@pytest.mark.parametrize("stop", ["max_tokens", "model_context_window_exceeded"])
def test_an_answer_stopped_at_a_limit_is_kept_and_says_it_was_cut_short(anthropic_settings, agent, stop):
    _, _, told = person_asks(agent, [{"content": "The release is on", "stop": stop}], anthropic_settings)
    assert told.content.startswith("The release is on") and "cut short" in told.content


def test_the_judge_asks_the_model(anthropic_settings):
    with StubAnthropic([{"content": "Cancel."}]) as stub:
        anthropic_settings(stub.url)
        provider = get_provider()
        word = provider.judge(current={"summary": "publish"}, new={"summary": "don't"}, context=CallContext())
    assert word == "cancel"
    assert "one word" in stub.requests[0]["body"]["messages"][0]["content"]


def test_a_stream_that_ends_without_a_stop_reason_is_a_provider_error_not_an_empty_answer():
    from types import SimpleNamespace as NS

    from markus.llm.anthropic_provider import _from_stream
    from markus.llm.base import CancelWatch, ProviderError

    usage = NS(input_tokens=10, output_tokens=0, cache_creation_input_tokens=0, cache_read_input_tokens=0)
    events = [
        NS(type="message_start", message=NS(usage=usage)),
        NS(type="content_block_start", index=0, content_block=NS(type="text", text="Half an ans")),
    ]  # the server died here: no message_delta with its stop_reason, no message_stop
    with pytest.raises(ProviderError, match="cut short"):
        _from_stream(iter(events), CancelWatch(lambda: False), CallContext())
