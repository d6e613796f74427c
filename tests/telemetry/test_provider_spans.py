"""The chat spans of a real provider path: the openai SDK against the local stub server
(tests/llm/stub_openai.py), its model, usage and finish reasons as the server sent them."""

from __future__ import annotations

import pytest
from opentelemetry.trace import SpanKind

from attention import loop
from mailbox.registry import MailboxType as T
from mailbox.services import mailbox_enqueue
from tests.llm.stub_openai import StubOpenAI
from tests.llm.test_openai_provider import openai_settings  # noqa: F401 (a fixture)


@pytest.mark.django_db(transaction=True)
def test_openai_calls_are_client_chat_spans_with_the_servers_usage_and_finish_reasons(spans, openai_settings, agent):
    replies = [
        {"tool_calls": [("update_working_memory", {"key": "plan", "content": "ship it"})]},
        {"content": "All handled."},
    ]
    with StubOpenAI(replies) as stub:
        openai_settings(stub.url)
        item = mailbox_enqueue(agent_id=agent.id, source_type=T.SYSTEM_EVENT, payload={"content": "please deploy"})
        assert item.id in loop.run_attention(agent.id).items
    finished = spans.get_finished_spans()
    [root] = [s for s in finished if s.name == "invoke_agent Ada"]
    assert root.attributes["gen_ai.provider.name"] == "openai"
    chats = sorted((s for s in finished if s.name.startswith("chat ")), key=lambda s: s.start_time)
    assert [s.name for s in chats] == ["chat stub-model", "chat stub-model"]
    assert all(s.kind == SpanKind.CLIENT and s.parent.span_id == root.context.span_id for s in chats)
    assert [s.attributes["gen_ai.response.finish_reasons"] for s in chats] == [("tool_calls",), ("stop",)]
    usage = [(s.attributes["gen_ai.usage.input_tokens"], s.attributes["gen_ai.usage.output_tokens"]) for s in chats]
    assert usage == [(21, 7), (21, 7)]  # the stub's usage block
    assert all(s.attributes["gen_ai.provider.name"] == "openai" for s in chats)
    [tool] = [s for s in finished if s.name == "execute_tool update_working_memory"]
    [turn] = [m for m in stub.requests[1]["body"]["messages"] if m.get("tool_calls")]
    sent = turn["tool_calls"][0]["id"]
    assert tool.attributes["gen_ai.tool.call.id"] == sent
