"""What an LLM writes is stored (its text, its tool calls' arguments in the activity log,
the session): a NUL byte or a lone surrogate in it, which PostgreSQL refuses in text and
JSONB, must not fail the item's attempt. They become U+FFFD where a response is made,
for every provider."""

from __future__ import annotations

import pytest

from attention import loop
from attention.models import AgentActivityLog
from mailbox.models import MailboxItem
from mailbox.registry import MailboxType, Status
from mailbox.services import mailbox_enqueue
from markus.llm.base import LLMResponse, ToolCall, set_provider_override
from markus.llm.scripted import ScriptedProvider, Turn

pytestmark = [pytest.mark.pg, pytest.mark.django_db(transaction=True)]


def test_a_response_is_made_safe_to_store():
    response = LLMResponse(
        text="a\x00b\ud800c",
        tool_calls=[ToolCall(id="c\x00", name="t", arguments={"k\x00": ["v\udfff", {"n": "x\x00"}], "i": 3})],
        refusal="refusal: n\x00o",
    )
    assert response.text == "a\ufffdb\ufffdc" and response.refusal == "refusal: n\ufffdo"
    [call] = response.tool_calls
    assert call.id == "c\ufffd" and call.arguments == {"k\ufffd": ["v\ufffd", {"n": "x\ufffd"}], "i": 3}


def test_nul_in_a_tool_call_does_not_fail_the_item(agent):
    item = mailbox_enqueue(agent_id=agent.id, source_type=MailboxType.SYSTEM_EVENT, payload={"summary": "notice"})
    set_provider_override(
        ScriptedProvider(
            [
                Turn(tool_calls=[("update_working_memory", {"key": "k", "content": "before\x00after"})]),
                Turn(text="done\x00"),
            ]
        )
    )
    try:
        loop.run_attention(agent.id)
    finally:
        set_provider_override(None)
    item.refresh_from_db()
    assert item.status == Status.COMPLETED
    assert MailboxItem.objects.get(id=item.id).extra.get("retries", 0) == 0
    logged = AgentActivityLog.objects.filter(activity__mailbox_item_id=item.id, type="tool_start").get()
    assert logged.metadata["arguments"]["content"] == "before\ufffdafter"


def test_a_tool_told_a_nul_through_json_text_answers_an_error_the_llm_can_read(agent):
    from attention.toolbox import ToolContext, execute_tool

    ctx = ToolContext(agent_id=agent.id, agent_name=agent.name, scenario="task_execution")
    ok, said = execute_tool(ctx, "update_working_memory", '{"key": "k", "content": "a\\u0000b"}')
    assert not ok and "update_working_memory" in said and "NUL" in said
