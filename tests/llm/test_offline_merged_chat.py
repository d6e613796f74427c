"""The offline brain on a chat that a follow-up was merged into (the README's merge
demo): its reply names every message it answers, and a mailbox count it read before
the follow-up came in is read again, so the number it gives is the one at reply time."""

from __future__ import annotations

import json

from markus.llm.base import CallContext
from markus.llm.offline import OfflineProvider

TOOLS = [{"type": "function", "function": {"name": "check_mailbox", "description": "", "parameters": {}}}]


def context(content: str) -> CallContext:
    return CallContext(scenario="chat", agent_name="Ada", item={"id": "mbx_1", "content": content})


def call_check(n: int) -> dict:
    return {
        "role": "assistant",
        "content": "",
        "tool_calls": [
            {"id": f"off_{n}", "type": "function", "function": {"name": "check_mailbox", "arguments": "{}"}}
        ],
    }


def result(n: int, depth: int) -> dict:
    return {"role": "tool", "tool_call_id": f"off_{n}", "content": json.dumps({"queueDepth": depth})}


HISTORY = [
    {"role": "user", "content": "an earlier question"},
    {"role": "assistant", "content": "an earlier answer"},
]


def test_a_merged_follow_up_makes_the_brain_read_its_mailbox_again():
    messages = [
        *HISTORY,
        {"role": "user", "content": "What's in your queue?"},
        call_check(1),
        result(1, 1),  # the follow-up was still queued when the mailbox was read
        {"role": "user", "content": "and anything waiting for review?"},
    ]
    answer = OfflineProvider().complete(
        system="", messages=messages, tools=TOOLS, context=context("What's in your queue?")
    )
    assert [c.name for c in answer.tool_calls] == ["check_mailbox"]


def test_the_reply_to_a_merged_chat_names_both_messages_and_the_count_read_last():
    messages = [
        *HISTORY,
        {"role": "user", "content": "What's in your queue?"},
        call_check(1),
        result(1, 1),
        {"role": "user", "content": "and anything waiting for review?"},
        call_check(2),
        result(2, 0),
    ]
    answer = OfflineProvider().complete(
        system="", messages=messages, tools=TOOLS, context=context("What's in your queue?")
    )
    assert not answer.tool_calls
    assert "What's in your queue?" in answer.text and "and anything waiting for review?" in answer.text
    assert "an earlier question" not in answer.text
    assert "0 item(s) waiting" in answer.text and "1 item(s)" not in answer.text


def test_a_single_chat_is_answered_as_before():
    messages = [*HISTORY, {"role": "user", "content": "How busy is your queue?"}, call_check(1), result(1, 2)]
    answer = OfflineProvider().complete(
        system="", messages=messages, tools=TOOLS, context=context("How busy is your queue?")
    )
    assert answer.text.startswith("Hello, this is Ada")
    assert "I read your message: “How busy is your queue?”." in answer.text
    assert "2 item(s) waiting" in answer.text
